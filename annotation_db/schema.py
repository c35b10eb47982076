"""The schema: studies, items, outputs, raters, assignments, ratings.

Integrity lives in the database (unique, foreign keys, checks, not-null), so that no code path
can store a second rating of the same output by the same rater, whatever the race.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        datetime: DateTime(timezone=True),
    }


STUDY_STATUSES = ("draft", "open", "closed")
PREFERENCE_KINDS = ("choice", "tie", "all_bad")
GOLD_ROLES = ("original", "corrupted")
# The built-in study that holds the demo's blind votes (kind "arena").
ARENA_STUDY = "arena"
# Item.source of an arena vote whose visitor had seen the same text with the names shown.
ARENA_SEEN_UNBLINDED = "arena:seen-unblinded"


class Study(Base):
    __tablename__ = "study"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    instructions: Mapped[str] = mapped_column(Text, default="")
    questions: Mapped[list[Any]] = mapped_column()
    raters_per_item: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="open")
    comment_max_chars: Mapped[int] = mapped_column(Integer, default=2000)
    kind: Mapped[str] = mapped_column(String(16), default="study")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # attention.AttentionSettings as a dict; None: made before it (the defaults, old placement)
    attention: Mapped[dict[str, Any] | None] = mapped_column(nullable=True)

    items: Mapped[list[Item]] = relationship(back_populates="study", cascade="all, delete-orphan")
    raters: Mapped[list[Rater]] = relationship(back_populates="study", cascade="all, delete-orphan")

    __table_args__ = (
        CheckConstraint("raters_per_item >= 1", name="ck_study_raters_per_item"),
        CheckConstraint("comment_max_chars >= 0", name="ck_study_comment_max"),
        CheckConstraint(f"status IN {STUDY_STATUSES}", name="ck_study_status"),
        CheckConstraint("kind IN ('study', 'arena')", name="ck_study_kind"),
    )


class Item(Base):
    """One text with blank(s); ``original`` is the hidden true span(s), never shown to raters."""

    __tablename__ = "item"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text)
    original: Mapped[list[Any] | None] = mapped_column(nullable=True)
    source: Mapped[str | None] = mapped_column(String(500), nullable=True)
    is_gold: Mapped[bool] = mapped_column(Boolean, default=False)
    # Raters this item was given to (kept by the allocator in the same transaction as the
    # assignment), so finding the least-covered item is an index lookup, not a count.
    n_assigned: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    study: Mapped[Study] = relationship(back_populates="items")
    outputs: Mapped[list[Output]] = relationship(
        back_populates="item", cascade="all, delete-orphan", order_by="Output.id"
    )

    __table_args__ = (
        UniqueConstraint("study_id", "key", name="uq_item_study_key"),
        Index("ix_item_study_gold_assigned", "study_id", "is_gold", "n_assigned"),
        CheckConstraint("n_assigned >= 0", name="ck_item_n_assigned"),
    )


class Output(Base):
    """One system's filled text for one item, with everything needed to reproduce it."""

    __tablename__ = "output"

    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("item.id", ondelete="CASCADE"), index=True)
    system: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text)
    fills: Mapped[list[Any] | None] = mapped_column(nullable=True)
    model: Mapped[str | None] = mapped_column(String(500), nullable=True)
    adapter_revision: Mapped[str | None] = mapped_column(String(500), nullable=True)
    decoding: Mapped[dict[str, Any]] = mapped_column(default=dict)
    seed: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gold_role: Mapped[str | None] = mapped_column(String(16), nullable=True)

    item: Mapped[Item] = relationship(back_populates="outputs")

    __table_args__ = (
        UniqueConstraint("item_id", "system", name="uq_output_item_system"),
        CheckConstraint(
            f"gold_role IS NULL OR gold_role IN {GOLD_ROLES}", name="ck_output_gold_role"
        ),
    )


class Rater(Base):
    """A rater of one study. Only the sha256 of the invite token is stored."""

    __tablename__ = "rater"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id", ondelete="CASCADE"), index=True)
    display_name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    seed: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    study: Mapped[Study] = relationship(back_populates="raters")

    __table_args__ = (CheckConstraint("length(token_hash) = 64", name="ck_rater_token_hash"),)


class Assignment(Base):
    """An item given to a rater: its place in the rater's sequence and the output order shown.

    Item-level answers (best-of-N preference, comment) live here; per-output answers in Rating.
    """

    __tablename__ = "assignment"

    id: Mapped[int] = mapped_column(primary_key=True)
    rater_id: Mapped[int] = mapped_column(ForeignKey("rater.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("item.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    output_order: Mapped[list[Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    shown_at: Mapped[datetime | None] = mapped_column(nullable=True)
    completed_at: Mapped[datetime | None] = mapped_column(nullable=True)
    preference: Mapped[str | None] = mapped_column(String(16), nullable=True)
    preferred_output_id: Mapped[int | None] = mapped_column(
        ForeignKey("output.id", ondelete="CASCADE"), nullable=True
    )
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    gold_passed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)

    rater: Mapped[Rater] = relationship()
    item: Mapped[Item] = relationship()

    __table_args__ = (
        UniqueConstraint("rater_id", "item_id", name="uq_assignment_rater_item"),
        UniqueConstraint("rater_id", "position", name="uq_assignment_rater_position"),
        CheckConstraint("position >= 1", name="ck_assignment_position"),
        CheckConstraint(
            f"preference IS NULL OR preference IN {PREFERENCE_KINDS}",
            name="ck_assignment_preference",
        ),
        CheckConstraint(
            "(preference = 'choice' AND preferred_output_id IS NOT NULL)"
            " OR (preference IS NULL AND preferred_output_id IS NULL)"
            " OR (preference IN ('tie', 'all_bad') AND preferred_output_id IS NULL)",
            name="ck_assignment_preferred_output",
        ),
    )


class Rating(Base):
    """One rater's answers about one output. At most one per (rater, output)."""

    __tablename__ = "rating"

    id: Mapped[int] = mapped_column(primary_key=True)
    rater_id: Mapped[int] = mapped_column(ForeignKey("rater.id", ondelete="CASCADE"))
    output_id: Mapped[int] = mapped_column(ForeignKey("output.id", ondelete="CASCADE"), index=True)
    assignment_id: Mapped[int] = mapped_column(
        ForeignKey("assignment.id", ondelete="CASCADE"), index=True
    )
    answers: Mapped[dict[str, Any]] = mapped_column()
    position: Mapped[int] = mapped_column(Integer)
    shown_at: Mapped[datetime] = mapped_column()
    answered_at: Mapped[datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("rater_id", "output_id", name="uq_rating_rater_output"),
        CheckConstraint("position >= 0", name="ck_rating_position"),
    )

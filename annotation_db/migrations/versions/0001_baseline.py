"""Baseline: the schema as annotation_db created it before migrations (create_all).

A database made by that code has these tables and no ``alembic_version``; opening it stamps
this revision (see ``annotation_db.migrate``), so nothing is rebuilt and no row is touched.

Revision ID: 0001_baseline
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "study",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("questions", sa.JSON(), nullable=False),
        sa.Column("raters_per_item", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("comment_max_chars", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('study', 'arena')", name="ck_study_kind"),
        sa.CheckConstraint("status IN ('draft', 'open', 'closed')", name="ck_study_status"),
        sa.CheckConstraint("comment_max_chars >= 0", name="ck_study_comment_max"),
        sa.CheckConstraint("raters_per_item >= 1", name="ck_study_raters_per_item"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "study_draft",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("items", sa.JSON(), nullable=False),
        sa.Column("systems", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("extra_items", sa.JSON(), nullable=False),
        sa.Column("extra_outputs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "draft_output",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("draft_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.String(length=200), nullable=False),
        sa.Column("system", sa.String(length=200), nullable=False),
        sa.Column("output", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["draft_id"], ["study_draft.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("draft_id", "item_key", "system", name="uq_draft_output"),
    )
    op.create_table(
        "item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("original", sa.JSON(), nullable=True),
        sa.Column("source", sa.String(length=500), nullable=True),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.Column("n_assigned", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("n_assigned >= 0", name="ck_item_n_assigned"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("study_id", "key", name="uq_item_study_key"),
    )
    op.create_index(
        "ix_item_study_gold_assigned", "item", ["study_id", "is_gold", "n_assigned"], unique=False
    )
    op.create_table(
        "rater",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("display_name", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(token_hash) = 64", name="ck_rater_token_hash"),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index(op.f("ix_rater_study_id"), "rater", ["study_id"], unique=False)
    op.create_table(
        "output",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("system", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("fills", sa.JSON(), nullable=True),
        sa.Column("model", sa.String(length=500), nullable=True),
        sa.Column("adapter_revision", sa.String(length=500), nullable=True),
        sa.Column("decoding", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("gold_role", sa.String(length=16), nullable=True),
        sa.CheckConstraint(
            "gold_role IS NULL OR gold_role IN ('original', 'corrupted')",
            name="ck_output_gold_role",
        ),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "system", name="uq_output_item_system"),
    )
    op.create_index(op.f("ix_output_item_id"), "output", ["item_id"], unique=False)
    op.create_table(
        "assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rater_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("output_order", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("shown_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("preference", sa.String(length=16), nullable=True),
        sa.Column("preferred_output_id", sa.Integer(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("gold_passed", sa.Boolean(), nullable=True),
        sa.CheckConstraint(
            "(preference = 'choice' AND preferred_output_id IS NOT NULL)"
            " OR (preference IS NULL AND preferred_output_id IS NULL)"
            " OR (preference IN ('tie', 'all_bad') AND preferred_output_id IS NULL)",
            name="ck_assignment_preferred_output",
        ),
        sa.CheckConstraint(
            "preference IS NULL OR preference IN ('choice', 'tie', 'all_bad')",
            name="ck_assignment_preference",
        ),
        sa.CheckConstraint("position >= 1", name="ck_assignment_position"),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["preferred_output_id"], ["output.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["rater_id"], ["rater.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("rater_id", "item_id", name="uq_assignment_rater_item"),
        sa.UniqueConstraint("rater_id", "position", name="uq_assignment_rater_position"),
    )
    op.create_index(op.f("ix_assignment_item_id"), "assignment", ["item_id"], unique=False)
    op.create_table(
        "rating",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rater_id", sa.Integer(), nullable=False),
        sa.Column("output_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("shown_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("position >= 0", name="ck_rating_position"),
        sa.ForeignKeyConstraint(["assignment_id"], ["assignment.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["output_id"], ["output.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["rater_id"], ["rater.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("rater_id", "output_id", name="uq_rating_rater_output"),
    )
    op.create_index(op.f("ix_rating_assignment_id"), "rating", ["assignment_id"], unique=False)
    op.create_index(op.f("ix_rating_output_id"), "rating", ["output_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_rating_output_id"), table_name="rating")
    op.drop_index(op.f("ix_rating_assignment_id"), table_name="rating")
    op.drop_table("rating")
    op.drop_index(op.f("ix_assignment_item_id"), table_name="assignment")
    op.drop_table("assignment")
    op.drop_index(op.f("ix_output_item_id"), table_name="output")
    op.drop_table("output")
    op.drop_index(op.f("ix_rater_study_id"), table_name="rater")
    op.drop_table("rater")
    op.drop_index("ix_item_study_gold_assigned", table_name="item")
    op.drop_table("item")
    op.drop_table("draft_output")
    op.drop_table("study_draft")
    op.drop_table("study")

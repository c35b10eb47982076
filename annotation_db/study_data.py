"""What a study's results are computed from, read in one snapshot: its answered assignments,
outputs and ratings as plain dataclasses (``StudyData``), no ORM rows. ``load_study`` is the
SQL half of the results (``results.compute_results`` = ``load_study`` then
``results.summarize``); the statistics never touch the database, so each can be tested on
hand-made data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .attention import AttentionSettings
from .queries import questions_of, study_progress
from .questions import Question
from .schema import ARENA_SEEN_UNBLINDED, Assignment, Item, Output, Rater, Rating, Study
from .views import StudyProgress


@dataclass(frozen=True)
class Judgment:
    """One answered assignment: an item judged by a rater."""

    rater_id: int
    item_id: int
    is_gold: bool
    gold_passed: bool | None
    preference: str | None  # "choice", "tie", "all_bad" or None
    preferred_output_id: int | None
    output_order: list[int]
    seconds: float | None  # from shown to answered


@dataclass(frozen=True)
class OutputRow:
    id: int
    item_id: int
    system: str


@dataclass(frozen=True)
class RatingRow:
    rater_id: int
    output_id: int
    answers: dict[str, Any]


@dataclass(frozen=True)
class StudyData:
    """Everything the statistics need, read in one snapshot; plain values, no ORM rows."""

    name: str
    questions: list[Question]
    raters: dict[int, str]  # rater id -> display name
    judgments: list[Judgment]  # answered assignments, gold included
    outputs: dict[int, OutputRow]  # outputs of regular (non-gold) items
    ratings: list[RatingRow]  # ratings of those outputs
    n_seen_unblinded: int
    progress: StudyProgress
    attention: AttentionSettings = field(default_factory=AttentionSettings)
    check_outputs: int = 0  # outputs an attention check shows (0: the study has none)


def load_study(s: Session, study: Study) -> StudyData:
    """Read a study's answered assignments, outputs and ratings (SQL only, no statistics)."""
    assignments = s.execute(
        select(Assignment, Item.is_gold)
        .join(Item, Item.id == Assignment.item_id)
        .where(Item.study_id == study.id, Assignment.completed_at.is_not(None))
    ).all()
    judgments = [
        Judgment(
            a.rater_id,
            a.item_id,
            bool(is_gold),
            a.gold_passed,
            a.preference,
            a.preferred_output_id,
            list(a.output_order),
            (a.completed_at - a.shown_at).total_seconds() if a.shown_at is not None else None,
        )
        for a, is_gold in assignments
    ]
    raters = {
        r.id: r.display_name for r in s.scalars(select(Rater).where(Rater.study_id == study.id))
    }
    seen_unblinded = (
        s.scalar(
            select(func.count(Item.id)).where(
                Item.study_id == study.id, Item.source == ARENA_SEEN_UNBLINDED
            )
        )
        or 0
    )
    outputs = {
        o.id: OutputRow(o.id, o.item_id, o.system)
        for o in s.scalars(
            select(Output).join(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))
        )
    }
    ratings = [
        RatingRow(r.rater_id, r.output_id, dict(r.answers))
        for r in s.scalars(
            select(Rating)
            .join(Output)
            .join(Item)
            .where(Item.study_id == study.id, Item.is_gold.is_(False))
        )
    ]
    check_outputs = s.scalar(
        select(func.count(Output.id))
        .join(Item)
        .where(Item.study_id == study.id, Item.is_gold.is_(True))
        .group_by(Item.id)
        .limit(1)
    )
    return StudyData(
        name=study.name,
        questions=questions_of(study),
        raters=raters,
        judgments=judgments,
        outputs=outputs,
        ratings=ratings,
        n_seen_unblinded=seen_unblinded,
        progress=study_progress(s, study),
        attention=AttentionSettings.from_dict(study.attention),
        check_outputs=check_outputs or 0,
    )

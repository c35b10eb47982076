"""Plain dataclasses that cross the API boundary (no ORM objects leave a session).

Rater-side classes (``RaterSession``, ``RaterItem``, ``RaterOutput``, ``RaterProgress``,
``SubmitReceipt``) deliberately have no field that could carry a system, model, adapter,
decoding setting, seed, gold flag or original span: blindness is enforced by the types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from .questions import Question

# ---------------------------------------------------------------- admin side: input


@dataclass(frozen=True)
class ItemIn:
    """An item to rate: ``text`` with its blank(s); ``original`` = the hidden true span(s)."""

    key: str
    text: str
    original: Sequence[str] | str | None = None
    source: str | None = None
    is_gold: bool = False


@dataclass(frozen=True)
class OutputIn:
    """One system's output for the item ``item_key``, generated ahead of the study."""

    item_key: str
    system: str
    text: str
    fills: Sequence[str] | None = None
    model: str | None = None
    adapter_revision: str | None = None
    decoding: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    gold_role: str | None = None  # "original" / "corrupted" on attention-check items


# ---------------------------------------------------------------- admin side: output


@dataclass(frozen=True)
class StudyInfo:
    id: int
    name: str
    status: str
    kind: str
    instructions: str
    questions: list[Question]
    raters_per_item: int
    comment_max_chars: int
    n_items: int
    n_gold: int
    systems: list[str]
    n_raters: int
    created_at: datetime
    # attention.AttentionSettings as a dict (None: an arena, or a study from before them)
    attention: dict[str, Any] | None = None
    # judgments of regular items not yet handed to a rater: 0 means a rater invited now would
    # find nothing to rate (they are never given attention checks alone)
    judgments_open: int = 0


@dataclass(frozen=True)
class Invite:
    """The only place the plain token exists: hand it to the rater, it is not stored."""

    rater_id: int
    display_name: str
    token: str


@dataclass(frozen=True)
class RaterStatus:
    rater_id: int
    display_name: str
    done: int
    open: int
    remaining: int
    gold_done: int
    gold_failed: int
    last_answer_at: datetime | None
    revoked: bool = False  # the invite token no longer works (AnnotationStore.revoke)


@dataclass(frozen=True)
class StudyProgress:
    study: str
    status: str
    n_items: int
    raters_per_item: int
    judgments_needed: int
    judgments_done: int
    items_complete: int
    share_done: float
    raters: list[RaterStatus]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VoteReceipt:
    """Stored arena vote; ``systems`` is in the order shown (A, B, C...) for the reveal."""

    vote_id: str
    systems: list[str]
    choice: str
    chosen_system: str | None
    duplicate: bool


# ---------------------------------------------------------------- rater side


@dataclass(frozen=True)
class RaterProgress:
    done: int
    remaining: int
    total: int
    finished: bool


@dataclass(frozen=True)
class RaterSession:
    study: str
    display_name: str
    instructions: str
    questions: list[Question]
    comment_max_chars: int
    is_open: bool
    progress: RaterProgress


@dataclass(frozen=True)
class RaterOutput:
    label: str
    text: str
    fills: list[str] | None


@dataclass(frozen=True)
class RaterItem:
    assignment_id: int
    position: int
    text: str
    outputs: list[RaterOutput]
    questions: list[Question]


@dataclass(frozen=True)
class SubmitReceipt:
    assignment_id: int
    position: int
    answered_at: datetime
    duplicate: bool
    done: int

"""Arena votes: a demo visitor's blind vote between outputs shown as A, B, C..., stored as an
answered item of the built-in study ``"arena"`` (so its results are those of any study).

Written through ``AnnotationStore.write``, the store's one write path; the store's
``record_blind_vote`` calls this.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .errors import AlreadySubmittedError, InvalidInputError
from .queries import hash_token, label_of
from .questions import ALL_BAD, TIE, preference
from .rows import add_items
from .schema import (
    ARENA_SEEN_UNBLINDED,
    ARENA_STUDY,
    Assignment,
    Item,
    Output,
    Rater,
    Rating,
    Study,
    utcnow,
)
from .validate import check_items_outputs, check_name, check_text, coerce
from .views import ItemIn, OutputIn, VoteReceipt

T = TypeVar("T")


class Writer(Protocol):
    """What a vote is written through: ``AnnotationStore.write`` (the one write path; this
    module is below the store, so it names the method, not the class)."""

    def write(self, fn: Callable[[Session], T], *, integrity_retries: int = 0) -> T: ...


def record_blind_vote(
    store: Writer,
    text: str,
    outputs: Sequence[OutputIn | Mapping[str, Any]],
    choice: str,
    *,
    vote_id: str | None = None,
    visitor: str | None = None,
    source: str | None = None,
    seen_unblinded: bool = False,
) -> VoteReceipt:
    """Store a demo visitor's blind vote between outputs shown as A, B, C... in that order.

    ``outputs`` are in the order shown (``item_key`` is ignored); ``choice`` is a label,
    ``"tie"`` or ``"all_bad"``. ``vote_id`` (e.g. a UUID made when the outputs were shown)
    makes a repeated click store one vote. Votes land in the built-in study ``"arena"``,
    whose results give win rates and Bradley-Terry scores like any study.
    ``seen_unblinded``: the visitor had seen this text's outputs with the names shown; the
    vote is kept but flagged (its item's source is ``ARENA_SEEN_UNBLINDED``, counted in
    ``results("arena").n_votes_seen_unblinded`` and exported).
    """
    if seen_unblinded:
        source = ARENA_SEEN_UNBLINDED
    text = check_text(text, "text")
    vote_id = check_name(vote_id or uuid.uuid4().hex, "vote_id")
    outs = [coerce(OutputIn, o, "output") for o in outputs]
    if len(outs) < 2:
        raise InvalidInputError("a blind vote needs at least two outputs")
    outs = [
        OutputIn(
            vote_id,
            o.system,
            o.text,
            o.fills,
            o.model,
            o.adapter_revision,
            dict(o.decoding),
            o.seed,
        )
        for o in outs
    ]
    check_items_outputs([ItemIn(vote_id, text, source=source)], outs)
    labels = [label_of(i) for i in range(len(outs))]
    if choice not in (*labels, TIE, ALL_BAD):
        raise InvalidInputError(f"choice must be one of {labels + [TIE, ALL_BAD]}, got {choice!r}")
    visitor_hash = hash_token(f"arena-visitor:{visitor or 'anonymous'}")
    systems = [o.system for o in outs]
    chosen = systems[labels.index(choice)] if choice in labels else None

    def fn(s: Session) -> VoteReceipt:
        study = _arena_study(s)
        existing = s.scalar(select(Item).where(Item.study_id == study.id, Item.key == vote_id))
        if existing is not None:
            a = s.scalar(select(Assignment).where(Assignment.item_id == existing.id))
            shown = [s.get(Output, oid).system for oid in a.output_order] if a else []
            pref_sys = (
                s.get(Output, a.preferred_output_id).system
                if a is not None and a.preferred_output_id
                else None
            )
            same = shown == systems and (
                pref_sys == chosen if chosen else a is not None and a.preference == choice
            )
            if not same:
                raise AlreadySubmittedError(f"vote {vote_id!r} was already stored differently")
            return VoteReceipt(vote_id, shown, choice, chosen, duplicate=True)
        rater = s.scalar(select(Rater).where(Rater.token_hash == visitor_hash))
        if rater is None:
            rater = Rater(
                study_id=study.id,
                display_name="visitor",
                token_hash=visitor_hash,
                seed=secrets.randbits(62),
            )
            s.add(rater)
        item = add_items(s, study, [ItemIn(vote_id, text, source=source)], outs)[0]
        s.flush()
        last = s.scalar(
            select(func.max(Assignment.position)).where(Assignment.rater_id == rater.id)
        )
        order = [o.id for o in item.outputs]
        now = utcnow()
        item.n_assigned = 1
        a = Assignment(
            rater_id=rater.id,
            item_id=item.id,
            position=(last or 0) + 1,
            output_order=order,
            shown_at=now,
            completed_at=now,
            preference="choice" if chosen else choice,
            preferred_output_id=order[labels.index(choice)] if chosen else None,
        )
        s.add(a)
        s.flush()
        for pos, oid in enumerate(order):
            s.add(
                Rating(
                    rater_id=rater.id,
                    output_id=oid,
                    assignment_id=a.id,
                    answers={},
                    position=pos,
                    shown_at=now,
                    answered_at=now,
                )
            )
        return VoteReceipt(vote_id, systems, choice, chosen, duplicate=False)

    return store.write(fn, integrity_retries=3)


def _arena_study(s: Session) -> Study:
    study = s.scalar(select(Study).where(Study.name == ARENA_STUDY))
    if study is None:
        study = Study(
            name=ARENA_STUDY,
            kind="arena",
            instructions="Blind votes from the demo's compare mode.",
            questions=[preference().to_dict()],
            raters_per_item=1,
            status="open",
            comment_max_chars=0,
        )
        s.add(study)
        s.flush()
    return study

"""Shared reads: the lookups and summaries that the store, results and export all need.

Each function takes an open session and returns rows or views; none writes. Token checks are
here too (a token is looked up by its SHA-256, never stored in clear).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .attention import AttentionSettings, check_due
from .errors import InvalidInputError, NotFoundError, UnknownTokenError
from .questions import Question
from .schema import Assignment, Item, Output, Rater, Study
from .validate import MAX_TOKEN_CHARS
from .views import (
    ItemIn,
    OutputIn,
    RaterItem,
    RaterOutput,
    RaterProgress,
    RaterStatus,
    StudyInfo,
    StudyProgress,
)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


REVOKED_PREFIX = "revoked-"


def revoked_hash(rater_id: int) -> str:
    """What a revoked rater's token hash becomes: 64 characters like a hash (the schema checks
    the length), unique per rater, and never equal to a SHA-256 hex digest (not hex)."""
    return f"{REVOKED_PREFIX}{rater_id:056d}"


def label_of(position: int) -> str:
    """Labels shown to raters: A, B, ..., Z, AA, AB, ..."""
    s = ""
    n = position
    while True:
        s = chr(65 + n % 26) + s
        n = n // 26 - 1
        if n < 0:
            return s


def as_utc(dt: datetime | None) -> datetime | None:
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=UTC)  # SQLite hands back naive datetimes; they were stored in UTC


def eligible(rater: Rater, study: Study, *, gold: bool):  # noqa: ANN202 - a Select
    """Items this rater may still get: not yet theirs; regular ones only while under k."""
    mine = select(Assignment.item_id).where(Assignment.rater_id == rater.id)
    q = select(Item.id).where(
        Item.study_id == study.id, Item.is_gold.is_(gold), Item.id.not_in(mine)
    )
    if not gold:
        q = q.where(Item.n_assigned < study.raters_per_item)
    return q


def get_study(s: Session, name: str) -> Study:
    if not isinstance(name, str):
        raise InvalidInputError(f"study name must be text, got {name!r}")
    study = s.scalar(select(Study).where(Study.name == name.strip()))
    if study is None:
        raise NotFoundError(f"no study named {name!r}")
    return study


def check_invitable(s: Session, study: Study) -> None:
    """Refuse to invite raters to a study whose links could not be rated: the built-in arena
    (demo votes; its tokens never open a rater page) or a study with no regular item."""
    if study.kind != "study":
        raise InvalidInputError(
            f"{study.name!r} holds the demo's blind votes and has no rater page: "
            "pick a study of your own"
        )
    n = s.scalar(
        select(func.count(Item.id)).where(Item.study_id == study.id, Item.is_gold.is_(False))
    )
    if not n:
        raise InvalidInputError(f"the study {study.name!r} has no item to rate")


def questions_of(study: Study) -> list[Question]:
    return [Question.from_dict(q, check=False) for q in study.questions]


def study_info(s: Session, study: Study) -> StudyInfo:
    n_items = s.scalar(select(func.count(Item.id)).where(Item.study_id == study.id)) or 0
    n_gold = (
        s.scalar(select(func.count(Item.id)).where(Item.study_id == study.id, Item.is_gold)) or 0
    )
    systems = list(
        s.scalars(
            select(Output.system)
            .join(Item)
            .where(Item.study_id == study.id, Output.gold_role.is_(None))
            .distinct()
            .order_by(Output.system)
        )
    )
    n_raters = s.scalar(select(func.count(Rater.id)).where(Rater.study_id == study.id)) or 0
    assigned = s.execute(
        select(func.count(Item.id), func.coalesce(func.sum(Item.n_assigned), 0)).where(
            Item.study_id == study.id, Item.is_gold.is_(False)
        )
    ).one()
    # n_assigned never exceeds raters_per_item for a regular item (the allocator's rule)
    judgments_open = max(0, assigned[0] * study.raters_per_item - int(assigned[1]))
    return StudyInfo(
        id=study.id,
        name=study.name,
        status=study.status,
        kind=study.kind,
        instructions=study.instructions,
        questions=questions_of(study),
        raters_per_item=study.raters_per_item,
        comment_max_chars=study.comment_max_chars,
        n_items=n_items - n_gold,
        n_gold=n_gold,
        systems=systems,
        n_raters=n_raters,
        created_at=as_utc(study.created_at),
        attention=dict(study.attention) if study.attention else None,
        judgments_open=judgments_open if study.kind == "study" else 0,
    )


def rater_by_token(s: Session, token: Any) -> tuple[Rater, Study]:
    if not isinstance(token, str) or not token.strip() or len(token) > MAX_TOKEN_CHARS:
        raise UnknownTokenError("this invite token is not valid")
    if not token.isascii():  # tokens are URL-safe base64; this also keeps surrogates out
        raise UnknownTokenError("this invite token is not valid (check the link you were sent)")
    row = s.execute(
        select(Rater, Study)
        .join(Study, Study.id == Rater.study_id)
        .where(Rater.token_hash == hash_token(token.strip()), Study.kind == "study")
    ).first()
    if row is None:
        raise UnknownTokenError("this invite token is not valid (check the link you were sent)")
    return row[0], row[1]


def rater_item(s: Session, a: Assignment, study: Study) -> RaterItem:
    item = s.get(Item, a.item_id)
    outs = {o.id: o for o in s.scalars(select(Output).where(Output.id.in_(a.output_order)))}
    return RaterItem(
        assignment_id=a.id,
        position=a.position,
        text=item.text,
        outputs=[
            RaterOutput(label_of(i), outs[oid].text, list(outs[oid].fills or []) or None)
            for i, oid in enumerate(a.output_order)
        ],
        questions=questions_of(study),
    )


def rater_progress(s: Session, rater: Rater, study: Study) -> RaterProgress:
    done, open_, remaining = rater_counts(s, rater, study)
    total = done + open_ + remaining
    return RaterProgress(done, open_ + remaining, total, finished=open_ + remaining == 0)


def check_due_at(s: Session, rater: Rater, study: Study, position: int) -> bool:
    """Whether the rater's item at ``position`` is an attention check: ``checks_per_rater`` of
    every ``items_per_rater`` positions, at places drawn once per rater
    (``attention.check_offsets``). A study that states neither (made before they existed)
    spreads its checks over every item a rater may do."""
    settings = AttentionSettings.from_dict(study.attention)
    n, m = settings.items_per_rater, settings.checks_per_rater
    if n is None or m is None:
        counts = dict(
            s.execute(
                select(Item.is_gold, func.count(Item.id))
                .where(Item.study_id == study.id)
                .group_by(Item.is_gold)
            ).all()
        )
        m = counts.get(True, 0)
        n = m + counts.get(False, 0)
    return m > 0 and check_due(rater.seed, position, n, m)


def checks_may_continue(s: Session, rater: Rater) -> bool:
    """Whether a rater whose regular items ran out may still be handed a check: only while
    they have answered more regular items than checks, so that checks never outnumber the
    work they guard (and a rater who came too late gets none)."""
    counts = dict(
        s.execute(
            select(Item.is_gold, func.count(Assignment.id))
            .join(Item, Item.id == Assignment.item_id)
            .where(Assignment.rater_id == rater.id)
            .group_by(Item.is_gold)
        ).all()
    )
    return counts.get(False, 0) > counts.get(True, 0)


def rater_counts(s: Session, rater: Rater, study: Study) -> tuple[int, int, int]:
    """(answered, assigned but not answered, still assignable to this rater). With no regular
    item left for them a rater gets at most the check due at their next position, and only
    while checks do not outnumber their regular items, so only that one counts as still to
    do."""
    done, total = s.execute(
        select(
            func.count(Assignment.completed_at),
            func.count(Assignment.id),
        ).where(Assignment.rater_id == rater.id)
    ).one()
    regular = s.scalar(eligible(rater, study, gold=False).with_only_columns(func.count(Item.id)))
    gold = s.scalar(eligible(rater, study, gold=True).with_only_columns(func.count(Item.id)))
    if regular:
        return done, total - done, regular + gold
    last = s.scalar(select(func.max(Assignment.position)).where(Assignment.rater_id == rater.id))
    due = (
        bool(gold)
        and last is not None
        and checks_may_continue(s, rater)
        and check_due_at(s, rater, study, last + 1)
    )
    return done, total - done, int(due)


def study_progress(s: Session, st: Study) -> StudyProgress:
    items = s.execute(select(Item.id, Item.is_gold).where(Item.study_id == st.id)).all()
    regular = {iid for iid, g in items if not g}
    done_per_item: dict[int, int] = {}
    for iid, n in s.execute(
        select(Assignment.item_id, func.count(Assignment.id))
        .join(Item, Item.id == Assignment.item_id)
        .where(
            Item.study_id == st.id, Assignment.completed_at.is_not(None), Item.is_gold.is_(False)
        )
        .group_by(Assignment.item_id)
    ):
        done_per_item[iid] = n
    k = st.raters_per_item
    needed = len(regular) * k if st.kind == "study" else sum(done_per_item.values())
    done = sum(min(n, k) for n in done_per_item.values()) if st.kind == "study" else needed
    raters = []
    for r in s.scalars(select(Rater).where(Rater.study_id == st.id).order_by(Rater.id)):
        d, o, rem = rater_counts(s, r, st)
        gold = s.execute(
            select(Assignment.gold_passed)
            .join(Item, Item.id == Assignment.item_id)
            .where(Assignment.rater_id == r.id, Item.is_gold, Assignment.completed_at.is_not(None))
        ).all()
        last = s.scalar(
            select(func.max(Assignment.completed_at)).where(Assignment.rater_id == r.id)
        )
        raters.append(
            RaterStatus(
                rater_id=r.id,
                display_name=r.display_name,
                done=d,
                open=o,
                remaining=rem,
                gold_done=len(gold),
                gold_failed=sum(1 for (p,) in gold if p is False),
                last_answer_at=as_utc(last),
                revoked=r.token_hash.startswith(REVOKED_PREFIX),
            )
        )
    return StudyProgress(
        study=st.name,
        status=st.status,
        n_items=len(regular),
        raters_per_item=k,
        judgments_needed=needed,
        judgments_done=done,
        items_complete=sum(1 for n in done_per_item.values() if n >= k),
        share_done=done / needed if needed else 0.0,
        raters=raters,
    )


def study_items(s: Session, name: str) -> tuple[list[ItemIn], list[OutputIn]]:
    """A study's items and outputs as given at creation (for re-export or a copy)."""
    st = get_study(s, name)
    items, outs = [], []
    for it in s.scalars(select(Item).where(Item.study_id == st.id).order_by(Item.id)):
        items.append(ItemIn(it.key, it.text, it.original, it.source, it.is_gold))
        for o in it.outputs:
            outs.append(
                OutputIn(
                    it.key,
                    o.system,
                    o.text,
                    o.fills,
                    o.model,
                    o.adapter_revision,
                    dict(o.decoding or {}),
                    o.seed,
                    o.gold_role,
                )
            )
    return items, outs

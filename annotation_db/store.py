"""The store: studies, invites, blind assignment, idempotent submission, arena votes.

Each public method is one unit of work (one transaction). Rater methods take the invite token
and return only rater-side views (see ``views``), so system identities never reach a rater.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import BigInteger, func, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .engine import Database, is_sqlite
from .errors import (
    AlreadySubmittedError,
    DuplicateError,
    InvalidInputError,
    NotAssignedError,
    NotFoundError,
    StudyClosedError,
    UnknownTokenError,
)
from .questions import (
    ALL_BAD,
    DEFAULT_QUESTIONS,
    TIE,
    Question,
    normalize_output_answers,
    parse_questions,
    preference,
)
from .schema import (
    ARENA_SEEN_UNBLINDED,
    STUDY_STATUSES,
    Assignment,
    Item,
    Output,
    Rater,
    Rating,
    Study,
    utcnow,
)
from .settings import DBSettings
from .views import (
    Invite,
    ItemIn,
    OutputIn,
    RaterItem,
    RaterOutput,
    RaterProgress,
    RaterSession,
    RaterStatus,
    StudyInfo,
    StudyProgress,
    SubmitReceipt,
    VoteReceipt,
)

T = TypeVar("T")

ARENA_STUDY = "arena"
MAX_TEXT_CHARS = 100_000
MAX_NAME_CHARS = 200
MAX_DISPLAY_NAME_CHARS = 100
MAX_TOKEN_CHARS = 200
MAX_STUDY_NAME_CHARS = 100
# A study name is also a file name (exports, backups): ASCII letters and digits, with
# '-', '_', '.' or spaces inside; never '/', '\\', '..' or a leading dot.
_STUDY_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 _.-]*[A-Za-z0-9])?")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


_REVOKED = "revoked-"


def _revoked_hash(rater_id: int) -> str:
    """What a revoked rater's token hash becomes: 64 characters like a hash (the schema checks
    the length), unique per rater, and never equal to a SHA-256 hex digest (not hex)."""
    return f"{_REVOKED}{rater_id:056d}"


def label_of(position: int) -> str:
    """Labels shown to raters: A, B, ..., Z, AA, AB, ..."""
    s = ""
    n = position
    while True:
        s = chr(65 + n % 26) + s
        n = n // 26 - 1
        if n < 0:
            return s


def _as_utc(dt: datetime | None) -> datetime | None:
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=UTC)  # SQLite hands back naive datetimes; they were stored in UTC


_PRIME = 2_147_483_647  # 2**31 - 1: every product below stays within 64-bit integers


def _shuffle_key(rater: Rater):  # noqa: ANN202 - a SQL expression
    """A per-rater pseudo-random order of items, computed in SQL (SQLite and Postgres alike):
    an affine map of the id, squared (non-linear, so orders of different raters do not
    share a lattice structure), then another affine map, all modulo a prime."""
    seed = rater.seed
    m1, a1 = 1 + seed % (_PRIME - 1), (seed >> 20) % _PRIME
    m2, a2 = 1 + (seed >> 31) % (_PRIME - 1), (seed >> 11) % _PRIME
    x = (Item.id * literal(m1, BigInteger) + literal(a1, BigInteger)) % _PRIME
    return ((x * x) % _PRIME * literal(m2, BigInteger) + literal(a2, BigInteger)) % _PRIME


def _eligible(rater: Rater, study: Study, *, gold: bool):  # noqa: ANN202 - a Select
    """Items this rater may still get: not yet theirs; regular ones only while under k."""
    mine = select(Assignment.item_id).where(Assignment.rater_id == rater.id)
    q = select(Item.id).where(
        Item.study_id == study.id, Item.is_gold.is_(gold), Item.id.not_in(mine)
    )
    if not gold:
        q = q.where(Item.n_assigned < study.raters_per_item)
    return q


class AnnotationStore:
    """Entry point of the package. ``AnnotationStore()`` opens the store named by the settings."""

    def __init__(
        self,
        url: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        settings: DBSettings | None = None,
    ) -> None:
        self.settings = settings or DBSettings.from_env(url=url, path=path)
        self.db = Database(self.settings)

    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> AnnotationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite(self.db.engine)

    def _write(self, fn: Callable[[Session], T], *, integrity_retries: int = 0) -> T:
        """One write transaction. ``fn`` must re-check state, so that after losing a race on a
        unique constraint it can be rerun and find the winner's row (idempotent operations)."""
        attempt = 0
        while True:
            try:
                return self.db.write(fn)
            except IntegrityError:
                attempt += 1
                if attempt > integrity_retries:
                    raise

    # ------------------------------------------------------------------ studies

    def create_study(
        self,
        name: str,
        items: Sequence[ItemIn | Mapping[str, Any]],
        outputs: Sequence[OutputIn | Mapping[str, Any]],
        *,
        questions: Sequence[Question | Mapping[str, Any] | str] = DEFAULT_QUESTIONS,
        instructions: str = "",
        raters_per_item: int = 3,
        status: str = "open",
        comment_max_chars: int = 2000,
    ) -> StudyInfo:
        """Create a study with all its items and pre-generated outputs, in one transaction."""
        name = check_study_name(name)
        if name == ARENA_STUDY:
            raise InvalidInputError(f"the study name {ARENA_STUDY!r} is reserved for blind votes")
        qs = parse_questions(questions)
        _check_int(raters_per_item, "raters_per_item", 1, 1000)
        _check_int(comment_max_chars, "comment_max_chars", 0, MAX_TEXT_CHARS)
        if status not in STUDY_STATUSES:
            raise InvalidInputError(f"status must be one of {STUDY_STATUSES}, got {status!r}")
        if not isinstance(instructions, str) or len(instructions) > MAX_TEXT_CHARS:
            raise InvalidInputError("instructions must be text of at most 100000 characters")
        check_encodable(instructions, "the instructions")
        items_in = [_coerce(ItemIn, it, "item") for it in items]
        outputs_in = [_coerce(OutputIn, o, "output") for o in outputs]
        _check_items_outputs(items_in, outputs_in)

        def fn(s: Session) -> StudyInfo:
            if s.scalar(select(Study.id).where(Study.name == name)) is not None:
                raise DuplicateError(f"a study named {name!r} already exists")
            study = Study(
                name=name,
                instructions=instructions,
                questions=[q.to_dict() for q in qs],
                raters_per_item=raters_per_item,
                status=status,
                comment_max_chars=comment_max_chars,
            )
            s.add(study)
            _add_items(s, study, items_in, outputs_in)
            s.flush()
            return _study_info(s, study)

        try:
            return self._write(fn)
        except IntegrityError as e:  # lost a race on the study name
            raise DuplicateError(f"a study named {name!r} already exists") from e

    def study(self, name: str) -> StudyInfo:
        return self.db.read(lambda s: _study_info(s, _get_study(s, name)))

    def list_studies(self) -> list[StudyInfo]:
        def fn(s: Session) -> list[StudyInfo]:
            return [_study_info(s, st) for st in s.scalars(select(Study).order_by(Study.id))]

        return self.db.read(fn)

    def set_status(self, name: str, status: str) -> StudyInfo:
        if status not in STUDY_STATUSES:
            raise InvalidInputError(f"status must be one of {STUDY_STATUSES}, got {status!r}")

        def fn(s: Session) -> StudyInfo:
            study = _get_study(s, name)
            study.status = status
            s.flush()
            return _study_info(s, study)

        return self._write(fn)

    def revoke(self, study: str, rater_id: int) -> RaterStatus:
        """Make a rater's invite token stop working, at once and for good.

        Their answers so far are kept; the item they were shown but had not answered goes back
        to the pool for other raters. Invite them again for a new token.
        """
        _check_int(rater_id, "rater id", 1, 2**62)

        def fn(s: Session) -> RaterStatus:
            st = _get_study(s, study)
            rater = s.get(Rater, rater_id)
            if rater is None or rater.study_id != st.id:
                raise NotFoundError(f"no rater {rater_id} in study {st.name!r}")
            rater.token_hash = _revoked_hash(rater.id)
            for a in s.scalars(
                select(Assignment).where(
                    Assignment.rater_id == rater.id, Assignment.completed_at.is_(None)
                )
            ):
                s.execute(
                    update(Item).where(Item.id == a.item_id).values(n_assigned=Item.n_assigned - 1)
                )
                s.delete(a)
            s.flush()
            return next(r for r in _study_progress(s, st).raters if r.rater_id == rater.id)

        return self._write(fn)

    def new_link(self, study: str, rater_id: int) -> Invite:
        """A new invite token for an existing rater (a lost or leaked link): the old token
        stops working at once, the new one is shown once (only its hash is kept), and the
        rater keeps their answers, their order and the item they were shown."""
        _check_int(rater_id, "rater id", 1, 2**62)
        token = secrets.token_urlsafe(24)

        def fn(s: Session) -> Invite:
            st = _get_study(s, study)
            rater = s.get(Rater, rater_id)
            if rater is None or rater.study_id != st.id:
                raise NotFoundError(f"no rater {rater_id} in study {st.name!r}")
            rater.token_hash = hash_token(token)
            s.flush()
            return Invite(rater.id, rater.display_name, token)

        return self._write(fn)

    def invite(self, study: str, display_name: str) -> Invite:
        """Create a rater and return their invite token (shown once; only its hash is kept)."""
        return self.invite_many(study, [display_name])[0]

    def invite_many(self, study: str, display_names: Sequence[str]) -> list[Invite]:
        names = [_check_name(n, "display name", MAX_DISPLAY_NAME_CHARS) for n in display_names]
        tokens = [secrets.token_urlsafe(24) for _ in names]

        def fn(s: Session) -> list[Invite]:
            st = _get_study(s, study)
            raters = [
                Rater(
                    study_id=st.id,
                    display_name=n,
                    token_hash=hash_token(t),
                    seed=secrets.randbits(62),
                )
                for n, t in zip(names, tokens, strict=True)
            ]
            s.add_all(raters)
            s.flush()
            return [Invite(r.id, r.display_name, t) for r, t in zip(raters, tokens, strict=True)]

        return self._write(fn)

    def items(self, study: str) -> tuple[list[ItemIn], list[OutputIn]]:
        """The study's items and outputs as given at creation (for re-export or a copy)."""

        def fn(s: Session) -> tuple[list[ItemIn], list[OutputIn]]:
            st = _get_study(s, study)
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

        return self.db.read(fn)

    # ------------------------------------------------------------------ rater side

    def open_session(self, token: str) -> RaterSession:
        """What a rater sees on arrival: study instructions, questions, own progress."""

        def fn(s: Session) -> RaterSession:
            rater, study = _rater_by_token(s, token)
            return RaterSession(
                study=study.name,
                display_name=rater.display_name,
                instructions=study.instructions,
                questions=_questions(study),
                comment_max_chars=study.comment_max_chars,
                is_open=study.status == "open",
                progress=_rater_progress(s, rater, study),
            )

        return self.db.read(fn)

    def rater_progress(self, token: str) -> RaterProgress:
        def fn(s: Session) -> RaterProgress:
            rater, study = _rater_by_token(s, token)
            return _rater_progress(s, rater, study)

        return self.db.read(fn)

    def next_item(self, token: str) -> RaterItem | None:
        """The rater's current item: the open one if any (resume), else a newly assigned one.

        ``None`` when nothing is left for this rater. Calling it twice returns the same item.
        """

        def fn(s: Session) -> RaterItem | None:
            rater, study = _rater_by_token(s, token)
            if study.status != "open":
                raise StudyClosedError(f"the study {study.name!r} is {study.status}")
            if not self.is_sqlite:
                # Two tabs of one rater asking at once must not both allocate a new item.
                s.execute(select(Rater.id).where(Rater.id == rater.id).with_for_update())
            a = s.scalar(
                select(Assignment)
                .where(Assignment.rater_id == rater.id, Assignment.completed_at.is_(None))
                .order_by(Assignment.position)
                .limit(1)
            )
            if a is None:
                a = self._allocate(s, rater, study)
                if a is None:
                    return None
            if a.shown_at is None:
                a.shown_at = utcnow()
            return _rater_item(s, a, study)

        return self._write(fn, integrity_retries=3)

    def rater_item(self, token: str, assignment_id: int) -> RaterItem:
        """One of this rater's items by its ``assignment_id``, answered or not, as it was shown
        (same labels and order), e.g. to read answers given for the item a page displayed."""
        if isinstance(assignment_id, bool) or not isinstance(assignment_id, int):
            raise InvalidInputError(f"assignment_id must be an integer, got {assignment_id!r}")

        def fn(s: Session) -> RaterItem:
            rater, study = _rater_by_token(s, token)
            a = s.get(Assignment, assignment_id)
            if a is None or a.rater_id != rater.id:
                raise NotAssignedError(f"item {assignment_id} is not assigned to you")
            return _rater_item(s, a, study)

        return self.db.read(fn)

    def _allocate(self, s: Session, rater: Rater, study: Study) -> Assignment | None:
        """Give the rater one more item: every attention check once, regular items until each
        has ``raters_per_item`` raters, least-covered first, in the rater's own random order."""
        if not self.is_sqlite:  # SQLite's BEGIN IMMEDIATE already serialises writers
            s.execute(select(Study.id).where(Study.id == study.id).with_for_update())
        gold = list(s.scalars(_eligible(rater, study, gold=True).order_by(_shuffle_key(rater))))
        item_id = s.scalar(
            _eligible(rater, study, gold=False)
            .order_by(Item.n_assigned, _shuffle_key(rater), Item.id)
            .limit(1)
        )
        if item_id is None and not gold:
            return None
        last = s.scalar(
            select(func.max(Assignment.position)).where(Assignment.rater_id == rater.id)
        )
        position = (last or 0) + 1
        rng = random.Random(f"{rater.seed}:{position}")
        if gold:
            # Spread attention checks evenly: pick one with probability gold left / all left.
            n_regular = s.scalar(
                _eligible(rater, study, gold=False).with_only_columns(func.count(Item.id))
            )
            if item_id is None or rng.random() < len(gold) / (len(gold) + n_regular):
                item_id = gold[0]
        s.execute(update(Item).where(Item.id == item_id).values(n_assigned=Item.n_assigned + 1))
        output_ids = list(
            s.scalars(select(Output.id).where(Output.item_id == item_id).order_by(Output.id))
        )
        rng.shuffle(output_ids)
        a = Assignment(
            rater_id=rater.id, item_id=item_id, position=position, output_order=output_ids
        )
        s.add(a)
        s.flush()
        return a

    def submit(
        self,
        token: str,
        assignment_id: int,
        answers: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        preference: str | None = None,
        comment: str | None = None,
    ) -> SubmitReceipt:
        """Store a rater's answers for one item, all outputs at once, in one transaction.

        ``answers`` maps the output labels shown (``"A"``, ``"B"``...) to per-output answers,
        e.g. ``{"A": {"appropriate": True, "fluency": 4}}``. ``preference`` is a label, ``"tie"``
        or ``"all_bad"``. Sending the same submission again returns the stored one
        (``duplicate=True``); sending a different one for an answered item raises
        ``AlreadySubmittedError``.
        """
        if isinstance(assignment_id, bool) or not isinstance(assignment_id, int):
            raise InvalidInputError(f"assignment_id must be an integer, got {assignment_id!r}")
        if comment is not None and not isinstance(comment, str):
            raise InvalidInputError("comment must be text")
        comment = check_encodable((comment or "").strip(), "the comment") or None

        def fn(s: Session) -> SubmitReceipt:
            rater, study = _rater_by_token(s, token)
            a = s.get(Assignment, assignment_id)
            if a is None or a.rater_id != rater.id:
                raise NotAssignedError(f"item {assignment_id} is not assigned to you")
            qs = _questions(study)
            labels = {label_of(i): oid for i, oid in enumerate(a.output_order)}
            norm = _normalize_submission(qs, labels, answers, preference, comment, study)
            if a.completed_at is not None:
                if _stored_submission(s, a, labels) == norm:
                    return _receipt(s, a, rater, duplicate=True)
                raise AlreadySubmittedError(
                    f"item {a.position} was already answered differently; answers are final"
                )
            if study.status != "open":
                raise StudyClosedError(f"the study {study.name!r} is {study.status}")
            per_output, pref, cmt = norm
            now = utcnow()
            shown = _as_utc(a.shown_at) or now
            for pos, oid in enumerate(a.output_order):
                s.add(
                    Rating(
                        rater_id=rater.id,
                        output_id=oid,
                        assignment_id=a.id,
                        answers=per_output.get(label_of(pos), {}),
                        position=pos,
                        shown_at=shown,
                        answered_at=now,
                    )
                )
            a.shown_at = shown
            a.completed_at = now
            a.comment = cmt
            if pref is not None:
                a.preference = pref if pref in (TIE, ALL_BAD) else "choice"
                a.preferred_output_id = labels[pref] if pref not in (TIE, ALL_BAD) else None
            item = s.get(Item, a.item_id)
            if item is not None and item.is_gold:
                a.gold_passed = _gold_passed(s, a, labels, per_output, pref)
            s.flush()
            return _receipt(s, a, rater, duplicate=False)

        return self._write(fn, integrity_retries=3)

    # ------------------------------------------------------------------ admin: progress

    def progress(self, study: str) -> StudyProgress:
        def fn(s: Session) -> StudyProgress:
            st = _get_study(s, study)
            return _study_progress(s, st)

        return self.db.read(fn)

    # ------------------------------------------------------------------ arena

    def record_blind_vote(
        self,
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
        text = _check_text(text, "text")
        vote_id = _check_name(vote_id or uuid.uuid4().hex, "vote_id")
        outs = [_coerce(OutputIn, o, "output") for o in outputs]
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
        _check_items_outputs([ItemIn(vote_id, text, source=source)], outs)
        labels = [label_of(i) for i in range(len(outs))]
        if choice not in (*labels, TIE, ALL_BAD):
            raise InvalidInputError(
                f"choice must be one of {labels + [TIE, ALL_BAD]}, got {choice!r}"
            )
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
            item = _add_items(s, study, [ItemIn(vote_id, text, source=source)], outs)[0]
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

        return self._write(fn, integrity_retries=3)

    # ------------------------------------------------------------------ results, export, backup

    def results(self, study: str, **kwargs: Any):  # noqa: ANN201 - see results.StudyResults
        """Rates with intervals, pairwise and Bradley-Terry, agreement, attention, timing."""
        from .results import compute_results

        return self.db.read(lambda s: compute_results(s, _get_study(s, study), **kwargs))

    def export(self, study: str, fmt: str, out: str | os.PathLike[str]) -> Path:
        """Write every rating with its item, output, system and presentation order."""
        from .io import export_study

        return export_study(self, study, fmt, Path(out))

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Copy the live SQLite database to ``dest`` with SQLite's online backup API."""
        from .backup import backup_sqlite

        return backup_sqlite(self.db.engine, Path(dest), overwrite=overwrite)


# ---------------------------------------------------------------------- helpers


def _coerce(cls: type[T], obj: Any, what: str) -> T:
    if isinstance(obj, cls):
        return obj
    if isinstance(obj, Mapping):
        try:
            return cls(**dict(obj))
        except TypeError as e:
            raise InvalidInputError(f"bad {what} {dict(obj)!r}: {e}") from e
    raise InvalidInputError(f"expected an {what} (dataclass or mapping), got {obj!r}")


def check_study_name(v: Any) -> str:
    """A study name that is safe as a file name; ``InvalidInputError`` naming the rule if not."""
    v = _check_name(v, "study name", MAX_STUDY_NAME_CHARS)
    if not _STUDY_NAME.fullmatch(v) or ".." in v:
        raise InvalidInputError(
            f"the study name {v!r} may only use letters, digits, '-', '_', '.' and spaces, "
            "start and end with a letter or digit, and not contain '..'"
        )
    return v


def check_encodable(v: str, what: str) -> str:
    """Text that UTF-8 can store: a lone surrogate (from a broken copy-paste or a crafted
    request) cannot be written to the database or a file."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{what} contains a character that is not valid text (a lone surrogate at "
            f"position {e.start + 1}); remove it and try again"
        ) from None
    return v


def _check_name(v: Any, what: str, max_len: int = MAX_NAME_CHARS) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InvalidInputError(f"{what} must be non-empty text, got {v!r}")
    v = check_encodable(v.strip(), what)
    if len(v) > max_len:
        raise InvalidInputError(f"{what} is {len(v)} characters; at most {max_len} allowed")
    return v


def _check_text(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InvalidInputError(f"{what} must be non-empty text")
    if len(v) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"{what} is {len(v)} characters; at most {MAX_TEXT_CHARS} allowed")
    return check_encodable(v, what)


def _check_int(v: Any, what: str, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InvalidInputError(f"{what} must be an integer between {lo} and {hi}, got {v!r}")


def _spans(v: Sequence[str] | str | None, what: str) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [v]
    if not all(isinstance(x, str) for x in v):
        raise InvalidInputError(f"{what} must be text or a list of texts")
    return list(v)


def _check_items_outputs(items: Sequence[ItemIn], outputs: Sequence[OutputIn]) -> None:
    """Validate everything before anything is written."""
    keys: set[str] = set()
    for it in items:
        _check_name(it.key, "item key")
        if it.key in keys:
            raise DuplicateError(f"item key {it.key!r} appears twice")
        keys.add(it.key)
        _check_text(it.text, f"text of item {it.key!r}")
        _spans(it.original, f"original of item {it.key!r}")
        if it.source is not None and (not isinstance(it.source, str) or len(it.source) > 500):
            raise InvalidInputError(f"source of item {it.key!r} must be text (<= 500 characters)")
    seen: set[tuple[str, str]] = set()
    roles: dict[str, list[str]] = {}
    for o in outputs:
        if o.item_key not in keys:
            raise NotFoundError(f"output for unknown item key {o.item_key!r}")
        _check_name(o.system, f"system of an output of item {o.item_key!r}")
        if (o.item_key, o.system) in seen:
            raise DuplicateError(f"item {o.item_key!r} has two outputs from system {o.system!r}")
        seen.add((o.item_key, o.system))
        _check_text(o.text, f"output of {o.system!r} for item {o.item_key!r}")
        _spans(o.fills, f"fills of {o.system!r} for item {o.item_key!r}")
        if o.seed is not None and (isinstance(o.seed, bool) or not isinstance(o.seed, int)):
            raise InvalidInputError(f"seed must be an integer, got {o.seed!r}")
        if not isinstance(o.decoding, Mapping):
            raise InvalidInputError("decoding settings must be a mapping")
        if o.gold_role is not None:
            if o.gold_role not in ("original", "corrupted"):
                raise InvalidInputError(
                    f"gold_role must be original/corrupted, got {o.gold_role!r}"
                )
            roles.setdefault(o.item_key, []).append(o.gold_role)
    per_item = {k: 0 for k in keys}
    for o in outputs:
        per_item[o.item_key] += 1
    for it in items:
        if per_item[it.key] == 0:
            raise InvalidInputError(f"item {it.key!r} has no outputs")
        r = roles.get(it.key, [])
        if it.is_gold and (r.count("original") != 1 or len(r) != per_item[it.key] or len(r) < 2):
            raise InvalidInputError(
                f"attention-check item {it.key!r} needs one output with gold_role='original'"
                " and the others with gold_role='corrupted'"
            )
        if not it.is_gold and r:
            raise InvalidInputError(f"item {it.key!r} has gold_role outputs but is_gold=False")
    _check_gold_looks_regular(items, outputs, per_item)


def _check_gold_looks_regular(
    items: Sequence[ItemIn], outputs: Sequence[OutputIn], per_item: Mapping[str, int]
) -> None:
    """An attention check must not stand out: as many outputs as the regular items show (when
    they all show the same number), and a passage that is not also one of the regular items."""
    regular = [it for it in items if not it.is_gold]
    counts = {per_item[it.key] for it in regular}
    regular_texts = {it.text.strip() for it in regular}
    regular_texts |= {o.text.strip() for o in outputs if o.gold_role is None}
    for it in items:
        if not it.is_gold:
            continue
        if len(counts) == 1 and per_item[it.key] not in counts:
            raise InvalidInputError(
                f"attention-check item {it.key!r} has {per_item[it.key]} outputs but every "
                f"regular item has {counts.pop()}; raters would spot it"
            )
        gold_texts = {it.text.strip()} | {
            o.text.strip() for o in outputs if o.item_key == it.key and o.gold_role == "original"
        }
        if gold_texts & regular_texts:
            raise InvalidInputError(
                f"attention-check item {it.key!r} uses the passage of a regular item; build "
                "checks from passages that are not in the study"
            )


def _add_items(
    s: Session, study: Study, items: Sequence[ItemIn], outputs: Sequence[OutputIn]
) -> list[Item]:
    by_key: dict[str, Item] = {}
    for it in items:
        row = Item(
            key=it.key.strip(),
            text=it.text,
            original=_spans(it.original, "original"),
            source=it.source,
            is_gold=bool(it.is_gold),
        )
        study.items.append(row)
        by_key[it.key] = row
    for o in outputs:
        by_key[o.item_key].outputs.append(
            Output(
                system=o.system.strip(),
                text=o.text,
                fills=_spans(o.fills, "fills"),
                model=o.model,
                adapter_revision=o.adapter_revision,
                decoding=dict(o.decoding or {}),
                seed=o.seed,
                gold_role=o.gold_role,
            )
        )
    return list(by_key.values())


def _get_study(s: Session, name: str) -> Study:
    if not isinstance(name, str):
        raise InvalidInputError(f"study name must be text, got {name!r}")
    study = s.scalar(select(Study).where(Study.name == name.strip()))
    if study is None:
        raise NotFoundError(f"no study named {name!r}")
    return study


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


def _questions(study: Study) -> list[Question]:
    return [Question(**q) for q in study.questions]


def _study_info(s: Session, study: Study) -> StudyInfo:
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
    return StudyInfo(
        id=study.id,
        name=study.name,
        status=study.status,
        kind=study.kind,
        instructions=study.instructions,
        questions=_questions(study),
        raters_per_item=study.raters_per_item,
        comment_max_chars=study.comment_max_chars,
        n_items=n_items - n_gold,
        n_gold=n_gold,
        systems=systems,
        n_raters=n_raters,
        created_at=_as_utc(study.created_at),
    )


def _rater_by_token(s: Session, token: Any) -> tuple[Rater, Study]:
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


def _rater_item(s: Session, a: Assignment, study: Study) -> RaterItem:
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
        questions=_questions(study),
    )


def _normalize_submission(
    qs: Sequence[Question],
    labels: Mapping[str, int],
    answers: Mapping[str, Any] | None,
    pref: Any,
    comment: str | None,
    study: Study,
) -> tuple[dict[str, dict[str, Any]], str | None, str | None]:
    answers = answers or {}
    if not isinstance(answers, Mapping):
        raise InvalidInputError("answers must map output labels (A, B, ...) to answers")
    unknown = [k for k in answers if k not in labels]
    if unknown:
        raise NotAssignedError(
            f"output(s) {unknown} are not part of this item; it shows {sorted(labels)}"
        )
    per_output: dict[str, dict[str, Any]] = {}
    if any(q.per_output for q in qs):
        missing = [lab for lab in labels if lab not in answers]
        if missing:
            raise InvalidInputError(f"answer every output; missing {missing}")
        for lab in labels:
            per_output[lab] = normalize_output_answers(qs, lab, answers[lab])
    else:
        for lab, v in answers.items():
            if v:
                raise InvalidInputError(f"this study asks nothing per output (got {lab}: {v!r})")
    pq = next((q for q in qs if q.kind == "preference"), None)
    if pq is None:
        if pref is not None:
            raise InvalidInputError("this study does not ask for a preference")
    else:
        allowed = list(labels)
        if pq.allow_tie:
            allowed.append(TIE)
        if pq.allow_all_bad:
            allowed.append(ALL_BAD)
        if pref not in allowed:
            if pref is None:
                raise InvalidInputError(f"choose one of {allowed}")
            raise InvalidInputError(f"preference must be one of {allowed}, got {pref!r}")
    cq = next((q for q in qs if q.kind == "comment"), None)
    if comment is not None and len(comment) > study.comment_max_chars:
        raise InvalidInputError(
            f"the comment is {len(comment)} characters; at most {study.comment_max_chars} allowed"
        )
    if cq is not None and cq.required and not comment:
        raise InvalidInputError("a comment is required for this study")
    return per_output, pref, comment


def _stored_submission(
    s: Session, a: Assignment, labels: Mapping[str, int]
) -> tuple[dict[str, dict[str, Any]], str | None, str | None]:
    by_output = {
        r.output_id: r.answers
        for r in s.scalars(select(Rating).where(Rating.assignment_id == a.id))
    }
    per_output = {lab: by_output.get(oid, {}) for lab, oid in labels.items() if by_output.get(oid)}
    if a.preference == "choice":
        pref = next(lab for lab, oid in labels.items() if oid == a.preferred_output_id)
    else:
        pref = a.preference
    return per_output, pref, a.comment


def _gold_passed(
    s: Session,
    a: Assignment,
    labels: Mapping[str, int],
    per_output: Mapping[str, Mapping[str, Any]],
    pref: str | None,
) -> bool:
    """Failed when the corrupted fill is judged appropriate, preferred, or scored above the
    original on any Likert question. Rejecting the original alone is not counted as failure."""
    role = {o.id: o.gold_role for o in s.scalars(select(Output).where(Output.item_id == a.item_id))}
    original = next(lab for lab, oid in labels.items() if role[oid] == "original")
    orig = per_output.get(original, {})
    for lab, oid in labels.items():
        if role[oid] != "corrupted":
            continue
        corr = per_output.get(lab, {})
        if corr.get("appropriate") is True or pref == lab:
            return False
        for k, v in corr.items():
            if k != "appropriate" and isinstance(v, int) and v > orig.get(k, v):
                return False
    return True


def _receipt(s: Session, a: Assignment, rater: Rater, *, duplicate: bool) -> SubmitReceipt:
    done = s.scalar(
        select(func.count(Assignment.id)).where(
            Assignment.rater_id == rater.id, Assignment.completed_at.is_not(None)
        )
    )
    return SubmitReceipt(a.id, a.position, _as_utc(a.completed_at), duplicate, done or 0)


def _rater_progress(s: Session, rater: Rater, study: Study) -> RaterProgress:
    done, open_, remaining = _rater_counts(s, rater, study)
    total = done + open_ + remaining
    return RaterProgress(done, open_ + remaining, total, finished=open_ + remaining == 0)


def _rater_counts(s: Session, rater: Rater, study: Study) -> tuple[int, int, int]:
    """(answered, assigned but not answered, still assignable to this rater)."""
    done, total = s.execute(
        select(
            func.count(Assignment.completed_at),
            func.count(Assignment.id),
        ).where(Assignment.rater_id == rater.id)
    ).one()
    remaining = 0
    for gold in (True, False):
        remaining += s.scalar(
            _eligible(rater, study, gold=gold).with_only_columns(func.count(Item.id))
        )
    return done, total - done, remaining


def _study_progress(s: Session, st: Study) -> StudyProgress:
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
        d, o, rem = _rater_counts(s, r, st)
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
                last_answer_at=_as_utc(last),
                revoked=r.token_hash.startswith(_REVOKED),
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

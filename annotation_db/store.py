"""The store: studies, invites, blind assignment, idempotent submission, arena votes.

Each public method is one unit of work (one transaction). Rater methods take the invite token
and return only rater-side views (see ``views``), so system identities never reach a rater.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import BigInteger, func, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .arena import record_blind_vote
from .attention import AttentionSettings, check_passed
from .backup import backup_sqlite
from .database import Database, is_sqlite
from .errors import (
    AlreadySubmittedError,
    DuplicateError,
    InvalidInputError,
    NotAssignedError,
    NotFoundError,
    StudyClosedError,
)
from .fills import FillCounts, fill_counts
from .io import FORMATS, export_rows, write_export
from .queries import (
    as_utc,
    check_due_at,
    check_invitable,
    checks_may_continue,
    eligible,
    get_study,
    hash_token,
    label_of,
    questions_of,
    rater_by_token,
    rater_item,
    rater_progress,
    revoked_hash,
    study_info,
    study_items,
    study_progress,
)
from .questions import ALL_BAD, DEFAULT_QUESTIONS, TIE, Question, parse_questions
from .results import StudyResults, compute_results
from .rows import add_items
from .schema import (
    ARENA_STUDY,
    Assignment,
    Item,
    Output,
    Rater,
    Rating,
    Study,
    utcnow,
)
from .settings import DBSettings
from .validate import (
    MAX_DISPLAY_NAME_CHARS,
    MAX_TEXT_CHARS,
    check_encodable,
    check_int,
    check_items_outputs,
    check_name,
    check_status,
    check_study_name,
    coerce,
    normalize_submission,
)
from .views import (
    Invite,
    ItemIn,
    OutputIn,
    RaterItem,
    RaterProgress,
    RaterSession,
    RaterStatus,
    StudyInfo,
    StudyProgress,
    SubmitReceipt,
)

T = TypeVar("T")

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

    @property
    def location(self) -> str:
        """Where the data lives, safe to print or log: the SQLite file's path, or the
        database URL with its password hidden."""
        return self.db.location

    @property
    def sqlite_file(self) -> Path | None:
        """The SQLite file of the store (e.g. to check the disk it is on); None for a
        database server or an in-memory database."""
        return self.db.file

    def write(self, fn: Callable[[Session], T], *, integrity_retries: int = 0) -> T:
        """One write transaction, for the store and the modules built on it (drafts). ``fn``
        must re-check state, so that after losing a race on a unique constraint it can be rerun
        and find the winner's row (idempotent operations)."""
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
        attention: AttentionSettings | Mapping[str, Any] | None = None,
    ) -> StudyInfo:
        """Create a study with all its items and pre-generated outputs, in one transaction.

        ``attention``: the attention checks' rule and placement (``attention.AttentionSettings``:
        slip rate, error rates, items and checks per rater; ``planned_settings`` sizes them)."""
        name = check_study_name(name)
        if name == ARENA_STUDY:
            raise InvalidInputError(f"the study name {ARENA_STUDY!r} is reserved for blind votes")
        qs = parse_questions(questions)
        check_int(raters_per_item, "raters_per_item", 1, 1000)
        check_int(comment_max_chars, "comment_max_chars", 0, MAX_TEXT_CHARS)
        check_status(status)
        if not isinstance(instructions, str) or len(instructions) > MAX_TEXT_CHARS:
            raise InvalidInputError("instructions must be text of at most 100000 characters")
        check_encodable(instructions, "the instructions")
        attention_in = AttentionSettings.from_dict(attention)
        items_in = [coerce(ItemIn, it, "item") for it in items]
        outputs_in = [coerce(OutputIn, o, "output") for o in outputs]
        check_items_outputs(items_in, outputs_in)

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
                attention=attention_in.to_dict(),
            )
            s.add(study)
            add_items(s, study, items_in, outputs_in)
            s.flush()
            return study_info(s, study)

        try:
            return self.write(fn)
        except IntegrityError as e:  # lost a race on the study name
            raise DuplicateError(f"a study named {name!r} already exists") from e

    def study(self, name: str) -> StudyInfo:
        return self.db.read(lambda s: study_info(s, get_study(s, name)))

    def list_studies(self) -> list[StudyInfo]:
        def fn(s: Session) -> list[StudyInfo]:
            return [study_info(s, st) for st in s.scalars(select(Study).order_by(Study.id))]

        return self.db.read(fn)

    def set_status(self, name: str, status: str) -> StudyInfo:
        check_status(status)

        def fn(s: Session) -> StudyInfo:
            study = get_study(s, name)
            study.status = status
            s.flush()
            return study_info(s, study)

        return self.write(fn)

    def revoke(self, study: str, rater_id: int) -> RaterStatus:
        """Make a rater's invite token stop working, at once and for good.

        Their answers so far are kept; the item they were shown but had not answered goes back
        to the pool for other raters. Invite them again for a new token.
        """
        check_int(rater_id, "rater id", 1, 2**62)

        def fn(s: Session) -> RaterStatus:
            st = get_study(s, study)
            rater = s.get(Rater, rater_id)
            if rater is None or rater.study_id != st.id:
                raise NotFoundError(f"no rater {rater_id} in study {st.name!r}")
            rater.token_hash = revoked_hash(rater.id)
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
            return next(r for r in study_progress(s, st).raters if r.rater_id == rater.id)

        return self.write(fn)

    def new_link(self, study: str, rater_id: int) -> Invite:
        """A new invite token for an existing rater (a lost or leaked link): the old token
        stops working at once, the new one is shown once (only its hash is kept), and the
        rater keeps their answers, their order and the item they were shown."""
        check_int(rater_id, "rater id", 1, 2**62)
        token = secrets.token_urlsafe(24)

        def fn(s: Session) -> Invite:
            st = get_study(s, study)
            rater = s.get(Rater, rater_id)
            if rater is None or rater.study_id != st.id:
                raise NotFoundError(f"no rater {rater_id} in study {st.name!r}")
            rater.token_hash = hash_token(token)
            s.flush()
            return Invite(rater.id, rater.display_name, token)

        return self.write(fn)

    def invite(self, study: str, display_name: str) -> Invite:
        """Create a rater and return their invite token (shown once; only its hash is kept)."""
        return self.invite_many(study, [display_name])[0]

    def invite_many(self, study: str, display_names: Sequence[str]) -> list[Invite]:
        """Raters and their invite tokens (shown once), refused for a study that cannot be
        rated (``queries.check_invitable``): a link made is one that opens."""
        names = [check_name(n, "display name", MAX_DISPLAY_NAME_CHARS) for n in display_names]
        tokens = [secrets.token_urlsafe(24) for _ in names]

        def fn(s: Session) -> list[Invite]:
            st = get_study(s, study)
            check_invitable(s, st)
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

        return self.write(fn)

    def items(self, study: str) -> tuple[list[ItemIn], list[OutputIn]]:
        """The study's items and outputs as given at creation (for re-export or a copy)."""

        return self.db.read(lambda s: study_items(s, study))

    def fill_counts(self, study: str) -> list[FillCounts]:
        """Per system, how many of its outputs have an empty or an overlong fill (fills.py)."""
        return fill_counts(*self.items(study))

    # ------------------------------------------------------------------ rater side

    def open_session(self, token: str) -> RaterSession:
        """What a rater sees on arrival: study instructions, questions, own progress."""

        def fn(s: Session) -> RaterSession:
            rater, study = rater_by_token(s, token)
            return RaterSession(
                study=study.name,
                display_name=rater.display_name,
                instructions=study.instructions,
                questions=questions_of(study),
                comment_max_chars=study.comment_max_chars,
                is_open=study.status == "open",
                progress=rater_progress(s, rater, study),
            )

        return self.db.read(fn)

    def rater_progress(self, token: str) -> RaterProgress:
        def fn(s: Session) -> RaterProgress:
            rater, study = rater_by_token(s, token)
            return rater_progress(s, rater, study)

        return self.db.read(fn)

    def next_item(self, token: str) -> RaterItem | None:
        """The rater's current item: the open one if any (resume), else a newly assigned one.

        ``None`` when nothing is left for this rater. Calling it twice returns the same item.
        """

        def fn(s: Session) -> RaterItem | None:
            rater, study = rater_by_token(s, token)
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
            return rater_item(s, a, study)

        return self.write(fn, integrity_retries=3)

    def rater_item(self, token: str, assignment_id: int) -> RaterItem:
        """One of this rater's items by its ``assignment_id``, answered or not, as it was shown
        (same labels and order), e.g. to read answers given for the item a page displayed."""
        if isinstance(assignment_id, bool) or not isinstance(assignment_id, int):
            raise InvalidInputError(f"assignment_id must be an integer, got {assignment_id!r}")

        def fn(s: Session) -> RaterItem:
            rater, study = rater_by_token(s, token)
            a = s.get(Assignment, assignment_id)
            if a is None or a.rater_id != rater.id:
                raise NotAssignedError(f"item {assignment_id} is not assigned to you")
            return rater_item(s, a, study)

        return self.db.read(fn)

    def _allocate(self, s: Session, rater: Rater, study: Study) -> Assignment | None:
        """Give the rater one more item: regular items until each has ``raters_per_item``
        raters, least-covered first, in the rater's own random order, and an attention check
        where the rater's check schedule has one (``queries.check_due_at``), the least-used
        check first so that raters meet different ones. A check never opens a rater's page,
        and a rater with no regular item left gets the checks due only while they have done
        more regular items than checks: nobody is handed a page of checks alone."""
        if not self.is_sqlite:  # SQLite's BEGIN IMMEDIATE already serialises writers
            s.execute(select(Study.id).where(Study.id == study.id).with_for_update())
        item_id = s.scalar(
            eligible(rater, study, gold=False)
            .order_by(Item.n_assigned, _shuffle_key(rater), Item.id)
            .limit(1)
        )
        last = s.scalar(
            select(func.max(Assignment.position)).where(Assignment.rater_id == rater.id)
        )
        position = (last or 0) + 1
        if item_id is None and not checks_may_continue(s, rater):
            return None  # no regular item left: checks never outnumber the regular items
        gold = s.scalar(
            eligible(rater, study, gold=True)
            .order_by(Item.n_assigned, _shuffle_key(rater), Item.id)
            .limit(1)
        )
        rng = random.Random(f"{rater.seed}:{position}")
        if gold is not None:
            rng.random()  # the draw the old rule made: the output orders below stay as they were
            if check_due_at(s, rater, study, position):
                item_id = gold
        if item_id is None:
            return None
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
            rater, study = rater_by_token(s, token)
            a = s.get(Assignment, assignment_id)
            if a is None or a.rater_id != rater.id:
                raise NotAssignedError(f"item {assignment_id} is not assigned to you")
            qs = questions_of(study)
            labels = {label_of(i): oid for i, oid in enumerate(a.output_order)}
            norm = normalize_submission(
                qs, labels, answers, preference, comment, study.comment_max_chars
            )
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
            shown = as_utc(a.shown_at) or now
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
                a.gold_passed = _gold_passed(s, a, qs, labels, per_output, pref)
            s.flush()
            return _receipt(s, a, rater, duplicate=False)

        return self.write(fn, integrity_retries=3)

    # ------------------------------------------------------------------ admin: progress

    def progress(self, study: str) -> StudyProgress:
        def fn(s: Session) -> StudyProgress:
            st = get_study(s, study)
            return study_progress(s, st)

        return self.db.read(fn)

    # ------------------------------------------------------------------ arena

    # A demo visitor's blind vote, stored in the built-in study "arena": arena.py's function,
    # bound as a method (its first parameter is the store it writes through), so its signature
    # and docstring are written once.
    record_blind_vote = record_blind_vote

    # ------------------------------------------------------------------ results, export, backup

    def results(self, study: str, **kwargs: Any) -> StudyResults:
        """Rates with intervals, pairwise and Bradley-Terry, agreement, attention, timing."""
        return self.db.read(lambda s: compute_results(s, get_study(s, study), **kwargs))

    def export(self, study: str, fmt: str, out: str | os.PathLike[str]) -> Path:
        """Write every rating with its item, output, system and presentation order."""
        if fmt not in FORMATS:
            raise InvalidInputError(f"format must be one of {FORMATS}, got {fmt!r}")

        def fn(s: Session) -> tuple[str, list[dict[str, Any]], list[ItemIn], list[OutputIn]]:
            name = get_study(s, study).name
            return name, export_rows(s, name), *study_items(s, name)

        name, rows, items, outputs = self.db.read(fn)  # one consistent snapshot
        return write_export(name, rows, items, outputs, fmt, Path(out))

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Copy the live SQLite database to ``dest`` with SQLite's online backup API."""
        return backup_sqlite(self.db.engine, Path(dest), overwrite=overwrite)


# ---------------------------------------------------------------------- helpers


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
    qs: Sequence[Question],
    labels: Mapping[str, int],
    per_output: Mapping[str, Mapping[str, Any]],
    pref: str | None,
) -> bool:
    """The check scored as a whole (``attention.check_passed``): every answer right, so that
    rejecting everything fails it as surely as accepting everything."""
    role = {o.id: o.gold_role for o in s.scalars(select(Output).where(Output.item_id == a.item_id))}
    return check_passed(qs, {lab: role[oid] for lab, oid in labels.items()}, per_output, pref)


def _receipt(s: Session, a: Assignment, rater: Rater, *, duplicate: bool) -> SubmitReceipt:
    done = s.scalar(
        select(func.count(Assignment.id)).where(
            Assignment.rater_id == rater.id, Assignment.completed_at.is_not(None)
        )
    )
    return SubmitReceipt(a.id, a.position, as_utc(a.completed_at), duplicate, done or 0)

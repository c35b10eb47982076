"""Studies being generated: items and settings first, outputs saved one by one as produced.

Generating every system's output for 100 items takes long on a CPU; a restart midway must not
lose what was made. A draft holds the items and the study's settings; each output is written
in its own transaction the moment it exists; ``finish_draft`` creates the study from them (one
transaction, through ``AnnotationStore.create_study``) and drops the draft. Calling
``start_draft`` again with the same name returns the stored draft, so generation resumes with
the outputs still missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ForeignKey, String, UniqueConstraint, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from .errors import DuplicateError, InvalidInputError, NotFoundError
from .schema import Base, Study, utcnow
from .validate import check_items, check_study_name
from .views import ItemIn, OutputIn, StudyInfo

if TYPE_CHECKING:
    from .store import AnnotationStore


class StudyDraft(Base):
    __tablename__ = "study_draft"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    items: Mapped[list[Any]] = mapped_column()  # ItemIn as dicts
    systems: Mapped[list[Any]] = mapped_column()
    settings: Mapped[dict[str, Any]] = mapped_column()  # create_study keywords + generation
    # made up front, nothing to generate: e.g. attention checks (ItemIn / OutputIn as dicts)
    extra_items: Mapped[list[Any]] = mapped_column(default=list)
    extra_outputs: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DraftOutput(Base):
    __tablename__ = "draft_output"

    id: Mapped[int] = mapped_column(primary_key=True)
    draft_id: Mapped[int] = mapped_column(ForeignKey("study_draft.id", ondelete="CASCADE"))
    item_key: Mapped[str] = mapped_column(String(200))
    system: Mapped[str] = mapped_column(String(200))
    output: Mapped[dict[str, Any]] = mapped_column()  # OutputIn as a dict
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("draft_id", "item_key", "system", name="uq_draft_output"),)


@dataclass(frozen=True)
class Draft:
    name: str
    items: list[ItemIn]
    systems: list[str]
    settings: dict[str, Any]
    outputs: list[OutputIn] = field(default_factory=list)
    resumed: bool = False  # True when start_draft found it already stored
    extra_items: list[ItemIn] = field(default_factory=list)  # e.g. attention checks
    extra_outputs: list[OutputIn] = field(default_factory=list)

    @property
    def missing(self) -> list[tuple[ItemIn, list[str]]]:
        """Per item, the systems whose output is not made yet (items in their order)."""
        have = {(o.item_key, o.system) for o in self.outputs}
        out = []
        for it in self.items:
            todo = [s for s in self.systems if (it.key, s) not in have]
            if todo:
                out.append((it, todo))
        return out

    @property
    def n_needed(self) -> int:
        return len(self.items) * len(self.systems)


def start_draft(
    store: AnnotationStore,
    name: str,
    items: Sequence[ItemIn],
    systems: Sequence[str],
    settings: Mapping[str, Any],
    *,
    extra_items: Sequence[ItemIn] = (),
    extra_outputs: Sequence[OutputIn] = (),
) -> Draft:
    """Store a new draft, or return the stored one of that name (``resumed=True``).

    ``extra_items`` / ``extra_outputs`` (attention checks, say) need no generation; they are
    kept with the draft and added to the study by ``finish_draft``."""
    name = (name or "").strip()
    if not name:
        raise InvalidInputError("give the study a name")
    name = check_study_name(name)  # before any generation, not at finish_draft
    if not items or not systems:
        raise InvalidInputError("a study needs at least one item and one system")
    check_items([*items, *extra_items])  # sizes and characters too: a refusal costs no output

    def fn(s: Session) -> Draft:
        if s.scalar(select(Study.id).where(Study.name == name)) is not None:
            raise DuplicateError(f"a study named {name!r} already exists")
        row = s.scalar(select(StudyDraft).where(StudyDraft.name == name))
        if row is not None:
            return _draft(s, row, resumed=True)
        row = StudyDraft(
            name=name,
            items=[asdict(it) for it in items],
            systems=list(systems),
            settings=dict(settings),
            extra_items=[asdict(it) for it in extra_items],
            extra_outputs=[_jsonable(asdict(o)) for o in extra_outputs],
        )
        s.add(row)
        s.flush()
        return _draft(s, row, resumed=False)

    return store.write(fn, integrity_retries=1)


def get_draft(store: AnnotationStore, name: str) -> Draft:
    def fn(s: Session) -> Draft:
        return _draft(s, _row(s, name), resumed=True)

    return store.db.read(fn)


def list_drafts(store: AnnotationStore) -> list[Draft]:
    def fn(s: Session) -> list[Draft]:
        rows = s.scalars(select(StudyDraft).order_by(StudyDraft.id))
        return [_draft(s, r, resumed=True) for r in rows]

    return store.db.read(fn)


def save_output(store: AnnotationStore, name: str, output: OutputIn) -> None:
    """Keep one generated output (its own transaction; saving it twice keeps the first)."""

    def fn(s: Session) -> None:
        row = _row(s, name)
        known = s.scalar(
            select(DraftOutput.id).where(
                DraftOutput.draft_id == row.id,
                DraftOutput.item_key == output.item_key,
                DraftOutput.system == output.system,
            )
        )
        if known is None:
            s.add(
                DraftOutput(
                    draft_id=row.id,
                    item_key=output.item_key,
                    system=output.system,
                    output=_jsonable(asdict(output)),
                )
            )

    store.write(fn, integrity_retries=1)


def finish_draft(
    store: AnnotationStore,
    name: str,
    extra_items: Sequence[ItemIn] = (),
    extra_outputs: Sequence[OutputIn] = (),
) -> StudyInfo:
    """Create the study from the draft (with its extra items and outputs, and any given here),
    then drop the draft."""
    d = get_draft(store, name)
    if d.missing:
        n = sum(len(sys_) for _, sys_ in d.missing)
        raise InvalidInputError(f"the study {name!r} still misses {n} of {d.n_needed} outputs")
    kwargs = {k: d.settings[k] for k in _STUDY_KEYS if k in d.settings}
    info = store.create_study(
        d.name,
        [*d.items, *d.extra_items, *extra_items],
        [*d.outputs, *d.extra_outputs, *extra_outputs],
        **kwargs,
    )
    discard_draft(store, name)
    return info


def discard_draft(store: AnnotationStore, name: str) -> None:
    def fn(s: Session) -> None:
        row = _row(s, name)
        s.execute(delete(DraftOutput).where(DraftOutput.draft_id == row.id))
        s.delete(row)

    store.write(fn)


_STUDY_KEYS = (
    "questions",
    "instructions",
    "raters_per_item",
    "status",
    "comment_max_chars",
    "attention",
)


def _row(s: Session, name: str) -> StudyDraft:
    row = s.scalar(select(StudyDraft).where(StudyDraft.name == (name or "").strip()))
    if row is None:
        raise NotFoundError(f"no study being generated is named {name!r}")
    return row


def _draft(s: Session, row: StudyDraft, *, resumed: bool) -> Draft:
    outs = s.scalars(
        select(DraftOutput.output).where(DraftOutput.draft_id == row.id).order_by(DraftOutput.id)
    )
    return Draft(
        name=row.name,
        items=[ItemIn(**d) for d in row.items],
        systems=list(row.systems),
        settings=dict(row.settings),
        outputs=[OutputIn(**d) for d in outs],
        resumed=resumed,
        extra_items=[ItemIn(**d) for d in row.extra_items or []],
        extra_outputs=[OutputIn(**d) for d in row.extra_outputs or []],
    )


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v)
        for k, v in d.items()
    }

"""A study's outputs revised before anyone rates them: a flagged output made again, or a flagged
item dropped (``fills.py`` says which are flagged).

Allowed only while no rater has been invited: once a rater holds a link, what they may already
have seen must stay what the results describe. Written through ``AnnotationStore.write``, the
store's one write path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .errors import InvalidInputError, NotFoundError
from .queries import get_study, study_info
from .schema import Item, Output, Rater
from .validate import check_name, check_text, coerce, spans
from .views import OutputIn, StudyInfo

if TYPE_CHECKING:
    from .store import AnnotationStore


def revise_outputs(
    store: AnnotationStore,
    study: str,
    *,
    replace: Sequence[OutputIn] = (),
    drop: Sequence[str] = (),
) -> StudyInfo:
    """Replace the outputs given (same item key and system as a stored one) and drop the items
    of the keys given, in one transaction; refused once the study has a rater, for an
    attention check, or when no regular item would be left."""
    new = [coerce(OutputIn, o, "output") for o in replace]
    for o in new:
        check_name(o.system, "system")
        check_text(o.text, f"output of {o.system!r} for item {o.item_key!r}")
        spans(o.fills, f"fills of {o.system!r} for item {o.item_key!r}")
        if o.gold_role is not None:
            raise InvalidInputError("attention-check outputs are made by the study, not revised")
    gone = {k.strip() for k in drop}

    def fn(s: Session) -> StudyInfo:
        st = get_study(s, study)
        if st.kind != "study":
            raise InvalidInputError(f"{st.name!r} holds the demo's blind votes, not a study's")
        n_raters = s.scalar(select(func.count(Rater.id)).where(Rater.study_id == st.id))
        if n_raters:
            raise InvalidInputError(
                f"the study {st.name!r} has {n_raters} invited rater(s): its outputs can no "
                "longer change (make a new study to change them)"
            )
        items = {it.key: it for it in s.scalars(select(Item).where(Item.study_id == st.id))}
        for key in gone | {o.item_key for o in new}:
            if key not in items:
                raise NotFoundError(f"the study {st.name!r} has no item {key!r}")
            if items[key].is_gold:
                raise InvalidInputError(f"item {key!r} is an attention check")
        if not any(not it.is_gold for k, it in items.items() if k not in gone):
            raise InvalidInputError("dropping these would leave the study no item to rate")
        for o in new:
            if o.item_key in gone:
                continue
            row = s.scalar(
                select(Output).where(
                    Output.item_id == items[o.item_key].id, Output.system == o.system
                )
            )
            if row is None:
                raise NotFoundError(f"item {o.item_key!r} has no output of {o.system!r}")
            row.text, row.fills = o.text, spans(o.fills, "fills")
            row.model, row.adapter_revision = o.model, o.adapter_revision
            row.decoding, row.seed = dict(o.decoding or {}), o.seed
        for key in gone:
            s.delete(items[key])
        s.flush()
        return study_info(s, st)

    return store.write(fn)

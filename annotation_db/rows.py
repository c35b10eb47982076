"""The rows of a study's items and their outputs, added in the caller's session (the one write
of ``AnnotationStore.create_study`` and of an arena vote)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from .schema import Item, Output, Study
from .validate import spans
from .views import ItemIn, OutputIn


def add_items(
    s: Session, study: Study, items: Sequence[ItemIn], outputs: Sequence[OutputIn]
) -> list[Item]:
    by_key: dict[str, Item] = {}
    for it in items:
        row = Item(
            key=it.key.strip(),
            text=it.text,
            original=spans(it.original, "original"),
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
                fills=spans(o.fills, "fills"),
                model=o.model,
                adapter_revision=o.adapter_revision,
                decoding=dict(o.decoding or {}),
                seed=o.seed,
                gold_role=o.gold_role,
            )
        )
    return list(by_key.values())

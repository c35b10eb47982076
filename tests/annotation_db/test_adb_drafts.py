"""Studies being generated keep every output as it is made, across a restart."""

from __future__ import annotations

import pytest

from annotation_db import (
    AnnotationStore,
    DuplicateError,
    InvalidInputError,
    ItemIn,
    NotFoundError,
    finish_draft,
    list_drafts,
    make_gold_items,
    save_output,
    start_draft,
)

SETTINGS = {"questions": ["appropriate"], "raters_per_item": 3, "max_span_tokens": 64}


def test_outputs_survive_a_restart_and_the_study_is_made_once(tmp_path, adb):
    path = tmp_path / "a.sqlite3"
    items, outputs = adb.make_items(4)
    store = AnnotationStore(path=path)
    d = start_draft(store, "paper", items, adb.SYSTEMS, SETTINGS)
    assert not d.resumed and len(d.missing) == 4 and d.n_needed == 12
    for o in outputs[:5]:  # generation stops after 5 of 12 outputs
        save_output(store, "paper", o)
    save_output(store, "paper", outputs[0])  # saved twice: kept once
    store.close()

    store = AnnotationStore(path=path)  # the app restarts
    d = start_draft(store, "paper", items[:1], ["other"], {})  # same name: the stored draft
    assert d.resumed and d.settings == SETTINGS and d.systems == list(adb.SYSTEMS)
    assert [o.item_key for o in d.outputs] == [o.item_key for o in outputs[:5]]
    assert d.outputs[0] == outputs[0]
    missing = [(it.key, systems) for it, systems in d.missing]
    assert missing == [
        ("item-1", list(adb.SYSTEMS[2:])),
        ("item-2", list(adb.SYSTEMS)),
        ("item-3", list(adb.SYSTEMS)),
    ]
    with pytest.raises(InvalidInputError, match="7 of 12"):
        finish_draft(store, "paper")
    for o in outputs[5:]:
        save_output(store, "paper", o)
    spare = [  # attention checks come from passages that are not rated
        ItemIn(f"spare-{i}", f"Spare {i} has a ___ here.", [w], source=f"s{i}")
        for i, w in enumerate(("word", "other"))
    ]
    gold_items, gold_outputs = make_gold_items(spare, 2, blank="___", n_outputs=3, donors=items)
    info = finish_draft(store, "paper", gold_items, gold_outputs)
    assert (info.n_items, info.n_gold, info.raters_per_item) == (4, 2, 3)
    assert list_drafts(store) == []
    made_items, made_outputs = store.items("paper")
    assert len(made_outputs) == 12 + 2 * 3
    with pytest.raises(DuplicateError):
        start_draft(store, "paper", items, adb.SYSTEMS, SETTINGS)
    with pytest.raises(NotFoundError):
        save_output(store, "paper", outputs[0])
    store.close()

"""Issue 22, point 7, store side: control characters on every backend, drafts that check their
name and items before any generation, unreadable CSV cells, '$' in a system name."""

from __future__ import annotations

import json

import pytest

from annotation_db import (
    AnnotationStore,
    ImportFormatError,
    InvalidInputError,
    ItemIn,
    OutputIn,
    list_drafts,
    read_items,
    start_draft,
)
from annotation_db.report import write_report
from annotation_db.validate import MAX_TEXT_CHARS

SETTINGS = {"questions": ["appropriate"], "raters_per_item": 1, "max_span_tokens": 8}


def _study(store: AnnotationStore, name: str, system: str = "magnet") -> None:
    item = ItemIn("i1", "the cat [blank] on the mat .", ["sat"])
    outs = [
        OutputIn("i1", system, "the cat sat on the mat .", ["sat"]),
        OutputIn("i1", "zero-shot", "the cat ran on the mat .", ["ran"]),
    ]
    store.create_study(name, [item], outs, questions=["appropriate"], raters_per_item=1)


@pytest.mark.parametrize("bad", ["\x00", "\x07", "\x1b[31m", "\x7f"])
def test_a_nul_or_control_character_is_one_sentence_on_every_backend(store, bad):
    """PostgreSQL cannot store NUL: it was reported as "the database is not writable" (and
    a retry could never work). Now every backend refuses it, and the other C0 controls, up
    front; tab and line breaks stay allowed."""
    _study(store, "ctl")
    token = store.invite("ctl", "Ada").token
    item = store.next_item(token)
    answers = {o.label: {"appropriate": True} for o in item.outputs}
    with pytest.raises(InvalidInputError, match="control character"):
        store.submit(token, item.assignment_id, answers, comment=f"nice {bad} work")
    with pytest.raises(InvalidInputError, match="control character"):
        store.invite("ctl", f"Bob{bad}")
    with pytest.raises(InvalidInputError, match="control character"):
        _study(store, "ctl2", system=f"sys{bad}")
    with pytest.raises(InvalidInputError, match="control character"):
        store.create_study(
            "ctl3",
            [ItemIn("i1", f"text {bad} [blank] .", ["x"])],
            [OutputIn("i1", "magnet", "text x .", ["x"]), OutputIn("i1", "b", "t y .", ["y"])],
        )
    stored = store.submit(token, item.assignment_id, answers, comment="tab\tand\nlines\r\n")
    assert stored is not None


def test_drafts_check_the_name_and_the_items_before_anything_is_stored(tmp_path):
    store = AnnotationStore(path=tmp_path / "d.sqlite3")
    items = [ItemIn("a", "the cat [blank] on the mat .", ["sat"])]
    for name in ("../x", "<img src=x onerror=alert(1)>", "[a](javascript:alert(1))"):
        with pytest.raises(InvalidInputError, match="study name"):
            start_draft(store, name, items, ["magnet"], SETTINGS)
    huge = [ItemIn("big", "word " * (MAX_TEXT_CHARS // 5) + "[blank] end", ["x"])]
    with pytest.raises(InvalidInputError, match="at most 100000"):
        start_draft(store, "huge", huge, ["magnet"], SETTINGS)
    with pytest.raises(InvalidInputError, match="control character"):
        start_draft(store, "nul", [ItemIn("n", "a \x00 [blank] b", ["x"])], ["magnet"], SETTINGS)
    assert list_drafts(store) == []  # nothing to resume, nothing stuck
    store.close()


def test_a_csv_cell_over_128_kb_or_json_nested_deep_is_one_sentence(tmp_path):
    cell = tmp_path / "cell.csv"
    cell.write_text("key,text\nk1," + "w" * 200_000 + "\n")
    with pytest.raises(ImportFormatError, match=r"cell\.csv:\d+: unreadable CSV"):
        read_items(cell)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.raises(ImportFormatError, match="deep.jsonl:1: .*nested too deeply"):
        read_items(deep)
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps({"key": "k", "text": "a [blank] b"}) + "\n")
    assert [i.key for i in read_items(ok)] == ["k"]


def test_a_dollar_sign_in_a_system_name_does_not_break_the_report(tmp_path):
    """Matplotlib read '$\\undefinedmacro{x}$' as mathtext and the whole report failed."""
    store = AnnotationStore(path=tmp_path / "r.sqlite3")
    _study(store, "money", system="$\\undefinedmacro{x}$")
    token = store.invite("money", "Ada").token
    item = store.next_item(token)
    store.submit(token, item.assignment_id, {o.label: {"appropriate": True} for o in item.outputs})
    out = write_report(store, "money", tmp_path / "report.html")
    assert "$\\undefinedmacro{x}$" in out.read_text(encoding="utf-8")
    store.close()

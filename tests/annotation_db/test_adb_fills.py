"""Empty and overlong fills are counted per system, in the store, the report and the rules."""

from __future__ import annotations

from annotation_db import OVERLONG_RATIO, ItemIn, OutputIn, fill_counts, fill_summary
from annotation_db.report import render_report


def _study(store):
    items = [ItemIn(f"i{i}", f"Passage {i} with ___ inside.", ["two words"]) for i in range(4)]
    fills = {
        "magnet": ["a fill", "a fill", "a fill", "a fill"],
        "zero-shot": ["", '"', "a fill", " ".join(["w"] * (2 * OVERLONG_RATIO + 1))],
        "five-shot": ["a fill", "a fill", "", " ".join(["w"] * (2 * OVERLONG_RATIO))],
    }
    outputs = [
        OutputIn(it.key, system, it.text.replace("___", f[i]), [f[i]])
        for system, f in fills.items()
        for i, it in enumerate(items)
    ]
    store.create_study("fills", items, outputs, questions=["appropriate"], raters_per_item=1)


def test_empty_and_overlong_outputs_are_counted_per_system(sqlite_store):
    _study(sqlite_store)
    counts = {c.system: c for c in sqlite_store.fill_counts("fills")}
    assert (counts["magnet"].empty, counts["magnet"].overlong) == (0, 0)
    # "" and a lone quote are empty; 7 words for a 2-word span is more than 3x
    assert (counts["zero-shot"].empty, counts["zero-shot"].overlong) == (2, 1)
    assert (counts["five-shot"].empty, counts["five-shot"].overlong) == (1, 0)  # 6 = 3x: not
    assert all(c.n_outputs == 4 for c in counts.values())
    line = fill_summary(list(counts.values()))
    assert "zero-shot: 2 of 4 empty, 1 overlong" in line and "3x" in line


def test_the_report_says_how_many_fills_are_empty_or_overlong(sqlite_store):
    _study(sqlite_store)
    page = render_report(sqlite_store, "fills", n_resamples=50)
    assert "Empty and overlong fills, per system" in page
    assert "<tr><td>zero-shot</td><td class=num>4</td><td class=num>2</td><td class=num>1</td>" in (
        page
    )


def test_attention_checks_and_outputs_without_fills():
    items = [ItemIn("a", "x ___ y", ["w"]), ItemIn("g", "x ___ y", ["w"], is_gold=True)]
    outputs = [
        OutputIn("a", "s", "x  y"),  # no fills stored: cannot be checked
        OutputIn("g", "s", "x  y", [""], gold_role="corrupted"),  # made by us, not the system
    ]
    (c,) = fill_counts(items, outputs)
    assert (c.n_outputs, c.empty, c.overlong, c.unchecked) == (1, 0, 0, 1)

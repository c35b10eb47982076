"""Issue 22 point 2: attention checks that cannot be spotted by their content. Their wrong
fills come from held-out passages (never a rated item's hidden original), none is shown in
two checks, and their fills are as long as the systems' fills."""

from __future__ import annotations

import statistics

import pytest
from app_fixtures import admin_request, make_app
from scipy import stats
from tiny_models import tiny_engine

from app import studies

SYSTEMS = ["magnet", "zero-shot", "five-shot"]


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def words(fills) -> int:
    return sum(len(f.split()) for f in fills or [])


@pytest.mark.parametrize("kind, span", [("words", 8), ("sentence", 24)])
def test_checks_are_held_out_unique_and_as_long_as_the_systems_fills(engine, tmp_path, kind, span):
    app = make_app(tmp_path, engine, max_span_tokens=span)
    app.admin_create(
        admin_request(app), "s", None, 12, SYSTEMS, ["appropriate"], 1, 6, "", span, kind
    )
    items, outputs = app.store.items("s")
    gold = {it.key for it in items if it.is_gold}
    regular = [it for it in items if not it.is_gold]
    assert len(gold) == 6 and len(regular) == 12
    originals = {s.strip() for it in regular for s in it.original}
    check_fills = [o for o in outputs if o.item_key in gold]
    wrong = [" ".join(o.fills) for o in check_fills if o.gold_role == "corrupted"]
    assert len(wrong) == 12 and len(set(wrong)) == 12  # no wrong fill in two checks
    assert not {f.strip() for o in check_fills for f in o.fills} & originals
    item_len = [words(o.fills) for o in outputs if o.item_key not in gold]
    check_len = [words(o.fills) for o in check_fills]
    p = stats.mannwhitneyu(check_len, item_len).pvalue
    med_c, med_i = statistics.median(check_len), statistics.median(item_len)
    assert p > 0.05, (p, sorted(check_len), sorted(item_len), [o.fills for o in check_fills])
    assert abs(med_c - med_i) <= 0.2 * med_i, (med_c, med_i)


def test_too_few_held_out_passages_are_refused_before_any_generation(engine, tmp_path):
    app = make_app(tmp_path, engine)
    path = tmp_path / "items.jsonl"
    rows = [f'{{"key": "k{i}", "text": "the cat [blank] on the mat {i} .", "original": ["sat{i}"]}}'
            for i in range(6)]  # fmt: skip
    path.write_text("\n".join(rows))
    calls = []
    app.compare_infill_many = lambda *a: calls.append(a)
    with pytest.raises(Exception, match=r"need 6 passages .* there are 2"):
        app.admin_create(
            admin_request(app), "u", str(path), 4, SYSTEMS, ["appropriate"], 1, 2, "", 3
        )
    assert calls == [] and studies.unfinished(app.store) == []

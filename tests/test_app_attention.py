"""The app's side of the attention checks (issue 31, issue 29 points 3-4): the Paper protocol
sizes the checks per rater, the create message says what a study with fewer costs, the admin
is told at invite time when raters would find nothing to rate, and a generated study's checks
take the systems' surface. No model: the draft's outputs are written by hand."""

from __future__ import annotations

import pytest

from annotation_db import AnnotationStore, ItemIn, OutputIn, save_output, start_draft
from annotation_db.attention import AttentionSettings
from app import studies


@pytest.fixture
def store(tmp_path):
    s = AnnotationStore(path=tmp_path / "a.sqlite3")
    yield s
    s.close()


def _items(n, prefix="i"):
    return [
        ItemIn(f"{prefix}{k}", f"Text {prefix}{k} has a [blank] inside it.", [f"lower words {k}"],
               source=f"src-{prefix}{k}")
        for k in range(n)
    ]  # fmt: skip


def _made_study(store, name, *, n_items, n_gold, items_per_rater, k=1, fill="A Capital fill."):
    """A study built as build_study builds one, its outputs written by hand."""
    systems = ["magnet", "base-zero-shot", "base-five-shot"]
    settings = {
        "questions": ["appropriate"],
        "raters_per_item": k,
        "seed": 12345,
        "n_gold": n_gold,
        "n_outputs": 3,
        "check_pool": [it.__dict__ for it in _items(n_gold * 3 * 4, prefix="h")],
        "check_reblank": False,
        "attention": studies.study_attention(
            ["appropriate"], 3, n_items, n_gold, items_per_rater
        ).to_dict(),
    }
    items = _items(n_items)
    start_draft(store, name, items, systems, settings)
    for it in items:
        for sys_ in systems:
            text = it.text.replace("[blank]", fill)
            save_output(store, name, OutputIn(it.key, sys_, text, [fill]))
    gold_items, gold_outputs = studies._checks(store, name)
    from annotation_db import finish_draft

    return finish_draft(store, name, gold_items, gold_outputs), gold_outputs


def test_the_paper_protocol_gives_each_rater_the_checks_the_rule_needs():
    p = studies.PAPER
    a = studies.study_attention(p.questions, 3, p.n_items, p.n_gold, p.items_per_rater)
    # stated against careless raters of every kind: 7 checks among 20 items (random alone: 4)
    assert (a.items_per_rater, a.checks_per_rater, a.against) == (20, 7, "careless")
    assert p.n_gold > a.checks_per_rater  # so that raters meet different checks


def test_the_create_message_says_what_too_few_checks_cost(store):
    info, _ = _made_study(store, "small", n_items=10, n_gold=2, items_per_rater=12)
    a = AttentionSettings.from_dict(info.attention)
    assert (a.items_per_rater, a.checks_per_rater) == (12, 2)
    note = studies.checks_note(info)
    assert "Each rater meets 2 attention check(s) among 12 items" in note
    assert "The rule needs 7" in note and "undecided" in note
    info, _ = _made_study(store, "enough", n_items=20, n_gold=8, items_per_rater=12)
    assert "needs" not in studies.checks_note(info)


def test_the_admin_is_told_at_invite_time_when_items_are_all_taken(store):
    info, _ = _made_study(store, "full", n_items=2, n_gold=2, items_per_rater=12)
    assert studies.invite_note(info, 1) == ""  # plenty left? 2 judgments, 1 rater: fewer
    token = store.invite("full", "first").token
    while (item := store.next_item(token)) is not None:
        ans = {o.label: {"appropriate": True} for o in item.outputs}
        store.submit(token, item.assignment_id, ans)
    note = studies.invite_note(store.study("full"), 2)
    assert "will find nothing to rate" in note and "never given attention checks alone" in note
    late = store.invite("full", "late").token
    assert store.next_item(late) is None


def test_a_generated_studys_checks_read_as_written_and_wrong_fills_look_like_the_systems(store):
    """Every system fill starts with a capital and ends with a full stop; the held-out
    originals are lower-case word runs. The wrong fills take the systems' surface; the true
    text of a check is shown exactly as written (restyling it broke it for readers: "back
    seat. of the car", "51% Of the total", "mediterranean Sea")."""
    _, gold_outputs = _made_study(store, "styled", n_items=6, n_gold=2, items_per_rater=6)
    wrong = [f for o in gold_outputs if o.gold_role == "corrupted" for f in o.fills]
    assert len(wrong) == 4
    assert all(f[0].isupper() and f.endswith(".") for f in wrong), wrong
    pool = {it.key: it.original for it in _items(2 * 3 * 4, prefix="h")}
    for o in gold_outputs:
        if o.gold_role == "original":
            assert [f.strip() for f in o.fills] == pool[o.item_key.removeprefix("gold-")]


def test_admin_results_show_the_rule_and_every_raters_figures(store):
    from app.admin.results import results_rows

    _made_study(store, "res", n_items=6, n_gold=2, items_per_rater=8, k=2)
    careful, careless = store.invite_many("res", ["careful", "careless"])
    gold = {o.text for o in store.items("res")[1] if o.gold_role == "corrupted"}
    for inv, ok in ((careful, True), (careless, False)):
        while (item := store.next_item(inv.token)) is not None:
            ans = {o.label: {"appropriate": not ok or o.text not in gold} for o in item.outputs}
            store.submit(inv.token, item.assignment_id, ans)
    res = store.results("res", n_resamples=100)
    assert [a.decision for a in res.attention] == ["undecided", "excluded"]  # 2 checks each
    rows = {r[0]: r[1:] for r in results_rows(res)}
    assert rows["base-zero-shot: judged appropriate, every rater (no exclusion)"][0] == 12
    assert rows["base-zero-shot: judged appropriate"][0] == 6  # careless left out
    excluded = rows["Raters excluded by the attention rule"]
    assert excluded[:2] == [2, 1] and "likelihood ratio" in excluded[2]
    assert rows["Raters undecided (too few checks to tell; counted)"][:2] == [2, 1]

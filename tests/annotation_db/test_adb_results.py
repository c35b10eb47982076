"""Results on designed data (known answers), attention checks and rater exclusion."""

from __future__ import annotations

import json

import pytest

from annotation_db import ItemIn, OutputIn, make_gold_items


def _study(store, n_items=6, k=3, gold=2):
    items = [
        ItemIn(f"i{i}", f"Sentence {i} has a ___ here.", [f"word{i}"], source=f"doc{i}")
        for i in range(n_items)
    ]
    outputs = [
        OutputIn(f"i{i}", sysname, f"Sentence {i} has a {sysname}{i} here.")
        for i in range(n_items)
        for sysname in ("good", "bad")
    ]
    spare = [  # attention checks come from passages that are not items of the study
        ItemIn(f"p{i}", f"Passage {i} hides a ___ there.", [f"span{i}"], source=f"pdoc{i}")
        for i in range(max(gold, 2))
    ]
    g_items, g_outs = make_gold_items(spare, gold, blank="___", seed=1, donors=items)
    store.create_study(
        "designed",
        items + g_items,
        outputs + g_outs,
        questions=["appropriate", "likert:fluency", "preference"],
        raters_per_item=k,
    )


def _system_of(store, item, label):
    """Test-side lookup (admin view) of which system sits behind a label."""
    from annotation_db.schema import Assignment, Output

    def fn(s):
        a = s.get(Assignment, item.assignment_id)
        oid = a.output_order[ord(label) - 65]
        o = s.get(Output, oid)
        return o.gold_role or o.system

    return store.db.read(fn)


def _rate(store, token, careless=False):
    """A careful rater: 'good' and gold originals are appropriate, fluency 5 vs 2, prefers
    good. A careless one says yes to everything and prefers A."""
    while (item := store.next_item(token)) is not None:
        roles = {o.label: _system_of(store, item, o.label) for o in item.outputs}
        if careless:
            ans = {lab: {"appropriate": True, "fluency": 3} for lab in roles}
            pref = "A"
        else:
            ok = {lab: r in ("good", "original") for lab, r in roles.items()}
            ans = {lab: {"appropriate": v, "fluency": 5 if v else 2} for lab, v in ok.items()}
            pref = next(lab for lab, v in ok.items() if v)
        store.submit(token, item.assignment_id, ans, preference=pref)


def test_results_on_designed_data(store):
    _study(store)
    careful = store.invite_many("designed", ["c1", "c2", "c3"])
    for inv in careful:
        _rate(store, inv.token)
    res = store.results("designed", n_resamples=300)
    by = {s.system: s for s in res.systems}
    assert set(by) == {"good", "bad"}  # gold outputs are not systems
    assert by["good"].appropriate.share == 1.0 and by["bad"].appropriate.share == 0.0
    assert by["good"].appropriate.n == 18
    assert by["good"].appropriate.low == pytest.approx(0.8241, abs=1e-3)  # Wilson 18/18
    assert by["good"].likert["fluency"].mean == 5.0
    assert by["bad"].likert["fluency"].mean == 2.0
    assert [b.system for b in res.bradley_terry] == ["good", "bad"]
    (pw,) = res.pairwise
    assert (pw.system_a, pw.system_b, pw.win_rate_a, pw.n) == ("bad", "good", 0.0, 18.0)
    alpha = {a.question: a.alpha for a in res.agreement}
    assert alpha["appropriate"] == pytest.approx(1.0)
    assert alpha["fluency"] == pytest.approx(1.0)
    assert alpha["preference"] == pytest.approx(1.0)
    assert all(a.gold_done == 2 and a.gold_failed == 0 for a in res.attention)
    assert res.time_per_item.n == 18 and res.time_per_item.median_s >= 0
    assert res.progress.share_done == 1.0
    json.dumps(res.to_dict())  # JSON-ready


def test_attention_failures_are_recorded_and_can_exclude(sqlite_store):
    store = sqlite_store
    _study(store, k=2)
    good, careless = store.invite_many("designed", ["careful", "careless"])
    _rate(store, good.token)
    _rate(store, careless.token, careless=True)
    prog = {r.display_name: r for r in store.progress("designed").raters}
    assert prog["careful"].gold_failed == 0 and prog["careless"].gold_failed == 2
    kept = store.results("designed", exclude=False, n_resamples=200)
    assert kept.n_raters_excluded == 0
    assert {s.system: s.appropriate.share for s in kept.systems}["bad"] == 0.5
    # 2 of 2 checks failed: an attentive rater does that with probability 1% (slip 0.1)
    cut = store.results("designed", n_resamples=200)
    assert cut.n_raters_excluded == 1
    assert [a.display_name for a in cut.attention if a.excluded] == ["careless"]
    assert {s.system: s.appropriate.share for s in cut.systems}["bad"] == 0.0
    assert {s.system: s.appropriate.share for s in cut.systems_all_raters}["bad"] == 0.5
    assert all(a.n_raters <= 1 for a in cut.agreement)


def test_gold_items_reach_every_rater_once(sqlite_store):
    """a takes every item; b, who comes after, gets nothing: not the checks alone."""
    store = sqlite_store
    _study(store, n_items=4, k=1, gold=2)
    a, b = store.invite_many("designed", ["a", "b"])
    _rate(store, a.token)
    _rate(store, b.token)
    prog = {r.display_name: r for r in store.progress("designed").raters}
    assert (prog["a"].gold_done, prog["b"].gold_done) == (2, 0)
    assert (prog["a"].done, prog["b"].done) == (4 + 2, 0)


def test_make_gold_items_corrupts_with_another_documents_span():
    items = [ItemIn(f"k{i}", f"A ___ b{i}", [f"s{i}"], source=f"d{i}") for i in range(5)]
    g_items, g_outs = make_gold_items(items, 3, blank="___", seed=0)
    assert len(g_items) == 3 and all(g.is_gold for g in g_items)
    for g in g_items:
        orig, corr = [o for o in g_outs if o.item_key == g.key]
        assert orig.gold_role == "original" and corr.gold_role == "corrupted"
        assert orig.text == g.text.replace("___", g.original[0])
        assert corr.fills != orig.fills


def test_results_of_an_empty_study(store):
    _study(store)
    res = store.results("designed")
    assert [s.appropriate.n for s in res.systems] == [0, 0]
    assert res.pairwise == [] and res.bradley_terry == []
    assert all(a.alpha is None for a in res.agreement)
    assert res.time_per_item.n == 0 and res.progress.share_done == 0.0
    json.dumps(res.to_dict())


def test_one_vote_gives_n_and_a_note_not_a_certain_looking_interval(store):
    """One arena vote once showed a pairwise interval [1, 1] and a degenerate Bradley-Terry
    interval; below the minimum n there is the n and a note, no interval."""
    outs = [OutputIn("v1", s, f"the cat {s} .", [s]) for s in ("good", "bad")]
    store.record_blind_vote("the cat ___ .", outs, "A", vote_id="v1")
    res = store.results("arena")
    (pw,) = res.pairwise
    assert pw.n == 1.0 and pw.low is None and pw.high is None
    assert pw.note == "not enough votes for an interval (n = 1, need 10)"
    assert [(b.n, b.low, b.high) for b in res.bradley_terry] == [(1, None, None)] * 2
    assert all(b.note.startswith("not enough votes") for b in res.bradley_terry)
    d = res.to_dict()
    assert d["min_n"] == 10 and d["pairwise"][0]["low"] is None
    enough = store.results("arena", min_n=1)
    assert enough.pairwise[0].low is not None and enough.bradley_terry[0].note is None


def test_designed_data_has_enough_votes_for_intervals(store):
    _study(store)
    for inv in store.invite_many("designed", ["c1", "c2", "c3"]):
        _rate(store, inv.token)
    res = store.results("designed", n_resamples=200)
    (pw,) = res.pairwise
    assert pw.note is None and pw.low <= pw.win_rate_a <= pw.high
    assert all(b.n == 18 and b.note is None and b.low <= b.high for b in res.bradley_terry)
    assert all(s.likert["fluency"].low is not None for s in res.systems)

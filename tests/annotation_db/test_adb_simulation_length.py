"""The strategy simulation meets checks as the app makes them (issue 58 point 5): its checks'
true text stands at each place by length equally often, and raters who always accept the
shortest or the longest output are played and caught like the other careless raters."""

from __future__ import annotations

import collections
import random

import pytest
from scipy.stats import chisquare

from annotation_db import AnnotationStore
from annotation_db.simulate import STRATEGIES, UNREAD, SimConfig, simulate_study, study_material

PAPER_STRATEGIES = SimConfig(
    rates={"magnet": 0.62, "five-shot": 0.54, "zero-shot": 0.2},
    n_items=60,
    inattentive_share=0.6,
    strategies=("first", "longest", "shortest"),
    n_gold=10,
    items_per_rater=20,
    questions=("appropriate",),
)


def test_the_simulated_checks_are_made_as_the_apps():
    """Over 150 simulated studies' checks (1500), the true text's place among a check's
    outputs by length is uniform, as in the app's checks. Before, the simulation made its
    checks from "span104" against "span7": the true text was never the shortest."""
    places = collections.Counter()
    for seed in range(150):
        _, outputs, _, _, gold = study_material(PAPER_STRATEGIES, random.Random(seed), seed)
        by = collections.defaultdict(list)
        for o in gold:
            by[o.item_key].append(o)
        for outs in by.values():
            true = next(len(o.text) for o in outs if o.gold_role == "original")
            wrong = [len(o.text) for o in outs if o.gold_role != "original"]
            places[sum(w < true for w in wrong)] += 1
            assert true not in wrong  # no tie: the place is plain
        system_words = [len(o.fills[0].split()) for o in outputs]
        assert min(system_words) >= 1 and max(system_words) <= 12
    counts = [places[k] for k in range(3)]
    assert sum(counts) == 1500 and chisquare(counts).pvalue > 0.05, counts


def test_always_the_shortest_and_always_the_longest_are_played_and_caught(tmp_path):
    """Raters who always accept the shortest or the longest output, in three simulated studies
    at the Paper protocol's checks (7 among 20 items): they fail about two checks in three,
    as one who always takes the first output does, and most are excluded; attentive raters
    almost never are."""
    assert {"shortest", "longest"} <= set(STRATEGIES) and "shortest" in UNREAD
    with AnnotationStore(path=tmp_path / "sim.sqlite3") as store:
        runs = [simulate_study(store, f"len-{i}", PAPER_STRATEGIES, seed=70 + i) for i in range(3)]
    failed: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    excluded: dict[str, list[bool]] = collections.defaultdict(list)
    for r in runs:
        for a in r.results.attention:
            strategy = r.strategy_of[a.rater_id]
            failed[strategy][0] += a.gold_failed
            failed[strategy][1] += a.gold_done
            if a.gold_done >= 7:
                excluded[strategy].append(a.rater_id in r.excluded)
    for strategy in ("first", "longest", "shortest"):
        f, m = failed[strategy]
        assert m >= 40 and f / m == pytest.approx(2 / 3, abs=0.15), (strategy, f, m)
        assert sum(excluded[strategy]) >= len(excluded[strategy]) / 2, (strategy, excluded)
    assert sum(excluded["attentive"]) <= 1, excluded["attentive"]

"""The statistics proven by simulation: simulated raters with known truth go through the real
store and the real assignment (next_item / submit), then results() is checked against the
truth. Small studies and fixed seeds (the simulation also fixes each rater's order seed, so a
run repeats exactly); bench/bench_study_simulation.py runs the large version."""

from __future__ import annotations

import pytest

from annotation_db import AnnotationStore
from annotation_db.simulate import SimConfig, simulate_study


@pytest.fixture(scope="module")
def sim_store(tmp_path_factory):
    store = AnnotationStore(path=tmp_path_factory.mktemp("sim") / "sim.sqlite3")
    yield store
    store.close()


def test_intervals_cover_the_true_rates(sim_store):
    """Reported 95% intervals cover the true rates close to nominally; treating an output's
    raters as independent judgments (plain Wilson) covers visibly less."""
    config = SimConfig(
        rates={"a": 0.7, "b": 0.5, "c": 0.3},
        n_items=12,
        icc=0.4,
        noise=0.05,
        inattentive_share=0.0,
        exclude=False,  # nobody dropped: every judgment counts
        n_gold=2,
        items_per_rater=14,
        questions=("appropriate",),
    )
    runs = [simulate_study(sim_store, f"cov-{i}", config, seed=i) for i in range(16)]
    covered = [r.covered(s) for r in runs for s in config.rates]
    naive = [r.covered_naive(s) for r in runs for s in config.rates]
    assert sum(covered) / len(covered) >= 0.85, sum(covered)
    assert sum(naive) < sum(covered)
    # every rating went through the store: each item has exactly k raters
    assert all(r.results.progress.share_done == 1.0 for r in runs)
    assert all(s.appropriate.n == 12 * 3 for r in runs for s in r.results.systems)


RATES = {"strong": 0.95, "middle": 0.5, "weak": 0.05}


def test_bradley_terry_order_and_attention_checks(sim_store):
    """With a large gap Bradley-Terry orders the systems correctly; attention checks exclude
    most raters who answer at random and few careful ones (pooled over the studies)."""
    tp = fn = fp = tn = 0
    for noise in (0.0, 0.1):
        config = SimConfig(rates=RATES, n_items=24, noise=noise, inattentive_share=0.3)
        for seed in range(2):
            out = simulate_study(sim_store, f"bt-{noise}-{seed}", config, seed=100 + seed)
            assert out.bt_order_correct(), out.results.bradley_terry
            attentive = {a.rater_id for a in out.results.attention} - out.inattentive
            tp += len(out.excluded & out.inattentive)
            fn += len(out.inattentive - out.excluded)
            fp += len(out.excluded & attentive)
            tn += len(attentive - out.excluded)
    assert tp + fn >= 4 and fp + tn >= 10  # enough raters of each kind to judge
    assert tp / (tp + fn) >= 0.6, (tp, fn)  # most inattentive raters are excluded
    assert fp / (fp + tn) <= 0.2, (fp, tn)  # few attentive ones are


def test_agreement_falls_as_rater_noise_rises(sim_store):
    alphas = []
    for noise in (0.0, 0.3, 0.7):
        config = SimConfig(
            rates=RATES,
            n_items=12,
            noise=noise,
            inattentive_share=0.0,
            exclude=False,
            questions=("appropriate",),
        )
        runs = [simulate_study(sim_store, f"alpha-{noise}-{s}", config, seed=s) for s in (7, 8)]
        alphas.append(sum(r.alpha() for r in runs) / len(runs))
    assert alphas[0] > alphas[1] > alphas[2], alphas


def test_constant_answers_are_always_excluded_and_careless_raters_far_more_than_attentive(
    sim_store,
):
    """Raters who answer "No" to everything or "Yes" to everything fail every check scored as
    a whole and are excluded at the Paper protocol's questions and sizes; random answers, the
    first, the last or the longest output are excluded far more often than attentive raters,
    who are kept. Before checks were scored whole, a rater saying "No" to everything passed
    every check. (How often each strategy is caught at the Paper protocol's size is measured by
    bench/bench_study_simulation.py.)"""
    from annotation_db.simulate import CARELESS

    config = SimConfig(
        rates={"magnet": 0.62, "five-shot": 0.54, "zero-shot": 0.2},
        n_items=40,
        inattentive_share=0.6,
        strategies=CARELESS,
        n_gold=10,
        items_per_rater=12,
        questions=("appropriate",),
    )
    runs = [simulate_study(sim_store, f"strat-{i}", config, seed=500 + i) for i in range(3)]
    by: dict[str, list[bool]] = {}
    for r in runs:
        decided = {a.rater_id: a for a in r.results.attention}
        for rid, strategy in r.strategy_of.items():
            if decided[rid].gold_done >= 4:  # raters who met the planned checks
                by.setdefault(strategy, []).append(rid in r.excluded)
    for strategy in CARELESS:
        assert by.get(strategy), (strategy, by)
    assert all(by["always-no"]) and all(by["always-yes"]), by
    careless = [x for s in CARELESS for x in by[s]]
    assert len(careless) >= 12 and sum(careless) / len(careless) >= 0.6, by
    assert len(by["attentive"]) >= 8 and sum(by["attentive"]) <= 1, by["attentive"]


def test_a_skimmer_reads_everything_a_check_can_stand_on(sim_store):
    """A rater who answers at random wherever a check certainly is not can skim only the first
    item: every other position may hold a check."""
    config = SimConfig(
        rates={"a": 0.6, "b": 0.4},
        n_items=24,
        inattentive_share=1.0,
        strategies=("position",),
        n_gold=6,
        items_per_rater=12,
        questions=("appropriate",),
    )
    out = simulate_study(sim_store, "skim", config, seed=9)
    for skimmed, regular in out.skimmed.values():
        assert skimmed <= 1 and regular >= 1

"""Statistics against published or independently computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import binomtest

from annotation_db.stats import (
    bootstrap_mean,
    bootstrap_pairwise,
    bradley_terry,
    krippendorff_alpha,
    wilson_interval,
)

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, values 1-5, missing data. Published: nominal .743, ordinal .815, interval .849,
# ratio .797.
KRIPPENDORFF_2011_C = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)
# Same paper, section A: binary data, two observers, 10 units. Published alpha = 0.095.
KRIPPENDORFF_2011_A = np.array(
    [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]], dtype=float
)


@pytest.mark.parametrize(
    "level, published",
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_krippendorff_matches_the_2011_worked_example(level, published):
    assert round(krippendorff_alpha(KRIPPENDORFF_2011_C, level), 3) == published


def test_krippendorff_binary_example():
    assert round(krippendorff_alpha(KRIPPENDORFF_2011_A, "nominal"), 3) == 0.095


def test_krippendorff_undefined_cases():
    assert krippendorff_alpha(np.array([[1.0, 1.0], [1.0, 1.0]]), "nominal") is None
    assert krippendorff_alpha(np.array([[1.0, NAN], [NAN, 0.0]]), "nominal") is None
    assert krippendorff_alpha(np.array([[1.0, 0.0]]), "nominal") is None


@pytest.mark.parametrize("k, n", [(0, 10), (5, 10), (81, 263), (10, 10), (1, 3), (0, 1)])
def test_wilson_matches_scipy(k, n):
    ours = wilson_interval(k, n)
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert ours.share == pytest.approx(k / n)
    assert ours.low == pytest.approx(ref.low, abs=1e-12)
    assert ours.high == pytest.approx(ref.high, abs=1e-12)


def test_wilson_textbook_value_and_edges():
    # Newcombe (1998) table I, example 81/263: 0.2553 to 0.3662.
    p = wilson_interval(81, 263)
    assert (round(p.low, 4), round(p.high, 4)) == (0.2553, 0.3662)
    assert math.isnan(wilson_interval(0, 0).share)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_bootstrap_mean_covers_the_mean_and_handles_constants():
    rng = np.random.default_rng(1)
    x = rng.normal(3.0, 1.0, size=200)
    ci = bootstrap_mean(x)
    assert ci.low < x.mean() < ci.high
    assert ci.high - ci.low == pytest.approx(2 * 1.96 / math.sqrt(200), rel=0.25)
    assert bootstrap_mean([4, 4, 4]) == bootstrap_mean([4.0, 4.0, 4.0])
    assert bootstrap_mean([4, 4, 4]).low == 4.0
    assert math.isnan(bootstrap_mean([]).mean)


def test_bradley_terry_two_players_closed_form():
    # A beats B 3 times of 4: strengths 3:1, so log-strengths differ by ln 3.
    s = bradley_terry(np.array([[0, 3], [1, 0]]), prior=0.0)
    assert s[0] - s[1] == pytest.approx(math.log(3), abs=1e-8)
    assert s.sum() == pytest.approx(0.0, abs=1e-12)


def test_bradley_terry_matches_direct_likelihood_maximisation():
    wins = np.array([[0, 7, 4, 9], [3, 0, 6, 5], [5, 4, 0, 6], [1, 5, 4, 0]], dtype=float)

    def nll(theta):
        t = np.concatenate([[0.0], theta])
        diff = t[:, None] - t[None, :]
        return -(wins * (diff - np.logaddexp(0, diff))).sum()

    ref = optimize.minimize(nll, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    ref = np.concatenate([[0.0], ref])
    ref -= ref.mean()
    assert bradley_terry(wins, prior=0.0) == pytest.approx(ref, abs=1e-5)


def test_bradley_terry_prior_keeps_a_never_winner_finite():
    s = bradley_terry(np.array([[0, 5], [0, 0]]), prior=0.5)
    assert np.all(np.isfinite(s)) and s[0] > s[1]


def test_bootstrap_pairwise_intervals_contain_estimates():
    rng = np.random.default_rng(0)
    judgments = []
    for _ in range(300):
        m = np.zeros((3, 3))
        # system 0 beats 1 70% of the time; 2 is compared with 0 only, and loses mostly
        if rng.random() < 0.5:
            w, loser = (0, 1) if rng.random() < 0.7 else (1, 0)
        else:
            w, loser = (0, 2) if rng.random() < 0.8 else (2, 0)
        m[w, loser] = 1
        judgments.append(m)
    pb = bootstrap_pairwise(np.stack(judgments), n_resamples=500, seed=3)
    total = np.stack(judgments).sum(axis=0)
    assert pb.win_rate[0, 1] == pytest.approx(total[0, 1] / (total[0, 1] + total[1, 0]))
    assert pb.win_rate[0, 1] + pb.win_rate[1, 0] == pytest.approx(1.0)
    assert pb.win_low[0, 1] < pb.win_rate[0, 1] < pb.win_high[0, 1]
    assert np.all(pb.scores_low <= pb.scores) and np.all(pb.scores <= pb.scores_high)
    assert np.argmax(pb.scores) == 0
    assert pb.counts[1, 2] == 0 and math.isnan(pb.win_rate[1, 2])


def test_clustered_proportion_widens_by_the_design_effect():
    from annotation_db.stats import clustered_proportion

    # one judgment per cluster: Wilson, up to the small-sample factor c / (c - 1)
    single = clustered_proportion([1] * 30 + [0] * 20, [1] * 50)
    plain = wilson_interval(30, 50)
    assert single.design_effect == pytest.approx(50 / 49)
    assert (single.low, single.high) == pytest.approx((plain.low, plain.high), abs=0.003)
    # 3 raters who always agree: 150 judgments carry the information of 50 (deff ~ 3)
    agree = clustered_proportion([3] * 30 + [0] * 20, [3] * 50)
    assert agree.n == 150 and agree.share == pytest.approx(0.6)
    assert agree.design_effect == pytest.approx(3 * 50 / 49)
    assert agree.high - agree.low > wilson_interval(90, 150).high - wilson_interval(90, 150).low
    assert agree.high - agree.low == pytest.approx(plain.high - plain.low, rel=0.02)
    # clusters that agree less than chance do not make the interval narrower than Wilson
    anti = clustered_proportion([1, 2] * 25, [3] * 50)
    assert anti.design_effect == 1.0

"""How sure the evaluator's numbers are (evaluation/stats.py): shares with their 95% interval,
and two systems compared case by case on the same cases."""

from __future__ import annotations

import math

import pytest

from magnet_model.evaluation.stats import paired_means, paired_nll, paired_shares, share


def test_a_share_comes_with_its_wilson_interval():
    s = share([True] * 8 + [False] * 2)
    assert s["share"] == 0.8 and s["n"] == 10
    assert s["lo"] == pytest.approx(0.4902, abs=1e-3) and s["hi"] == pytest.approx(0.9433, abs=1e-3)
    # at 80 fills a share near one half is known to about +-11 points, the bar
    wide = share([True] * 40 + [False] * 40)
    assert 0.20 < wide["hi"] - wide["lo"] < 0.22
    # 0 of n: the interval stays inside [0, 1] (the normal approximation would not)
    none = share([False] * 20)
    assert none["lo"] == 0.0 and 0 < none["hi"] < 0.2
    assert math.isnan(share([])["share"])


def test_paired_shares_count_only_the_cases_where_the_two_differ():
    a = [True] * 6 + [True] * 10 + [False] * 4
    b = [False] * 6 + [True] * 10 + [False] * 4
    c = paired_shares(a, b)
    assert c["diff"] == pytest.approx(6 / 20) and (c["a_only"], c["b_only"]) == (6, 0)
    assert c["p"] == pytest.approx(2 * 0.5**6)  # exact McNemar: 6 of 6 discordant one way
    assert 0 < c["lo"] <= c["diff"] <= c["hi"]
    same = paired_shares(a, a)
    assert same["diff"] == 0 and same["p"] == 1.0
    # the same two shares from unpaired cases that disagree everywhere: no evidence either way
    swapped = paired_shares([True, False] * 10, [False, True] * 10)
    assert swapped["diff"] == 0 and swapped["p"] == 1.0
    with pytest.raises(ValueError):
        paired_shares([True], [True, False])


def test_paired_nll_gives_the_ppl_ratio_and_whether_it_is_consistent():
    tokens = [10] * 30
    b = [30.0 + (i % 7) for i in range(30)]
    better = [x - 3.0 for x in b]  # 0.3 nats a token lower on every case
    c = paired_nll(better, b, tokens)
    assert c["ppl_ratio"] == pytest.approx(math.exp(-0.3))
    assert c["hi"] < 1 and c["p"] < 1e-4
    even = paired_nll(b, b, tokens)
    assert even["ppl_ratio"] == 1.0 and even["p"] == 1.0


def test_paired_means_tell_a_consistent_small_gap_from_noise():
    b = [1.0, 0.5, 1.0, 0.25, 1.0, 0.5] * 10
    lower = [x - 0.01 for x in b]  # a hundredth lower on every case: small but consistent
    c = paired_means(lower, b)
    assert c["diff"] == pytest.approx(-0.01) and c["hi"] < 0 and c["p"] < 1e-6
    # two cases of 60 swapped between ranks 1 and 2: the same means, no evidence either way
    swapped = list(b)
    swapped[0], swapped[1] = b[1], b[0]
    noise = paired_means(swapped, b)
    assert noise["diff"] == pytest.approx(0) and noise["lo"] < 0 < noise["hi"] and noise["p"] > 0.5
    assert paired_means(b, b)["p"] == 1.0
    with pytest.raises(ValueError):
        paired_means([1.0], [1.0, 0.5])

"""The statistics of ``results`` as pure functions: hand-made data, known answers, no database."""

from __future__ import annotations

import math

import pytest

from annotation_db import StudyProgress
from annotation_db.attention import AttentionRule
from annotation_db.questions import appropriate, likert, preference
from annotation_db.results import (
    agreement,
    attention_checks,
    preference_results,
    summarize,
    system_results,
    time_stats,
)
from annotation_db.study_data import Judgment, OutputRow, RatingRow, StudyData


def _j(rater, item=1, *, gold=False, passed=None, pref=None, chosen=None, order=(1, 2), secs=10.0):
    return Judgment(rater, item, gold, passed, pref, chosen, list(order), secs)


OUTPUTS = {  # two items, systems a and b
    1: OutputRow(1, 10, "a"),
    2: OutputRow(2, 10, "b"),
    3: OutputRow(3, 11, "a"),
    4: OutputRow(4, 11, "b"),
}


def test_attention_checks_exclude_by_the_rule_not_by_a_share():
    """Failing 1 of 2 checks is 50%, yet an attentive rater (slip 0.1) does it 18% of the
    time: undecided, not excluded; 2 of 2 (1% for an attentive rater) excludes."""
    raters = {1: "ok", 2: "slipped", 3: "careless", 4: "unchecked"}
    judgments = [
        _j(1, gold=True, passed=True),
        _j(1, gold=True, passed=True),
        _j(2, gold=True, passed=False),
        _j(2, gold=True, passed=True),
        _j(3, gold=True, passed=False),
        _j(3, gold=True, passed=False),
        _j(4),
    ]
    rule = AttentionRule(slip=0.1, chance=0.75)
    table, excluded = attention_checks(raters, judgments, rule)
    assert excluded == {3}
    assert [(a.display_name, a.gold_done, a.gold_failed, a.decision) for a in table] == [
        ("ok", 2, 0, "undecided"),  # two checks catch 56% of random raters, not 85%
        ("slipped", 2, 1, "undecided"),
        ("careless", 2, 2, "excluded"),
        ("unchecked", 0, 0, "undecided"),
    ]
    assert attention_checks(raters, judgments, None)[1] == set()


def test_preference_counts_pairwise_and_bradley_terry():
    judgments = [_j(r, pref="choice", chosen=1) for r in (1, 2, 3)]  # a beats b three times
    judgments += [_j(4, pref="tie"), _j(5, pref="all_bad"), _j(6)]  # a tie, no info, no answer
    counts, pairwise, bt = preference_results(["a", "b"], OUTPUTS, judgments, n_resamples=200)
    assert counts == {"choice": 3, "tie": 1, "all_bad": 1}
    (pw,) = pairwise
    # the tie counts once and half for each; all_bad is left out
    assert (pw.system_a, pw.system_b, pw.n, pw.win_rate_a) == ("a", "b", 4.0, 0.875)
    assert pw.low is None and pw.high is None and "not enough votes" in pw.note  # 4 < 10
    assert [(b.system, b.n) for b in bt] == [("a", 4), ("b", 4)]
    assert bt[0].score > 0 > bt[1].score and bt[0].score == pytest.approx(-bt[1].score)
    _, pairwise, _ = preference_results(["a", "b"], OUTPUTS, judgments, min_n=4, n_resamples=200)
    assert pairwise[0].note is None and pairwise[0].low <= 0.875 <= pairwise[0].high
    assert preference_results(["a", "b"], OUTPUTS, [_j(1)]) == (
        {"choice": 0, "tie": 0, "all_bad": 0},
        [],
        [],
    )


def test_system_results_cluster_by_output_and_average_items_first():
    qs = [appropriate(), likert("fluency", "How fluent is it?")]
    ratings = [
        RatingRow(1, 1, {"appropriate": True, "fluency": 4}),
        RatingRow(2, 1, {"appropriate": True, "fluency": 5}),
        RatingRow(1, 3, {"appropriate": False, "fluency": 3}),
        RatingRow(1, 2, {"appropriate": False, "fluency": 1}),
    ]
    by = {s.system: s for s in system_results(qs, ["a", "b"], OUTPUTS, ratings)}
    a = by["a"]
    assert (a.n_outputs, a.n_ratings) == (2, 3)
    assert (a.appropriate.successes, a.appropriate.n) == (2, 3)
    assert a.appropriate.share == pytest.approx(2 / 3)
    fl = a.likert["fluency"]
    assert fl.n == 3 and fl.mean == pytest.approx((4.5 + 3) / 2)  # item means, then their mean
    assert math.isnan(fl.low) and math.isnan(fl.high)  # 3 ratings < min_n: no interval
    assert by["b"].n_ratings == 1 and by["b"].appropriate.share == 0.0


def test_agreement_is_one_when_raters_agree():
    qs = [appropriate(), preference()]
    ratings = [RatingRow(r, o, {"appropriate": o in (1, 3)}) for r in (1, 2) for o in (1, 2, 3, 4)]
    judgments = [
        _j(r, item, pref="choice", chosen=o) for r in (1, 2) for item, o in ((10, 1), (11, 4))
    ]
    appr, pref = agreement(qs, OUTPUTS, ratings, judgments)
    assert (appr.question, appr.level, appr.n_units, appr.n_raters) == (
        "appropriate",
        "nominal",
        4,
        2,
    )
    assert appr.alpha == pytest.approx(1.0)
    assert (pref.question, pref.n_units, pref.alpha) == ("preference", 2, pytest.approx(1.0))


def test_time_stats():
    t = time_stats([_j(1, secs=1.0), _j(1, secs=2.0), _j(1, secs=3.0), _j(1, secs=None)])
    assert (t.n, t.median_s, t.mean_s) == (3, 2.0, 2.0) and t.p90_s == pytest.approx(2.8)
    assert time_stats([]).median_s is None


def test_summarize_leaves_excluded_raters_out_of_every_number():
    ratings = [RatingRow(r, 1, {"appropriate": r == 1}) for r in (1, 2)]
    judgments = [
        _j(1, gold=True, passed=True),
        _j(2, gold=True, passed=False),
        _j(1, 10, pref="choice", chosen=1),
        _j(2, 10, pref="choice", chosen=2),
    ]
    progress = StudyProgress("s", "open", 2, 2, 4, 2, 0, 0.5, [])
    data = StudyData("s", [appropriate(), preference()], {1: "r1", 2: "r2"}, judgments,
                     OUTPUTS, ratings, 0, progress)  # fmt: skip
    every = summarize(data, n_resamples=100)  # one failed check excludes no one (slip 0.1)
    assert (every.n_raters_included, every.n_judgments) == (2, 2)
    assert {s.system: s.appropriate.share for s in every.systems}["a"] == 0.5
    # a researcher stating a slip rate of 1%: one failure in one check is then 1 in 100
    kept = summarize(data, slip=0.01, n_resamples=100)
    assert (kept.n_raters_included, kept.n_raters_excluded, kept.n_judgments) == (1, 1, 1)
    assert {s.system: s.appropriate.share for s in kept.systems}["a"] == 1.0
    assert {s.system: s.appropriate.share for s in kept.systems_all_raters}["a"] == 0.5
    assert kept.preference_counts["choice"] == 1 and kept.n_raters_failed_attention == 1
    with pytest.raises(Exception, match="between 0 and 1"):
        summarize(data, slip=2.0)

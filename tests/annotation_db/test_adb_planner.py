"""The sample-size planner against Cohen's published table and against simulated studies."""

from __future__ import annotations

import numpy as np
import pytest

from annotation_db import InvalidInputError
from annotation_db.planner import n_per_group, plan_study, power_at, power_of


# Cohen (1988), Statistical Power Analysis, Table 6.4.1: n per sample for a two-sided test of
# two proportions at alpha .05 and power .80, by effect size h.
@pytest.mark.parametrize("h, published", [(0.2, 392), (0.3, 175), (0.5, 63), (0.8, 25)])
def test_n_per_group_matches_cohens_table(h, published):
    assert n_per_group(h, 0.05, 0.8) == pytest.approx(published, abs=1)
    assert power_of(h, n_per_group(h), 0.05) == pytest.approx(0.8, abs=1e-3)


def _simulated_power(p1, p2, n_items, k, icc, n_studies=3000, seed=0):
    """Share of simulated studies whose cluster-robust z-test rejects at 5%: each output's
    yes-probability is Beta-distributed (intra-output correlation icc), k raters answer."""
    rng = np.random.default_rng(seed)
    var, share = [], []
    for p in (p1, p2):
        if icc > 0:
            a, b = p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc
            q = rng.beta(a, b, size=(n_studies, n_items))
        else:
            q = np.full((n_studies, n_items), p)
        y = rng.binomial(k, q)
        n = n_items * k
        phat = y.sum(axis=1) / n
        robust = n_items / (n_items - 1) * ((y - phat[:, None] * k) ** 2).sum(axis=1) / n**2
        share.append(phat)
        var.append(robust)
    z = (share[0] - share[1]) / np.sqrt(var[0] + var[1])
    return float((np.abs(z) > 1.959964).mean())


@pytest.mark.parametrize("icc", [0.0, 0.3, 0.6])
def test_planned_size_reaches_the_power_in_simulation(icc):
    plan = plan_study(0.62, 0.54, 3, icc=icc)
    got = _simulated_power(0.62, 0.54, plan.items, 3, icc)
    assert got == pytest.approx(0.80, abs=0.03), (plan.items, got)


def test_ignoring_clustering_plans_too_few_items():
    """Planning with icc=0 when the answers are correlated leaves the study underpowered."""
    naive = plan_study(0.62, 0.54, 3, icc=0.0)
    assert _simulated_power(0.62, 0.54, naive.items, 3, icc=0.3) < 0.7


def test_plan_for_the_papers_rates():
    plan = plan_study()  # 0.62 vs 0.54, 3 raters per item, icc 0.3
    assert plan.design_effect == pytest.approx(1.6)
    assert plan.items == int(np.ceil(n_per_group(plan.cohen_h) * 1.6 / 3))
    assert plan.achieved_power >= 0.8
    # 20 items x 2 raters cannot separate 62% from 54%
    h = plan.cohen_h
    assert power_of(h, 20 * 2 / (1 + 0.3)) < 0.2
    assert 0 < plan.half_width_2 < plan.half_width_1 + 0.01
    assert "items x 3 raters" in plan.summary()


@pytest.mark.parametrize(
    "kwargs",
    [dict(p1=0.5, p2=0.5), dict(p1=1.2), dict(raters_per_item=0), dict(icc=1.0), dict(p2=0)],
)
def test_bad_inputs_say_why(kwargs):
    with pytest.raises(InvalidInputError):
        plan_study(**kwargs)


def test_plan_command(capsys):
    from annotation_db.cli import main

    assert main(["plan", "--p1", "0.62", "--p2", "0.54", "--raters-per-item", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{plan_study().items} items x 3 raters per item")
    assert main(["plan", "--raters-per-item", "2", "--items", "20", "318"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"20 items x 2 raters: power {power_at(20, raters_per_item=2):.0%}"
    assert power_at(20, raters_per_item=2) < 0.2 and power_at(318) == plan_study().achieved_power
    assert main(["plan", "--p1", "0.6", "--p2", "0.6"]) == 2
    assert capsys.readouterr().err.startswith("error: the two rates are equal")

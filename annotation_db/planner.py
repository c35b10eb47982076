"""How many items a study needs: power of comparing two systems' rates of "appropriate".

The test is the two-sided comparison of two independent proportions on Cohen's arcsine scale
(h = 2 asin sqrt p1 - 2 asin sqrt p2; Cohen 1988, ch. 6), whose per-group size for power
1 - beta is n = 2 ((z_{1-alpha/2} + z_{1-beta}) / h)^2 judgments. Judgments are clustered:
the k raters of one output judge the same text, so k judgments carry the information of
k / deff independent ones, deff = 1 + (k - 1) icc (Kish's design effect, icc = the
intra-output correlation of the yes/no answers). Items needed = n deff / k per system.
Normal quantiles and probabilities come from scipy.stats.

The systems of a study are rated on the same items, which a paired analysis could exploit;
the independent-groups figure is the conservative one (no item-level correlation assumed).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import norm

from .errors import InvalidInputError

DEFAULT_RATES = (0.62, 0.54)  # the paper's MAGNET vs base five-shot
# Assumed intra-output correlation of yes/no answers: agreement on "is this fill appropriate"
# is moderate in published infilling studies; 0.3 is a middle value, editable in the planner.
DEFAULT_ICC = 0.3


@dataclass(frozen=True)
class Plan:
    p1: float
    p2: float
    raters_per_item: int
    icc: float
    alpha: float
    power: float
    cohen_h: float
    design_effect: float
    effective_judgments: int  # independent-equivalent judgments needed, per system
    items: int  # items needed (each rated by raters_per_item raters), per system
    achieved_power: float  # at that many items
    half_width_1: float  # expected 95% CI half-width of p1's estimate at that many items
    half_width_2: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.items} items x {self.raters_per_item} raters per item "
            f"({self.items * self.raters_per_item} judgments per system) give "
            f"{self.achieved_power:.0%} power to tell {self.p1:.0%} from {self.p2:.0%} at "
            f"alpha {self.alpha:g} (intra-item correlation {self.icc:g}, design effect "
            f"{self.design_effect:.2f}); each rate's 95% interval is about "
            f"+/-{self.half_width_1:.1%} and +/-{self.half_width_2:.1%}."
        )


def cohen_h(p1: float, p2: float) -> float:
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def design_effect(raters_per_item: int, icc: float) -> float:
    return 1 + (raters_per_item - 1) * icc


def n_per_group(h: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Independent judgments per group for a two-sided test of effect size h (not rounded)."""
    _check_unit("alpha", alpha)
    _check_unit("power", power)
    if h == 0:
        raise InvalidInputError("the two rates are equal: no study size can tell them apart")
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return 2 * (z / abs(h)) ** 2


def power_of(h: float, n_effective: float, alpha: float = 0.05) -> float:
    """Power of the two-sided test with n_effective independent judgments per group."""
    shift = abs(h) * math.sqrt(n_effective / 2)
    crit = norm.ppf(1 - alpha / 2)
    return float(norm.cdf(shift - crit) + norm.cdf(-shift - crit))


def half_width(
    p: float, n_items: int, raters_per_item: int, icc: float, confidence: float = 0.95
) -> float:
    """Expected half-width of the normal interval of a rate from n_items x k judgments."""
    deff = design_effect(raters_per_item, icc)
    return float(
        norm.ppf(0.5 + confidence / 2) * math.sqrt(p * (1 - p) * deff / (n_items * raters_per_item))
    )


def plan_study(
    p1: float = DEFAULT_RATES[0],
    p2: float = DEFAULT_RATES[1],
    raters_per_item: int = 3,
    *,
    icc: float = DEFAULT_ICC,
    alpha: float = 0.05,
    power: float = 0.8,
) -> Plan:
    """Items needed to tell p1 from p2 with the given power, and the intervals to expect."""
    for name, v in (("expected rate 1", p1), ("expected rate 2", p2)):
        _check_unit(name, v)
    if isinstance(raters_per_item, bool) or int(raters_per_item) != raters_per_item:
        raise InvalidInputError("raters per item must be a whole number")
    k = int(raters_per_item)
    if k < 1:
        raise InvalidInputError("raters per item must be at least 1")
    if not 0 <= icc < 1:
        raise InvalidInputError(f"the intra-item correlation must be in [0, 1), not {icc}")
    h = cohen_h(p1, p2)
    deff = design_effect(k, icc)
    n = n_per_group(h, alpha, power)
    items = math.ceil(n * deff / k)
    return Plan(
        p1=p1,
        p2=p2,
        raters_per_item=k,
        icc=icc,
        alpha=alpha,
        power=power,
        cohen_h=h,
        design_effect=deff,
        effective_judgments=math.ceil(n),
        items=items,
        achieved_power=power_of(h, items * k / deff, alpha),
        half_width_1=half_width(p1, items, k, icc),
        half_width_2=half_width(p2, items, k, icc),
    )


def power_at(
    n_items: int,
    p1: float = DEFAULT_RATES[0],
    p2: float = DEFAULT_RATES[1],
    raters_per_item: int = 3,
    *,
    icc: float = DEFAULT_ICC,
    alpha: float = 0.05,
) -> float:
    """Power of a study of n_items items x raters_per_item raters (same model as plan_study)."""
    if isinstance(n_items, bool) or int(n_items) != n_items or n_items < 1:
        raise InvalidInputError("the number of items must be a whole number of at least 1")
    for name, v in (("expected rate 1", p1), ("expected rate 2", p2)):
        _check_unit(name, v)
    n_eff = n_items * raters_per_item / design_effect(raters_per_item, icc)
    return power_of(cohen_h(p1, p2), n_eff, alpha)


def _check_unit(name: str, v: float) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
        raise InvalidInputError(f"{name} must be between 0 and 1 (exclusive), not {v!r}")

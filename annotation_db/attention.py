"""Attention checks: which raters to leave out, with error rates a researcher can state.

A check shows an item's true text beside wrong fills taken from other passages, and is scored
**as a whole** (``check_passed``): it is passed only when every answer about it is right: the
true text accepted and every wrong fill rejected on each yes/no question, the true text scored
strictly above every wrong fill on each scale, and the true text picked when a preference is
asked. So no constant answer passes: "No" to everything rejects the true text, "Yes" to
everything accepts the wrong fills, the same score everywhere ranks nothing, a tie or "all bad"
picks nothing.

An attentive rater fails a check now and then: the **slip rate** s, stated for the study (0.2
by default: a careful rater who gets one answer in twenty wrong fails a check of three outputs
and a preference about one time in five). A rater answering at random fails it with the
**chance rate** c, which follows from the study's questions and how many outputs a check shows
(``chance_fail_rate``: with one yes/no question and three outputs, a random rater gets all
three answers right with probability 1/8, so c = 7/8). A rater's record is m checks met and f
failed; the likelihood ratio of "answers at random" against "attentive" is

    LR = (c / s)^f ((1 - c) / (1 - s))^(m - f),

which grows with f (c > s). The rule excludes a rater when f >= t_m, t_m the smallest number of
failures an attentive rater with m checks reaches with probability at most alpha: the
Neyman-Pearson likelihood-ratio test at level alpha (for a given m, "LR at least LR(t_m)" and
"f >= t_m" are the same rule). Its error rates at m checks are exact binomial tails
(scipy.stats.binom): an attentive rater is excluded with probability P(Bin(m, s) >= t_m) <=
alpha, a random one with probability P(Bin(m, c) >= t_m), the rule's *power* at m.

The power is stated against careless raters as they come (``against="careless"``, what a
study made now states): the mean, over the ways of answering without reading that
``simulate.STRATEGIES`` plays (at random, "Yes" or "No" to everything, always the first, the
last or the longest output), of the probability of excluding such a rater. Each fails a check
at its own rate (``careless_fail_rates``): "Yes" or "No" to everything fails every check that
asks a yes/no or a score question; one who always takes the first, last or longest output
passes only when the true text stands there, one check in n outputs (the true text's place is
drawn, and so is its place among the check's fills by length, ``gold.held_out_gold_items``).
One who always takes the shortest output fails as often as one who takes the longest; the
simulation plays both (``simulate.UNREAD``), the mean here keeps the six ways it was stated
with, so that a study already made keeps its stated power. The last are the hardest to
catch, so a study needs more checks than against random raters alone (``against="random"``,
the rule of studies made before, which a stored study without the field keeps).

A rater who is not excluded is *kept* when the power at their m reaches the stated power (a
careless rater with that many checks would have been caught that often), and *undecided*
otherwise: too few checks to tell. Undecided raters stay in the numbers and are counted and
named as such, never silently kept or dropped. ``checks_needed`` is the smallest m at which the
rule reaches its power: how many checks a study must give each rater (``plan_checks``).

Where the checks stand (``check_offsets``): each run of a rater's items holds at least the
planned number of checks at positions drawn at random among all of the run's positions, and
every other position is a check too with probability ``EXTRA_CHECK_RATE``; so whatever a rater
has seen, every item but the very first (never a check: a page does not open on one) may be a
check, and skimming any of them can be caught.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import binom

from .errors import InvalidInputError
from .questions import Appropriate, Likert, Preference, Question

DEFAULT_SLIP = 0.2  # an attentive rater fails one check in five (a check is scored whole)
DEFAULT_ALPHA = 0.05  # at most 5% of attentive raters excluded
DEFAULT_POWER = 0.85  # at least 85% of random raters excluded, at the checks needed
MAX_CHECKS = 50
EXTRA_CHECK_RATE = 0.1  # beyond the planned checks, any other position is one this often
EXCLUDED, KEPT, UNDECIDED = "excluded", "kept", "undecided"
# The ways of answering a check without reading it, as simulate.STRATEGIES plays them.
CARELESS = ("random", "always-yes", "always-no", "first", "last", "longest")
AGAINST = ("careless", "random")  # whom the rule's power is stated against


def chance_fail_rate(questions: Sequence[Question], n_outputs: int) -> float:
    """The probability that a rater answering every question at random fails a check showing
    ``n_outputs`` outputs (one original, the others wrong), the check scored whole
    (``check_passed``): they pass only when each yes/no answer is right (the original accepted,
    every wrong fill rejected), the original's score is strictly above every wrong fill's on
    each Likert question (every score equally likely), and their preference is the original
    (one of all the choices the question offers)."""
    if n_outputs < 2:
        raise InvalidInputError("an attention check shows at least two outputs")
    wrong = n_outputs - 1
    passes = 1.0
    for q in questions:
        if isinstance(q, Appropriate):
            passes *= 0.5**n_outputs
        elif isinstance(q, Likert):
            k = q.scale_max - q.scale_min + 1
            passes *= sum((below / k) ** wrong for below in range(k)) / k
        elif isinstance(q, Preference):
            passes *= 1 / (n_outputs + q.allow_tie + q.allow_all_bad)
    return 1 - passes


def careless_fail_rates(questions: Sequence[Question], n_outputs: int) -> dict[str, float]:
    """Per way of answering without reading (``CARELESS``), the probability of failing a check
    showing ``n_outputs`` outputs and asking ``questions`` (scored whole, ``check_passed``):
    at random, ``chance_fail_rate``; "Yes" to everything accepts the wrong fills (and scores
    them as high as the true text), "No" to everything rejects the true text, so both fail
    every check with a per-output question; with a preference alone, a tie or "all bad" where
    offered fails too, else their pick (the first, the last) is the true text one time in n.
    Always the first, last or longest output (or the shortest, not in the mean): right one
    time in n."""
    per_output = any(q.per_output for q in questions)
    pref = next((q for q in questions if isinstance(q, Preference)), None)
    one_in_n = 1 - 1 / n_outputs
    tie, all_bad = (pref.allow_tie, pref.allow_all_bad) if pref is not None else (False, False)
    return {
        "random": chance_fail_rate(questions, n_outputs),
        "always-yes": 1.0 if per_output or tie else one_in_n,
        "always-no": 1.0 if per_output or all_bad else one_in_n,
        "first": one_in_n,
        "last": one_in_n,
        "longest": one_in_n,
    }


def check_passed(
    questions: Sequence[Question],
    roles: Mapping[str, str],
    per_output: Mapping[str, Mapping[str, Any]],
    preference: str | None,
) -> bool:
    """Whether a rater's answers to an attention check are right as a whole.

    ``roles`` maps each output label shown to ``"original"`` or ``"corrupted"``;
    ``per_output`` the rater's answers per label; ``preference`` their pick (a label, ``"tie"``,
    ``"all_bad"``, or None when the study asks none). Passed only when every per-output question
    is right about every output (``Question.check_passed``) and the pick, if any, is the
    original: so neither "No" to everything nor "Yes" to everything passes."""
    original = next(lab for lab, role in roles.items() if role == "original")
    wrong = [lab for lab, role in roles.items() if role != "original"]
    if preference is not None and preference != original:
        return False
    for q in questions:
        if not q.per_output:
            continue
        said = per_output.get(original, {}).get(q.name)
        if not q.check_passed(said, [per_output.get(lab, {}).get(q.name) for lab in wrong]):
            return False
    return True


@dataclass(frozen=True)
class AttentionRule:
    """The exclusion rule of one study (see the module's docstring)."""

    slip: float = DEFAULT_SLIP  # an attentive rater's failure rate per check
    chance: float = 0.75  # a random rater's failure rate per check (chance_fail_rate)
    alpha: float = DEFAULT_ALPHA  # attentive raters excluded, at most
    power: float = DEFAULT_POWER  # careless raters excluded, at least (once decided)
    # the failure rates of the careless raters the power is stated against, one per way of
    # answering (careless_fail_rates); empty: random raters alone (the rate `chance`)
    careless: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("slip", "alpha", "power", "chance"):
            v = getattr(self, name)
            if name == "chance" and isinstance(v, int | float) and v <= self.slip:
                break  # said below, in words
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
                raise InvalidInputError(f"the {name} rate must be between 0 and 1, not {v!r}")
        if self.chance <= self.slip:
            raise InvalidInputError(
                f"a random rater fails a check with probability {self.chance:.0%}, no more often "
                f"than an attentive one ({self.slip:.0%}): the checks cannot tell them apart"
            )
        for v in self.careless:
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
                raise InvalidInputError(
                    f"a careless rater's failure rate must be in (0, 1], not {v!r}"
                )

    def threshold(self, m: int) -> int | None:
        """Failures out of m checks that exclude a rater (None: none can, at this alpha)."""
        for t in range(m + 1):
            if binom.sf(t - 1, m, self.slip) <= self.alpha:
                return t if t > 0 else None
        return None

    def false_exclusion(self, m: int) -> float:
        """P(an attentive rater with m checks is excluded)."""
        t = self.threshold(m)
        return 0.0 if t is None else float(binom.sf(t - 1, m, self.slip))

    def detection(self, m: int) -> float:
        """P(a careless rater with m checks is excluded): the rule's power at m, the mean over
        the ways of answering in `careless` (a random rater's alone when it is empty)."""
        t = self.threshold(m)
        if t is None:
            return 0.0
        rates = self.careless or (self.chance,)
        return float(sum(binom.sf(t - 1, m, c) for c in rates) / len(rates))

    def detection_random(self, m: int) -> float:
        """P(a rater answering at random with m checks is excluded)."""
        t = self.threshold(m)
        return 0.0 if t is None else float(binom.sf(t - 1, m, self.chance))

    @property
    def whom(self) -> str:
        """Whom the power is stated against, in words."""
        if not self.careless:
            return f"one answering at random (fails {self.chance:.0%})"
        return (
            'a careless one (the mean over answering at random, "Yes" or "No" to '
            "everything, always the first, last or longest output)"
        )

    def log_lr(self, m: int, f: int) -> float:
        """Log likelihood ratio of answering at random against attentive for f failures of m."""
        return f * math.log(self.chance / self.slip) + (m - f) * math.log(
            (1 - self.chance) / (1 - self.slip)
        )

    def checks_needed(self) -> int | None:
        """The fewest checks per rater at which the rule reaches its power (None: not within
        MAX_CHECKS)."""
        return next((m for m in range(1, MAX_CHECKS + 1) if self.detection(m) >= self.power), None)

    def decide(self, m: int, f: int) -> str:
        """``EXCLUDED``, ``KEPT`` or ``UNDECIDED`` for a rater who failed f of m checks."""
        t = self.threshold(m)
        if t is not None and f >= t:
            return EXCLUDED
        return KEPT if self.detection(m) >= self.power else UNDECIDED

    def describe(self, m: int | None = None) -> str:
        """The rule in one sentence, with its error rates at m checks (default: at the checks
        needed)."""
        need = self.checks_needed()
        m = need if m is None else m
        head = (
            f"A rater is excluded when the likelihood ratio of answering at random "
            f"(fails a check with probability {self.chance:.0%}) against attentive (slips on "
            f"{self.slip:.0%} of checks) is at its level {self.alpha:g}"
        )
        if m is None or m < 1:
            return head + "; no rater met a check."
        t = self.threshold(m)
        if t is None:
            return head + f"; with {m} check(s) no record excludes a rater."
        return (
            head + f": with {m} checks, {t} or more failed. Then an attentive rater is excluded "
            f"with probability {self.false_exclusion(m):.1%} and {self.whom} with "
            f"{self.detection(m):.1%}; raters with fewer than "
            f"{need if need is not None else 'enough'} checks who are not excluded are "
            "undecided (kept, and counted apart)."
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rule_for(
    questions: Sequence[Question],
    n_outputs: int,
    *,
    slip: float = DEFAULT_SLIP,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    against: str = "random",
) -> AttentionRule:
    """The rule of a study whose checks show ``n_outputs`` outputs and ask ``questions``, its
    power stated against careless raters of every kind (``against="careless"``) or against
    random ones alone (``"random"``)."""
    if against not in AGAINST:
        raise InvalidInputError(
            f"the rule's power is stated against {' or '.join(AGAINST)} raters, not {against!r}"
        )
    careless = (
        tuple(careless_fail_rates(questions, n_outputs).values()) if against == "careless" else ()
    )
    return AttentionRule(slip, chance_fail_rate(questions, n_outputs), alpha, power, careless)


@dataclass(frozen=True)
class CheckPlan:
    """How many attention checks each rater needs, and what fewer would cost."""

    items_per_rater: int
    checks_per_rater: int  # the checks placed among each rater's items_per_rater items
    regular_per_rater: int
    reached: bool  # the rule reaches its power at checks_per_rater
    rule: AttentionRule
    # per number of checks m = 1 .. items_per_rater - 1: (m, failures that exclude, attentive
    # excluded, random excluded)
    table: list[tuple[int, int | None, float, float]]

    def summary(self) -> str:
        r, m = self.rule, self.checks_per_rater
        if not self.reached:
            best = max(self.table, key=lambda row: row[3], default=(0, None, 0.0, 0.0))
            kind = "careless" if r.careless else "random"
            return (
                f"No number of checks among {self.items_per_rater} items per rater (at least one "
                f"regular) catches {r.power:.0%} of {kind} raters with at most {r.alpha:.0%} of "
                f"attentive ones excluded; the best is {best[0]} checks, catching "
                f"{best[3]:.0%}. Give each rater more items, or state a lower power."
            )
        fewer = [row for row in self.table if row[0] < m][-2:]
        cost = "; ".join(
            f"{k} checks catch {det:.0%} (attentive excluded {fa:.1%})" for k, _t, fa, det in fewer
        )
        return (
            f"{m} attention checks among each rater's {self.items_per_rater} items "
            f"({self.regular_per_rater} regular; any other item but the first is one too with "
            f"probability {EXTRA_CHECK_RATE:.0%}, so that none is surely free of a check): "
            f"raters failing {r.threshold(m)} or more are "
            f"excluded; an attentive rater (slips on {r.slip:.0%} of checks) is excluded with "
            f"probability {r.false_exclusion(m):.1%}, {r.whom} with {r.detection(m):.1%}."
            + (f" Fewer cost power: {cost}." if cost else "")
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary()
        return d


def plan_checks(items_per_rater: int, rule: AttentionRule) -> CheckPlan:
    """The checks each rater must meet among their ``items_per_rater`` items (at least one of
    them a regular item) for the rule to reach its stated power."""
    if isinstance(items_per_rater, bool) or not isinstance(items_per_rater, int):
        raise InvalidInputError("items per rater must be a whole number")
    if items_per_rater < 2:
        raise InvalidInputError("items per rater must be at least 2 (a check and a regular item)")
    table = [
        (m, rule.threshold(m), rule.false_exclusion(m), rule.detection(m))
        for m in range(1, min(items_per_rater - 1, MAX_CHECKS) + 1)
    ]
    m = next((row[0] for row in table if row[3] >= rule.power), None)
    reached = m is not None
    if m is None:
        m = max(table, key=lambda row: row[3])[0]
    return CheckPlan(items_per_rater, m, items_per_rater - m, reached, rule, table)


# ---------------------------------------------------------------------- the study's settings


@dataclass(frozen=True)
class AttentionSettings:
    """What a study states about its attention checks (stored with the study).

    ``items_per_rater``: the items each rater is expected to do (a paid batch); the placement
    gives each rater ``checks_per_rater`` checks among every ``items_per_rater`` items. Both
    None: checks are spread over everything a rater may do (studies made before this).
    ``against``: whom the power is stated against (``AGAINST``; a stored study without the
    field states it against random raters, as it was made)."""

    slip: float = DEFAULT_SLIP
    alpha: float = DEFAULT_ALPHA
    power: float = DEFAULT_POWER
    items_per_rater: int | None = None
    checks_per_rater: int | None = None
    against: str = "careless"

    def __post_init__(self) -> None:
        if self.against not in AGAINST:
            raise InvalidInputError(
                f"the rule's power is stated against {' or '.join(AGAINST)} raters, not "
                f"{self.against!r}"
            )
        for name in ("slip", "alpha", "power"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
                raise InvalidInputError(f"the {name} rate must be between 0 and 1, not {v!r}")
        n, m = self.items_per_rater, self.checks_per_rater
        if (n is None) != (m is None):
            raise InvalidInputError("give both items per rater and checks per rater, or neither")
        if n is not None:
            for name, v in (("items per rater", n), ("checks per rater", m)):
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise InvalidInputError(f"{name} must be a whole number of at least 1")
            if m >= n:
                raise InvalidInputError(
                    f"{m} checks among {n} items per rater leave no regular item: at most {n - 1}"
                )

    @staticmethod
    def from_dict(d: Mapping[str, Any] | None) -> AttentionSettings:
        if d is None:
            return AttentionSettings(against="random")  # a study made before the settings
        if isinstance(d, AttentionSettings):
            return d
        if not isinstance(d, Mapping):
            raise InvalidInputError(f"attention settings must be a mapping, got {d!r}")
        known = set(AttentionSettings.__dataclass_fields__)
        extra = set(d) - known
        if extra:
            raise InvalidInputError(f"unknown attention setting(s) {sorted(extra)}")
        return AttentionSettings(**{"against": "random", **dict(d)})

    def rule(self, questions: Sequence[Question], n_outputs: int) -> AttentionRule:
        return rule_for(
            questions,
            n_outputs,
            slip=self.slip,
            alpha=self.alpha,
            power=self.power,
            against=self.against,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def planned_settings(
    items_per_rater: int,
    questions: Sequence[Question],
    n_outputs: int,
    *,
    slip: float = DEFAULT_SLIP,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    against: str = "careless",
) -> tuple[AttentionSettings, CheckPlan]:
    """The settings a study stores, with the checks per rater sized by ``plan_checks`` (the
    power stated against careless raters of every kind unless ``against`` says otherwise)."""
    rule = rule_for(questions, n_outputs, slip=slip, alpha=alpha, power=power, against=against)
    plan = plan_checks(items_per_rater, rule)
    settings = AttentionSettings(
        slip, alpha, power, items_per_rater, plan.checks_per_rater, against
    )
    return settings, plan


# ---------------------------------------------------------------------- placement


def check_offsets(seed: int, block: int, items_per_rater: int, checks: int) -> frozenset[int]:
    """The offsets (0-based) within a rater's ``block``-th run of ``items_per_rater`` positions
    that hold an attention check: ``checks`` positions drawn at random among the run's
    positions, and each other position as well with probability ``EXTRA_CHECK_RATE``, drawn
    once per rater and run. No position is certainly free of a check once others were seen
    (a rater cannot skim "the rest of the slice"), except the first of the first run: a check
    never opens a rater's page."""
    lo = 1 if block == 0 else 0
    allowed = range(lo, items_per_rater)
    checks = min(checks, len(allowed))
    rng = random.Random(f"{seed}:checks:{block}")
    planned = set(rng.sample(allowed, checks))
    extra = {p for p in allowed if rng.random() < EXTRA_CHECK_RATE}
    return frozenset(planned | extra)


def check_due(seed: int, position: int, items_per_rater: int, checks: int) -> bool:
    """Whether a rater's item at ``position`` (1-based) is an attention check."""
    block, offset = divmod(position - 1, items_per_rater)
    return offset in check_offsets(seed, block, items_per_rater, checks)

"""Study results: what a researcher reports, computed from one consistent snapshot.

Gold (attention-check) items never count toward system results. A system's share judged
appropriate has a Wilson interval at the effective sample size (the raters of one output are
one cluster; ``stats.clustered_proportion``). Raters the study's attention rule excludes
(``attention.AttentionRule``: a binomial likelihood ratio with the study's slip rate and the
chance rate of its checks, exact error rates per number of checks met) are left out of every
number except the attention table itself, which lists each rater's record and decision
(excluded, kept, or undecided: too few checks to tell); the per-system results of every rater,
with no one excluded, come beside them (``systems_all_raters``), so a reader sees what the rule
changed.

Two halves: ``study_data.load_study`` reads what the numbers need in one session (SQL only)
into plain dataclasses (``StudyData``); ``summarize`` and the functions it calls
(``attention_checks``, ``system_results``, ``preference_results``, ``agreement``,
``time_stats``) compute from those, with no database, so each can be tested on hand-made data.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from .attention import EXCLUDED, UNDECIDED, AttentionRule, rule_for
from .errors import InvalidInputError
from .questions import ALL_BAD, TIE, Appropriate, Likert, Preference, Question, first
from .schema import Study
from .stats import (
    MeanCI,
    Proportion,
    bootstrap_mean,
    bootstrap_pairwise,
    clustered_proportion,
    krippendorff_alpha,
)
from .study_data import Judgment, OutputRow, RatingRow, StudyData, load_study
from .views import StudyProgress

# Fewer judgments than this give no interval, only "not enough votes": a bootstrap over one or
# two votes returns degenerate intervals such as [1, 1] that look certain and are not.
MIN_N = 10


def not_enough(n: float, min_n: int) -> str | None:
    """The note shown instead of an interval below min_n judgments; None when there are enough."""
    return None if n >= min_n else f"not enough votes for an interval (n = {n:g}, need {min_n})"


@dataclass(frozen=True)
class SystemResult:
    system: str
    n_outputs: int
    n_ratings: int
    appropriate: Proportion | None
    likert: dict[str, MeanCI] = field(default_factory=dict)


@dataclass(frozen=True)
class PairwiseResult:
    system_a: str
    system_b: str
    n: float  # judgments comparing the two (a tie counts once)
    win_rate_a: float  # share won by a, ties counted half
    low: float | None  # None below the minimum n (see note)
    high: float | None
    note: str | None = None


@dataclass(frozen=True)
class BTScore:
    system: str
    score: float  # natural-log strength, mean 0 over systems; P(a beats b) = 1/(1+e^(b-a))
    low: float | None  # None below the minimum n (see note)
    high: float | None
    n: int = 0  # preference judgments that showed this system
    note: str | None = None


@dataclass(frozen=True)
class Agreement:
    question: str
    level: str
    alpha: float | None
    n_units: int
    n_raters: int


@dataclass(frozen=True)
class AttentionResult:
    rater_id: int
    display_name: str
    gold_done: int
    gold_failed: int
    failure_share: float | None
    excluded: bool
    decision: str = UNDECIDED  # attention.EXCLUDED, KEPT or UNDECIDED (too few checks)
    log_lr: float | None = None  # log likelihood ratio, random against attentive


@dataclass(frozen=True)
class TimeStats:
    n: int
    median_s: float | None
    mean_s: float | None
    p90_s: float | None


@dataclass(frozen=True)
class StudyResults:
    study: str
    confidence: float
    min_n: int  # below this many judgments: no interval, a note instead
    exclude: bool  # the attention rule's exclusions applied to the numbers
    n_raters_included: int
    n_raters_excluded: int
    n_judgments: int
    systems: list[SystemResult]
    pairwise: list[PairwiseResult]
    bradley_terry: list[BTScore]
    preference_counts: dict[str, int]
    agreement: list[Agreement]
    attention: list[AttentionResult]
    time_per_item: TimeStats
    progress: StudyProgress
    # raters who answered at least one attention check / failed at least one
    n_raters_checked: int = 0
    n_raters_failed_attention: int = 0
    # arena only: votes from a visitor who had seen the same text with the names shown
    n_votes_seen_unblinded: int = 0
    # the attention rule: slip, chance, alpha, power, checks_needed, description (None: the
    # study's checks cannot tell a random rater from an attentive one, nobody is excluded)
    attention_rule: dict[str, Any] | None = None
    n_raters_undecided: int = 0
    # per system, every rater counted (no exclusion): what the rule changed
    systems_all_raters: list[SystemResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN becomes None."""
        return _clean(asdict(self))


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "isoformat"):
        return x.isoformat()
    return x


def compute_results(
    s: Session,
    study: Study,
    *,
    exclude: bool = True,
    slip: float | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    bt_prior: float = 0.5,
    min_n: int = MIN_N,
) -> StudyResults:
    """``load_study`` then ``summarize``: the results of one study from one snapshot."""
    return summarize(
        load_study(s, study),
        exclude=exclude,
        slip=slip,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        bt_prior=bt_prior,
        min_n=min_n,
    )


# ---------------------------------------------------------------------- statistics (pure)


def summarize(
    data: StudyData,
    *,
    exclude: bool = True,
    slip: float | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    bt_prior: float = 0.5,
    min_n: int = MIN_N,
) -> StudyResults:
    """Every number of ``StudyResults`` from loaded data; no database needed.

    ``exclude``: leave out the raters the study's attention rule excludes (the per-system
    results of every rater come beside them either way); ``slip``: the slip rate to judge by
    instead of the study's stated one."""
    rule = study_rule(data, slip)
    attention, excluded = attention_checks(data.raters, data.judgments, rule)
    every_system = sorted({o.system for o in data.outputs.values()})
    systems_all = system_results(
        data.questions,
        every_system,
        data.outputs,
        data.ratings,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        min_n=min_n,
    )
    if not exclude:
        excluded = set()
    regular = [j for j in data.judgments if not j.is_gold and j.rater_id not in excluded]
    ratings = [r for r in data.ratings if r.rater_id not in excluded]
    system_names = sorted({o.system for o in data.outputs.values()})
    counts, pairwise, bt = preference_results(
        system_names,
        data.outputs,
        regular,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        bt_prior=bt_prior,
        min_n=min_n,
    )
    return StudyResults(
        study=data.name,
        confidence=confidence,
        min_n=min_n,
        exclude=exclude,
        n_raters_included=len(data.raters) - len(excluded),
        n_raters_excluded=len(excluded),
        n_judgments=len(regular),
        systems=systems_all
        if not excluded
        else system_results(
            data.questions,
            system_names,
            data.outputs,
            ratings,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
            min_n=min_n,
        ),
        pairwise=pairwise,
        bradley_terry=bt,
        preference_counts=counts,
        agreement=agreement(data.questions, data.outputs, ratings, regular),
        attention=attention,
        time_per_item=time_stats(regular),
        progress=data.progress,
        n_raters_checked=sum(1 for a in attention if a.gold_done),
        n_raters_failed_attention=sum(1 for a in attention if a.gold_failed),
        n_votes_seen_unblinded=data.n_seen_unblinded,
        attention_rule=_rule_dict(rule),
        n_raters_undecided=sum(1 for a in attention if a.decision == UNDECIDED),
        systems_all_raters=systems_all,
    )


def study_rule(data: StudyData, slip: float | None = None) -> AttentionRule | None:
    """The study's attention rule (its stated slip rate unless ``slip`` is given, the chance
    rate of its checks); None when its checks cannot tell a random rater from an attentive one
    (no question a check can be failed on)."""
    a = data.attention
    try:
        return rule_for(
            data.questions,
            max(data.check_outputs, 2),
            slip=a.slip if slip is None else slip,
            alpha=a.alpha,
            power=a.power,
            against=a.against,
        )
    except InvalidInputError:
        if slip is not None:  # a slip rate the caller chose: say why it cannot be used
            raise
        return None


def _rule_dict(rule: AttentionRule | None) -> dict[str, Any] | None:
    if rule is None:
        return None
    return {**rule.to_dict(), "checks_needed": rule.checks_needed(), "description": rule.describe()}


def attention_checks(
    raters: Mapping[int, str],
    judgments: Sequence[Judgment],
    rule: AttentionRule | None,
) -> tuple[list[AttentionResult], set[int]]:
    """Attention checks per rater, each rater's decision under ``rule``, and the excluded."""
    gold_done: dict[int, int] = defaultdict(int)
    gold_failed: dict[int, int] = defaultdict(int)
    for j in judgments:
        if j.is_gold:
            gold_done[j.rater_id] += 1
            gold_failed[j.rater_id] += j.gold_passed is False
    attention, excluded = [], set()
    for rid, name in sorted(raters.items()):
        m, f = gold_done[rid], gold_failed[rid]
        share = f / m if m else None
        decision = UNDECIDED if rule is None else rule.decide(m, f)
        if decision == EXCLUDED:
            excluded.add(rid)
        lr = rule.log_lr(m, f) if rule is not None and m else None
        attention.append(
            AttentionResult(rid, name, m, f, share, decision == EXCLUDED, decision, lr)
        )
    return attention, excluded


def system_results(
    questions: Sequence[Question],
    system_names: Sequence[str],
    outputs: Mapping[int, OutputRow],
    ratings: Sequence[RatingRow],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    min_n: int = MIN_N,
) -> list[SystemResult]:
    """Per system: share judged appropriate (clustered Wilson) and Likert means (BCa)."""
    by_system: dict[str, list[RatingRow]] = defaultdict(list)
    for r in ratings:
        by_system[outputs[r.output_id].system].append(r)
    n_outputs: dict[str, int] = defaultdict(int)
    for o in outputs.values():
        n_outputs[o.system] += 1
    systems = []
    for name in system_names:
        rs = by_system[name]
        appr = None
        aq = first(questions, Appropriate)
        if aq is not None:
            # The raters of one output judge the same text: one cluster per output.
            per_output: dict[int, list[bool]] = defaultdict(list)
            for r in rs:
                if aq.name in r.answers:
                    per_output[r.output_id].append(bool(r.answers[aq.name]))
            appr = clustered_proportion(
                [sum(v) for v in per_output.values()],
                [len(v) for v in per_output.values()],
                confidence,
            )
        likert = {}
        for q in questions:
            if not isinstance(q, Likert):
                continue
            # Cluster bootstrap by item: average the raters of each item first, so that an
            # item rated by many raters does not weigh more than the others.
            per_item: dict[int, list[int]] = defaultdict(list)
            for r in rs:
                if q.name in r.answers:
                    per_item[outputs[r.output_id].item_id].append(r.answers[q.name])
            means = [float(np.mean(v)) for v in per_item.values()]
            ci = bootstrap_mean(means, confidence, max(n_resamples, 1000), seed)
            n_ratings = sum(len(v) for v in per_item.values())
            if not_enough(n_ratings, min_n):  # no interval (None in JSON) from too few
                ci = MeanCI(n_ratings, ci.mean, math.nan, math.nan)
            likert[q.name] = MeanCI(n_ratings, ci.mean, ci.low, ci.high)
        systems.append(SystemResult(name, n_outputs[name], len(rs), appr, likert))
    return systems


def preference_results(
    system_names: Sequence[str],
    outputs: Mapping[int, OutputRow],
    judgments: Sequence[Judgment],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    bt_prior: float = 0.5,
    min_n: int = MIN_N,
) -> tuple[dict[str, int], list[PairwiseResult], list[BTScore]]:
    """Preference counts, pairwise win rates (ties half) and Bradley-Terry scores."""
    sys_index = {name: i for i, name in enumerate(system_names)}
    pref_counts = {"choice": 0, TIE: 0, ALL_BAD: 0}
    contributions = []
    S = len(system_names)
    for a in judgments:
        if a.preference is None:
            continue
        pref_counts[a.preference] += 1
        shown = [sys_index[outputs[oid].system] for oid in a.output_order if oid in outputs]
        m = np.zeros((S, S))
        if a.preference == "choice":
            w = sys_index[outputs[a.preferred_output_id].system]
            for other in shown:
                if other != w:
                    m[w, other] += 1
        elif a.preference == TIE:
            for i in shown:
                for j in shown:
                    if i != j:
                        m[i, j] += 0.5
        else:  # all_bad says nothing about which is better
            continue
        contributions.append(m)
    shown_in = np.zeros(S, dtype=int)  # preference judgments that showed each system
    for m in contributions:
        shown_in += (m.sum(axis=0) + m.sum(axis=1)) > 0
    pairwise: list[PairwiseResult] = []
    bt: list[BTScore] = []
    if not contributions:
        return pref_counts, pairwise, bt
    pb = bootstrap_pairwise(
        np.stack(contributions),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        prior=bt_prior,
    )
    for i in range(S):
        for j in range(i + 1, S):
            if pb.counts[i, j] > 0:
                note = not_enough(float(pb.counts[i, j]), min_n)
                pairwise.append(
                    PairwiseResult(
                        system_names[i],
                        system_names[j],
                        float(pb.counts[i, j]),
                        float(pb.win_rate[i, j]),
                        None if note else float(pb.win_low[i, j]),
                        None if note else float(pb.win_high[i, j]),
                        note,
                    )
                )
    for i in np.argsort(-pb.scores):
        note = not_enough(int(shown_in[i]), min_n)
        bt.append(
            BTScore(
                system_names[i],
                float(pb.scores[i]),
                None if note else float(pb.scores_low[i]),
                None if note else float(pb.scores_high[i]),
                int(shown_in[i]),
                note,
            )
        )
    return pref_counts, pairwise, bt


def agreement(
    questions: Sequence[Question],
    outputs: Mapping[int, OutputRow],
    ratings: Sequence[RatingRow],
    judgments: Sequence[Judgment],
) -> list[Agreement]:
    """Krippendorff's alpha per question: nominal for yes/no and preference, ordinal for Likert."""
    rater_ids = sorted({r.rater_id for r in ratings} | {a.rater_id for a in judgments})
    rix = {rid: i for i, rid in enumerate(rater_ids)}
    out = []
    out_ids = sorted(outputs)
    oix = {oid: i for i, oid in enumerate(out_ids)}
    for q in questions:
        level = q.agreement_level
        if level is None:
            continue
        if q.per_output:
            mat = np.full((len(rater_ids), len(out_ids)), np.nan)
            for r in ratings:
                if q.name in r.answers:
                    mat[rix[r.rater_id], oix[r.output_id]] = float(r.answers[q.name])
        elif isinstance(q, Preference):
            items = sorted({a.item_id for a in judgments if a.preference is not None})
            iix = {iid: i for i, iid in enumerate(items)}
            mat = np.full((len(rater_ids), len(items)), np.nan)
            codes = {TIE: 0.0, ALL_BAD: -1.0}
            for a in judgments:
                if a.preference is not None:
                    v = (
                        float(a.preferred_output_id)
                        if a.preference == "choice"
                        else codes[a.preference]
                    )
                    mat[rix[a.rater_id], iix[a.item_id]] = v
        else:
            continue
        pairable = int(((~np.isnan(mat)).sum(axis=0) >= 2).sum()) if mat.size else 0
        alpha = krippendorff_alpha(mat, level) if mat.size else None
        n_r = int((~np.isnan(mat)).any(axis=1).sum()) if mat.size else 0
        out.append(Agreement(q.name, level, alpha, pairable, n_r))
    return out


def time_stats(judgments: Sequence[Judgment]) -> TimeStats:
    """Seconds from shown to answered per item: median, mean, 90th percentile."""
    secs = [j.seconds for j in judgments if j.seconds is not None]
    return TimeStats(
        len(secs),
        float(np.median(secs)) if secs else None,
        float(np.mean(secs)) if secs else None,
        float(np.quantile(secs, 0.9)) if secs else None,
    )

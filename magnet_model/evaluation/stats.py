"""How sure a number is: 95% intervals of shares, and paired comparisons of two systems on the
same cases (scipy.stats), so that the report never states a share without its interval and
two adapters are compared case by case rather than by two independent means."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95


def share(flags: Sequence[bool]) -> dict:
    """A share with its 95% Wilson interval (scipy's binomtest): {share, lo, hi, n}; n = 0
    gives nan. Wilson, not the normal approximation, because shares near 0% or 100% are the
    interesting ones here and the normal interval leaves [0, 1] there."""
    from scipy.stats import binomtest

    n = len(flags)
    if n == 0:
        return {"share": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}
    k = int(sum(bool(f) for f in flags))
    ci = binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return {"share": k / n, "lo": float(ci.low), "hi": float(ci.high), "n": n}


def paired_shares(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """Two systems' flags on the same cases: the difference of shares (a - b) with a 95%
    bootstrap interval over the cases (the pairs resampled together), and the exact McNemar
    p-value (a binomial test on the discordant cases: only the cases where the two differ say
    which is better)."""
    from scipy.stats import binomtest

    if len(a) != len(b):
        raise ValueError(f"paired flags of different lengths: {len(a)} and {len(b)}")
    n = len(a)
    if n == 0:
        return {"diff": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan, "n": 0}
    d = np.array([int(bool(x)) - int(bool(y)) for x, y in zip(a, b, strict=True)], float)
    a_only, b_only = int((d > 0).sum()), int((d < 0).sum())
    p = 1.0 if a_only + b_only == 0 else float(binomtest(a_only, a_only + b_only).pvalue)
    lo, hi = _bootstrap_mean(d)
    return {
        "diff": float(d.mean()), "lo": lo, "hi": hi, "p": p, "n": n,
        "a_only": a_only, "b_only": b_only,
    }  # fmt: skip


def _bootstrap_mean(values: np.ndarray) -> tuple[float, float]:
    """95% percentile bootstrap interval of a mean (seeded: the report is reproducible)."""
    from scipy.stats import bootstrap

    if len(values) < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())
    res = bootstrap(
        (values,),
        np.mean,
        n_resamples=2000,
        confidence_level=CONFIDENCE,
        method="percentile",
        random_state=np.random.default_rng(0),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_means(a: Sequence[float], b: Sequence[float]) -> dict:
    """Two systems' per-case scores on the same cases (a query's reciprocal rank): the
    difference of their means (a - b) with a 95% bootstrap interval over the cases, and the
    Wilcoxon signed-rank p-value of the per-case differences (1 when no case differs)."""
    from scipy.stats import wilcoxon

    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) != len(b):
        raise ValueError(f"paired scores of different lengths: {len(a)} and {len(b)}")
    if len(a) == 0:
        return {"diff": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan, "n": 0}
    d = a - b
    lo, hi = _bootstrap_mean(d)
    p = 1.0 if np.all(d == 0) else float(wilcoxon(d).pvalue)
    return {"diff": float(d.mean()), "lo": lo, "hi": hi, "p": p, "n": int(len(d))}


def paired_nll(a: Sequence[float], b: Sequence[float], tokens: Sequence[int]) -> dict:
    """Two systems' summed span NLLs on the same cases: the ratio of their span perplexities
    (a / b), the mean per-token NLL difference with a 95% bootstrap interval (seeded, 2,000
    resamples of the cases), and the Wilcoxon signed-rank p-value of the per-case
    differences (per token)."""
    from scipy.stats import bootstrap, wilcoxon

    a, b, t = np.asarray(a, float), np.asarray(b, float), np.asarray(tokens, float)
    if not len(a) == len(b) == len(t):
        raise ValueError("paired NLLs and token counts must have one value per case")
    if len(a) == 0:
        return {"ppl_ratio": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan, "n": 0}
    ratio = math.exp((a.sum() - b.sum()) / t.sum())
    per_token = (a - b) / t
    if len(a) < 2 or np.allclose(per_token, 0):
        lo = hi = ratio
        p = 1.0
    else:

        def stat(i, axis=-1):  # the PPL ratio of a resample of the cases
            i = i.astype(int)
            return np.exp((a[i].sum(axis=axis) - b[i].sum(axis=axis)) / t[i].sum(axis=axis))

        res = bootstrap(
            (np.arange(len(a)),),
            stat,
            n_resamples=2000,
            confidence_level=CONFIDENCE,
            method="percentile",
            vectorized=True,
            random_state=np.random.default_rng(0),
        )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        p = float(wilcoxon(per_token).pvalue)
    return {"ppl_ratio": ratio, "lo": lo, "hi": hi, "p": p, "n": int(len(a))}

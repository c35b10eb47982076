"""Statistics for rating studies, each small enough to check by hand.

- ``wilson_interval``: binomial proportion CI (Wilson 1927), better than the normal
  approximation at small n or near 0/1.
- ``clustered_proportion``: the same share when judgments come in clusters (the k raters of
  one output agree far more than independent coin flips): Wilson's interval at the effective
  sample size n / deff, deff from the cluster-robust (ratio-estimator) variance, floored at 1
  (Korn & Graubard 1998). Treating clustered judgments as independent gives intervals that
  are too narrow (``annotation_db.simulate`` measures by how much).
- ``bootstrap_mean``: BCa bootstrap CI of a mean (``scipy.stats.bootstrap``).
- ``bradley_terry``: strengths from pairwise outcomes by Hunter's (2004) MM algorithm;
  ``bootstrap_pairwise`` gives percentile CIs for win rates and strengths by resampling
  whole judgments.
- ``krippendorff_alpha``: agreement via the maintained ``krippendorff`` package.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
from scipy import stats as sps

from .errors import InvalidInputError


@dataclass(frozen=True)
class Proportion:
    successes: int
    n: int
    share: float
    low: float
    high: float
    design_effect: float = 1.0  # variance / binomial variance; 1 = independent judgments


@dataclass(frozen=True)
class MeanCI:
    n: int
    mean: float
    low: float
    high: float


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be in (0, 1), got {confidence}")
    return float(sps.norm.ppf(0.5 + confidence / 2))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Proportion:
    """Share ``successes / n`` with its Wilson score interval."""
    if n < 0 or not 0 <= successes <= n:
        raise InvalidInputError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return Proportion(0, 0, math.nan, math.nan, math.nan)
    p = successes / n
    return Proportion(successes, n, p, *_wilson_bounds(p, n, _z(confidence)))


def _wilson_bounds(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's bounds around p, which they always hold: in floating point, 0 of n gave a low
    end of 2.8e-17 above the share of 0 (1 of 1 a high end just under 1), and a plot's error
    bar from the share down to it was negative (tour 6, M1)."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def clustered_proportion(
    successes: Sequence[int], sizes: Sequence[int], confidence: float = 0.95
) -> Proportion:
    """Share of yes over clusters (``successes[i]`` of ``sizes[i]`` judgments in cluster i)
    with Wilson's interval at the effective sample size n / deff.

    deff = cluster-robust variance of the ratio estimator / binomial variance, floored at 1
    (a study's few clusters can make the estimate fall below 1 by chance); the variance has
    the usual small-sample factor c / (c - 1) for c clusters, so one judgment per cluster
    gives Wilson's interval at n (c - 1) / c.
    """
    y = np.asarray(successes, dtype=float)
    m = np.asarray(sizes, dtype=float)
    if y.shape != m.shape or np.any(m < 0) or np.any(y < 0) or np.any(y > m):
        raise InvalidInputError("need 0 <= successes <= size for every cluster")
    keep = m > 0
    y, m = y[keep], m[keep]
    n = int(m.sum())
    if n == 0:
        return wilson_interval(0, 0, confidence)
    total = int(y.sum())
    p = total / n
    deff = 1.0
    c = len(m)
    if c >= 2 and 0 < p < 1:
        robust = c / (c - 1) * float(((y - p * m) ** 2).sum()) / (n * n)
        deff = max(1.0, robust / (p * (1 - p) / n))
    low, high = _wilson_bounds(p, n / deff, _z(confidence))
    return Proportion(total, n, p, low, high, deff)


def bootstrap_mean(
    values: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> MeanCI:
    """Mean with a BCa bootstrap interval (percentile when BCa is undefined)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return MeanCI(0, math.nan, math.nan, math.nan)
    m = float(x.mean())
    if n == 1 or np.all(x == x[0]):
        # No spread to resample: every bootstrap mean equals the sample mean.
        return MeanCI(n, m, m if n > 1 else math.nan, m if n > 1 else math.nan)
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = sps.bootstrap(
                (x,),
                np.mean,
                confidence_level=confidence,
                n_resamples=n_resamples,
                method=method,
                rng=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return MeanCI(n, m, lo, hi)
    return MeanCI(n, m, math.nan, math.nan)


def bradley_terry(
    wins: np.ndarray,
    *,
    prior: float = 0.5,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> np.ndarray:
    """Log-strengths (mean 0) from ``wins[i, j]`` = times i beat j (ties as 0.5 each way).

    ``prior`` adds that many wins each way to every pair (0.5 = one virtual tie), which keeps
    strengths finite when a system never wins and pulls scores to 0 when data are few. With
    ``prior=0`` this is the maximum-likelihood estimate (Hunter 2004, MM algorithm).
    Accepts a stack of matrices ``(..., S, S)`` and solves them all at once.
    """
    w = np.asarray(wins, dtype=float)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise InvalidInputError("wins must be a square matrix (or a stack of them)")
    s = w.shape[-1]
    off = 1.0 - np.eye(s)
    w = w * off + prior * off
    n = w + np.swapaxes(w, -1, -2)
    total_wins = w.sum(axis=-1)
    p = np.ones(w.shape[:-1])
    for _ in range(max_iter):
        denom = (n / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            new = np.where(denom > 0, total_wins / denom, p)
        new = new / np.exp(np.log(np.maximum(new, 1e-300)).mean(axis=-1, keepdims=True))
        delta = np.nanmax(np.abs(np.log(np.maximum(new, 1e-300)) - np.log(np.maximum(p, 1e-300))))
        p = new
        if delta < tol:
            break
    return np.log(np.maximum(p, 1e-300))


@dataclass(frozen=True)
class PairwiseBootstrap:
    scores: np.ndarray  # (S,) log-strengths
    scores_low: np.ndarray
    scores_high: np.ndarray
    win_rate: np.ndarray  # (S, S): share of i-vs-j judgments won by i, ties half
    win_low: np.ndarray
    win_high: np.ndarray
    counts: np.ndarray  # (S, S): judgments comparing i and j


def bootstrap_pairwise(
    judgments: np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    prior: float = 0.5,
) -> PairwiseBootstrap:
    """Win rates and Bradley-Terry scores with percentile CIs.

    ``judgments`` has shape (J, S, S): judgment j's contribution to the wins matrix, so
    a best-of-N choice (one winner over N-1 others) is resampled as one unit.
    """
    t = np.asarray(judgments, dtype=float)
    j, s, _ = t.shape
    w = t.sum(axis=0)
    n = w + w.T
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n > 0, w / n, np.nan)
    scores = bradley_terry(w, prior=prior)
    if j == 0:
        nan = np.full(s, np.nan)
        nan2 = np.full((s, s), np.nan)
        return PairwiseBootstrap(scores, nan, nan, rate, nan2, nan2, n)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(j, np.full(j, 1.0 / j), size=n_resamples)  # (B, J)
    wb = (counts @ t.reshape(j, s * s)).reshape(n_resamples, s, s)
    nb = wb + np.swapaxes(wb, -1, -2)
    with np.errstate(divide="ignore", invalid="ignore"):
        rb = np.where(nb > 0, wb / nb, np.nan)
    sb = bradley_terry(wb, prior=prior)
    a = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return PairwiseBootstrap(
            scores=scores,
            scores_low=np.quantile(sb, a, axis=0),
            scores_high=np.quantile(sb, 1 - a, axis=0),
            win_rate=rate,
            win_low=np.nanquantile(rb, a, axis=0),
            win_high=np.nanquantile(rb, 1 - a, axis=0),
            counts=n,
        )


def krippendorff_alpha(reliability_data: np.ndarray, level: str) -> float | None:
    """Krippendorff's alpha of a raters x units matrix (``nan`` = not rated).

    ``None`` when it is undefined: fewer than two pairable values, or a single value used
    throughout (no variation to agree on).
    """
    data = np.asarray(reliability_data, dtype=float)
    if data.ndim != 2 or data.shape[0] < 2:
        return None
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    data = data[:, pairable]
    values = data[~np.isnan(data)]
    if values.size < 2 or np.unique(values).size < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))

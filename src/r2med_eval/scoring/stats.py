"""Significance tests over queries: each system against a baseline, per task.

* ``paired_ttest``: the paired t-test of ``scipy.stats.ttest_rel`` (two-sided, n - 1 degrees of freedom),
  computed here from the differences. When every per-query difference is 0 the statistic is undefined
  (scipy returns nan); we report t = 0 and p = 1, the systems being indistinguishable on these queries.
* ``randomization_test``: the paired (sign-flip) randomization test of Smucker et al. (CIKM 2007). Under
  the null hypothesis the sign of each per-query difference is exchangeable; we draw ``permutations``
  random sign vectors from a fixed seed and count those whose |mean difference| reaches the observed one
  (with a 1e-12 tolerance for float round-off). p = (count + 1) / (permutations + 1): the observed
  assignment is counted as one of the permutations, so p is never 0 and the test stays valid
  (Phipson & Smyth 2010).
* Non-finite input (NaN, infinities) is refused by the paired tests and the bootstrap with a ValueError: a NaN makes
  every comparison false, so the randomization test would count no permutation and report its smallest p as if the
  difference were decisive. Callers leave such queries out explicitly (``claims.evidence`` counts them).
* ``bootstrap_ci``: percentile bootstrap confidence interval of a mean: ``resamples`` resamples of the
  queries with replacement from a fixed seed, drawn exactly as ``scipy.stats.bootstrap`` draws them
  (``rng.integers(0, n, (resamples, n))``), quantiles by linear interpolation; so with the same seed it
  equals ``scipy.stats.bootstrap(..., method='percentile')``.
* ``holm``: Holm's step-down correction of a family of p-values.

Agreement and intervals (CliniQ's judgment completion, ``cliniq_completion``):

* ``clopper_pearson_interval``: the Clopper-Pearson (exact binomial) interval from the beta quantiles, for a real
  ``x`` and ``n`` too: with ``x = p n_eff`` and ``n = n_eff`` the effective sample size of a survey design it is Korn
  and Graubard's interval (1998), the one ``cliniq_completion`` uses; vectorised over arrays.
* ``wilson_interval``: the Wilson score interval of a proportion, closed form; ``n`` may be an effective sample
  size (a real number).
* ``kendall_tau_b``: Kendall's tau-b of two score vectors (ties in either counted as scipy.stats.kendalltau does;
  nan when one vector is constant).
* ``cohen_kappa``: Cohen's kappa of two raters' labels of the same items, with the observed agreement.
"""

from __future__ import annotations

import functools
import math

import numpy as np

TOLERANCE = 1e-12


def _finite(x: np.ndarray, what: str) -> np.ndarray:
    """``x`` when every value is finite; else ValueError: a NaN makes every comparison false (a randomization test
    would count no permutation and give its smallest p), so non-finite input is refused, never tested."""
    bad = int(np.count_nonzero(~np.isfinite(x)))
    if bad:
        raise ValueError(f"{what}: {bad} of {x.size} values are not finite (NaN or infinite); leave those queries "
                         "out before testing")
    return x


def _pair(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be 1-d and of equal length (got {a.shape} and {b.shape})")
    if len(a) < 2:
        raise ValueError("a paired test needs at least 2 queries")
    return _finite(a, "a paired test") - _finite(b, "a paired test")


def paired_ttest(a, b) -> tuple[float, float]:
    """Two-sided paired t-test of ``a`` against ``b``: (t, p), as scipy.stats.ttest_rel(a, b)."""
    from scipy.stats import t as t_dist

    d = _pair(a, b)
    n = len(d)
    mean = math.fsum(d) / n
    sd = float(np.std(d, ddof=1))
    if sd == 0.0:
        if mean == 0.0:
            return 0.0, 1.0
        return math.copysign(math.inf, mean), 0.0
    t = mean / (sd / math.sqrt(n))
    p = float(2.0 * t_dist.sf(abs(t), n - 1))
    return float(t), min(1.0, p)


def randomization_test(a, b, permutations: int = 10000, seed: int = 0, chunk: int = 1000) -> float:
    """Two-sided paired sign-flip randomization test of mean(a - b) = 0; p with the +1 correction."""
    d = _pair(a, b)
    n = len(d)
    observed = abs(math.fsum(d) / n)
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < permutations:
        size = min(chunk, permutations - done)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8).astype(float) * 2.0 - 1.0
        stats = np.abs(signs @ d) / n
        hits += int(np.count_nonzero(stats >= observed - TOLERANCE))
        done += size
    return (hits + 1) / (permutations + 1)


def bootstrap_ci(x, resamples: int = 10000, seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``x``."""
    x = _finite(np.asarray(x, dtype=float), "a bootstrap")
    n = len(x)
    if n == 0:
        raise ValueError("bootstrap of an empty sample")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, (resamples, n))
    means = x[index].mean(axis=-1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def holm(pvalues) -> list[float]:
    """Holm-adjusted p-values, in the input order: sorted ascending, p_(i) * (m - i + 1), made monotone,
    capped at 1. Ties keep their input order (any order gives the same adjusted values)."""
    p = [float(v) for v in pvalues]
    if any(math.isnan(v) or v < 0 or v > 1 for v in p):
        raise ValueError(f"p-values must lie in [0, 1]: {p}")
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


@functools.cache
def _normal_quantile(q: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def wilson_interval(p: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed on ``n`` trials (``n`` > 0, possibly an effective
    sample size): (centre +- half) / (1 + z^2/n), centre = p + z^2/(2n), half = z sqrt(p(1-p)/n + z^2/(4n^2))."""
    if not n > 0:
        raise ValueError(f"the Wilson interval needs n > 0 (got {n})")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a proportion lies in [0, 1] (got {p})")
    if math.isinf(n):
        return p, p
    z = _normal_quantile(0.5 + confidence / 2.0)
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    low = 0.0 if p == 0.0 else max(0.0, centre - half)  # exactly the bounds at p = 0 and 1, not round-off near them
    high = 1.0 if p == 1.0 else min(1.0, centre + half)
    return low, high


def clopper_pearson_interval(x, n, confidence: float = 0.95):
    """The Clopper-Pearson interval of ``x`` successes in ``n`` trials: (B^-1(a/2; x, n - x + 1),
    B^-1(1 - a/2; x + 1, n - x)), a = 1 - confidence, B^-1 the beta quantile; the lower bound is 0 at x = 0 and the
    upper 1 at x = n. ``x`` and ``n`` may be real (an effective sample size, Korn and Graubard 1998) and arrays of
    one shape (then arrays come back); ``n`` > 0 and 0 <= x <= n."""
    from scipy.special import betaincinv

    xa, na = np.asarray(x, dtype=float), np.asarray(n, dtype=float)
    if np.any(~(na > 0)):
        raise ValueError("the Clopper-Pearson interval needs n > 0")
    if np.any((xa < 0) | (xa > na * (1 + 1e-12))):
        raise ValueError("the Clopper-Pearson interval needs 0 <= x <= n")
    xa = np.minimum(xa, na)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(xa > 0, betaincinv(np.maximum(xa, 1e-300), na - xa + 1.0, alpha / 2.0), 0.0)
        high = np.where(xa < na, betaincinv(xa + 1.0, np.maximum(na - xa, 1e-300), 1.0 - alpha / 2.0), 1.0)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b of paired scores: (concordant - discordant) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2, n1 and
    n2 the pairs tied in x and in y (a pair tied in both counts in both); nan when x or y is constant."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores must be 1-d and of equal length (got {x.shape} and {y.shape})")
    i, j = np.triu_indices(len(x), k=1)
    sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    pairs = len(i)
    denom = math.sqrt(float(pairs - np.count_nonzero(sx == 0)) * float(pairs - np.count_nonzero(sy == 0)))
    return float(np.sum(sx * sy)) / denom if denom > 0 else math.nan


def cohen_kappa(a, b) -> tuple[float, float, int]:
    """(kappa, observed agreement, n) of two raters' labels of the same n items: kappa = (po - pe) / (1 - pe), pe
    from each rater's label frequencies; nan when pe = 1 (both raters gave one and the same label throughout) or
    n = 0."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"two raters must label the same items (got {len(a)} and {len(b)} labels)")
    n = len(a)
    if n == 0:
        return math.nan, math.nan, 0
    po = sum(1 for u, v in zip(a, b) if u == v) / n
    pe = sum((a.count(k) / n) * (b.count(k) / n) for k in set(a) | set(b))
    kappa = (po - pe) / (1.0 - pe) if pe < 1.0 else math.nan
    return kappa, po, n

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
* ``bootstrap_ci``: percentile bootstrap confidence interval of a mean: ``resamples`` resamples of the
  queries with replacement from a fixed seed, drawn exactly as ``scipy.stats.bootstrap`` draws them
  (``rng.integers(0, n, (resamples, n))``), quantiles by linear interpolation; so with the same seed it
  equals ``scipy.stats.bootstrap(..., method='percentile')``.
* ``holm``: Holm's step-down correction of a family of p-values.
"""

from __future__ import annotations

import math

import numpy as np

TOLERANCE = 1e-12


def _pair(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be 1-d and of equal length (got {a.shape} and {b.shape})")
    if len(a) < 2:
        raise ValueError("a paired test needs at least 2 queries")
    return a - b


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
    x = np.asarray(x, dtype=float)
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

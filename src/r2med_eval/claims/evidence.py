"""The tests a claim rests on, over queries, from ``scoring.stats`` (no new paired test, no new interval).

Per-query values are keyed ``(task, query id)``. A benchmark with several tasks weighs each task the same, as its
leaderboard average does: a query of task t weighs ``1 / (T n_t)`` (T tasks, n_t of its queries compared), and the
estimate is the weighted mean. The tests take the per-query statistic scaled by ``N w`` (N queries in all), whose
plain mean is that weighted mean, so that ``stats.randomization_test`` (sign flips of each query's value: flipping a
scaled value is flipping the value) and ``stats.bootstrap_ci`` (queries resampled) apply unchanged; with one task
the scale is 1.

Each test compares an estimate with a boundary. ``paired``: the mean of ``a - factor * b`` against 0 (``factor`` 1:
a difference; 0.9: "a reaches 90% of b"); ``one_sample``: a mean against a constant; ``correlation``: Spearman's rho
of pooled queries against +-c, by Fisher's z with Fieller, Hartley and Pearson's standard error 1.06 / sqrt(n - 3).
Every p-value is two-sided (a one-sided p doubled), so one Holm family holds them all.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..scoring import stats

RANDOMIZATION = "paired randomization test (sign flips), two-sided"
ONE_SAMPLE = "randomization test (sign flips about the boundary), two-sided"
FISHER = "Fisher-z test of Spearman's rho (SE 1.06/sqrt(n-3)), two-sided"


@dataclass
class Test:
    """One test: ``estimate`` against ``boundary``; ``effect`` (with its 95% interval) is what a reader compares."""

    label: str
    runs: list
    measure: str
    n: int
    effect: float
    ci_low: float
    ci_high: float
    estimate: float
    boundary: float
    p: float
    test: str
    p_holm: float = math.nan
    unit: str = "points"  # points: a measure's difference (x 100 when shown); share: a proportion; rho
    detail: dict = field(default_factory=dict)

    def side(self, alpha: float) -> int:
        """+1 (the estimate is above the boundary) or -1 (below) when the Holm-adjusted p is below ``alpha``; 0
        when the test decides nothing."""
        if not self.p_holm < alpha or not math.isfinite(self.estimate) or self.estimate == self.boundary:
            return 0  # no valid test (no p, or a non-finite estimate) decides nothing
        return 1 if self.estimate > self.boundary else -1

    def as_dict(self) -> dict:
        return {k: clean(v) for k, v in asdict(self).items()}


def clean(value):
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def weights(keys) -> np.ndarray:
    """``N w`` of each key (task, query): 1 for every key when there is one task."""
    keys = list(keys)
    per_task: dict = {}
    for task, _ in keys:
        per_task[task] = per_task.get(task, 0) + 1
    n, t = len(keys), len(per_task)
    return np.array([n / (t * per_task[task]) for task, _ in keys], dtype=float)


def _untestable(label, runs, measure, n, test, effect=math.nan, boundary=0.0, skipped: int = 0) -> Test:
    out = Test(label, list(runs), measure, n, effect, math.nan, math.nan, effect, boundary, math.nan, test,
               detail={"note": f"{n} queries" + _skipped_note(skipped) + ": fewer than 2, no test"})
    if skipped:
        out.detail["skipped_not_finite"] = skipped
    return out


def _skipped_note(skipped: int) -> str:
    return f" with finite values ({skipped} left out: not finite)" if skipped else ""


def finite_keys(*values: dict) -> tuple[list, int]:
    """The keys every mapping of ``values`` has, in order, whose values are all finite numbers, and how many of the
    shared keys were left out for a value that is not (NaN, an infinity): a test never sees one (``scoring.stats``
    refuses them), and the count goes into the test's detail."""
    shared = sorted(set(values[0]).intersection(*values[1:]))
    keys = [k for k in shared if all(isinstance(v[k], (int, float)) and math.isfinite(v[k]) for v in values)]
    return keys, len(shared) - len(keys)


def paired(a: dict, b: dict, *, label: str, runs, measure: str, resampling: dict, factor: float = 1.0) -> Test:
    """The weighted mean of ``a - factor b`` over the keys both have with finite values, against 0; the effect is
    ``a - b``."""
    keys, skipped = finite_keys(a, b)
    if len(keys) < 2:
        return _untestable(label, runs, measure, len(keys), RANDOMIZATION, skipped=skipped)
    scale = weights(keys)
    va = np.array([a[k] for k in keys], dtype=float)
    vb = np.array([b[k] for k in keys], dtype=float)
    diff, stat = scale * (va - vb), scale * (va - factor * vb)
    low, high = stats.bootstrap_ci(diff, resamples=resampling["bootstrap"], seed=resampling["seed"])
    p = stats.randomization_test(stat, np.zeros(len(stat)), permutations=resampling["permutations"],
                                 seed=resampling["seed"])
    detail = {"mean_a": float(np.mean(scale * va)), "mean_b": float(np.mean(scale * vb))}
    if factor != 1.0:
        detail["factor"] = factor
    if skipped:
        detail["skipped_not_finite"] = skipped
    return Test(label, list(runs), measure, len(keys), float(np.mean(diff)), low, high, float(np.mean(stat)), 0.0, p,
                RANDOMIZATION, detail=detail)


def one_sample(x: dict, boundary: float, *, label: str, runs, measure: str, resampling: dict,
               unit: str = "points") -> Test:
    """The weighted mean of ``x`` (its finite values) against ``boundary``."""
    keys, skipped = finite_keys(x)
    if len(keys) < 2:
        out = _untestable(label, runs, measure, len(keys), ONE_SAMPLE, boundary=boundary, skipped=skipped)
        out.unit = unit
        return out
    scale = weights(keys)
    vx = np.array([x[k] for k in keys], dtype=float)
    low, high = stats.bootstrap_ci(scale * vx, resamples=resampling["bootstrap"], seed=resampling["seed"])
    centred = scale * (vx - boundary)
    p = stats.randomization_test(centred, np.zeros(len(keys)), permutations=resampling["permutations"],
                                 seed=resampling["seed"])
    mean = float(np.mean(scale * vx))
    return Test(label, list(runs), measure, len(keys), mean, low, high, mean, boundary, p, ONE_SAMPLE, unit=unit,
                detail={"skipped_not_finite": skipped} if skipped else {})


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def correlation(x: dict, y: dict, bound: float, *, label: str, runs, measure: str) -> Test:
    """Spearman's rho of ``x`` and ``y`` over the keys both have, against ``+-bound``: the estimate is |rho| and
    the boundary ``bound``; below means |rho| < bound (equivalence: both one-sided tests), above |rho| > bound."""
    from scipy.stats import spearmanr

    keys, skipped = finite_keys(x, y)
    n = len(keys)
    if n < 4:
        out = _untestable(label, runs, measure, n, FISHER, boundary=bound, skipped=skipped)
        out.unit = "rho"
        out.detail["note"] = f"{n} queries{_skipped_note(skipped)}: fewer than 4, no test"
        return out
    rho = float(spearmanr([x[k] for k in keys], [y[k] for k in keys]).statistic)
    if math.isnan(rho):  # one of them constant: no rank order to correlate
        return Test(label, list(runs), measure, n, rho, math.nan, math.nan, math.nan, bound, math.nan, FISHER,
                    unit="rho", detail={"note": "one of the two is constant over the queries"})
    se = 1.06 / math.sqrt(n - 3)
    z = math.atanh(max(-0.999999, min(0.999999, rho)))
    zb = math.atanh(bound)
    low, high = math.tanh(z - 1.959963984540054 * se), math.tanh(z + 1.959963984540054 * se)
    if abs(rho) < bound:  # both one-sided tests of equivalence: rho < bound and rho > -bound
        one_sided = max(_normal_cdf((z - zb) / se), 1.0 - _normal_cdf((z + zb) / se))
    else:  # |rho| above the bound: the one-sided test on the side rho lies
        one_sided = 1.0 - _normal_cdf((z - zb) / se) if rho > 0 else _normal_cdf((z + zb) / se)
    detail = {"rho_squared": rho * rho, **({"skipped_not_finite": skipped} if skipped else {})}
    return Test(label, list(runs), measure, n, rho, low, high, abs(rho), bound, min(1.0, 2.0 * one_sided), FISHER,
                unit="rho", detail=detail)


def mean_over(values: dict, keys=None) -> float:
    """The task-weighted mean of per-query values (the leaderboard's benchmark average), over the finite ones."""
    keys = [k for k in sorted(values if keys is None else keys) if math.isfinite(values[k])]
    if not keys:
        return math.nan
    return float(np.mean(weights(keys) * np.array([values[k] for k in keys], dtype=float)))


def best(values: dict, candidates) -> tuple[str, dict]:
    """The candidate run with the highest task-weighted mean of its per-query ``values`` (the first in configuration
    order on a tie; a run without a value last), and every candidate's mean."""
    candidates = list(candidates)
    means = {r: mean_over(values[r]) for r in candidates}
    top = max(candidates, key=lambda r: (means[r] == means[r], means[r] if means[r] == means[r] else 0.0,
                                         -candidates.index(r)))
    return top, means


def averaged(runs_values: list[dict]) -> dict:
    """Per key, the mean over the runs that all have it (a group's per-query mean)."""
    if not runs_values:
        return {}
    common = set(runs_values[0]).intersection(*runs_values[1:])
    return {k: sum(v[k] for v in runs_values) / len(runs_values) for k in common}


def holm(tests: list[Test]) -> None:
    """Holm's correction over the tests that have a p-value (``stats.holm``), in place."""
    tested = [t for t in tests if not math.isnan(t.p)]
    for t, adjusted in zip(tested, stats.holm([t.p for t in tested])):
        t.p_holm = adjusted

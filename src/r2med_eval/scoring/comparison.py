"""Every pair of several runs on several measures, tested with ranx's statistical tests, Holm across the family.

The per-query values are r2med-eval's (``metrics.evaluate``: trec_eval's measures, or ir_measures' through
``scoring.irm``), over the judged queries; the tests are ranx 0.3's, under ranx's names: ``student`` (two-sided paired
t-test: ranx's ``paired_student_t_test``, scipy's ``ttest_rel``), ``tukey`` (Tukey's HSD over all the runs of a
measure: ranx's ``tukey_hsd_test``, scipy's ``tukey_hsd``) and ``fisher`` (Fisher's paired randomization test as ranx
computes it: p is the share of ``permutations`` random swaps of each query's two values whose absolute mean difference
reaches the observed one, without the +1 of the pipeline's randomization test). ranx draws Fisher's permutations in a
parallel numba loop whose threads do not share its seeded generator, so the same seed gives other p-values from call
to call; here they come from numpy's generator seeded with ``seed`` (one swap per query and permutation: a sign flip
of its difference), so the same inputs give the same p.

ranx reports each p-value as it is; here the family is every (pair, measure) test of the comparison and Holm's
correction runs over it (``correction="holm"``, the default; ``none`` keeps the tests' p-values). For Tukey's HSD, whose
p-values already allow for the pairs of one measure, Holm then also allows for the measures (a conservative
family-wise bound). A difference is significant when its adjusted p is at most ``alpha`` (ranx's ``max_p``).

:func:`report` builds ranx's own ``Report`` from these figures, so that its table (``to_table``) and its LaTeX table
(``to_latex``: the runs as rows a, b, c, ..., a superscript on a mean for each run it is significantly above, the best
mean of each measure in bold) are ranx's, with the measures under r2med-eval's names and Holm's decisions.
"""

from __future__ import annotations

from ..errors import InputError
from .stats import holm

TESTS = ("student", "fisher", "tukey")
CORRECTIONS = ("holm", "none")


def pairs(values: dict, measures: list[str], test: str = "student", alpha: float = 0.05, correction: str = "holm",
          permutations: int = 1000, seed: int = 42) -> list[dict]:
    """One row per pair of runs (in the given order, each pair once) and measure: ``a``, ``b``, ``measure``,
    ``mean_a``, ``mean_b``, ``n_queries``, ``p`` (ranx's test), ``p_adjusted`` (Holm over every row, or ``p``),
    ``significant``. ``values``: {run: {measure: per-query values, the same queries in the same order}}."""
    import numpy as np
    from ranx.statistical_tests import compute_statistical_significance

    if test not in TESTS:
        raise InputError(f"unknown test {test!r}.", fix="use one of ranx's: " + ", ".join(TESTS) + ".")
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}.", fix="use holm or none.")
    names = list(values)
    if len(names) < 2:
        raise InputError(f"a comparison needs at least 2 runs, got {len(names)}.", fix="name two or more runs.")
    scores = {r: {m: np.asarray(values[r][m], dtype=np.float64) for m in measures} for r in names}
    n = {len(v) for r in names for v in scores[r].values()}
    if len(n) != 1 or n.pop() < 2:
        raise InputError("the runs' per-query values do not cover the same 2 or more queries.",
                         fix="score every run on the same judged queries.")
    if test == "fisher":
        found = {(a, b): {m: {"p_value": fisher(scores[a][m], scores[b][m], permutations, seed)} for m in measures}
                 for i, a in enumerate(names) for b in names[i + 1:]}
    else:
        found = compute_statistical_significance(model_names=names, metric_scores=scores, stat_test=test,
                                                 n_permutations=permutations, max_p=alpha, random_seed=seed)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for m in measures:
                rows.append({"a": a, "b": b, "measure": m, "mean_a": float(scores[a][m].mean()),
                             "mean_b": float(scores[b][m].mean()), "n_queries": len(scores[a][m]),
                             "p": float(found[a, b][m]["p_value"])})
    adjusted = holm([r["p"] for r in rows]) if correction == "holm" else [r["p"] for r in rows]
    for row, p in zip(rows, adjusted):
        row["p_adjusted"] = p
        row["significant"] = p <= alpha
    return rows


def fisher(a, b, permutations: int = 1000, seed: int = 42, chunk: int = 1000) -> float:
    """ranx's Fisher randomization test of paired values, drawn from numpy's generator seeded with ``seed``: the
    share of random swaps (sign flips of each difference) whose |mean difference| is at least the observed one."""
    import numpy as np

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    observed = abs(np.asarray(a, dtype=np.float64).mean() - np.asarray(b, dtype=np.float64).mean())
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < permutations:
        size = min(chunk, permutations - done)
        signs = rng.integers(0, 2, size=(size, len(d)), dtype=np.int8).astype(np.float64) * 2.0 - 1.0
        hits += int(np.count_nonzero(np.abs(signs @ d) / len(d) >= observed))
        done += size
    return hits / permutations


def report(rows: list[dict], names: list[str], measures: list[str], test: str, alpha: float, digits: int = 4):
    """ranx's ``Report`` of the rows (means, Holm's decisions), its measures labelled as given."""
    from ranx.data_structures import FrozensetDict, Report

    class _Report(Report):
        def get_metric_label(self, m):
            return m

    results = {r: {} for r in names}
    comparisons = FrozensetDict()
    wtl: dict = {}
    for row in rows:
        results[row["a"]][row["measure"]] = row["mean_a"]
        results[row["b"]][row["measure"]] = row["mean_b"]
        key = frozenset([row["a"], row["b"]])
        if key not in comparisons:
            comparisons[key] = {}
        comparisons[key][row["measure"]] = {"p_value": row["p_adjusted"], "significant": row["significant"]}
    results = {r: {m: results[r][m] for m in measures} for r in names}
    return _Report(model_names=names, results=results, comparisons=comparisons, metrics=measures, max_p=alpha,
                   win_tie_loss=wtl, rounding_digits=digits, show_percentages=False, stat_test=test)


def to_csv(rows: list[dict]) -> str:
    import csv
    import io

    out = io.StringIO()
    fields = ["a", "b", "measure", "mean_a", "mean_b", "n_queries", "p", "p_adjusted", "significant"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()

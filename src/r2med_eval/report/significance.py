"""The significance table: every run against the configured baseline, per (benchmark, task).

Reads the per-query TSVs written by ``score_run`` (``results/per_query/{benchmark}/{task}/{model}.tsv``,
header ``query_id`` then one column per metric). For each task and each run other than the baseline:
the paired t-test and the paired randomization test over the queries both runs judged (normally all
judged queries; where the query sets differ only the common ones are compared, and the table and log
say how many), Holm's correction within a family of comparisons (``HOLM_FAMILIES``: by default ``benchmark``, every
(run, task) comparison of one benchmark; one family per test; no family spans benchmarks, so the marks of a
benchmark do not change with what else is selected), and a 95% percentile bootstrap confidence interval of each
run's mean over its own judged queries (the leaderboard's value). See ``stats`` for the exact procedures.
"""

from __future__ import annotations

import csv
import io as _io
import logging
import math
from pathlib import Path

from ..errors import InputError
from ..io import finite_number
from ..scoring import stats
from .tables import md_escape, metric_label

log = logging.getLogger(__name__)

MARK_TTEST = "*"
MARK_RANDOMIZATION = "\u2020"  # dagger
FIELDS = ["benchmark", "task", "model", "baseline", "metric", "n_queries", "n_model_queries", "mean", "ci_low",
          "ci_high", "mean_common", "baseline_mean_common", "diff", "t", "p_ttest", "p_ttest_holm",
          "p_randomization", "p_randomization_holm", "significant", "note"]


# Holm's families (``report.holm``): which comparisons are corrected together, never across benchmarks (a benchmark's
# marks stay as its complete scoring gave them whatever else a run selects). With ``run`` a run's marks change only
# when its own tasks do.
HOLM_FAMILIES = {"benchmark": "each benchmark's (run, task) comparisons",
                 "task": "the runs compared on each task",
                 "run": "each run's comparisons on the tasks of its benchmark"}
DEFAULT_FAMILY = "benchmark"


def holm_key(row: dict, family: str):
    """The family of a row's comparison."""
    if family not in HOLM_FAMILIES:
        raise ValueError(f"unknown Holm family {family!r} (one of {', '.join(HOLM_FAMILIES)})")
    return {"benchmark": (row["benchmark"],), "task": (row["benchmark"], row["task"]),
            "run": (row["benchmark"], row["model"])}[family]


def legend(alpha: float, baseline: str, permutations: int, family: str = DEFAULT_FAMILY) -> str:
    return (f"{MARK_TTEST} paired t-test, {MARK_RANDOMIZATION} paired randomization test "
            f"({permutations} sign flips): differs from the baseline {baseline} at Holm-adjusted p < {alpha:g} "
            f"(Holm over {HOLM_FAMILIES[family]})")


def read_per_query(path, metric: str) -> dict[str, float]:
    """query id -> value of ``metric`` from a per-query TSV; a missing metric stops with the file named."""
    path = Path(path)
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if not header or header[0] != "query_id":
            raise InputError("not a per-query metrics file (first column must be query_id).", path=path, line=1,
                             fix="point the report at results/per_query/... files written by score_run.")
        if metric not in header:
            raise InputError(f"metric {metric!r} is not computed (have: {', '.join(header[1:])}).", path=path,
                             line=1, fix="set leaderboard.metric in config.yaml to one of those names.")
        col = header.index(metric)
        out: dict[str, float] = {}
        for lineno, line in enumerate(handle, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != len(header):
                raise InputError(f"expected {len(header)} columns, found {len(parts)}.", path=path, line=lineno,
                                 fix="re-run score_run for this run.")
            out[parts[0]] = finite_number(parts[col], path=path, line=lineno, column=metric,
                                          fix="re-run score_run for this run (delete the file).")
    return out


def compute(files, baseline: str, metric: str = "ndcg_at_10", permutations: int = 10000, resamples: int = 10000,
            seed: int = 0, alpha: float = 0.05, family: str = DEFAULT_FAMILY) -> list[dict]:
    """The rows of the significance table (one per run and task, baseline rows included). ``files``: one
    (benchmark, task, model, per-query TSV path) per scored run; ``family``: Holm's (``HOLM_FAMILIES``)."""
    tasks: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for bench, task, model, path in files:
        tasks.setdefault((bench, task), {})[model] = read_per_query(path, metric)
    return compute_values(tasks, baseline, metric, permutations, resamples, seed, alpha, family)


def stored(value: float) -> float:
    """A per-query value as ``score_run``'s per-query TSV stores it (6 decimals), which the tests read."""
    return float(f"{value:.6f}")


def compute_values(tasks: dict, baseline: str, metric: str = "ndcg_at_10", permutations: int = 10000,
                   resamples: int = 10000, seed: int = 0, alpha: float = 0.05,
                   family: str = DEFAULT_FAMILY) -> list[dict]:
    """:func:`compute` on the values themselves: ``tasks`` {(benchmark, task): {model: {query id: value}}}."""
    holm_key({"benchmark": "", "task": "", "model": ""}, family)  # an unknown family stops before any test
    if not any(baseline in models for models in tasks.values()):
        known = sorted({m for models in tasks.values() for m in models})
        raise InputError(f"the baseline {baseline!r} is not among the scored runs ({', '.join(known)}).",
                         fix="set report.baseline in config.yaml to one of them.")
    rows = []
    for (bench, task), models in sorted(tasks.items()):
        base = models.get(baseline)
        if base is None:
            log.warning("%s/%s: the baseline %s has no run here; no tests for this task", bench, task, baseline)
        for model in sorted(models, key=lambda m: (m != baseline, m)):
            values = models[model]
            mine = [values[q] for q in sorted(values)]
            low, high = stats.bootstrap_ci(mine, resamples=resamples, seed=seed) if mine else (math.nan, math.nan)
            row = {"benchmark": bench, "task": task, "model": model, "baseline": baseline, "metric": metric,
                   "n_model_queries": len(values), "mean": math.fsum(mine) / len(mine) if mine else math.nan,
                   "ci_low": low, "ci_high": high, "note": ""}
            if base is None:
                row["note"] = f"baseline {baseline} not run on this task"
            elif model == baseline:
                row["n_queries"] = len(values)
                row["note"] = "baseline"
            else:
                common = sorted(set(values) & set(base))
                row["n_queries"] = len(common)
                if len(common) != len(values) or len(common) != len(base):
                    note = (f"query sets differ: {model} has {len(values)} judged queries, {baseline} {len(base)}; "
                            f"compared on the {len(common)} common")
                    log.warning("%s/%s: %s", bench, task, note)
                    row["note"] = note
                a = [values[q] for q in common]
                b = [base[q] for q in common]
                if len(common) >= 2:
                    row["mean_common"] = math.fsum(a) / len(a)
                    row["baseline_mean_common"] = math.fsum(b) / len(b)
                    row["diff"] = row["mean_common"] - row["baseline_mean_common"]
                    row["t"], row["p_ttest"] = stats.paired_ttest(a, b)
                    row["p_randomization"] = stats.randomization_test(a, b, permutations=permutations, seed=seed)
                else:
                    row["note"] = (row["note"] + "; " if row["note"] else "") + \
                        f"only {len(common)} common queries: no test"
                    log.warning("%s/%s: %s and %s share %d queries; no test", bench, task, model, baseline,
                                len(common))
            rows.append(row)
    for key in ("p_ttest", "p_randomization"):
        families: dict[tuple, list[dict]] = {}
        for r in rows:
            if r.get(key) is not None:
                families.setdefault(holm_key(r, family), []).append(r)
        for tested in families.values():
            for r, adj in zip(tested, stats.holm([r[key] for r in tested])):
                r[key + "_holm"] = adj
    for r in rows:
        mark = ""
        if r.get("p_ttest_holm") is not None and r["p_ttest_holm"] < alpha:
            mark += MARK_TTEST
        if r.get("p_randomization_holm") is not None and r["p_randomization_holm"] < alpha:
            mark += MARK_RANDOMIZATION
        r["significant"] = mark
    return rows


def _num(v, digits: int = 6) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.{digits}f}"
    return str(v)


def to_csv(rows) -> str:
    buf = _io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(FIELDS)
    for r in rows:
        writer.writerow([_num(r.get(f)) for f in FIELDS])
    return buf.getvalue()


def read_csv(path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def marks(rows) -> dict[tuple[str, str], dict[str, str]]:
    """{(benchmark, task): {model: marker}} from the rows (dicts from compute or read_csv)."""
    out: dict = {}
    for r in rows:
        if r.get("significant"):
            out.setdefault((r["benchmark"], r["task"]), {})[r["model"]] = r["significant"]
    return out


def intervals(rows, benchmark: str) -> dict[tuple[str, str], tuple[float, float, int]]:
    """{(task, model): (95% CI low, high, queries)} of one benchmark from the rows (dicts from compute or
    read_csv); the interval of each run's mean over its own judged queries."""
    return {(r["task"], r["model"]): (float(r["ci_low"]), float(r["ci_high"]), int(r["n_model_queries"]))
            for r in rows if r["benchmark"] == benchmark and r["ci_low"] not in ("", None)}


def to_markdown(rows, baseline: str, alpha: float, permutations: int, resamples: int,
                family: str = DEFAULT_FAMILY) -> str:
    def p(v):
        return "" if v is None else ("<0.0001" if v < 1e-4 else f"{v:.4f}")

    metric = rows[0]["metric"] if rows else ""
    lines = [f"# Significance against {md_escape(baseline)} ({metric_label(metric)} x 100)", "",
             md_escape(legend(alpha, baseline, permutations, family)) + ".",
             f"95% CI: percentile bootstrap over queries, {resamples} resamples. n = queries compared "
             "(judged by both runs).", "",
             "| benchmark/task | model | n | mean [95% CI] | diff | p t-test | p Holm | p rand. | p Holm | sig |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ci = f"{r['mean'] * 100:.2f} [{r['ci_low'] * 100:.2f}, {r['ci_high'] * 100:.2f}]"
        diff = "" if r.get("diff") is None else f"{r['diff'] * 100:+.2f}"
        lines.append(f"| {md_escape(r['benchmark'])}/{md_escape(r['task'])} | {md_escape(r['model'])} | "
                     f"{r.get('n_queries', '')} | {ci} | {diff} | {md_escape(p(r.get('p_ttest')))} | "
                     f"{md_escape(p(r.get('p_ttest_holm')))} | {md_escape(p(r.get('p_randomization')))} | "
                     f"{md_escape(p(r.get('p_randomization_holm')))} | {md_escape(r['significant'])} |")
    notes = [f"- {md_escape(r['benchmark'] + '/' + r['task'] + ' ' + r['model'] + ': ' + r['note'])}" for r in rows
             if r["note"] and r["note"] != "baseline"]
    if notes:
        lines += ["", "Notes:", ""] + notes
    return "\n".join(lines) + "\n"

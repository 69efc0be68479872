"""Figures (matplotlib, Agg backend), each written as PNG and SVG.

Deterministic: a fixed ``svg.hashsalt`` (SVG element ids), no date in the SVG metadata, no timestamps
in the PNG; the same inputs give byte-identical files on the same matplotlib version. Plots hold ids,
names and numbers only (never document or query text).
"""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

from .errors import InputError
from .io import atomic_path
from .tables import metric_label

log = logging.getLogger(__name__)

CLINIQ_FIELDS = ["model", "setting", "group", "metric", "value", "n_queries"]
CLINIQ_SETTINGS = ("multi", "single")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.hashsalt": "r2med-eval", "svg.fonttype": "path", "font.size": 9,
                                "axes.spines.top": False, "axes.spines.right": False})
    return plt


def save(fig, png, svg) -> None:
    """Write ``fig`` to ``png`` and ``svg`` atomically, without dates; close it."""
    plt = _pyplot()
    check_panels(fig)
    with atomic_path(png, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    with atomic_path(svg, suffix=".svg") as tmp:
        fig.savefig(tmp, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)


def _models_tasks(table: dict, benchmark: str) -> tuple[list[str], list[str]]:
    tasks = sorted({t for row in table.values() for b, t in row if b == benchmark})
    models = sorted(m for m, row in table.items() if any(b == benchmark for b, _ in row))
    if not tasks:
        raise InputError(f"no scored runs for benchmark {benchmark!r}.", fix="check benchmarks_to_run.")
    return models, tasks


def panel_points(ax) -> int:
    """How many finite data points a panel draws (bars, markers, image cells); reference lines do not count."""
    import numpy as np

    n = sum(1 for p in ax.patches if hasattr(p, "get_height") and math.isfinite(p.get_height()))
    n += sum(len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets") and c.get_array() is None)
    n += sum(int(np.isfinite(np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), np.nan)).sum())
             for im in ax.images)
    n += sum(int(np.isfinite(np.asarray(line.get_ydata(), dtype=float)).sum()) for line in ax.lines
             if not str(line.get_label()).startswith("_"))
    return n


def check_panels(fig) -> None:
    """Every panel of ``fig`` (colour bars aside) draws data: an empty panel is a bug, not a figure."""
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        if panel_points(ax) == 0:
            raise ValueError(f"plot panel {ax.get_title()!r} has no data")


def by_task(table: dict, benchmark: str, metric: str, png, svg) -> None:
    """Grouped bars: a group per task (and the average when there are several tasks), a bar per model."""
    plt = _pyplot()
    models, tasks = _models_tasks(table, benchmark)
    groups = tasks + (["avg"] if len(tasks) > 1 else [])

    def value(model, group):
        if group == "avg":
            vals = [table[model].get((benchmark, t)) for t in tasks]
            return math.nan if any(v is None for v in vals) else math.fsum(vals) / len(vals)
        v = table[model].get((benchmark, group))
        return math.nan if v is None else v

    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 + len(groups) * (0.4 + 0.22 * len(models))), 3.8))
    cmap = plt.get_cmap("tab20" if len(models) > 10 else "tab10")
    for i, model in enumerate(models):
        xs = [g + (i - (len(models) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [value(model, g) * 100 for g in groups], width=width, label=model, color=cmap(i % cmap.N))
    ax.set_xticks(range(len(groups)), groups, rotation=30 if len(groups) > 4 else 0, ha="right" if len(groups) > 4
                  else "center")
    ax.set_ylabel(f"{metric_label(metric)} x 100")
    ax.set_title(f"{benchmark}: {metric_label(metric)} by task and model")
    ax.legend(fontsize=7, frameon=False, bbox_to_anchor=(1.01, 1), loc="upper left")
    save(fig, png, svg)


def heatmap(table: dict, benchmark: str, metric: str, png, svg) -> None:
    """Models (rows, best average first) by tasks (columns), value annotated in every cell."""
    import numpy as np

    plt = _pyplot()
    models, tasks = _models_tasks(table, benchmark)
    grid = np.array([[table[m].get((benchmark, t), math.nan) for t in tasks] for m in models], dtype=float)
    means = [float(np.mean(row[np.isfinite(row)])) if np.isfinite(row).any() else -math.inf for row in grid]
    order = sorted(range(len(models)), key=lambda i: (-means[i], models[i]))
    grid = grid[order]
    models = [models[i] for i in order]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.8 + 0.9 * len(tasks)), max(2.5, 0.9 + 0.35 * len(models))))
    image = ax.imshow(np.ma.masked_invalid(grid * 100), cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(tasks)), tasks, rotation=30 if len(tasks) > 3 else 0,
                  ha="right" if len(tasks) > 3 else "center")
    ax.set_yticks(range(len(models)), models)
    finite = grid[np.isfinite(grid)]
    mid = float(np.mean([finite.min(), finite.max()])) * 100 if finite.size else 0.0
    for i in range(len(models)):
        for j in range(len(tasks)):
            v = grid[i, j]
            text = "-" if math.isnan(v) else f"{v * 100:.1f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if not math.isnan(v) and v * 100 > mid else "white")
    fig.colorbar(image, ax=ax, label=f"{metric_label(metric)} x 100")
    ax.set_title(f"{benchmark}: {metric_label(metric)}, model by task")
    save(fig, png, svg)


def rerank_groups(lineage: dict) -> dict:
    """{(input run, reranker): {depth: run name}} from the registry's lineage {run name: {run, reranker, depth}}."""
    out: dict = {}
    for name, job in lineage.items():
        out.setdefault((job["run"], job["reranker"]), {})[int(job["depth"])] = name
    return out


def rerank_depth(table: dict, benchmark: str, metric: str, png, svg, lineage: dict) -> bool:
    """The benchmark's average metric of each reranked run against its depth (depth 0 = the input run
    itself); one line per (input run, reranker). False (nothing written) when there are no reranked runs."""
    plt = _pyplot()
    models, tasks = _models_tasks(table, benchmark)
    groups = rerank_groups({n: j for n, j in lineage.items() if n in models})
    if not groups:
        return False

    def avg(model):
        vals = [table.get(model, {}).get((benchmark, t)) for t in tasks]
        return math.nan if any(v is None for v in vals) else math.fsum(vals) / len(vals) * 100

    depths = sorted({d for g in groups.values() for d in g})
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for (run, reranker), by_depth in sorted(groups.items()):
        xs = [0] + [depths.index(d) + 1 for d in sorted(by_depth)]
        ys = [avg(run)] + [avg(by_depth[d]) for d in sorted(by_depth)]
        ax.plot(xs, ys, marker="o", label=f"{run} reranked by {reranker}")
    ax.set_xticks(range(len(depths) + 1), ["no rerank"] + [f"top {d}" for d in depths])
    ax.set_xlabel("reranking depth")
    ax.set_ylabel(f"{metric_label(metric)} x 100" + (" (mean over tasks)" if len(tasks) > 1 else ""))
    ax.set_title(f"{benchmark}: reranking depth")
    ax.legend(fontsize=7, frameon=False)
    save(fig, png, svg)
    return True


def scatter(per_task: dict, name_a: str, name_b: str, benchmark: str, metric: str, png, svg) -> dict:
    """Per-query scatter of two runs: ``per_task`` = {task: ({qid: value of a}, {qid: value of b})}; only
    queries judged for both are drawn (counted). Returns the counts."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.4))
    counts = {"queries": 0, "a_better": 0, "b_better": 0, "ties": 0, "only_one": 0}
    cmap = plt.get_cmap("tab10")
    for i, task in enumerate(sorted(per_task)):
        a, b = per_task[task]
        common = sorted(set(a) & set(b))
        counts["only_one"] += len(set(a) ^ set(b))
        xs = [a[q] * 100 for q in common]
        ys = [b[q] * 100 for q in common]
        counts["queries"] += len(common)
        counts["a_better"] += sum(1 for x, y in zip(xs, ys) if x > y)
        counts["b_better"] += sum(1 for x, y in zip(xs, ys) if y > x)
        counts["ties"] += sum(1 for x, y in zip(xs, ys) if x == y)
        ax.scatter(xs, ys, s=14, alpha=0.7, label=f"{task} ({len(common)})", color=cmap(i % cmap.N),
                   edgecolors="none")
    ax.plot([0, 100], [0, 100], color="grey", linewidth=0.8, linestyle="--", label="_diagonal")
    ax.set_xlim(-3, 103)
    ax.set_ylim(-3, 103)
    ax.set_aspect("equal")
    ax.set_xlabel(f"{name_a}: {metric_label(metric)} x 100")
    ax.set_ylabel(f"{name_b}: {metric_label(metric)} x 100")
    ax.set_title(f"{benchmark}: per query ({counts['queries']}); {name_a} better {counts['a_better']}, "
                 f"{name_b} better {counts['b_better']}, ties {counts['ties']}", fontsize=8)
    if len(per_task) > 1:
        ax.legend(fontsize=7, frameon=False)
    save(fig, png, svg)
    return counts


def read_cliniq(path) -> list[dict]:
    """Rows of a CliniQ breakdown CSV (header model,setting,group,metric,value,n_queries), validated."""
    path = Path(path)
    rows = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != CLINIQ_FIELDS:
            raise InputError(f"header {header!r} is not {','.join(CLINIQ_FIELDS)}.", path=path, line=1,
                             fix="write the CliniQ breakdown in the long format.")
        for lineno, parts in enumerate(reader, start=2):
            if not parts:
                continue
            if len(parts) != len(CLINIQ_FIELDS):
                raise InputError(f"expected {len(CLINIQ_FIELDS)} columns, found {len(parts)}.", path=path,
                                 line=lineno, fix="one row per model, setting, group and metric.")
            row = dict(zip(CLINIQ_FIELDS, parts))
            if row["setting"] not in CLINIQ_SETTINGS:
                raise InputError(f"setting {row['setting']!r} is not one of {', '.join(CLINIQ_SETTINGS)}.",
                                 path=path, line=lineno, fix="use multi or single.")
            try:
                row["value"] = float(row["value"]) if row["value"] != "" else math.nan  # nothing scored
                row["n_queries"] = int(row["n_queries"])
            except ValueError:
                raise InputError("value must be a number and n_queries an integer.", path=path, line=lineno,
                                 fix="write numbers.") from None
            rows.append(row)
    if not rows:
        raise InputError("the file holds no rows.", path=path, fix="check the CliniQ scoring step.")
    return rows


def cliniq_breakdown(path, what: str, benchmark: str, png, svg) -> None:
    """CliniQ by match type or by query type: a row of panels per setting, a panel per metric of that setting
    (single- and multi-patient measure different metrics), grouped bars (group x model) x 100, the number of
    queries of each group under its label. Groups nothing was scored on are left out (logged)."""
    plt = _pyplot()
    rows = read_cliniq(path)
    settings = [s for s in CLINIQ_SETTINGS if any(r["setting"] == s for r in rows)]
    models = sorted({r["model"] for r in rows})
    panels = []
    for setting in settings:
        metrics = list(dict.fromkeys(r["metric"] for r in rows if r["setting"] == setting))
        for metric in metrics:
            sub = [r for r in rows if r["setting"] == setting and r["metric"] == metric]
            values = {(r["model"], r["group"]): r for r in sub if math.isfinite(r["value"])}
            groups = sorted({g for _, g in values}, key=lambda g: (g != "all", g))
            empty = sorted({r["group"] for r in sub} - set(groups))
            if empty:
                log.info("%s-patient %s: nothing scored for %s (not drawn)", setting, metric, ", ".join(empty))
            if groups:
                panels.append((setting, metric, groups, values))
    if not panels:
        raise InputError(f"nothing was scored in {path}.", path=path, fix="check the CliniQ scoring step.")
    ncols = max(sum(1 for p in panels if p[0] == s) for s in settings)
    nrows = len({p[0] for p in panels})
    most = max(len(p[2]) for p in panels)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(max(4.5, (1.0 + 0.45 * most * max(1, len(models)) ** 0.5) * ncols),
                                      3.4 * nrows))
    cmap = plt.get_cmap("tab10")
    placed = {s: 0 for s in settings}
    row_of = {s: i for i, s in enumerate(dict.fromkeys(p[0] for p in panels))}
    for setting, metric, groups, values in panels:
        ax = axes[row_of[setting]][placed[setting]]
        placed[setting] += 1
        width = 0.8 / max(1, len(models))
        for i, model in enumerate(models):
            xs = [g + (i - (len(models) - 1) / 2) * width for g in range(len(groups))]
            ys = [values[(model, grp)]["value"] * 100 if (model, grp) in values else math.nan for grp in groups]
            ax.bar(xs, ys, width=width, label=model, color=cmap(i % cmap.N))
        n = {grp: max(values[(m, grp)]["n_queries"] for m in models if (m, grp) in values) for grp in groups}
        ax.set_xticks(range(len(groups)), [f"{g} (n={n[g]})" for g in groups], fontsize=7, rotation=30, ha="right",
                      rotation_mode="anchor")
        ax.set_title(f"{setting}-patient: {metric_label(metric)}", fontsize=9)
        ax.set_ylabel(f"{metric_label(metric)} x 100")
    for setting, row in row_of.items():
        for j in range(placed[setting], ncols):
            axes[row][j].remove()
    first = next(iter(row_of))
    axes[0][placed[first] - 1].legend(fontsize=7, frameon=False, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.suptitle(f"{benchmark}: by {what.replace('_', ' ')}")
    fig.tight_layout()
    save(fig, png, svg)


def cliniq_completion(path, benchmark: str, png, svg) -> None:
    """CliniQ's judgment completion: a panel per multi-patient figure, each system's figure over all queries x 100
    with CliniQ's judgments (original) beside the completed one; a move above the threshold is marked with a dagger
    over the pair."""
    plt = _pyplot()
    with open(path, encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["group"] == "all"]
    if not rows:
        raise InputError("no row of the group 'all'.", path=path, fix="check rule cliniq_completion_rescore.")
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    index = {(r["model"], r["metric"]): r for r in rows}
    fig, axes = plt.subplots(1, len(metrics), squeeze=False,
                             figsize=(max(6.0, (0.9 + 0.32 * len(models)) * len(metrics)), 3.6))
    cmap = plt.get_cmap("tab10")
    for ax, metric in zip(axes[0], metrics):
        xs = range(len(models))
        for k, (column, label) in enumerate((("original", "CliniQ's judgments"), ("completed", "completed"))):
            ys = [float(index[(m, metric)][column]) * 100 if index[(m, metric)][column] else math.nan for m in models]
            ax.bar([x + (k - 0.5) * 0.4 for x in xs], ys, width=0.4, label=label, color=cmap(k))
        for x, m in zip(xs, models):
            if index[(m, metric)]["moved"] == "1":
                top = max(float(index[(m, metric)][c] or 0) for c in ("original", "completed")) * 100
                ax.annotate("\u2020", (x, top), ha="center", va="bottom", fontsize=9)
        ax.set_xticks(list(xs), models, fontsize=7, rotation=30, ha="right", rotation_mode="anchor")
        ax.set_title(metric_label(metric), fontsize=9)
        ax.set_ylabel(f"{metric_label(metric)} x 100")
    axes[0][-1].legend(fontsize=7, frameon=False, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.suptitle(f"{benchmark}: multi-patient figures, CliniQ's judgments and completed (\u2020: moved more than the "
                 "threshold)")
    fig.tight_layout()
    save(fig, png, svg)

"""The leaderboard's figures of a benchmark, each written as PNG and SVG (``report.figure``): bars by task,
the heatmap of runs by tasks, the reranking depth, the per-query scatter of two runs. The run rows follow the
leaderboard's order.
"""

from __future__ import annotations

import logging
import math

from ..errors import InputError
from . import palette as pal
from .figure import (
    INK,
    LINESTYLES,
    WIDTH_IN,
    axis_top,
    bar_style,
    label_width,
    layout,
    panel_grid,
    pyplot,
    run_gid,
    save,
    text_inches,
    value_cells,
)
from .tables import metric_label

log = logging.getLogger(__name__)


def leaderboard_order(table: dict, benchmark: str) -> tuple[list[str], list[str], list[list]]:
    """Runs in the leaderboard's order, the benchmark's tasks, and the leaderboard's rows [run, tasks..., avg]."""
    from .leaderboard import build_benchmark

    try:
        header, rows = build_benchmark(table, benchmark)
    except ValueError:
        raise InputError(f"no scored runs for benchmark {benchmark!r}.", fix="check benchmarks_to_run.") from None
    return [r[0] for r in rows], header[1:-1], rows


def by_task(table: dict, benchmark: str, metric: str, png, svg, palette: dict, ci: dict | None = None) -> None:
    """A panel per task (and the mean over tasks when there are several), a horizontal bar per run in the
    leaderboard's order, in the run's style, with its 95% bootstrap interval (``ci[(task, run)] = (low, high,
    queries)``, from the significance table) as an error bar; the value axis starts at 0 and is the same in
    every panel."""
    plt = pyplot()
    ci = ci or {}
    runs, tasks, rows = leaderboard_order(table, benchmark)
    styles = pal.styles_of(palette, runs)
    panels = tasks + (["mean over tasks"] if len(tasks) > 1 and any(r[-1] is not None for r in rows) else [])
    label = label_width(runs)
    nrows, ncols = panel_grid(len(panels), max(1, int((WIDTH_IN - label) // 1.0)))
    panel_w = max(1.0, min(2.6, (WIDTH_IN - label) / ncols))
    top = axis_top([v * 100 for r in rows for v in r[1:] if v is not None]
               + [ci[k][1] * 100 for k in ci if k[1] in styles])
    height = 0.8 + 0.13 * len(runs)  # a panel: its title, axis and a row per run
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, sharex=True,
                             figsize=(min(WIDTH_IN, label + panel_w * ncols), 0.6 + nrows * height))
    for p, name in enumerate(panels):
        ax = axes[p // ncols][p % ncols]
        j = p + 1 if name != "mean over tasks" else len(tasks) + 1
        drawn = [(i, row[0], row[j]) for i, row in enumerate(rows) if row[j] is not None]
        look = [bar_style(styles[r]) for _, r, _ in drawn]
        bars = ax.barh([i for i, _, _ in drawn], [v * 100 for _, _, v in drawn], height=0.72,
                       **{k: [x[k] for x in look] for k in look[0]})
        for bar, (_, run, _) in zip(bars, drawn):
            bar.set_gid(run_gid(fig, run))
        whiskers = [(i, v, ci[(name, r)]) for i, r, v in drawn if (name, r) in ci]
        counts = {n for _, _, (_, _, n) in whiskers}
        if whiskers:  # one call for the panel: an error bar per run costs seconds at 60 runs
            ax.errorbar([v * 100 for _, v, _ in whiskers], [i for i, _, _ in whiskers],
                        xerr=[[max(0.0, v - lo) * 100 for _, v, (lo, _, _) in whiskers],
                              [max(0.0, hi - v) * 100 for _, v, (_, hi, _) in whiskers]], fmt="none", ecolor=INK,
                        elinewidth=0.7, capsize=1.6, capthick=0.7, label="_ci")
        ax.set_title(name + (f"\n(n={counts.pop()})" if len(counts) == 1 else "\n"), fontsize=7.5)
        ax.set_xlim(0, top)
        ax.grid(axis="x", color="#dddddd", linewidth=0.5)
        ax.set_axisbelow(True)
        ax.tick_params(axis="x", labelbottom=True)
        if p // ncols == nrows - 1 or p + ncols >= len(panels):
            ax.set_xlabel(f"{metric_label(metric)} x 100")
        # the run names once per row of panels (ticks on every panel cost seconds at 60 runs)
        ax.set_yticks(range(len(runs)), runs) if p % ncols == 0 else ax.set_yticks([])
        ax.set_ylim(len(runs) - 0.4, -0.6)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].remove()
    intervals = "95% bootstrap CI over queries" + ("; the mean over tasks has none" if len(tasks) > 1 else "")
    layout(fig, f"{benchmark}: {metric_label(metric)} x 100 by task ({intervals})")
    save(fig, png, svg)


def heatmap(table: dict, benchmark: str, metric: str, png, svg) -> None:
    """Runs (rows, leaderboard order) by tasks (columns, then the mean over tasks), the value in every cell."""
    import numpy as np

    plt = pyplot()
    runs, tasks, rows = leaderboard_order(table, benchmark)
    columns = tasks + (["mean"] if len(tasks) > 1 else [])
    grid = np.array([[math.nan if v is None else v * 100 for v in r[1:1 + len(columns)]] for r in rows], dtype=float)
    label = label_width(runs)
    cell = max(0.3, min(0.62, (WIDTH_IN - label - 0.15) / len(columns)))
    widest = max(text_inches(c) for c in columns)
    rotate = widest > cell - 0.04
    head = 0.45 + (widest * 0.7 if rotate else 0.15)
    fig, ax = plt.subplots(figsize=(min(WIDTH_IN, label + cell * len(columns) + 0.15),
                                    head + 0.75 + 0.17 * len(runs)))
    image = value_cells(ax, grid, axis_top(grid[np.isfinite(grid)].tolist()), 6.5, missing="\u2013")
    ax.set_xticks(range(len(columns)), columns, rotation=40 if rotate else 0, ha="left" if rotate else "center",
                  rotation_mode="anchor")
    ax.set_yticks(range(len(runs)), runs)
    if len(columns) > len(tasks):
        ax.axvline(len(tasks) - 0.5, color="white", linewidth=2.5)
    fig.colorbar(image, ax=ax, label=f"{metric_label(metric)} x 100", orientation="horizontal",
                 fraction=0.5 / fig.get_figheight(), pad=0.15 / fig.get_figheight(), aspect=40)
    ax.set_title(f"{benchmark}: {metric_label(metric)} x 100, run by task", pad=8)
    fig.tight_layout()
    save(fig, png, svg)


def _spread(labels, gap: float) -> list:
    """``labels`` [(x, y, text)] with the y of labels at the same x pushed apart to at least ``gap``."""
    out = []
    for x in sorted({x for x, _, _ in labels}):
        last = -math.inf
        for _, y, text in sorted((lab for lab in labels if lab[0] == x), key=lambda lab: lab[1]):
            last = max(y, last + gap)
            out.append((x, last, text))
    return out


def rerank_groups(lineage: dict) -> dict:
    """{(input run, reranker): {depth: run name}} from the registry's lineage {run name: {run, reranker, depth}}."""
    out: dict = {}
    for name, job in lineage.items():
        out.setdefault((job["run"], job["reranker"]), {})[int(job["depth"])] = name
    return out


def rerank_depth(table: dict, benchmark: str, metric: str, png, svg, lineage: dict, palette: dict,
                 ci: dict | None = None) -> bool:
    """A panel per first-stage run: its value without reranking (dotted line, the baseline, with its value) and
    a line per reranker through each reranking depth; every point is a run, drawn in its style, with the change
    against the baseline. The axis starts at 0. With one task the points carry their 95% bootstrap intervals;
    with several they are means over the tasks. False (nothing written) when there are no reranked runs."""
    plt = pyplot()
    ci = ci or {}
    runs, tasks, rows = leaderboard_order(table, benchmark)
    value = {r[0]: r[-1] * 100 for r in rows if r[-1] is not None}  # a run missing a task has no mean
    groups = rerank_groups({n: j for n, j in lineage.items() if n in value and j["run"] in value})
    if not groups:
        return False
    firsts = [r for r in runs if any(r == g[0] for g in groups)]
    rerankers = sorted({g[1] for g in groups})
    depths = sorted({d for g in groups.values() for d in g})
    shown = {r for (run, _), by in groups.items() for r in [run, *by.values()]}
    styles = pal.styles_of(palette, [r for r in runs if r in shown])
    one = len(tasks) == 1

    def interval(run):
        low, high, _ = ci.get((tasks[0], run), (None, None, None)) if one else (None, None, None)
        return None if low is None else (low * 100, high * 100)

    top = axis_top([value[r] for r in shown] + [iv[1] for r in shown if (iv := interval(r))])
    nrows, ncols = panel_grid(len(firsts), 3)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, sharey=True,
                             figsize=(min(WIDTH_IN, max(3.4, 0.6 + 2.05 * ncols)),
                                      1.2 + 0.16 * math.ceil(len(rerankers) / 3) + 2.2 * nrows))
    for p, first in enumerate(firsts):
        ax = axes[p // ncols][p % ncols]
        base = value[first]
        ax.axhline(base, color="#777777", linewidth=0.8, linestyle=(0, (1, 2)), label="_baseline")
        labels = []
        for k, reranker in enumerate(rerankers):
            by = groups.get((first, reranker))
            if not by:
                continue
            pts = [(0, first)] + [(depths.index(d) + 1, by[d]) for d in sorted(by)]
            ax.plot([x for x, _ in pts], [value[r] for _, r in pts], color="#555555", linewidth=1.0,
                    linestyle=LINESTYLES[k % len(LINESTYLES)], label=reranker)
            labels += [(x, value[r], f"{value[r] - base:+.1f}") for x, r in pts[1:]]
        for x, y, text in _spread(labels, gap=0.06 * top):
            ax.text(x + 0.1, y, text, va="center", fontsize=6.5, color=INK)
        for x, run in [(0, first)] + [(depths.index(d) + 1, r) for (f, _), by in groups.items() if f == first
                                      for d, r in by.items()]:
            s = styles[run]
            iv = interval(run)
            if iv:
                ax.errorbar(x, value[run], yerr=[[value[run] - iv[0]], [iv[1] - value[run]]], fmt="none",
                            ecolor=INK, elinewidth=0.7, capsize=2, label="_ci")
            line, = ax.plot([x], [value[run]], linestyle="none", marker=s.marker, markersize=6, color=s.colour,
                            markeredgecolor=INK, markeredgewidth=0.5, label="_run", zorder=3)
            line.set_gid(run_gid(fig, run))
        ax.set_title(f"{first}\n(dotted: no rerank, {base:.1f})")
        ax.set_xticks(range(len(depths) + 1), ["none"] + [f"top {d}" for d in depths])
        ax.set_xlim(-0.3, len(depths) + 0.6)
        ax.set_ylim(0, top)
        ax.set_xlabel("reranking depth")
        ax.grid(axis="y", color="#e5e5e5", linewidth=0.5)
    axes[0][0].set_ylabel(f"{metric_label(metric)} x 100" + ("" if one else " (mean over tasks)"))
    for k in range(len(firsts), nrows * ncols):
        axes[k // ncols][k % ncols].remove()
    handles = [plt.Line2D([], [], color="#555555", linestyle=LINESTYLES[k % len(LINESTYLES)], label=r)
               for k, r in enumerate(rerankers)]
    what = "95% bootstrap CI" if one and ci else f"mean over {len(tasks)} tasks" if not one else "one task"
    layout(fig, f"{benchmark}: {metric_label(metric)} x 100 by reranking depth ({what})",
            legend={"handles": handles, "ncol": min(3, len(handles)), "rows": math.ceil(len(handles) / 3) + 1,
                    "title": "reranker", "title_fontsize": 7},
            note="Each point is a run, in its colour, labelled with its change against the first stage (dotted).")
    save(fig, png, svg)
    return True


def scatter(per_task: dict, name_a: str, name_b: str, benchmark: str, metric: str, png, svg) -> dict:
    """Per-query scatter of two runs, a panel per task: ``per_task`` = {task: ({qid: value of a}, {qid: value of
    b})}; only queries judged for both are drawn (counted). Returns the counts."""
    plt = pyplot()
    tasks = sorted(per_task)
    nrows, ncols = panel_grid(len(tasks), 3)
    side = 3.0 if len(tasks) == 1 else min(2.05, (WIDTH_IN - 0.5) / ncols)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(0.5 + side * ncols, 0.7 + (side + 0.25) * nrows))
    counts = {"queries": 0, "a_better": 0, "b_better": 0, "ties": 0, "only_one": 0}
    for p, task in enumerate(tasks):
        ax = axes[p // ncols][p % ncols]
        a, b = per_task[task]
        common = sorted(set(a) & set(b))
        counts["only_one"] += len(set(a) ^ set(b))
        xs = [a[q] * 100 for q in common]
        ys = [b[q] * 100 for q in common]
        here = {"a": sum(1 for x, y in zip(xs, ys) if x > y), "b": sum(1 for x, y in zip(xs, ys) if y > x)}
        here["ties"] = len(common) - here["a"] - here["b"]
        counts["queries"] += len(common)
        counts["a_better"] += here["a"]
        counts["b_better"] += here["b"]
        counts["ties"] += here["ties"]
        ax.scatter(xs, ys, s=10, alpha=0.5, color=INK, edgecolors="none", label="queries")
        ax.plot([0, 100], [0, 100], color="#999999", linewidth=0.7, linestyle="--", label="_diagonal")
        ax.set_xlim(-3, 103)
        ax.set_ylim(-3, 103)
        ax.set_aspect("equal")
        ax.set_title(f"{task} (n={len(common)})\nx better {here['a']}, y better {here['b']}, ties {here['ties']}")
        ax.set_xlabel(f"x: {name_a} (x 100)")
        ax.set_ylabel(f"y: {name_b} (x 100)")
    for k in range(len(tasks), nrows * ncols):
        axes[k // ncols][k % ncols].remove()
    layout(fig, f"{benchmark}: {metric_label(metric)} x 100 per query ({counts['queries']}); {name_a} better "
                 f"{counts['a_better']}, {name_b} better {counts['b_better']}, ties {counts['ties']}")
    save(fig, png, svg)
    return counts

"""Figures (matplotlib, Agg backend), each written as PNG and SVG.

Paper-ready: at most ``PAGE_WIDTH_IN`` wide (a one-column page with 1-inch margins), text of 6.5 pt and more,
so a figure printed at its own size needs no scaling and the index page shows it at that size. Runs keep one
style (colour, and beyond nine runs a marker and a hatch) in every figure of a benchmark, from the benchmark's
palette (``r2med_eval.palette``); each artist drawn for a run carries the id ``run_<k>_<quoted run name>`` in the
SVG, which is how the tests read the colours back. Values are the metric x 100 on axes that start at 0; the
run rows of the figures follow the leaderboard's order.

Deterministic: a fixed ``svg.hashsalt`` (SVG element ids), no date in the SVG metadata, no timestamps in the
PNG; the same inputs give byte-identical files on the same matplotlib version. Plots hold ids, names and numbers
only (never document or query text).
"""

from __future__ import annotations

import csv
import itertools
import logging
import math
import textwrap
from pathlib import Path
from urllib.parse import quote

from . import palette as pal
from .errors import InputError
from .io import atomic_path
from .tables import abbreviate, metric_label

log = logging.getLogger(__name__)

CLINIQ_FIELDS = ["model", "setting", "group", "metric", "value", "n_queries"]
CLINIQ_SETTINGS = ("multi", "single")
DPI = 150  # PNG resolution; the index page shows a PNG at 96 CSS px per inch, its printed size
PAGE_WIDTH_IN = 6.5
_WIDTH_IN = PAGE_WIDTH_IN - 0.25  # a figure's own width: the PNG and SVG add 0.1 in around it
_CHAR_IN = 0.058  # mean width of a character at 7 pt (DejaVu Sans), to wrap titles and notes
_INK = "#222222"
_LINESTYLES = ("-", "--", ":", "-.")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.hashsalt": "r2med-eval", "svg.fonttype": "path", "font.size": 8,
                                "axes.titlesize": 8, "axes.labelsize": 7.5, "xtick.labelsize": 7,
                                "ytick.labelsize": 7, "legend.fontsize": 7, "figure.titlesize": 9,
                                "hatch.linewidth": 0.6, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def save(fig, png, svg) -> None:
    """Write ``fig`` to ``png`` and ``svg`` atomically, without dates; close it."""
    plt = _pyplot()
    check_panels(fig)
    with atomic_path(png, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    with atomic_path(svg, suffix=".svg") as tmp:
        fig.savefig(tmp, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)


def run_gid(fig, run: str) -> str:
    """A unique SVG id naming ``run``: ``run_<k>_<run, percent-quoted>``."""
    counter = fig.__dict__.setdefault("_r2med_run_ids", itertools.count())
    return f"run_{next(counter)}_{quote(run, safe='')}"


def _layout(fig, title: str, legend: dict | None = None, note: str = "") -> None:
    """The figure's title on top, wrapped to its width, then ``legend`` (``fig.legend`` arguments, with ``rows``:
    its number of rows) under it, ``note`` in small type at the bottom, and the panels laid out in the rest."""
    h, w = fig.get_figheight(), fig.get_figwidth()
    lines = textwrap.wrap(title, max(30, int(w / (_CHAR_IN * 9 / 7))))
    fig.suptitle("\n".join(lines), y=1 - 0.04 / h, va="top")
    reserved = 0.0  # tight_layout leaves room for the title itself
    if legend:
        rows = legend.pop("rows")
        fig.legend(loc="upper center", frameon=False, bbox_to_anchor=(0.5, 1 - (0.08 + 0.16 * len(lines)) / h),
                   **legend)
        reserved = 0.1 + 0.16 * rows
    below = textwrap.wrap(note, int(w / (_CHAR_IN * 1.05))) if note else []
    if below:
        fig.text(0.5, 0.02 / h, "\n".join(below), ha="center", va="bottom", fontsize=7, color="#444444")
    fig.tight_layout(rect=(0, (0.05 + 0.14 * len(below)) / h if below else 0, 1, 1 - reserved / h))


def _bar_style(style: pal.Style) -> dict:
    return {"facecolor": style.colour, "hatch": style.bar_hatch, "edgecolor": _INK if style.bar_hatch else style.colour,
            "linewidth": 0.4 if style.bar_hatch else 0.0}


def text_inches(text: str, size: float = 7.0) -> float:
    """The width in inches of ``text`` set in matplotlib's default font at ``size`` pt (its advance widths)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    if not text:
        return 0.0
    return TextToPath().get_text_width_height_descent(text, FontProperties(size=size), ismath=False)[0] / 72


def _label_width(names, size: float = 7.0) -> float:
    return 0.15 + max((text_inches(n, size) for n in names), default=0.3)


def _grid(n: int, ncols: int) -> tuple[int, int]:
    ncols = max(1, min(n, ncols))
    return math.ceil(n / ncols), ncols


def _top(values, floor: float = 10.0) -> float:
    """The upper end of a value axis that starts at 0: the largest value, rounded up to 10, at most 100."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return min(100.0, max(floor, math.ceil((max(finite, default=0.0) + 1e-9) / 10) * 10))


def leaderboard_order(table: dict, benchmark: str) -> tuple[list[str], list[str], list[list]]:
    """Runs in the leaderboard's order, the benchmark's tasks, and the leaderboard's rows [run, tasks..., avg]."""
    from .leaderboard import build_benchmark

    try:
        header, rows = build_benchmark(table, benchmark)
    except ValueError:
        raise InputError(f"no scored runs for benchmark {benchmark!r}.", fix="check benchmarks_to_run.") from None
    return [r[0] for r in rows], header[1:-1], rows


def panel_points(ax) -> int:
    """How many finite data points a panel draws (bars, markers, image cells); reference lines do not count."""
    import numpy as np

    n = sum(1 for p in ax.patches if hasattr(p, "get_height") and math.isfinite(p.get_height())
            and math.isfinite(p.get_width()))
    n += sum(len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets") and c.get_array() is None
             and not str(c.get_label()).startswith("_"))
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


# ---------------------------------------------------------------- leaderboard figures


def by_task(table: dict, benchmark: str, metric: str, png, svg, palette: dict, ci: dict | None = None) -> None:
    """A panel per task (and the mean over tasks when there are several), a horizontal bar per run in the
    leaderboard's order, in the run's style, with its 95% bootstrap interval (``ci[(task, run)] = (low, high,
    queries)``, from the significance table) as an error bar; the value axis starts at 0 and is the same in
    every panel."""
    plt = _pyplot()
    ci = ci or {}
    runs, tasks, rows = leaderboard_order(table, benchmark)
    styles = pal.styles_of(palette, runs)
    panels = tasks + (["mean over tasks"] if len(tasks) > 1 and any(r[-1] is not None for r in rows) else [])
    label = _label_width(runs)
    nrows, ncols = _grid(len(panels), max(1, int((_WIDTH_IN - label) // 1.0)))
    panel_w = max(1.0, min(2.6, (_WIDTH_IN - label) / ncols))
    top = _top([v * 100 for r in rows for v in r[1:] if v is not None]
               + [ci[k][1] * 100 for k in ci if k[1] in styles])
    height = 0.8 + 0.13 * len(runs)  # a panel: its title, axis and a row per run
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, sharex=True,
                             figsize=(min(_WIDTH_IN, label + panel_w * ncols), 0.6 + nrows * height))
    for p, name in enumerate(panels):
        ax = axes[p // ncols][p % ncols]
        j = p + 1 if name != "mean over tasks" else len(tasks) + 1
        drawn = [(i, row[0], row[j]) for i, row in enumerate(rows) if row[j] is not None]
        look = [_bar_style(styles[r]) for _, r, _ in drawn]
        bars = ax.barh([i for i, _, _ in drawn], [v * 100 for _, _, v in drawn], height=0.72,
                       **{k: [x[k] for x in look] for k in look[0]})
        for bar, (_, run, _) in zip(bars, drawn):
            bar.set_gid(run_gid(fig, run))
        whiskers = [(i, v, ci[(name, r)]) for i, r, v in drawn if (name, r) in ci]
        counts = {n for _, _, (_, _, n) in whiskers}
        if whiskers:  # one call for the panel: an error bar per run costs seconds at 60 runs
            ax.errorbar([v * 100 for _, v, _ in whiskers], [i for i, _, _ in whiskers],
                        xerr=[[max(0.0, v - lo) * 100 for _, v, (lo, _, _) in whiskers],
                              [max(0.0, hi - v) * 100 for _, v, (_, hi, _) in whiskers]], fmt="none", ecolor=_INK,
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
    _layout(fig, f"{benchmark}: {metric_label(metric)} x 100 by task ({intervals})")
    save(fig, png, svg)


def _ink_on(rgba) -> str:
    """Black or white text, whichever reads on a cell of colour ``rgba``."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def _value_cells(ax, grid, vmax: float, fontsize: float, missing: str | None = None):
    """``grid`` (rows by columns, NaN where empty) drawn on ``ax`` in viridis from 0 to ``vmax``, its value to one
    decimal in every cell in the ink that reads on the cell (an empty cell shows ``missing`` in grey, or nothing),
    the column labels on top, no ticks or spines. Returns the image, for a colour bar."""
    import numpy as np

    image = ax.imshow(np.ma.masked_invalid(grid), cmap=_pyplot().get_cmap("viridis"), vmin=0, vmax=vmax,
                      aspect="auto", interpolation="nearest")
    for i, j in np.ndindex(grid.shape):
        v = grid[i, j]
        if math.isfinite(v):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=fontsize,
                    color=_ink_on(image.cmap(image.norm(v))))
        elif missing is not None:
            ax.text(j, i, missing, ha="center", va="center", fontsize=fontsize, color="#555555")
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return image


def heatmap(table: dict, benchmark: str, metric: str, png, svg) -> None:
    """Runs (rows, leaderboard order) by tasks (columns, then the mean over tasks), the value in every cell."""
    import numpy as np

    plt = _pyplot()
    runs, tasks, rows = leaderboard_order(table, benchmark)
    columns = tasks + (["mean"] if len(tasks) > 1 else [])
    grid = np.array([[math.nan if v is None else v * 100 for v in r[1:1 + len(columns)]] for r in rows], dtype=float)
    label = _label_width(runs)
    cell = max(0.3, min(0.62, (_WIDTH_IN - label - 0.15) / len(columns)))
    widest = max(text_inches(c) for c in columns)
    rotate = widest > cell - 0.04
    head = 0.45 + (widest * 0.7 if rotate else 0.15)
    fig, ax = plt.subplots(figsize=(min(_WIDTH_IN, label + cell * len(columns) + 0.15),
                                    head + 0.75 + 0.17 * len(runs)))
    image = _value_cells(ax, grid, _top(grid[np.isfinite(grid)].tolist()), 6.5, missing="\u2013")
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
    plt = _pyplot()
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

    top = _top([value[r] for r in shown] + [iv[1] for r in shown if (iv := interval(r))])
    nrows, ncols = _grid(len(firsts), 3)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, sharey=True,
                             figsize=(min(_WIDTH_IN, max(3.4, 0.6 + 2.05 * ncols)),
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
                    linestyle=_LINESTYLES[k % len(_LINESTYLES)], label=reranker)
            labels += [(x, value[r], f"{value[r] - base:+.1f}") for x, r in pts[1:]]
        for x, y, text in _spread(labels, gap=0.06 * top):
            ax.text(x + 0.1, y, text, va="center", fontsize=6.5, color=_INK)
        for x, run in [(0, first)] + [(depths.index(d) + 1, r) for (f, _), by in groups.items() if f == first
                                      for d, r in by.items()]:
            s = styles[run]
            iv = interval(run)
            if iv:
                ax.errorbar(x, value[run], yerr=[[value[run] - iv[0]], [iv[1] - value[run]]], fmt="none",
                            ecolor=_INK, elinewidth=0.7, capsize=2, label="_ci")
            line, = ax.plot([x], [value[run]], linestyle="none", marker=s.marker, markersize=6, color=s.colour,
                            markeredgecolor=_INK, markeredgewidth=0.5, label="_run", zorder=3)
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
    handles = [plt.Line2D([], [], color="#555555", linestyle=_LINESTYLES[k % len(_LINESTYLES)], label=r)
               for k, r in enumerate(rerankers)]
    what = "95% bootstrap CI" if one and ci else f"mean over {len(tasks)} tasks" if not one else "one task"
    _layout(fig, f"{benchmark}: {metric_label(metric)} x 100 by reranking depth ({what})",
            legend={"handles": handles, "ncol": min(3, len(handles)), "rows": math.ceil(len(handles) / 3) + 1,
                    "title": "reranker", "title_fontsize": 7},
            note="Each point is a run, in its colour, labelled with its change against the first stage (dotted).")
    save(fig, png, svg)
    return True


def scatter(per_task: dict, name_a: str, name_b: str, benchmark: str, metric: str, png, svg) -> dict:
    """Per-query scatter of two runs, a panel per task: ``per_task`` = {task: ({qid: value of a}, {qid: value of
    b})}; only queries judged for both are drawn (counted). Returns the counts."""
    plt = _pyplot()
    tasks = sorted(per_task)
    nrows, ncols = _grid(len(tasks), 3)
    side = 3.0 if len(tasks) == 1 else min(2.05, (_WIDTH_IN - 0.5) / ncols)
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
        ax.scatter(xs, ys, s=10, alpha=0.5, color=_INK, edgecolors="none", label="queries")
        ax.plot([0, 100], [0, 100], color="#999999", linewidth=0.7, linestyle="--", label="_diagonal")
        ax.set_xlim(-3, 103)
        ax.set_ylim(-3, 103)
        ax.set_aspect("equal")
        ax.set_title(f"{task} (n={len(common)})\nx better {here['a']}, y better {here['b']}, ties {here['ties']}")
        ax.set_xlabel(f"x: {name_a} (x 100)")
        ax.set_ylabel(f"y: {name_b} (x 100)")
    for k in range(len(tasks), nrows * ncols):
        axes[k // ncols][k % ncols].remove()
    _layout(fig, f"{benchmark}: {metric_label(metric)} x 100 per query ({counts['queries']}); {name_a} better "
                 f"{counts['a_better']}, {name_b} better {counts['b_better']}, ties {counts['ties']}")
    save(fig, png, svg)
    return counts


# ---------------------------------------------------------------- CliniQ


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


# Beyond this many runs a CliniQ breakdown draws each panel as a heatmap: 40 bars per group cannot be told apart.
CLINIQ_BAR_RUNS = 12


def cliniq_breakdown(path, what: str, benchmark: str, png, svg, palette: dict, order=None) -> None:
    """CliniQ by match type or by query type: a grid of small panels, one per metric of each setting
    (single-patient first; the settings measure different metrics), grouped bars (group x run, each run in its
    style) x 100 on a 0-100 axis, the number of queries of each group under its label, one legend for all.
    As many panels side by side as a page's width allows their bars. Groups nothing was scored on are left out
    (logged). With more than ``CLINIQ_BAR_RUNS`` runs each panel is a heatmap instead (``_cliniq_heatmaps``).
    ``order``: the runs in the leaderboard's order (the rows of the heatmaps, the bars' order); runs it lacks
    follow in the file's order."""
    plt = _pyplot()
    rows = read_cliniq(path)
    models = list(dict.fromkeys(r["model"] for r in rows))
    if order:
        known, wanted = set(models), set(order)
        models = [m for m in order if m in known] + [m for m in models if m not in wanted]
    styles = pal.styles_of(palette, models)
    panels = []
    for setting in ("single", "multi"):
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
    if len(models) > CLINIQ_BAR_RUNS:
        _cliniq_heatmaps(panels, models, styles, f"{benchmark}: by {what.replace('_', ' ')}", png, svg)
        return
    most = max(len(p[2]) for p in panels)
    panel_w = max(2.0, 0.45 + most * (0.1 + 0.055 * len(models)))
    nrows, ncols = _grid(len(panels), max(1, int(_WIDTH_IN // panel_w)))
    entry = 0.45 + max(text_inches(m) for m in models)
    legend_cols = max(1, min(len(models), int(_WIDTH_IN // entry)))
    legend_h = 0.2 + 0.17 * math.ceil(len(models) / legend_cols)
    fig_w = min(_WIDTH_IN, max(panel_w * ncols, 4.0))
    fig_h = 0.75 + legend_h + 2.35 * nrows
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, sharey=True, figsize=(fig_w, fig_h))
    width = 0.8 / max(1, len(models))
    short: dict = {}
    for p, (setting, metric, groups, values) in enumerate(panels):
        ax = axes[p // ncols][p % ncols]
        for i, model in enumerate(models):
            for g, grp in enumerate(groups):
                if (model, grp) not in values:
                    continue
                x = g + (i - (len(models) - 1) / 2) * width
                bar = ax.bar(x, values[(model, grp)]["value"] * 100, width=width, label=model,
                             **_bar_style(styles[model]))[0]
                bar.set_gid(run_gid(fig, model))
        n = {grp: max(values[(m, grp)]["n_queries"] for m in models if (m, grp) in values) for grp in groups}
        slot = (panel_w - 0.45) / len(groups)
        names = [g if text_inches(g, 6.5) <= slot - 0.03 else abbreviate(g) for g in groups]
        short.update((a, g) for a, g in zip(names, groups) if a != g)
        ax.set_xticks(range(len(groups)), [f"{a}\n(n={n[g]})" for a, g in zip(names, groups)], fontsize=6.5,
                      rotation=30 if max(text_inches(a, 6.5) for a in names) > slot - 0.03 else 0)
        ax.set_title(f"{setting}-patient: {metric_label(metric)}")
        ax.set_ylim(0, 100)
        ax.grid(axis="y", color="#e5e5e5", linewidth=0.5)
        ax.set_axisbelow(True)
        if p % ncols == 0:
            ax.set_ylabel("x 100")
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].remove()
    from matplotlib.patches import Patch

    handles = [Patch(label=m, **_bar_style(styles[m])) for m in models]
    _layout(fig, f"{benchmark}: by {what.replace('_', ' ')}",
            legend={"handles": handles, "ncol": legend_cols, "rows": math.ceil(len(models) / legend_cols)},
            note="; ".join(["n = queries of the group"] + [f"{a} = {g}" for a, g in short.items()]))
    save(fig, png, svg)


def _cliniq_heatmaps(panels, models, styles, title: str, png, svg) -> None:
    """The CliniQ breakdown of many runs: a heatmap per (setting, metric), the runs as rows (the given order, named
    on the first panel of each row of panels beside a swatch of their style), the groups as columns with their query
    counts, the value x 100 in each cell, one colour scale from 0 to 100 for every panel; an empty cell is a group
    nothing was scored on for that run."""
    import numpy as np

    plt = _pyplot()
    label = _label_width(models, 6.5) + 0.25  # and the swatch
    most = max(len(p[2]) for p in panels)
    ncols = max(1, min(len(panels), int((_WIDTH_IN - label + 0.1) // (most * 0.27 + 0.1))))
    cell = max(0.27, min(0.42, (_WIDTH_IN - label - 0.1 * (ncols - 1)) / (ncols * most)))
    nrows = math.ceil(len(panels) / ncols)
    head = 0.6  # a panel's title and its column labels
    panel_h = head + 0.145 * len(models)
    fig_w = min(_WIDTH_IN, label + ncols * most * cell + 0.1 * (ncols - 1))
    short = {abbreviate(g): g for _, _, groups, _ in panels for g in groups if text_inches(g, 6) > cell - 0.02}
    note = textwrap.wrap("; ".join(["x 100, colour from 0 to 100; under each group its number of queries"]
                                   + [f"{a} = {g}" for a, g in short.items()]), int(fig_w / (_CHAR_IN * 1.05)))
    fig = plt.figure(figsize=(fig_w, 0.22 + nrows * panel_h + 0.15 + 0.14 * len(note)))
    for p, (setting, metric, groups, values) in enumerate(panels):
        r, c = divmod(p, ncols)
        left = (label + c * (most * cell + 0.1)) / fig_w
        bottom = 1 - (0.22 + r * panel_h + panel_h) / fig.get_figheight()
        ax = fig.add_axes((left, bottom, len(groups) * cell / fig_w, (panel_h - head) / fig.get_figheight()))
        grid = np.array([[values[(m, g)]["value"] * 100 if (m, g) in values else math.nan for g in groups]
                         for m in models], dtype=float)
        _value_cells(ax, grid, 100, 5.5)
        n = {g: max(values[(m, g)]["n_queries"] for m in models if (m, g) in values) for g in groups}
        names = [g if text_inches(g, 6) <= cell - 0.02 else abbreviate(g) for g in groups]
        ax.set_xticks(range(len(groups)), [f"{a}\n{n[g]}" for a, g in zip(names, groups)], fontsize=6)
        ax.set_yticks(range(len(models)), models if c == 0 else [], fontsize=6.5)
        if c == 0:  # each run's style beside its name, as in the benchmark's other figures
            from matplotlib.patches import Rectangle

            ax.tick_params(axis="y", pad=11)
            width = 0.1 / cell
            for i, model in enumerate(models):
                swatch = Rectangle((-0.55 - width, i - 0.36), width, 0.72, clip_on=False,
                                   **_bar_style(styles[model]))
                swatch.set_gid(run_gid(fig, model))
                ax.add_patch(swatch)
        ax.set_title(f"{setting}-patient: {metric_label(metric)}", fontsize=7.5, pad=3)
    fig.suptitle("\n".join(textwrap.wrap(title, max(30, int(fig_w / (_CHAR_IN * 9 / 7))))),
                 y=1 - 0.05 / fig.get_figheight(), va="top")
    fig.text(0.5, 0.05 / fig.get_figheight(), "\n".join(note), ha="center", va="bottom", fontsize=7, color="#444444")
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

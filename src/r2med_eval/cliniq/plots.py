"""CliniQ's figures, each written as PNG and SVG (``report.figure``): the breakdowns by match type and by query
type (single- and multi-patient panels, bars or, for many runs, heatmaps) and the judgment completion's original
against completed figures. Ids, names and numbers only.
"""

from __future__ import annotations

import csv
import logging
import math
import textwrap
from pathlib import Path

from ..errors import InputError
from ..report import palette as pal
from ..report.figure import (
    CHAR_IN,
    WIDTH_IN,
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
from ..report.tables import abbreviate, metric_label
from .files import TABLE_HEADER

log = logging.getLogger(__name__)


CLINIQ_FIELDS = list(TABLE_HEADER)  # the header cliniq.files writes


CLINIQ_SETTINGS = ("multi", "single")


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
    plt = pyplot()
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
    nrows, ncols = panel_grid(len(panels), max(1, int(WIDTH_IN // panel_w)))
    entry = 0.45 + max(text_inches(m) for m in models)
    legend_cols = max(1, min(len(models), int(WIDTH_IN // entry)))
    legend_h = 0.2 + 0.17 * math.ceil(len(models) / legend_cols)
    fig_w = min(WIDTH_IN, max(panel_w * ncols, 4.0))
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
                             **bar_style(styles[model]))[0]
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

    handles = [Patch(label=m, **bar_style(styles[m])) for m in models]
    layout(fig, f"{benchmark}: by {what.replace('_', ' ')}",
            legend={"handles": handles, "ncol": legend_cols, "rows": math.ceil(len(models) / legend_cols)},
            note="; ".join(["n = queries of the group"] + [f"{a} = {g}" for a, g in short.items()]))
    save(fig, png, svg)


def _cliniq_heatmaps(panels, models, styles, title: str, png, svg) -> None:
    """The CliniQ breakdown of many runs: a heatmap per (setting, metric), the runs as rows (the given order, named
    on the first panel of each row of panels beside a swatch of their style), the groups as columns with their query
    counts, the value x 100 in each cell, one colour scale from 0 to 100 for every panel; an empty cell is a group
    nothing was scored on for that run."""
    import numpy as np

    plt = pyplot()
    label = label_width(models, 6.5) + 0.25  # and the swatch
    most = max(len(p[2]) for p in panels)
    ncols = max(1, min(len(panels), int((WIDTH_IN - label + 0.1) // (most * 0.27 + 0.1))))
    cell = max(0.27, min(0.42, (WIDTH_IN - label - 0.1 * (ncols - 1)) / (ncols * most)))
    nrows = math.ceil(len(panels) / ncols)
    head = 0.6  # a panel's title and its column labels
    panel_h = head + 0.145 * len(models)
    fig_w = min(WIDTH_IN, label + ncols * most * cell + 0.1 * (ncols - 1))
    short = {abbreviate(g): g for _, _, groups, _ in panels for g in groups if text_inches(g, 6) > cell - 0.02}
    note = textwrap.wrap("; ".join(["x 100, colour from 0 to 100; under each group its number of queries"]
                                   + [f"{a} = {g}" for a, g in short.items()]), int(fig_w / (CHAR_IN * 1.05)))
    fig = plt.figure(figsize=(fig_w, 0.22 + nrows * panel_h + 0.15 + 0.14 * len(note)))
    for p, (setting, metric, groups, values) in enumerate(panels):
        r, c = divmod(p, ncols)
        left = (label + c * (most * cell + 0.1)) / fig_w
        bottom = 1 - (0.22 + r * panel_h + panel_h) / fig.get_figheight()
        ax = fig.add_axes((left, bottom, len(groups) * cell / fig_w, (panel_h - head) / fig.get_figheight()))
        grid = np.array([[values[(m, g)]["value"] * 100 if (m, g) in values else math.nan for g in groups]
                         for m in models], dtype=float)
        value_cells(ax, grid, 100, 5.5)
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
                                   **bar_style(styles[model]))
                swatch.set_gid(run_gid(fig, model))
                ax.add_patch(swatch)
        ax.set_title(f"{setting}-patient: {metric_label(metric)}", fontsize=7.5, pad=3)
    fig.suptitle("\n".join(textwrap.wrap(title, max(30, int(fig_w / (CHAR_IN * 9 / 7))))),
                 y=1 - 0.05 / fig.get_figheight(), va="top")
    fig.text(0.5, 0.05 / fig.get_figheight(), "\n".join(note), ha="center", va="bottom", fontsize=7, color="#444444")
    save(fig, png, svg)


def cliniq_completion(path, benchmark: str, png, svg) -> None:
    """CliniQ's judgment completion: a panel per multi-patient figure, side by side on the page width, each system a
    row (named once, on the first panel) with its figure over all queries x 100 under CliniQ's judgments (original)
    and completed, as two horizontal bars; a move above the threshold is marked with a dagger after the pair. Rows,
    not rotated column labels: long run names are never cut or run into the next panel."""
    plt = pyplot()
    with open(path, encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["group"] == "all"]
    if not rows:
        raise InputError("no row of the group 'all'.", path=path, fix="check rule cliniq_completion_rescore.")
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    index = {(r["model"], r["metric"]): r for r in rows}

    def value(m, metric, column):
        text = index[(m, metric)][column] if (m, metric) in index else ""
        return float(text) * 100 if text else math.nan

    label = label_width(models, 7)
    ncols = len(metrics)
    panel_w = (WIDTH_IN - label - 0.15 * (ncols - 1)) / ncols
    height = 1.35 + 0.26 * len(models)  # the title, the legend and the panels' titles above, the axis below
    fig = plt.figure(figsize=(WIDTH_IN, height))
    cmap = plt.get_cmap("tab10")
    top = max(10.0, min(100.0, math.ceil(max((v for m in models for metric in metrics for c in ("original",
                                                                                              "completed")
                                              if (v := value(m, metric, c)) == v), default=10.0) / 10) * 10))
    for k, metric in enumerate(metrics):
        ax = fig.add_axes(((label + k * (panel_w + 0.15)) / WIDTH_IN, 0.45 / height, (panel_w - 0.25) / WIDTH_IN,
                           (height - 1.35) / height))
        ys = range(len(models))
        for j, (column, name) in enumerate((("original", "CliniQ's judgments"), ("completed", "completed"))):
            ax.barh([y + (j - 0.5) * 0.38 for y in ys], [value(m, metric, column) for m in models], height=0.38,
                    color=cmap(j), label=name if k == 0 else None)
        for y, m in zip(ys, models):
            if (m, metric) in index and index[(m, metric)]["moved"] == "1":
                end = max((v for c in ("original", "completed") if (v := value(m, metric, c)) == v), default=0.0)
                ax.annotate("\u2021", (end, y), xytext=(2, 0), textcoords="offset points", ha="left", va="center",
                            fontsize=8)
        ax.set_yticks(list(ys), models if k == 0 else [], fontsize=7)
        ax.invert_yaxis()  # the first system on top
        ax.set_xlim(0, top * 1.08)
        ax.set_title(metric_label(metric), fontsize=8)
        ax.set_xlabel("x 100", fontsize=7)
    fig.legend(loc="upper center", ncols=2, frameon=False, bbox_to_anchor=(0.5, 1 - 0.26 / height), fontsize=7)
    fig.suptitle(f"{benchmark}: multi-patient figures, CliniQ's judgments and completed (\u2021: moved more than "
                 "the threshold)", y=1 - 0.04 / height, va="top", fontsize=8)
    save(fig, png, svg)

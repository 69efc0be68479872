"""The figures' common toolkit (matplotlib, Agg backend): page width, fonts, saving as PNG and SVG, run ids in
the SVG, titles, legends and notes, bar styles from the palette, text widths, grids of panels, heatmap cells.

Paper-ready: at most ``PAGE_WIDTH_IN`` wide (a one-column page with 1-inch margins), text of 6.5 pt and more,
so a figure printed at its own size needs no scaling and the index page shows it at that size. Runs keep one
style (colour, and beyond nine runs a marker and a hatch) in every figure of a benchmark, from the benchmark's
palette (``report.palette``); each artist drawn for a run carries the id ``run_<k>_<quoted run name>`` in the
SVG, which is how the tests read the colours back. Values are the metric x 100 on axes that start at 0.

Deterministic: a fixed ``svg.hashsalt`` (SVG element ids), no date in the SVG metadata, no timestamps in the
PNG; the same inputs give byte-identical files on the same matplotlib version. Plots hold ids, names and numbers
only (never document or query text). The leaderboard's figures are in ``report.plots``, CliniQ's in
``cliniq.plots``.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from urllib.parse import quote

from ..io import atomic_path
from . import palette as pal

DPI = 150  # PNG resolution; the index page shows a PNG at 96 CSS px per inch, its printed size

PAGE_WIDTH_IN = 6.5

WIDTH_IN = PAGE_WIDTH_IN - 0.25  # a figure's own width: the PNG and SVG add 0.1 in around it

CHAR_IN = 0.058  # mean width of a character at 7 pt (DejaVu Sans), to wrap titles and notes

INK = "#222222"

LINESTYLES = ("-", "--", ":", "-.")


def pyplot():
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
    plt = pyplot()
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


def layout(fig, title: str, legend: dict | None = None, note: str = "") -> None:
    """The figure's title on axis_top, wrapped to its width, then ``legend`` (``fig.legend`` arguments, with ``rows``:
    its number of rows) under it, ``note`` in small type at the bottom, and the panels laid out in the rest."""
    h, w = fig.get_figheight(), fig.get_figwidth()
    lines = textwrap.wrap(title, max(30, int(w / (CHAR_IN * 9 / 7))))
    fig.suptitle("\n".join(lines), y=1 - 0.04 / h, va="top")
    reserved = 0.0  # tight_layout leaves room for the title itself
    if legend:
        rows = legend.pop("rows")
        fig.legend(loc="upper center", frameon=False, bbox_to_anchor=(0.5, 1 - (0.08 + 0.16 * len(lines)) / h),
                   **legend)
        reserved = 0.1 + 0.16 * rows
    below = textwrap.wrap(note, int(w / (CHAR_IN * 1.05))) if note else []
    if below:
        fig.text(0.5, 0.02 / h, "\n".join(below), ha="center", va="bottom", fontsize=7, color="#444444")
    fig.tight_layout(rect=(0, (0.05 + 0.14 * len(below)) / h if below else 0, 1, 1 - reserved / h))


def bar_style(style: pal.Style) -> dict:
    return {"facecolor": style.colour, "hatch": style.bar_hatch, "edgecolor": INK if style.bar_hatch else style.colour,
            "linewidth": 0.4 if style.bar_hatch else 0.0}


def text_inches(text: str, size: float = 7.0) -> float:
    """The width in inches of ``text`` set in matplotlib's default font at ``size`` pt (its advance widths)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    if not text:
        return 0.0
    return TextToPath().get_text_width_height_descent(text, FontProperties(size=size), ismath=False)[0] / 72


def label_width(names, size: float = 7.0) -> float:
    return 0.15 + max((text_inches(n, size) for n in names), default=0.3)


def panel_grid(n: int, ncols: int) -> tuple[int, int]:
    ncols = max(1, min(n, ncols))
    return math.ceil(n / ncols), ncols


def axis_top(values, floor: float = 10.0) -> float:
    """The upper end of a value axis that starts at 0: the largest value, rounded up to 10, at most 100."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return min(100.0, max(floor, math.ceil((max(finite, default=0.0) + 1e-9) / 10) * 10))


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


def ink_on(rgba) -> str:
    """Black or white text, whichever reads on a cell of colour ``rgba``."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def value_cells(ax, grid, vmax: float, fontsize: float, missing: str | None = None):
    """``grid`` (rows by columns, NaN where empty) drawn on ``ax`` in viridis from 0 to ``vmax``, its value to one
    decimal in every cell in the ink that reads on the cell (an empty cell shows ``missing`` in grey, or nothing),
    the column labels on axis_top, no ticks or spines. Returns the image, for a colour bar."""
    import numpy as np

    image = ax.imshow(np.ma.masked_invalid(grid), cmap=pyplot().get_cmap("viridis"), vmin=0, vmax=vmax,
                      aspect="auto", interpolation="nearest")
    for i, j in np.ndindex(grid.shape):
        v = grid[i, j]
        if math.isfinite(v):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=fontsize,
                    color=ink_on(image.cmap(image.norm(v))))
        elif missing is not None:
            ax.text(j, i, missing, ha="center", va="center", fontsize=fontsize, color="#555555")
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return image

"""Leaderboard: a row per model, a column per (benchmark, task) with the primary metric, and averages.

A cell is empty where the run was not scored, and "n/a" (NaN in the table) where the metric is undefined: no judged
query of the task has a relevant document (trec_eval then gives 0 on every measure, for every run: not a score, and
never the best of a column), or the metrics file holds no number. An average over a task that is n/a is n/a too;
rows are ranked on the defined cells only."""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import InputError
from ..io import write_text
from ..scoring import metric_table
from .tables import best_per_column, latex_table, md_escape, metric_label, tex_label


def collect(metric_files, metric: str = "ndcg_at_10") -> dict:
    """Read metric JSONs written by the score rule (or the collected files of rule collect_metrics,
    ``r2med_eval.metric_table``) into {model: {(benchmark, task): value}}."""
    table: dict[str, dict[tuple[str, str], float]] = {}
    for path, data in metric_table.records(metric_files):
        if metric not in data["metrics"]:
            raise InputError(f"metric {metric!r} is not computed (have: {', '.join(sorted(data['metrics']))}).",
                             path=path, fix="set leaderboard.metric in config.yaml to one of those names.")
        table.setdefault(data["model"], {})[(data["benchmark"], data["task"])] = defined(data, metric)
    return table


NA = "n/a"


def defined(data: dict, metric: str) -> float:
    """The metric of a metrics record, or NaN (shown "n/a") when it is undefined: no judged query with a relevant
    document (``counts``), or no number."""
    value = data["metrics"][metric]
    counts = data.get("counts") or {}
    judged = counts.get("judged_queries_scored")
    if judged is not None and judged - counts.get("judged_queries_without_relevant", 0) <= 0:
        return math.nan
    return math.nan if not isinstance(value, (int, float)) or value != value else float(value)


def is_na(value) -> bool:
    return value is not None and value != value


def build(table: dict, metric: str = "ndcg_at_10") -> tuple[list[str], list[list]]:
    """A column per (benchmark, task), then ``<benchmark>/avg`` for each benchmark with several tasks: averages
    are per benchmark, never across benchmarks. Row order: ``rank_key``."""
    columns = sorted({c for row in table.values() for c in row})
    benchmarks = sorted({b for b, _ in columns})
    multi = [b for b in benchmarks if sum(1 for c in columns if c[0] == b) > 1]
    header = ["model"] + [f"{b}/{t}" for b, t in columns] + [f"{b}/avg" for b in multi]
    rows = []
    for model in sorted(table):
        values = [table[model].get(c) for c in columns]
        per_bench = [_mean([table[model].get(c) for c in columns if c[0] == b]) for b in multi]
        rows.append([model] + values + per_bench)
    keys = {r[0]: rank_key({b: [table[r[0]].get(c) for c in columns if c[0] == b] for b in benchmarks})
            for r in rows}
    rows.sort(key=lambda r: (keys[r[0]], r[0]))
    return header, rows


def _mean(values):
    """The mean, or None (an empty cell) when a value is missing."""
    return None if not values or any(v is None for v in values) else math.fsum(values) / len(values)


def rank_key(by_benchmark: dict) -> float:
    """Sort key of a row (smaller first) from {benchmark: [task values, None where not run]}: the mean over
    the benchmarks the row has any value on of its mean over the tasks it has there. A missing cell neither
    sinks a row to the bottom nor counts as 0; each benchmark weighs the same, however many tasks it has.
    Rows without any value go last."""
    kept = [[v for v in vals if v is not None and v == v] for vals in by_benchmark.values()]  # n/a: not ranked
    means = [math.fsum(vals) / len(vals) for vals in kept if vals]
    return -math.fsum(means) / len(means) if means else math.inf


def _fmt(v, scale: float = 1.0) -> str:
    if v is None or is_na(v):
        return "" if v is None else NA
    return f"{v * scale:.2f}" if scale != 1.0 else f"{v:.4f}"


def _csv_value(v) -> str:
    return "" if v is None else NA if is_na(v) else f"{v:.5f}"


def to_csv(header, rows) -> str:
    lines = [",".join(header)]
    lines += [",".join([r[0]] + [_csv_value(v) for v in r[1:]]) for r in rows]
    return "\n".join(lines) + "\n"


def to_markdown(header, rows, metric: str = "ndcg_at_10", cell_marks: dict | None = None,
                legend: str | None = None, title: str = "Leaderboard") -> str:
    best = best_per_column(rows)
    cell_marks = cell_marks or {}
    lines = [f"# {md_escape(title)} ({metric_label(metric)} x 100; best per column in bold; empty = not run; "
             f"{NA} = no judged query with a relevant document)", "",
             "| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for r in rows:
        cells = [md_escape(r[0])]
        for j, v in enumerate(r[1:], start=1):
            text = _fmt(v, 100.0)
            text = f"**{text}**" if v is not None and not is_na(v) and v == best.get(j) and len(rows) > 1 else text
            cells.append(text + md_escape(cell_marks.get((r[0], j), "")))
        lines.append("| " + " | ".join(cells) + " |")
    if legend:
        lines += ["", md_escape(legend)]
    return "\n".join(lines) + "\n"


def to_latex(header, rows, metric: str, cell_marks: dict | None = None, legend: str | None = None,
             label: str = "tab:leaderboard", notes=()) -> str:
    """The leaderboard as a booktabs table: a spanning header per benchmark over its tasks and average."""
    columns = [tuple(h.split("/", 1)) if "/" in h else ("", h) for h in header[1:]]
    caption = (f"{metric_label(metric)} \u00d7 100; best per column in bold; \u2013 = not run; {NA} = no judged query "
               "with a relevant document; averages are per benchmark.")
    return latex_table(columns, rows, caption=caption, label=label, marks=cell_marks,
                       notes=[*([legend + "."] if legend else []), *notes])


def write(metric_files, csv_path, md_path, metric: str = "ndcg_at_10", html_path=None, significance=None,
          legend: str | None = None, tex_path=None, reference: dict | None = None) -> None:
    """The leaderboard over every benchmark; ``significance``: {(benchmark, task): {model: marker}};
    ``reference``: extra rows {name: {(benchmark, task): value}} (e.g. MTEB results), never tested."""
    table = collect(metric_files, metric)
    for name, row in (reference or {}).items():
        if name in table:
            raise InputError(f"reference row {name!r} has the name of a run.", fix="rename the reference model.")
        table[name] = row
    header, rows = build(table, metric)
    cell_marks = column_marks(header, significance or {})
    write_text(Path(csv_path), to_csv(header, rows))
    write_text(Path(md_path), to_markdown(header, rows, metric, cell_marks, legend))
    if tex_path is not None:
        write_text(Path(tex_path), to_latex(header, rows, metric, cell_marks, legend))
    if html_path is not None:
        write_text(Path(html_path), to_html(header, rows, metric, cell_marks, legend, title="Leaderboard",
                                            table_id="leaderboard"))


# ---------------------------------------------------------------- significance marks, HTML, per benchmark

def column_marks(header, significance: dict, benchmark: str | None = None) -> dict:
    """{(model, column index): marker} for the task columns of ``header`` (``b/t``, or ``t`` when the table
    is one benchmark's)."""
    out = {}
    for j, name in enumerate(header[1:], start=1):
        key = (benchmark, name) if benchmark is not None else tuple(name.split("/", 1))
        for model, mark in significance.get(key, {}).items():
            out[(model, j)] = mark
    return out


def to_html(header, rows, metric: str, cell_marks: dict | None = None, legend: str | None = None,
            title: str = "Leaderboard", table_id: str = "leaderboard", notes=()) -> str:
    from . import html as h

    caption = (f"{metric_label(metric)} x 100; best per column in bold; a dash = not run; {NA} = no judged query "
               "with a relevant document")
    parts = [h.table(header, rows, table_id=table_id, caption=caption, best=best_per_column(rows),
                     marks=cell_marks)]
    if legend:
        parts.append(h.paragraph(legend, "legend"))
    parts += [h.paragraph(n) for n in notes]
    return h.page(title, parts)


def build_benchmark(table: dict, benchmark: str) -> tuple[list[str], list[list]]:
    """One benchmark's table: a column per task, then the average over its tasks; order: ``rank_key``."""
    tasks = sorted({t for row in table.values() for b, t in row if b == benchmark})
    if not tasks:
        raise ValueError(f"no scored runs for benchmark {benchmark!r}")
    header = ["model"] + tasks + ["avg"]
    rows = []
    for model in sorted(table):
        values = [table[model].get((benchmark, t)) for t in tasks]
        if all(v is None for v in values):
            continue
        rows.append([model] + values + [_mean(values)])
    rows.sort(key=lambda r: (rank_key({benchmark: r[1:-1]}), r[0]))
    return header, rows


def benchmark_csv(header, rows, cell_marks: dict) -> str:
    """Values with 5 decimals; after them one ``<task> sig`` column per task with the markers."""
    tasks = header[1:-1]
    lines = [",".join(header + [f"{t} sig" for t in tasks])]
    for r in rows:
        vals = [_csv_value(v) for v in r[1:]]
        sig = [cell_marks.get((r[0], j), "") for j in range(1, len(tasks) + 1)]
        lines.append(",".join([r[0]] + vals + sig))
    return "\n".join(lines) + "\n"


def write_benchmark(metric_files, benchmark: str, csv_path, md_path, html_path, metric: str = "ndcg_at_10",
                    significance=None, legend: str | None = None, notes=(), tex_path=None) -> None:
    header, rows = build_benchmark(collect(metric_files, metric), benchmark)
    cell_marks = column_marks(header, significance or {}, benchmark=benchmark)
    title = f"Leaderboard: {benchmark}"
    write_text(Path(csv_path), benchmark_csv(header, rows, cell_marks))
    md = to_markdown(header, rows, metric, cell_marks, legend, title=title)
    write_text(Path(md_path), md + "".join(f"\n{md_escape(n)}\n" for n in notes))
    write_text(Path(html_path), to_html(header, rows, metric, cell_marks, legend, title=title,
                                        table_id=f"leaderboard-{benchmark}", notes=notes))
    if tex_path is not None:
        tex_header = ["model"] + [f"{benchmark}/{t}" for t in header[1:]]
        write_text(Path(tex_path), to_latex(tex_header, rows, metric, cell_marks, legend,
                                            label=tex_label("tab", "leaderboard", benchmark), notes=notes))

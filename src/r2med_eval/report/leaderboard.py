"""Leaderboard: a row per model, a column per (benchmark, task) with the primary metric, and averages.

A cell is empty where the run was not scored, and "n/a" (NaN in the table) where the metric is undefined: no judged
query of the task has a relevant document (trec_eval then gives 0 on every measure, for every run: not a score, and
never the best of a column), or the metrics file holds no number. An average over a task that is n/a is n/a too;
rows are ranked on the defined cells only.

Rows compare like with like (``arrange``): they are grouped by the columns a run has a cell in (runs on every
benchmark first), and ranked within a group, where every run has the same columns. A cell is marked ``°`` where
fewer than ``judged_below`` of the run's top 10 are judged on average (Judged@10, where the metrics hold it), and
``§`` where an LLM reranker had unusable answers (its lineage JSON)."""

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
    are per benchmark, never across benchmarks. Row order: ``arrange``."""
    header, rows, _ = build_grouped(table)
    return header, rows


def build_grouped(table: dict) -> tuple[list[str], list[list], list[tuple[str, int]]]:
    """``build`` and its row groups [(label, rows)] (``arrange``)."""
    columns = sorted({c for row in table.values() for c in row})
    benchmarks = sorted({b for b, _ in columns})
    multi = [b for b in benchmarks if sum(1 for c in columns if c[0] == b) > 1]
    header = ["model"] + [f"{b}/{t}" for b, t in columns] + [f"{b}/avg" for b in multi]
    rows, groups = [], []
    for label, models in arrange(table, columns):
        groups.append((label, len(models)))
        for model in models:
            values = [table[model].get(c) for c in columns]
            per_bench = [_mean([table[model].get(c) for c in columns if c[0] == b]) for b in multi]
            rows.append([model] + values + per_bench)
    return header, rows, groups


def arrange(table: dict, columns: list) -> list[tuple[str, list[str]]]:
    """[(label, [run...])]: the runs grouped by the columns they have a value in (an n/a task is n/a for every run,
    so it groups no one apart), so that a run is ranked only against runs with the same columns. Groups: the runs on
    more benchmarks first, then on more columns, then on the earlier columns; within a group, ``rank_key`` (ties
    by name). Runs without any value come last."""
    tasks_of: dict[str, list] = {}
    for b, t in columns:
        tasks_of.setdefault(b, []).append(t)
    groups: dict[tuple, list[str]] = {}
    for model in sorted(table):
        groups.setdefault(tuple(c for c in columns if table[model].get(c) is not None
                                and not is_na(table[model][c])), []).append(model)

    def label(cover: tuple) -> str:
        names = []
        for b in dict.fromkeys(b for b, _ in cover):
            have = [t for bb, t in cover if bb == b]
            names.append(b if len(have) == len(tasks_of[b]) else f"{b} ({', '.join(have)})")
        if not names:
            return "no score"
        return " + ".join(names) + (" only" if len(cover) < len(columns) else "")

    order = sorted(groups, key=lambda cover: (not cover, -len({b for b, _ in cover}), -len(cover),
                                              [columns.index(c) for c in cover]))
    out = []
    for cover in order:
        models = sorted(groups[cover], key=lambda m: (rank_key({b: [table[m].get(c) for c in cover if c[0] == b]
                                                                for b in dict.fromkeys(b for b, _ in cover)}), m))
        out.append((label(cover), models))
    return out


def order_note(groups: list[tuple[str, int]], per: str = "benchmark") -> str:
    """The caption's sentence on the row order (``arrange``)."""
    within = ("the mean of the per-benchmark averages (each benchmark weighs the same)" if per == "benchmark"
              else "the average over the tasks")
    if len(groups) <= 1:
        return f"Rows are ordered by {within}."
    what = "benchmarks" if per == "benchmark" else "tasks"
    parts = ", then ".join(f"{label} ({n} run{'s' if n != 1 else ''})" for label, n in groups)
    return (f"Rows are grouped by the {what} a run was scored on, so that a run is ranked only against runs with the "
            f"same columns: {parts}; within a group by {within}.")


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


# ---------------------------------------------------------------- Judged@10 and unusable LLM answers

JUDGED = "judged_at_10"
MARK_JUDGED = "\u00b0"  # degree sign
MARK_UNUSABLE = "\u00a7"  # section sign


def judged_table(metric_files) -> dict:
    """{model: {(benchmark, task): Judged@10}} from the metrics records that hold it (``metrics.judged_at_10``, the
    mean over the judged queries of the judged share of each top 10); older records without it are left out."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    for _, data in metric_table.records(metric_files):
        value = (data.get("metrics") or {}).get(JUDGED, data.get(JUDGED))
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            out.setdefault(data["model"], {})[(data["benchmark"], data["task"])] = float(value)
    return out


def unusable_answers(lineage: dict) -> dict:
    """{(benchmark, task, run): (unusable answers, their share or None)} from LLM-reranked runs' lineage JSONs
    ({(benchmark, task, run): content}) that count any; anything else in a lineage is ignored."""
    out = {}
    for key, data in lineage.items():
        n = data.get("unusable_answers") if isinstance(data, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            share = data.get("unusable_share")
            out[key] = (n, float(share) if isinstance(share, (int, float)) and share == share else None)
    return out


def quality_marks(header, judged: dict, judged_below: float, unusable: dict, benchmark: str | None = None):
    """({(model, column index): marks}, [notes]): ``°`` on a cell whose Judged@10 is below ``judged_below``, ``§``
    on a cell of an LLM-reranked run with unusable answers (``unusable_answers``)."""
    marks: dict = {}
    low = []
    pct = f"{judged_below * 100:g}%"
    for j, name in enumerate(header[1:], start=1):
        key = (benchmark, name) if benchmark is not None else tuple(name.split("/", 1))
        for model, row in judged.items():
            if key in row and row[key] < judged_below:
                marks[(model, j)] = marks.get((model, j), "") + MARK_JUDGED
                low.append(row[key])
        for b, t, run in unusable:
            if (b, t) == key:
                marks[(run, j)] = marks.get((run, j), "") + MARK_UNUSABLE
    notes = []
    if low:
        notes.append(f"{MARK_JUDGED} Judged@10 below {pct}: on average fewer than {pct} of a query's top 10 are "
                     f"judged (lowest {min(low) * 100:.0f}%); unjudged documents count as not relevant, so the figure "
                     f"is a lower bound ({len(low)} cell{'s' if len(low) != 1 else ''}; the CSV gives Judged@10).")
    for (b, t, run), (n, share) in sorted(unusable.items()):
        if benchmark is None or b == benchmark:
            part = f" ({share * 100:.1f}%)" if share is not None else ""
            notes.append(f"{MARK_UNUSABLE} {run} on {b}/{t}: {n} LLM answers unusable{part}; see "
                         f"results/runs/{b}/{t}/{run}.lineage.json.")
    return marks, notes


def merge_marks(*dicts) -> dict:
    out: dict = {}
    for d in dicts:
        for key, mark in d.items():
            out[key] = out.get(key, "") + mark
    return out


def judged_columns(header, rows, judged: dict, benchmark: str | None = None) -> tuple[list[str], list[list[str]]]:
    """The CSV's Judged@10 columns (``<column> judged@10`` after the others, one per task column) and each row's
    values; none when no record holds Judged@10."""
    if not judged:
        return [], [[] for _ in rows]
    tasks = [(j, h) for j, h in enumerate(header[1:], start=1) if not h.endswith("avg")]
    names = [f"{h} judged@10" for _, h in tasks]
    values = []
    for r in rows:
        mine = judged.get(r[0], {})
        values.append([_csv_value(mine.get((benchmark, h) if benchmark is not None else tuple(h.split("/", 1))))
                       for _, h in tasks])
    return names, values


def to_csv(header, rows, extra=([], None)) -> str:
    names, values = extra
    lines = [",".join(header + names)]
    lines += [",".join([r[0]] + [_csv_value(v) for v in r[1:]] + (values[i] if values else []))
              for i, r in enumerate(rows)]
    return "\n".join(lines) + "\n"


def to_markdown(header, rows, metric: str = "ndcg_at_10", cell_marks: dict | None = None,
                legend: str | None = None, title: str = "Leaderboard", notes=()) -> str:
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
    lines += [x for n in notes for x in ("", md_escape(n))]
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
          legend: str | None = None, tex_path=None, reference: dict | None = None, judged_below: float = 0.8,
          lineage: dict | None = None, notes=()) -> None:
    """The leaderboard over every benchmark; ``significance``: {(benchmark, task): {model: marker}};
    ``reference``: extra rows {name: {(benchmark, task): value}} (e.g. MTEB results), never tested; ``lineage``:
    {(benchmark, task, run): lineage JSON} of the LLM-reranked runs; ``notes``: more sentences for every format."""
    table = collect(metric_files, metric)
    for name, row in (reference or {}).items():
        if name in table:
            raise InputError(f"reference row {name!r} has the name of a run.", fix="rename the reference model.")
        table[name] = row
    header, rows, groups = build_grouped(table)
    judged = judged_table(metric_files)
    quality, quality_notes = quality_marks(header, judged, judged_below, unusable_answers(lineage or {}))
    cell_marks = merge_marks(column_marks(header, significance or {}), quality)
    notes = [order_note(groups), *quality_notes, *notes]
    write_text(Path(csv_path), to_csv(header, rows, judged_columns(header, rows, judged)))
    write_text(Path(md_path), to_markdown(header, rows, metric, cell_marks, legend, notes=notes))
    if tex_path is not None:
        write_text(Path(tex_path), to_latex(header, rows, metric, cell_marks, legend, notes=notes))
    if html_path is not None:
        write_text(Path(html_path), to_html(header, rows, metric, cell_marks, legend, title="Leaderboard",
                                            table_id="leaderboard", notes=notes))


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


def read_board_marks(path, benchmark: str) -> dict:
    """{(benchmark, task): {model: marks}} of the significance marks (``*``, dagger) in a per-benchmark leaderboard
    CSV (``benchmark_csv``'s ``<task> sig`` columns): an earlier run's, for the combined table."""
    import csv

    keep = "*\u2020"
    out: dict = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            for name, value in row.items():
                if name and name.endswith(" sig") and value:
                    mark = "".join(c for c in value if c in keep)
                    if mark:
                        out.setdefault((benchmark, name[:-len(" sig")]), {})[row["model"]] = mark
    return out


def build_benchmark(table: dict, benchmark: str) -> tuple[list[str], list[list]]:
    """One benchmark's table: a column per task, then the average over its tasks; order: ``arrange``."""
    header, rows, _ = build_benchmark_grouped(table, benchmark)
    return header, rows


def build_benchmark_grouped(table: dict, benchmark: str):
    """``build_benchmark`` and its row groups [(label, rows)]."""
    tasks = sorted({t for row in table.values() for b, t in row if b == benchmark})
    if not tasks:
        raise ValueError(f"no scored runs for benchmark {benchmark!r}")
    header = ["model"] + tasks + ["avg"]
    mine = {m: {c: v for c, v in row.items() if c[0] == benchmark} for m, row in table.items()}
    mine = {m: row for m, row in mine.items() if any(v is not None for v in row.values())}
    rows, groups = [], []
    for label, models in arrange(mine, [(benchmark, t) for t in tasks]):
        groups.append((label, len(models)))
        for model in models:
            values = [mine[model].get((benchmark, t)) for t in tasks]
            rows.append([model] + values + [_mean(values)])
    return header, rows, groups


def benchmark_csv(header, rows, cell_marks: dict, extra=([], None)) -> str:
    """Values with 5 decimals; after them one ``<task> sig`` column per task with the markers (significance, and
    the ``°`` / ``§`` of ``quality_marks``), then ``<task> judged@10`` where the metrics hold it."""
    tasks = header[1:-1]
    names, values = extra
    lines = [",".join(header + [f"{t} sig" for t in tasks] + names)]
    for i, r in enumerate(rows):
        vals = [_csv_value(v) for v in r[1:]]
        sig = [cell_marks.get((r[0], j), "") for j in range(1, len(tasks) + 1)]
        lines.append(",".join([r[0]] + vals + sig + (values[i] if values else [])))
    return "\n".join(lines) + "\n"


def write_benchmark(metric_files, benchmark: str, csv_path, md_path, html_path, metric: str = "ndcg_at_10",
                    significance=None, legend: str | None = None, notes=(), tex_path=None, judged_below: float = 0.8,
                    lineage: dict | None = None) -> None:
    header, rows, groups = build_benchmark_grouped(collect(metric_files, metric), benchmark)
    judged = judged_table(metric_files)
    quality, quality_notes = quality_marks(header[:-1], judged, judged_below, unusable_answers(lineage or {}),
                                           benchmark=benchmark)
    cell_marks = merge_marks(column_marks(header, significance or {}, benchmark=benchmark), quality)
    notes = [order_note(groups, per="task"), *quality_notes, *notes]
    title = f"Leaderboard: {benchmark}"
    write_text(Path(csv_path), benchmark_csv(header, rows, cell_marks,
                                             judged_columns(header, rows, judged, benchmark=benchmark)))
    write_text(Path(md_path), to_markdown(header, rows, metric, cell_marks, legend, title=title, notes=notes))
    write_text(Path(html_path), to_html(header, rows, metric, cell_marks, legend, title=title,
                                        table_id=f"leaderboard-{benchmark}", notes=notes))
    if tex_path is not None:
        tex_header = ["model"] + [f"{benchmark}/{t}" for t in header[1:]]
        write_text(Path(tex_path), to_latex(tex_header, rows, metric, cell_marks, legend,
                                            label=tex_label("tab", "leaderboard", benchmark), notes=notes))

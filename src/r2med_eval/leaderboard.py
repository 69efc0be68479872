"""Leaderboard: a row per model, a column per (benchmark, task) with the primary metric, and averages."""

from __future__ import annotations

import math
from pathlib import Path

from .io import read_json, write_text


def collect(metric_files, metric: str = "ndcg_at_10") -> dict:
    """Read metric JSONs written by the score rule into {model: {(benchmark, task): value}}."""
    table: dict[str, dict[tuple[str, str], float]] = {}
    for path in metric_files:
        data = read_json(path)
        if metric not in data["metrics"]:
            raise KeyError(f"{path}: metric {metric!r} is not computed (have: {', '.join(sorted(data['metrics']))}).")
        table.setdefault(data["model"], {})[(data["benchmark"], data["task"])] = data["metrics"][metric]
    return table


def build(table: dict, metric: str = "ndcg_at_10") -> tuple[list[str], list[list]]:
    columns = sorted({c for row in table.values() for c in row})
    benchmarks = sorted({b for b, _ in columns})
    multi = [b for b in benchmarks if sum(1 for c in columns if c[0] == b) > 1]
    header = ["model"] + [f"{b}/{t}" for b, t in columns] + [f"{b}/avg" for b in multi] + ["avg"]
    rows = []
    for model in sorted(table):
        values = [table[model].get(c) for c in columns]
        per_bench = []
        for b in multi:
            vals = [table[model].get(c) for c in columns if c[0] == b]
            per_bench.append(None if any(v is None for v in vals) else math.fsum(vals) / len(vals))
        avg = None if any(v is None for v in values) else math.fsum(values) / len(values)
        rows.append([model] + values + per_bench + [avg])
    rows.sort(key=lambda r: (-(r[-1] if r[-1] is not None else -1.0), r[0]))
    return header, rows


def _fmt(v, scale: float = 1.0) -> str:
    return "" if v is None else f"{v * scale:.2f}" if scale != 1.0 else f"{v:.4f}"


def to_csv(header, rows) -> str:
    lines = [",".join(header)]
    lines += [",".join([r[0]] + ["" if v is None else f"{v:.5f}" for v in r[1:]]) for r in rows]
    return "\n".join(lines) + "\n"


def to_markdown(header, rows, metric: str = "ndcg_at_10") -> str:
    best = {}
    for j in range(1, len(header)):
        vals = [r[j] for r in rows if r[j] is not None]
        best[j] = max(vals) if vals else None
    lines = [f"# Leaderboard ({metric} x 100; best per column in bold; empty = not run)", "",
             "| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for r in rows:
        cells = [r[0]]
        for j, v in enumerate(r[1:], start=1):
            text = _fmt(v, 100.0)
            cells.append(f"**{text}**" if v is not None and v == best[j] and len(rows) > 1 else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(metric_files, csv_path, md_path, metric: str = "ndcg_at_10") -> None:
    header, rows = build(collect(metric_files, metric), metric)
    write_text(Path(csv_path), to_csv(header, rows))
    write_text(Path(md_path), to_markdown(header, rows, metric))

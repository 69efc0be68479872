"""CliniQ's internal files and tables (the stages in ``stages/`` read and write them).

Files (MIMIC text only under ``resources/``, owner-only):

* ``resources/cliniq/{benchmark}/{task}/corpus.jsonl`` (0600): the rebuilt chunks {id, title, text};
  ``results/data/{benchmark}/{task}/corpus.jsonl`` is a relative symlink to it, for the retrievers.
* ``resources/cliniq/{benchmark}/{task}/{variants,generated,llm_cache}/`` (0600 files, 0700 folders): what LLM
  jobs on the benchmark asked and were answered (``workflow.paths.PRIVATE_*``); ``resources/logs/`` the logs that
  may carry note text (an LLM server's output).
* ``results/data/{benchmark}/{task}/chunk_ids.txt``, ``chunk_stats.json``: ids and counts.
* ``results/data/{benchmark}/{task}/cliniq_qrels.tsv``: ``query_id<TAB>chunk_id<TAB>label`` in file
  order (repeats kept; label a match type, or ``irrelevant`` from new judgments); ``qrels.tsv``
  (TREC, binary) for the generic scorer; ``query_types.tsv``; ``queries.jsonl``.
* ``results/cliniq/{benchmark}/{task}/{model}.json``: every measure of one run.
* ``results/cliniq/{benchmark}/by_match_type.{csv,md}``, ``by_query_type.{csv,md}``, ``pool.tsv``: the CSV long
  (model, setting, group, metric), the Markdown wide as in CliniQ's paper (``cliniq_tables``), also as LaTeX in
  ``results/tables/cliniq-{benchmark}-by_{grouping}.tex``.
"""

from __future__ import annotations

import csv
import io as _io
import math
import os
from pathlib import Path

from ..io import read_lines
from . import corpus as cc

TABLE_HEADER = ("model", "setting", "group", "metric", "value", "n_queries")


def link_relative(target: Path, link: Path) -> None:
    """``link`` -> ``target`` as a relative symlink, replaced atomically."""
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.link"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target.resolve(), link.parent.resolve()), tmp)
    os.replace(tmp, link)


def read_cliniq_qrels(path) -> tuple[list[tuple[str, str, str]], set]:
    rows, irrelevant = [], set()
    for line in read_lines(path):
        q, c, t = line.split("\t")
        if t == cc.IRRELEVANT:
            irrelevant.add((q, c))
        else:
            rows.append((q, c, t))
    return rows, irrelevant


def judged_chunks(rows, irrelevant) -> dict[str, set]:
    """Query -> every chunk a judgment row names (relevant or not), from ``read_cliniq_qrels``."""
    judged: dict[str, set] = {}
    for q, c, _ in rows:
        judged.setdefault(q, set()).add(c)
    for q, c in irrelevant:
        judged.setdefault(q, set()).add(c)
    return judged


def read_query_types(path) -> dict[str, str]:
    return dict(line.split("\t") for line in read_lines(path))


def clean_json(obj):
    """NaN (a group with nothing to score) and the infinities as null in JSON."""
    if isinstance(obj, float):
        return None if obj != obj or obj in (math.inf, -math.inf) else round(obj, 6)
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clean_json(v) for v in obj]
    return obj


def table_csv(rows) -> str:
    buf = _io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=TABLE_HEADER, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({**r, "value": "" if r["value"] is None else f"{r['value']:.6f}"})
    return buf.getvalue()


def nan_back(result: dict) -> dict:
    """JSON null back to NaN for table_rows."""
    def conv(obj):
        if isinstance(obj, dict):
            return {k: (float("nan") if v is None and k != "n" else conv(v)) for k, v in obj.items()}
        return obj
    return {k: conv(result[k]) for k in ("multi", "single")}


def completeness_markdown(models, results) -> str:
    lines = ["## Judgment completeness", "",
             "| model | judged@10 | condensed MRR | condensed nDCG@10 | condensed nDCG@10 (CliniQ) | condensed R@100 |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in models:
        r = results[m]
        c = r["condensed"]["all"]
        f = ["-" if v is None else f"{v:.4f}" for v in (r["judged_at_10"]["all"]["judged_at_10"], c["mrr"],
                                                        c["ndcg_at_10"], c["ndcg_at_10_cliniq"], c["recall_at_100"])]
        lines.append(f"| {m} | " + " | ".join(f) + " |")
    return "\n".join(lines) + "\n"

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
  (model, setting, group, metric), the Markdown wide as in CliniQ's paper (``wide_tables``), also as LaTeX in
  ``results/tables/cliniq-{benchmark}-by_{grouping}.tex``.
"""

from __future__ import annotations

import csv
import io as _io
import os
from pathlib import Path

from . import cliniq_corpus as cc
from .io import read_lines

TABLE_HEADER = ("model", "setting", "group", "metric", "value", "n_queries")


def link_relative(target: Path, link: Path) -> None:
    """``link`` -> ``target`` as a relative symlink, replaced atomically."""
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.link"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target.resolve(), link.parent.resolve()), tmp)
    os.replace(tmp, link)


def protect_up_to(path, top) -> None:
    """MIMIC-derived output ``path`` (a file or a folder tree) owner-only, and every folder between it and ``top``
    (``top`` included): the folders Snakemake made for a job's outputs under ``resources/cliniq/<benchmark>``."""
    from .io import protect_tree

    protect_tree(path)
    top = Path(top).resolve()
    folder = Path(path).resolve().parent
    while folder == top or top in folder.parents:
        os.chmod(folder, 0o700)
        folder = folder.parent


def open_private(path):
    """A new text file readable by its owner only (0600) in a 0700 folder (missing folders are made 0700): a
    log that may carry MIMIC-derived text."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return open(fd, "w", encoding="utf-8")


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
    """NaN (a group with nothing to score) as null in JSON."""
    if isinstance(obj, float):
        return None if obj != obj else round(obj, 6)
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


# ---------------------------------------------------------------- wide tables (the CliniQ paper's shape)

# One wide table per metric: single- and multi-patient side by side (single first), a column per group.
WIDE_METRICS = (("MRR", {"single": "mrr", "multi": "mrr"}),
                ("nDCG", {"single": "ndcg", "multi": "ndcg_at_10_cliniq"}),
                ("MAP and Recall@100", {"single": "map", "multi": "recall_at_100"}),
                ("nDCG@10, standard", {"multi": "ndcg_at_10"}))
SETTING_NAMES = {"single": "Single-patient", "multi": "Multi-patient"}


def wide_tables(rows) -> list[dict]:
    """The long rows of ``cliniq.table_rows`` as the CliniQ paper's tables: models as rows; per setting
    (single, then multi) a column per group (``all`` first). A group nothing was scored on (no query of
    that type) is left out and named in ``dropped``. Each table: {title, columns [(setting header, group)],
    rows [model, value...], counts {column: n}, dropped}."""
    from .tables import metric_label

    models = list(dict.fromkeys(r["model"] for r in rows))
    index = {(r["model"], r["setting"], r["group"], r["metric"]): r for r in rows}
    out = []
    for title, per_setting in WIDE_METRICS:
        columns, keys, counts, dropped = [], [], {}, []
        for setting in ("single", "multi"):
            metric = per_setting.get(setting)
            groups = list(dict.fromkeys(r["group"] for r in rows if r["setting"] == setting and r["metric"] == metric))
            head = f"{SETTING_NAMES[setting]} ({metric_label(metric)})" if metric else ""
            for group in groups:
                cells = [index.get((m, setting, group, metric)) for m in models]
                if all(c is None or c["value"] is None for c in cells):
                    dropped.append(f"{SETTING_NAMES[setting].lower()} {group}")
                    continue
                columns.append((head, group))
                keys.append((setting, group, metric))
                counts[(head, group)] = max(c["n_queries"] for c in cells if c is not None)
        if not columns:
            continue
        table = [[m] + [(index.get((m, s, g, me)) or {}).get("value") for s, g, me in keys] for m in models]
        out.append({"title": title, "columns": columns, "keys": keys, "rows": table, "counts": counts,
                    "dropped": dropped})
    return out


def wide_markdown(tables, title: str) -> str:
    """The wide tables in Markdown (x 100, best per column in bold); the setting in each column name."""
    from .tables import best_per_column, md_escape

    out = [f"# {md_escape(title)}", "", "Models as rows; single- and multi-patient side by side; x 100; best per "
           "column in bold; the number of scored queries (single-patient: query-note pairs) under each column.", ""]
    for t in tables:
        best = best_per_column(t["rows"]) if len(t["rows"]) > 1 else {}
        names = [f"{k[0]}: {g} (n={t['counts'][(h, g)]})" for (h, g), k in zip(t["columns"], t["keys"])]
        out += [f"## {md_escape(t['title'])}", "", "; ".join(md_escape(h) for h in dict.fromkeys(
            h for h, _ in t["columns"])) + ".", "",
            "| model | " + " | ".join(md_escape(n) for n in names) + " |", "|---|" + "---:|" * len(names)]
        for r in t["rows"]:
            cells = ["" if v is None else (f"**{v * 100:.2f}**" if best.get(j) == v else f"{v * 100:.2f}")
                     for j, v in enumerate(r[1:], start=1)]
            out.append(f"| {md_escape(r[0])} | " + " | ".join(cells) + " |")
        if t["dropped"]:
            out += ["", "Not shown (nothing scored): " + md_escape(", ".join(t["dropped"])) + "."]
        out.append("")
    return "\n".join(out)


def wide_latex(tables, title: str, label: str) -> str:
    """The wide tables as booktabs tables (one float each), single- and multi-patient under spanning headers."""
    from .tables import latex_table, tex_label

    parts = []
    for t in tables:
        counts = "; ".join(f"{k[0]} {g}: {t['counts'][(h, g)]}" for (h, g), k in zip(t["columns"], t["keys"]))
        dropped = [f"Not shown (nothing scored): {', '.join(t['dropped'])}."] if t["dropped"] else []
        parts.append(latex_table(t["columns"], t["rows"], caption=f"{title}: {t['title']} \u00d7 100.",
                                 label=tex_label(label, t["title"]), notes=[f"Queries per column: {counts}.",
                                                                             *dropped]))
    return "\n".join(parts)

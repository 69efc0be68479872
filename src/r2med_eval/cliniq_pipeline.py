"""The CliniQ rules' work, as functions of the ``snakemake`` object (called from ``stages``).

Files (MIMIC text only under ``resources/``, owner-only):

* ``resources/cliniq/{benchmark}/{task}/corpus.jsonl`` (0600): the rebuilt chunks {id, title, text};
  ``results/data/{benchmark}/{task}/corpus.jsonl`` is a relative symlink to it, for the retrievers.
* ``results/data/{benchmark}/{task}/chunk_ids.txt``, ``chunk_stats.json``: ids and counts.
* ``results/data/{benchmark}/{task}/cliniq_qrels.tsv``: ``query_id<TAB>chunk_id<TAB>label`` in file
  order (repeats kept; label a match type, or ``irrelevant`` from new judgments); ``qrels.tsv``
  (TREC, binary) for the generic scorer; ``query_types.tsv``; ``queries.jsonl``.
* ``results/cliniq/{benchmark}/{task}/{model}.json``: every measure of one run.
* ``results/cliniq/{benchmark}/by_match_type.{csv,md}``, ``by_query_type.{csv,md}``, ``pool.tsv``.
"""

from __future__ import annotations

import csv
import io as _io
import logging
import os
from pathlib import Path

from . import cliniq, cliniq_corpus as cc
from .io import read_json, read_lines, write_json, write_jsonl, write_text

log = logging.getLogger("r2med_eval")

TABLE_HEADER = ("model", "setting", "group", "metric", "value", "n_queries")


def download_annotations(sm) -> None:
    spec = sm.params.spec
    sums = cc.download_annotations(Path(sm.output[0]).parent, commit=spec["commit"], base_url=spec["base_url"],
                                   sha256=spec.get("sha256"))
    log.info("CliniQ annotations at commit %s: %d files checked", spec["commit"], len(sums))


def chunk(sm) -> None:
    spec = sm.params.spec
    stats = cc.chunk_corpus(sm.input.notes, sm.input.hadm_ids, sm.output.corpus, expected=spec["expected_chunks"],
                            allow_missing_notes=spec["allow_missing_notes"])
    ids = stats.pop("chunk_ids")
    write_text(sm.output.ids, "".join(i + "\n" for i in ids))
    stats.update({"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task,
                  "noteevents": str(sm.input.notes), "hadm_ids_sha256": cc.sha256_file(sm.input.hadm_ids)})
    write_json(sm.output.stats, stats)
    log.info("NOTEEVENTS rows %d; 'Discharge summary' rows %d (repeats of a HADM_ID skipped %d, not listed %d); "
             "listed HADM_IDs %d, found %d, absent %d%s", stats["rows"], stats["discharge_rows"],
             stats["discharge_duplicate_rows_skipped"], stats["discharge_rows_not_listed"], stats["listed_hadm_ids"],
             stats["notes_found"], stats["hadm_ids_absent"],
             (": " + ", ".join(stats["hadm_ids_absent_list"])) if stats["hadm_ids_absent_list"] else "")
    log.info("chunks %d (expected %s, difference %s); oversize chunks %d; notes without chunks %d; missing texts "
             "read as 'nan' %d", stats["chunks"], spec["expected_chunks"],
             "-" if spec["expected_chunks"] is None else f"{stats['chunks'] - spec['expected_chunks']:+d}",
             stats["oversize_chunks"], len(stats["notes_without_chunks"]), len(stats["missing_text_as_nan"]))


def _link(target: Path, link: Path) -> None:
    """``link`` -> ``target`` as a relative symlink, replaced atomically."""
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.link"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target.resolve(), link.parent.resolve()), tmp)
    os.replace(tmp, link)


DERIVED_DIRS = ("results/index", "results/embeddings")


def protect_derived(benchmark: str, root: Path = Path(".")) -> None:
    """The Lucene index (and its temporary copy of the text) and the embeddings are derived from MIMIC
    text: their benchmark folders are created owner-only (0700) before any rule writes there."""
    for base in DERIVED_DIRS:
        folder = root / base / benchmark
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)


def link_corpus(sm) -> None:
    """The retrievers' corpus.jsonl: a relative symlink to the owner-only chunks under resources/."""
    protect_derived(sm.wildcards.benchmark)
    _link(Path(sm.input.corpus), Path(sm.output.corpus))
    log.info("linked %s -> %s", sm.output.corpus, sm.input.corpus)


def prepare_queries(sm) -> None:
    queries, qtypes = cc.read_queries(Path(sm.input.queries[0]).parent)
    write_jsonl(sm.output.queries, ({"id": q, "text": t} for q, t in queries.items()))
    write_text(sm.output.query_types, "".join(f"{q}\t{t}\n" for q, t in qtypes.items()))
    log.info("queries %d: %s", len(queries), {t: sum(1 for v in qtypes.values() if v == t) for t in cc.QUERY_TYPES})


def prepare(sm) -> None:
    spec = sm.params.spec
    folder = Path(sm.input.hadm_ids).parent
    queries, qtypes = cc.read_queries(folder)
    rows, stats = cc.read_qrels(folder, queries)
    new = []
    if spec.get("new_judgments"):
        new = cc.read_new_judgments(spec["new_judgments"], queries)
        log.info("merged %d new judgments from %s (%d relevant, %d not relevant)", len(new), spec["new_judgments"],
                 sum(1 for r in new if r[2] != cc.IRRELEVANT), sum(1 for r in new if r[2] == cc.IRRELEVANT))
    ids = read_lines(sm.input.ids)
    stats.update(cc.check_chunks(rows, set(ids), spec["missing_chunk_qrels_max"], folder / "qrels_*.tsv"))
    all_rows = rows + new
    write_text(sm.output.cliniq_qrels, "".join(f"{q}\t{c}\t{t}\n" for q, c, t in all_rows))
    binary: dict[str, dict[str, int]] = {}
    for q, c, t in all_rows:
        grade = 0 if t == cc.IRRELEVANT else 1
        binary.setdefault(q, {})[c] = max(grade, binary.get(q, {}).get(c, 0))
    from .datasets import write_qrels

    write_qrels(binary, sm.output.qrels)
    by_type = {t: sum(1 for r in all_rows if r[2] == t) for t in cc.MATCH_TYPES + (cc.IRRELEVANT,)}
    judged = {q for q, _, t in all_rows if t != cc.IRRELEVANT}
    stats.update({"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "layout": "cliniq",
                  "documents": len(ids), "queries": len(queries),
                  "queries_by_type": {t: sum(1 for v in qtypes.values() if v == t) for t in cc.QUERY_TYPES},
                  "judged_queries": len(judged), "unjudged_queries": len(queries) - len(judged),
                  "unjudged_query_ids": [q for q in queries if q not in judged],
                  "judgments_by_match_type": by_type, "new_judgments": len(new),
                  "files": {name: {"sha256": cc.sha256_file(folder / name)} for name in cc.ANNOTATION_FILES}})
    write_json(sm.output.stats, stats)
    log.info("queries %d (%s); judgments %d by match type %s; repeated (query, chunk) rows %d; on chunks absent from "
             "the corpus %d", len(queries), stats["queries_by_type"], len(all_rows), by_type,
             stats["judgments_repeating_a_chunk"], stats["judgments_on_absent_chunks"])


def read_cliniq_qrels(path) -> tuple[list[tuple[str, str, str]], set]:
    rows, irrelevant = [], set()
    for line in read_lines(path):
        q, c, t = line.split("\t")
        if t == cc.IRRELEVANT:
            irrelevant.add((q, c))
        else:
            rows.append((q, c, t))
    return rows, irrelevant


def read_query_types(path) -> dict[str, str]:
    return dict(line.split("\t") for line in read_lines(path))


def _clean(obj):
    """NaN (a group with nothing to score) as null in JSON."""
    if isinstance(obj, float):
        return None if obj != obj else round(obj, 6)
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def score(sm) -> None:
    from . import runs

    run = runs.read_run(sm.input.run)
    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)
    qtypes = read_query_types(sm.input.query_types)
    ids = read_lines(sm.input.ids)
    result = cliniq.evaluate(run, rows, qtypes, ids, irrelevant)
    c = result["counts"]
    depth = runs.run_depth(run)
    if c.get("unranked_chunks"):
        log.warning("single-patient: %d chunks of scored notes are not in the run (depth %d); they are ranked after "
                    "the retrieved ones in chunk order. For eval.py's exact figures give the model top_k >= %d "
                    "(the corpus size)", c["unranked_chunks"], depth, len(ids))
    out = {"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "model": sm.wildcards.model,
           "run": str(sm.input.run), "run_depth": depth, "corpus_chunks": len(ids), **result}
    write_json(sm.output.metrics, _clean(out))
    m, s = result["multi"]["all"], result["single"]["all"]
    log.info("multi-patient (%d queries): MRR %.4f nDCG@10 %.4f (CliniQ-compatible %.4f) R@100 %.4f; "
             "single-patient (%d notes): MRR %.4f nDCG %.4f MAP %.4f; judged@10 %.4f; counts %s", m["n"], m["mrr"],
             m["ndcg_at_10"], m["ndcg_at_10_cliniq"], m["recall_at_100"], s["n"], s["mrr"], s["ndcg"], s["map"],
             result["judged_at_10"]["all"]["judged_at_10"],
             {k: v for k, v in c.items() if k != "unjudged_query_ids"})


def _csv(rows) -> str:
    buf = _io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=TABLE_HEADER, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({**r, "value": "" if r["value"] is None else f"{r['value']:.6f}"})
    return buf.getvalue()


def _markdown(rows, title: str) -> str:
    """One table per setting: rows model x group, columns metrics."""
    out = [f"# {title}", ""]
    for setting in ("multi", "single"):
        sel = [r for r in rows if r["setting"] == setting]
        if not sel:
            continue
        metrics = list(dict.fromkeys(r["metric"] for r in sel))
        out += [f"## {setting}-patient", "", "| model | group | " + " | ".join(metrics) + " | n |",
                "|---|---|" + "---:|" * (len(metrics) + 1)]
        keys = list(dict.fromkeys((r["model"], r["group"]) for r in sel))
        for model, group in keys:
            cells = {r["metric"]: r for r in sel if r["model"] == model and r["group"] == group}
            values = ["-" if cells[m]["value"] is None else f"{cells[m]['value']:.4f}" for m in metrics]
            out.append(f"| {model} | {group} | " + " | ".join(values) + f" | {cells[metrics[0]]['n_queries']} |")
        out.append("")
    return "\n".join(out)


def report(sm) -> None:
    from . import runs

    models = list(sm.params.models)
    results = {m: read_json(p) for m, p in zip(models, sm.input.metrics)}
    for grouping, csv_out, md_out, title in (
            ("by_match_type", sm.output.match_csv, sm.output.match_md, "CliniQ by match type"),
            ("by_query_type", sm.output.query_csv, sm.output.query_md, "CliniQ by query type")):
        rows = [r for m in models for r in cliniq.table_rows(m, _nan(results[m]), grouping)]
        write_text(csv_out, _csv(rows))
        write_text(md_out, _markdown(rows, f"{title} ({sm.wildcards.benchmark})") + "\n" + _completeness(models, results))
    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)
    judged: dict[str, set] = {}
    for q, c, _ in rows:
        judged.setdefault(q, set()).add(c)
    for q, c in irrelevant:
        judged.setdefault(q, set()).add(c)
    qtypes = read_query_types(sm.input.query_types)
    pooled = cliniq.pool({m: runs.read_run(p) for m, p in zip(models, sm.input.runs)}, judged, sm.params.depth,
                         queries=qtypes)
    lines = ["query_id\tchunk_id\tquery_type\tbest_rank\tn_systems\tsystems"]
    lines += [f"{p['query_id']}\t{p['chunk_id']}\t{qtypes[p['query_id']]}\t{p['best_rank']}\t{len(p['systems'])}\t"
              f"{','.join(p['systems'])}" for p in pooled]
    write_text(sm.output.pool, "\n".join(lines) + "\n")
    log.info("pool of unjudged chunks in the top %d of %d systems: %d (query, chunk) pairs over %d queries",
             sm.params.depth, len(models), len(pooled), len({p["query_id"] for p in pooled}))


def _nan(result: dict) -> dict:
    """JSON null back to NaN for table_rows."""
    def conv(obj):
        if isinstance(obj, dict):
            return {k: (float("nan") if v is None and k != "n" else conv(v)) for k, v in obj.items()}
        return obj
    return {k: conv(result[k]) for k in ("multi", "single")}


def _completeness(models, results) -> str:
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

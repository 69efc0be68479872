"""The published nDCG@10 on R2MED and ``results/r2med_vs_paper.md``: our scores beside each published source's, each
run set against the numbers published under its own evaluation protocol, with the known reasons for differences.

The published sources are ``SOURCES``, a list: each is a data file (``data/reference/``, declared in ``DATA_FILES``
so that an edit reruns the report), its name, the protocol its numbers were made under (``benchmarks.protocols``;
a row may name its own) and how a run names its row. A new source is one more entry here and its file.

* ``r2med``: R2MED's own table (``r2med_paper_ndcg10.tsv``, its repository's results/), R2MED's protocol; a run names
  its row by ``paper_name`` (retrievers, query variants of R2MED's setting, rerank runs: ``Registry.paper_key``).
* ``reasonembed``: Table 3 of ReasonEmbed (arXiv 2510.08252, ``reasonembed_2510.08252_table3_r2med_ndcg10.tsv``),
  ReasonEmbed's protocol (four rows taken from the R2MED paper: R2MED's); a retriever names its row by
  ``published_as: {reasonembed: <group>/<model>}``.

A run is compared with a published row when its protocol is the row's, or when it declares none (then its
published names alone decide, as before protocols were declared); a row published under another protocol is
listed as not compared, with both protocols named.
"""

from __future__ import annotations

import csv
import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..benchmarks import protocols
from ..hub.datasets import R2MED_TASKS
from ..io import read_json, write_text
from ..scoring import metric_table

log = logging.getLogger(__name__)

# part of the code hash of the rules using this module, one file per published source
DATA_FILES = ("data/reference/r2med_paper_ndcg10.tsv", "data/reference/reasonembed_2510.08252_table3_r2med_ndcg10.tsv")
REPO = Path(__file__).resolve().parents[3]
PAPER_TABLE = REPO / DATA_FILES[0]
FLAG_ABOVE = 0.005  # 0.5 points of nDCG@10 x 100
PAPER_ORDER = {t: i for i, t in enumerate(R2MED_TASKS)}  # the paper's order of its tasks

KNOWN_BY_PAPER_NAME = {
    "medcpt": "R2MED's code passes the MedCPT *article* encoder for queries and documents alike; `medcpt-official` "
              "reproduces that, `medcpt` (query encoder for queries) is expected to differ (config/r2med_models.yaml).",
    "nv": "the published NV-Embed-v2 row was scored with k up to 1000 (a different code path from the one in src/).",
}
# ... and by our model type.
KNOWN_BY_TYPE = {
    "bm25_lucene": "BM25 over a Lucene index (query terms weigh 1, Lucene's lossy document-length norms) is not "
                   "the paper's gensim LuceneBM25Model; compare the `bm25_paper` entry.",
    "bm25_paper": "tokenised by pyserini 1.6.0's Lucene analyzer (the paper's pyserini version is not stated); "
                  "dataset revision as pinned in config.",
    "dense": "weights at `revision: main` (config/r2med_models.yaml), not necessarily R2MED's checkpoints; at 62b7074 "
             "eval_retrieval.py looks instructions up by names 6 of 8 dictionaries lack, so the published runs came "
             "from another code state; fp16/bf16 and padding noise.",
    "cross_encoder": "reranks our own first-stage run, not R2MED's saved top-k file.",
    "rankllama": "reranks our own first-stage run, not R2MED's saved top-k file; fp16 on another GPU and library "
                 "versions.",
}
# ... and by source, for the sources other than R2MED's own.
KNOWN_BY_SOURCE = {
    "reasonembed": "weights at `revision: main` (config/r2med_reasoning_models.yaml); the authors ran FlagEmbedding in "
                   "fp16 on GPUs (ReasonIR in its checkpoint's dtype) under transformers 4, with FAISS on the GPU when "
                   "present; the table prints 2 decimals.",
}


def read_paper_table(path=PAPER_TABLE) -> dict[tuple, dict]:
    """(section, retriever, reranker, depth, method, llm, task) -> {ndcg_at_10, source_commit, source_path}."""
    rows = {}
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    for row in csv.DictReader(lines, delimiter="\t"):
        key = (row["section"], row["retriever"], row["reranker"], row["depth"], row["method"], row["llm"],
               row["task"])
        rows[key] = {"ndcg_at_10": float(row["ndcg_at_10"]), "source_commit": row["source_commit"],
                     "source_path": row["source_path"]}
    return rows


def read_reasonembed_table(path) -> dict[tuple, dict]:
    """(row, task) -> {ndcg_at_10 (a fraction: the table prints x 100, 2 decimals), protocol, where} of ReasonEmbed's
    Table 3 (one line per model, one column per task)."""
    rows = {}
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    for row in csv.DictReader(lines, delimiter="\t"):
        for task in R2MED_TASKS:
            rows[(row["row"], task)] = {"ndcg_at_10": round(float(row[task]) / 100, 6), "protocol": row["protocol"],
                                        "where": f"arXiv 2510.08252 Table 3, {row['row']}"}
    return rows


@dataclass(frozen=True)
class Source:
    """A published table: ``read(path)`` -> {(row, R2MED task): {ndcg_at_10, where, protocol (optional)}}; ``row(key)``
    the row a run names, from its ``Params.r2med_vs_paper`` keys entry (None: none)."""
    name: str
    title: str
    file: str
    protocol: str
    read: Callable[[Path], dict]
    row: Callable[[dict], object]


def _r2med_rows(path) -> dict[tuple, dict]:
    return {(k[:-1], k[-1]): {"ndcg_at_10": v["ndcg_at_10"], "where": f"{v['source_path']}@{v['source_commit'][:7]}"}
            for k, v in read_paper_table(path).items()}


SOURCES = (
    Source("r2med", "R2MED (Li et al. 2025, arXiv 2505.14558; its repository's results/ at 62b7074)", DATA_FILES[0],
           "r2med", _r2med_rows, lambda key: tuple(key["key"]) if key.get("key") else None),
    Source("reasonembed", "ReasonEmbed (arXiv 2510.08252), Table 3", DATA_FILES[1], "reasonembed",
           read_reasonembed_table, lambda key: (key.get("published_as") or {}).get("reasonembed")),
)
BY_NAME = {s.name: s for s in SOURCES}


def read_sources(files: dict | None = None) -> dict[str, dict]:
    """Every source's rows, by source name; ``files`` maps a source's name to another file (tests)."""
    files = files or {}
    return {s.name: s.read(files.get(s.name, REPO / s.file)) for s in SOURCES}


@functools.cache
def _row_names(source: str) -> frozenset:
    src = BY_NAME[source]
    return frozenset(r for r, _ in src.read(REPO / src.file))


def published_problem(published_as: dict) -> tuple[str, str] | None:
    """(what is wrong, after the entry's name; the fix, ``{name}`` for it) when ``published_as`` names a source that
    is not one, or a row its table lacks; None when every name is known (the configuration check)."""
    from ..errors import did_you_mean, name_list

    known = [s.name for s in SOURCES if s.name != "r2med"]
    for source, row in published_as.items():
        if source not in known:
            hint = did_you_mean(source, known)
            return (f".published_as names {source!r}, which is not a published source{'; ' + hint if hint else ''} "
                    f"(known: {name_list(known)}; R2MED's own table is named by paper_name)",
                    f"name one of {name_list(known)} in models.{{name}}.published_as, or use paper_name")
        src = BY_NAME[source]
        rows = _row_names(source)
        if row not in rows:
            hint = did_you_mean(row, rows)
            return (f".published_as.{source}: {row!r} is not a row of {src.file}{'; ' + hint if hint else ''}",
                    f"name one of its rows: {name_list(sorted(rows))}")
    return None


def _fmt(v) -> str:
    """A score x 100 with two decimals, as in every other table."""
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 100:.2f}"


def _known_reasons(source: str, info: dict, model: str) -> str:
    if source != "r2med":
        return KNOWN_BY_SOURCE.get(source, "") or "no known reason"
    reasons = [KNOWN_BY_PAPER_NAME.get(info["key"][1]), KNOWN_BY_TYPE.get(info["type"])]
    if model == "medcpt-official":
        reasons[0] = None
    return " ".join(r for r in reasons if r) or "no known reason"


def compare(metric_files, stats_files, keys: dict, tasks: dict, sources: dict | None = None,
            empty_hydocs: dict | None = None) -> dict:
    """Rows of the comparison and the statistics checks: one row per (run, task, published number it is set
    against), or one row saying why a (run, task) pair has none. ``keys``: per run, ``Params.r2med_vs_paper``'s entry
    (R2MED's key, type, protocol, published_as); ``sources``: ``read_sources()`` (by default the shipped files). A
    run's protocol is the one its metrics record (``score_run``), else its entry's. ``empty_hydocs``:
    ``"<run> <benchmark>/<task>"`` -> (empty hypothetical documents, queries) for the runs of a model whose R2MED
    wrapper encodes an empty one as NaN (GritLM): a row with any is flagged, whatever the difference and whether the
    paper has the row."""
    empty_hydocs = empty_hydocs or {}
    sources = read_sources() if sources is None else sources
    checks = []
    for path in stats_files:
        st = read_json(path)
        if st.get("paper_check"):
            checks.append({"benchmark": st["benchmark"], "task": st["task"], **st["paper_check"]})
    mismatch = {f"{c['benchmark']}/{c['task']}": c for c in checks if not c["match"]}
    rows = []
    for _, m in metric_table.records(metric_files):
        where = f"{m['benchmark']}/{m['task']}"
        ptask = tasks.get(where)
        info = keys.get(m["model"], {"key": None, "type": None})
        protocol = m.get("protocol", info.get("protocol"))
        base = {"benchmark": m["benchmark"], "task": m["task"], "model": m["model"], "paper_task": ptask,
                "protocol": protocol, "ours": m["metrics"]["ndcg_at_10"], "theirs": None, "diff": None, "flag": False,
                "note": "", "source": "", "published_protocol": None, "where": ""}
        found, missing, other = [], [], []
        if ptask is None:
            base["note"] = "not an R2MED task"
        elif info.get("not_compared"):
            base["note"] = f"not compared, the setting differs from R2MED's: {info['not_compared']}"
        else:
            for src in SOURCES:
                row = src.row(info)
                if row is None:
                    continue
                pub = sources.get(src.name, {}).get((row, ptask))
                if pub is None:
                    missing.append(src.name)
                    continue
                pub_protocol = pub.get("protocol", src.protocol)
                if protocol and protocol != pub_protocol:
                    other.append(f"{m['model']} ({protocol}) against {src.name}'s {row} ({pub_protocol})")
                    continue
                found.append((src, pub, pub_protocol))
            if not (found or missing or other):
                base["note"] = "no paper_name or published_as (or not a published configuration)"
            elif not found and other:
                base["note"] = f"not compared, published under another protocol: {'; '.join(other)}"
            elif not found:
                base["note"] = f"no such published row ({', '.join(missing)})"
        for src, pub, pub_protocol in found:
            row = {**base, "theirs": pub["ndcg_at_10"], "source": src.name, "published_protocol": pub_protocol,
                   "where": pub["where"]}
            row["diff"] = row["ours"] - pub["ndcg_at_10"]
            if abs(row["diff"]) > FLAG_ABOVE and where in mismatch:
                c = mismatch[where]
                row["flag"] = True
                row["note"] = (f"not comparable: this dataset has {c['queries']} queries / {c['documents']} "
                               f"documents, the paper's {ptask} {c['paper_queries']} / {c['paper_documents']} "
                               "(statistics below)")
            elif abs(row["diff"]) > FLAG_ABOVE:
                row["flag"] = True
                row["note"] = _known_reasons(src.name, info, m["model"])
            rows.append(row)
        if not found:
            rows.append(base)
    for row in rows:
        empty, total = empty_hydocs.get(f"{row['model']} {row['benchmark']}/{row['task']}", (0, 0))
        if empty:  # whether or not the paper has the row: R2MED's code would not give this run
            row["flag"] = True
            row["note"] = (f"{empty} of {total} hypothetical documents are empty: R2MED's GritLM wrapper encodes "
                           "them as NaN and BEIR then scores every document of those queries -1 (their top 100 is "
                           "torch.topk's choice among equal scores); here those queries keep their own vector "
                           "(config/r2med_models.yaml). " + row["note"]).strip()
    return {"rows": rows, "checks": checks}


def _pairs(n: int) -> str:
    return f"{n} (run, task) pair{'s' if n != 1 else ''}"


def not_compared(rows) -> list[str]:
    """One sentence per reason a (run, task) pair has no published number beside it, with the count and the runs
    or tasks concerned; the table lists only the pairs that have one."""
    groups: dict[str, list] = {}
    for r in rows:
        if r["theirs"] is None:
            reason = r["note"].split(":")[0] if r["note"].startswith("not compared") else r["note"]
            groups.setdefault(reason, []).append(r)
    out = []
    for reason, rs in groups.items():
        pairs = _pairs(len(rs))
        if reason == "not an R2MED task":
            tasks = sorted({f"{r['benchmark']}/{r['task']}" for r in rs})
            out.append(f"{pairs} on {', '.join(tasks)}: not an R2MED task (a task is R2MED's when its source is "
                       "`R2MED/<Task>` or it sets `paper_task`).")
        elif reason.startswith("not compared, "):
            why = sorted({r["note"].split(": ", 1)[1] for r in rs})
            out.append(f"{pairs}: {reason.removeprefix('not compared, ')}: {'; '.join(why)}.")
        else:
            models = sorted({r["model"] for r in rs})
            out.append(f"{pairs}: {reason}: {', '.join(models)}.")
    return out


def _flag(row: dict) -> str:
    """The flag column: a difference above FLAG_ABOVE, or a flagged row whose run R2MED's code would not give
    (a note says why; it is listed whether or not the paper has the row)."""
    if not row["flag"]:
        return ""
    if row["diff"] is not None and abs(row["diff"]) > FLAG_ABOVE:
        return f"**> {FLAG_ABOVE * 100:g}**"
    return "**see note**"


def _rank(source: str | None) -> int:
    """A source's place in SOURCES (an unknown or no source last)."""
    names = [s.name for s in SOURCES]
    return names.index(source) if source in names else len(names)


def _order(r: dict) -> tuple:
    return r["benchmark"], r["task"], r["model"], _rank(r.get("source"))


def to_markdown(result: dict) -> str:
    rows, checks = result["rows"], result["checks"]
    compared = sorted((r for r in rows if r["theirs"] is not None), key=_order)
    lines = ["# R2MED: our nDCG@10 against the published numbers", ""]
    used = [s for s in SOURCES if any(r.get("source") == s.name for r in compared)]
    if compared:
        pairs = len({(r["benchmark"], r["task"], r["model"]) for r in rows})
        with_number = len({(r["benchmark"], r["task"], r["model"]) for r in compared})
        lines += [f"nDCG@10 x 100. Each run is set against the numbers published under its own evaluation protocol "
                  f"(the run's protocol; `-`: none declared, compared by its published names alone). A difference "
                  f"above {FLAG_ABOVE * 100:g} points is flagged with the known reasons. {with_number} of {pairs} "
                  f"(run, task) pairs have a published number. Published sources:", ""]
        lines += [f"- `{s.name}`: {s.title}, `{s.file}`, numbers under {protocols.get(s.protocol).title} protocol "
                  f"({protocols.get(s.protocol).code})" for s in used] + [""]
    else:
        lines += [f"No comparable runs: {_pairs(len(rows))}, none with a published number, so there is no table "
                  "(and `tables/r2med_vs_paper.tex` holds none).", ""]
    bad = [f"{c['benchmark']}/{c['task']}" for c in checks if not c["match"]]
    if bad:
        lines += [f"**Not comparable:** {', '.join(bad)} {'does' if len(bad) == 1 else 'do'} not hold the paper's "
                  "dataset (query and document counts differ, see the statistics below), so differences there "
                  "say nothing about the retrievers.", ""]
    listed = compared + sorted((r for r in rows if r["theirs"] is None and r["flag"]), key=_order)
    if listed:
        lines += ["| benchmark/task | R2MED task | run | run's protocol | ours | published | source | "
                  "source's protocol | difference | flag | note |",
                  "|---|---|---|---|---:|---:|---|---|---:|---|---|"]
        for r in listed:
            diff = "" if r["diff"] is None else f"{r['diff'] * 100:+.2f}"
            lines.append(f"| {r['benchmark']}/{r['task']} | {r['paper_task'] or '-'} | {r['model']} | "
                         f"{protocols.label(r.get('protocol'))} | {_fmt(r['ours'])} | {_fmt(r['theirs'])} | "
                         f"{r.get('source') or '-'} | {protocols.label(r.get('published_protocol'))} | {diff} | "
                         f"{_flag(r)} | "
                         f"{r['note']} |")
        lines.append("")
    reasons = not_compared([r for r in rows if r not in listed])
    if reasons:
        lines += ["Not listed, without a published number:", ""] + [f"- {x}" for x in reasons] + [""]
    if checks:
        lines += ["## Dataset statistics against the paper", "",
                  "| benchmark/task | R2MED task | queries | paper | documents | paper | |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for c in checks:
            lines.append(f"| {c['benchmark']}/{c['task']} | {c['paper_task']} | {c['queries']} | "
                         f"{c['paper_queries']} | {c['documents']} | {c['paper_documents']} | "
                         f"{'ok' if c['match'] else '**WARNING: differs from the paper**'} |")
        lines.append("")
    where = sorted({(r.get("source") or "-", r.get("where") or "") for r in compared if r.get("where")},
                   key=lambda x: (_rank(x[0]), x[1]))
    if where:
        lines += ["## Sources", ""] + [f"- {src}: `{w}`" for src, w in where] + [""]
    return "\n".join(lines)


def to_latex(result: dict) -> str:
    """The (run, task) pairs with a published number as booktabs tables (x 100): ours, the published number, the
    difference, by R2MED task, each row naming its source and the protocol of the number. Without any such pair, no
    table: a LaTeX comment saying why, so that ``\\input`` adds nothing."""
    from .tables import latex_table

    compared = sorted((r for r in result["rows"] if r["theirs"] is not None),
                      key=lambda r: (PAPER_ORDER.get(r["paper_task"], 99), r["paper_task"], r["model"], r["benchmark"],
                                     _rank(r.get("source"))))
    if not compared:
        return ("% R2MED: our nDCG@10 against the published numbers. No table: "
                f"{_pairs(len(result['rows']))}, none with a published number (results/r2med_vs_paper.md).\n")
    benchmarks: dict[tuple, set] = {}
    for r in compared:
        benchmarks.setdefault((r["paper_task"], r["model"]), set()).add(r["benchmark"])
    several = {task for (task, _), bs in benchmarks.items() if len(bs) > 1}
    rows = [[r["paper_task"], f"{r['model']} ({r['benchmark']})" if r["paper_task"] in several else r["model"],
             protocols.label(r.get("published_protocol")), r.get("source") or "-", r["ours"], r["theirs"], r["diff"]]
            for r in compared]
    columns = [("nDCG@10 \u00d7 100", "ours"), ("nDCG@10 \u00d7 100", "published"),
               ("nDCG@10 \u00d7 100", "difference")]
    flagged = sum(1 for r in compared if r["flag"] and abs(r["diff"]) > FLAG_ABOVE)
    used = [s for s in SOURCES if any(r.get("source") == s.name for r in compared)]
    notes = [f"Sources: {'; '.join(f'{s.name}, {s.title}' for s in used)}. Each run is set against the numbers "
             "published under its own protocol.",
             f"{flagged} of {len(compared)} comparisons differ by more than {FLAG_ABOVE * 100:g} points; the reasons "
             "are in results/r2med_vs_paper.md."]
    notes += [f"{c['benchmark']}/{c['task']} differs from the paper's {c['paper_task']} ({c['queries']} queries / "
              f"{c['documents']} documents against {c['paper_queries']} / {c['paper_documents']}): not comparable."
              for c in result["checks"] if not c["match"]]
    return latex_table(columns, rows, caption="R2MED: our nDCG@10 against the published numbers.",
                       label="tab:r2med-vs-paper", stub=("R2MED task", "Run", "Protocol", "Source"), notes=notes,
                       bold=False, signed={2})


def write_report(metric_files, stats_files, keys, tasks, target, tex_target=None, empty_hydocs: dict | None = None,
                 sources: dict | None = None) -> dict:
    result = compare(metric_files, stats_files, keys, tasks, sources=sources, empty_hydocs=empty_hydocs)
    write_text(target, to_markdown(result))
    if tex_target is not None:
        write_text(tex_target, to_latex(result))
    return result

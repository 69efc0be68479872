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
* ``reasonrank``: ReasonRank-32B's R2MED leaderboard figure from ReasonRank's README (``reasonrank_r2med_ndcg10.tsv``),
  ReasonRank's reranking protocol; the mean of the eight tasks only (task ``average``), over a first stage and depth
  the row names; a rerank run names its row by its reranker's ``published_as: {reasonrank: <row>}``.

A row's task is an R2MED task or ``average``: the mean of the eight, set against a run's mean over the eight tasks of a
benchmark that holds them all (fewer: listed, not compared). A row that names the first stage and depth it reranked
is compared with a rerank run of that first stage (its ``paper_name``) at that depth only, and the report names the
first stage each rerank run reranked (run here, or imported as ``type: run``).

A run is compared with a published row when its protocol is the row's, or when it declares none (then its
published names alone decide, as before protocols were declared); a row published under another protocol is
listed as not compared, with both protocols named (a rerank run is also compared under a reranking protocol whose
first stage's protocol is its own: ``protocols.compatible``).
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
DATA_FILES = ("data/reference/r2med_paper_ndcg10.tsv", "data/reference/reasonembed_2510.08252_table3_r2med_ndcg10.tsv",
              "data/reference/reasonrank_r2med_ndcg10.tsv")
REPO = Path(__file__).resolve().parents[3]
PAPER_TABLE = REPO / DATA_FILES[0]
FLAG_ABOVE = 0.005  # 0.5 points of nDCG@10 x 100
PAPER_ORDER = {t: i for i, t in enumerate(R2MED_TASKS)}  # the paper's order of its tasks
AVERAGE = "average"  # a published row's task: the mean of the eight R2MED tasks

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
    "run": "a run file made elsewhere (its maker's code, checkpoint and library versions).",
}
# ... and by source, for the sources other than R2MED's own.
KNOWN_BY_SOURCE = {
    "reasonembed": "weights at `revision: main` (config/r2med_reasoning_models.yaml); the authors ran FlagEmbedding in "
                   "fp16 on GPUs (ReasonIR in its checkpoint's dtype) under transformers 4, with FAISS on the GPU when "
                   "present; the table prints 2 decimals.",
    "reasonrank": "the published figure is ReasonRank-32B's mean of the eight tasks on the R2MED leaderboard (README, "
                  "2025-08-16) over the first stage its repository ships (e5-mistral-7b-instruct's top 100, "
                  "runs/r2med_<Task>/), on the authors' copy of the corpora (liuwenhan/r2med), served by vLLM 0.8.5 "
                  "on GPUs; its README warns that results vary with the sampling and the vLLM version.",
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


def read_reasonrank_table(path) -> dict[tuple, dict]:
    """(row, task: ``average``) -> {ndcg_at_10 (a fraction; the file holds x 100), first_stage (the first stage's
    paper_name), depth, where} of ReasonRank's published R2MED figures."""
    rows = {}
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    for row in csv.DictReader(lines, delimiter="\t"):
        rows[(row["row"], row["task"])] = {"ndcg_at_10": round(float(row["ndcg_at_10"]) / 100, 6),
                                           "first_stage": row["first_stage"], "depth": row["depth"],
                                           "where": row["where"]}
    return rows


@dataclass(frozen=True)
class Source:
    """A published table: ``read(path)`` -> {(row, R2MED task or ``average``): {ndcg_at_10, where, protocol, first_stage
    and depth (optional)}}; ``row(key)`` the row a run names, from its ``Params.r2med_vs_paper`` keys entry (None:
    none); ``reranks``: its rows are rerankers' (named by a reranker's ``published_as``), not retrievers'."""
    name: str
    title: str
    file: str
    protocol: str
    read: Callable[[Path], dict]
    row: Callable[[dict], object]
    reranks: bool = False


def _r2med_rows(path) -> dict[tuple, dict]:
    return {(k[:-1], k[-1]): {"ndcg_at_10": v["ndcg_at_10"], "where": f"{v['source_path']}@{v['source_commit'][:7]}"}
            for k, v in read_paper_table(path).items()}


def _named_row(source: str, reranks: bool):
    """The row a run names in ``source`` by ``published_as``: a retriever's own, a rerank run's its reranker's."""
    def row(key: dict):
        return None if bool(key.get("first_stage")) != reranks else (key.get("published_as") or {}).get(source)
    return row


SOURCES = (
    Source("r2med", "R2MED (Li et al. 2025, arXiv 2505.14558; its repository's results/ at 62b7074)", DATA_FILES[0],
           "r2med", _r2med_rows, lambda key: tuple(key["key"]) if key.get("key") else None),
    Source("reasonembed", "ReasonEmbed (arXiv 2510.08252), Table 3", DATA_FILES[1], "reasonembed",
           read_reasonembed_table, _named_row("reasonembed", reranks=False)),
    Source("reasonrank", "ReasonRank (Liu et al. 2025, arXiv 2508.07050), its README at 06721fd: ReasonRank-32B's "
           "R2MED leaderboard figure of 2025-08-16, the mean of the eight tasks over e5-mistral-7b-instruct's top 100",
           DATA_FILES[2], "reasonrank", read_reasonrank_table, _named_row("reasonrank", reranks=True), reranks=True),
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


def published_problem(published_as: dict, reranker: bool = False) -> tuple[str, str] | None:
    """(what is wrong, after the entry's name; the fix, ``{name}`` for it) when ``published_as`` names a source that
    is not one or not of the entry's kind (a ``reranker``'s or a retriever's), or a row its table lacks; None when
    every name is known (the configuration check)."""
    from ..errors import did_you_mean, name_list

    known = [s.name for s in SOURCES if s.name != "r2med" and s.reranks == reranker]
    other = {s.name for s in SOURCES if s.name != "r2med"} - set(known)
    for source, row in published_as.items():
        if source in other:
            kind = ("retrievers'", "a reranker") if reranker else ("rerankers'", "a retriever")
            return (f".published_as names {source!r}, whose rows are {kind[0]}, not {kind[1]}'s",
                    f"remove {source} from models.{{name}}.published_as" + (f", or name one of {name_list(known)}"
                                                                           if known else ""))
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


def first_stage(info: dict, quote: str = "`") -> str:
    """Which first stage a rerank run reranked, in words (its keys entry's ``first_stage``), its name in ``quote``."""
    first = info.get("first_stage") or {}
    if first.get("type") == "run":
        return f"{quote}{first['run']}{quote}, imported (type: run, a run file made elsewhere)"
    return f"{quote}{first['run']}{quote}, run here ({first['type']})" if first.get("run") else "unknown"


def _lookup(src: Source, info: dict, table: dict, protocol, model: str, task: str):
    """(what, detail) of a run's row in one source for one task: ``found`` (the published number, its protocol),
    ``average`` (the source publishes the mean of the eight tasks only), ``missing``, ``other`` (another protocol)
    or ``setting`` (another first stage or depth); None when the run names no row there."""
    row = src.row(info)
    if row is None:
        return None
    pub, what = table.get((row, task)), "found"
    if pub is None and task != AVERAGE and (row, AVERAGE) in table:
        pub, what = table[(row, AVERAGE)], "average"
    if pub is None:
        return "missing", src.name
    pub_protocol = pub.get("protocol", src.protocol)
    if protocol and not protocols.compatible(protocol, pub_protocol, reranked=bool(info.get("first_stage"))):
        return "other", f"{model} ({protocol}) against {src.name}'s {row} ({pub_protocol})"
    first = info.get("first_stage") or {}
    if pub.get("first_stage") and (first.get("paper_name"), str(first.get("depth"))) != (pub["first_stage"],
                                                                                       pub["depth"]):
        return "setting", (f"{model} reranks {first.get('run')} (paper_name {first.get('paper_name') or 'none'}) at "
                           f"depth {first.get('depth')}; {src.name}'s {row}, {pub['first_stage']} at depth "
                           f"{pub['depth']}")
    return what, (pub, pub_protocol)


def _known_reasons(source: str, info: dict, model: str) -> str:
    if source != "r2med":
        return KNOWN_BY_SOURCE.get(source, "") or "no known reason"
    reasons = [KNOWN_BY_PAPER_NAME.get(info["key"][1]), KNOWN_BY_TYPE.get(info["type"])]
    if model == "medcpt-official":
        reasons[0] = None
    return " ".join(r for r in reasons if r) or "no known reason"


def _compared(base: dict, src: Source, pub: dict, pub_protocol: str, info: dict, unlike: str | None) -> dict:
    """A row with its published number, the difference and, above FLAG_ABOVE, the flag and why (``unlike``: the
    dataset differs from the paper's, said so; else the known reasons)."""
    row = {**base, "theirs": pub["ndcg_at_10"], "source": src.name, "published_protocol": pub_protocol,
           "where": pub["where"]}
    row["diff"] = row["ours"] - pub["ndcg_at_10"]
    if abs(row["diff"]) > FLAG_ABOVE:
        row["flag"] = True
        reasons = unlike or _known_reasons(src.name, info, row["model"])
        row["note"] = f"{row['note']}; {reasons}" if row["note"] else reasons
    return row


def _base(m: dict, task: str, paper_task, protocol) -> dict:
    return {"benchmark": m["benchmark"], "task": task, "model": m["model"], "paper_task": paper_task,
            "protocol": protocol, "ours": None, "theirs": None, "diff": None, "flag": False, "note": "", "source": "",
            "published_protocol": None, "where": ""}


def _averages(means: dict, found: dict, mismatch: dict) -> list[dict]:
    """The rows of the published means: a run's mean over the eight R2MED tasks of a benchmark against each source's
    mean it names (``found``: (benchmark, run) -> {source: (src, pub, protocol, info, run's protocol)}); a benchmark
    without all eight is listed, not compared."""
    rows = []
    for (bench, model), named in found.items():
        scores = means[(bench, model)]
        for src, pub, pub_protocol, info, protocol in named.values():
            base = {**_base({"benchmark": bench, "model": model}, AVERAGE, AVERAGE, protocol), "tasks": len(scores),
                    "first_stage": first_stage(info, quote="") if info.get("first_stage") else None}
            stage = f"; reranks {first_stage(info)}" if info.get("first_stage") else ""
            if set(scores) != set(R2MED_TASKS):
                lacking = [t for t in R2MED_TASKS if t not in scores]
                base["note"] = (f"no mean to compare: {len(scores)} of the 8 R2MED tasks on {bench} ({src.name} "
                                f"publishes the mean of the eight only; without {', '.join(lacking)}){stage}")
                rows.append(base)
                continue
            base.update(ours=sum(scores.values()) / len(scores), note=f"the mean of the 8 R2MED tasks{stage}")
            unlike = [w for w, c in mismatch.items() if w.startswith(f"{bench}/") and c["paper_task"] in scores]
            rows.append(_compared(base, src, pub, pub_protocol, info, unlike and (
                f"not comparable: {', '.join(sorted(unlike))} hold{'s' if len(unlike) == 1 else ''} another dataset "
                "than the paper's (statistics below)")))
    return rows


def compare(metric_files, stats_files, keys: dict, tasks: dict, sources: dict | None = None,
            empty_hydocs: dict | None = None) -> dict:
    """Rows of the comparison and the statistics checks: one row per (run, task, published number it is set
    against), or one row saying why a (run, task) pair has none; then one row per (run, benchmark, published mean
    of the eight tasks it is set against). ``keys``: per run, ``Params.r2med_vs_paper``'s entry (R2MED's key, type,
    protocol, published_as, a rerank run's first_stage); ``sources``: ``read_sources()`` (by default the shipped
    files). A run's protocol is the one its metrics record (``score_run``), else its entry's. ``empty_hydocs``:
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
    rows, means, averaged = [], {}, {}
    for _, m in metric_table.records(metric_files):
        where = f"{m['benchmark']}/{m['task']}"
        ptask = tasks.get(where)
        info = keys.get(m["model"], {"key": None, "type": None})
        protocol = m.get("protocol", info.get("protocol"))
        base = {**_base(m, m["task"], ptask, protocol), "ours": m["metrics"]["ndcg_at_10"]}
        found, seen = [], {}
        if ptask is None:
            base["note"] = "not an R2MED task"
        elif info.get("not_compared"):
            base["note"] = f"not compared, the setting differs from R2MED's: {info['not_compared']}"
        else:
            for src in SOURCES:
                hit = _lookup(src, info, sources.get(src.name, {}), protocol, m["model"], ptask)
                if hit is not None:
                    seen.setdefault(hit[0], []).append(hit[1])
                if hit is not None and hit[0] == "average":
                    means.setdefault((m["benchmark"], m["model"]), {})[ptask] = base["ours"]
                    averaged.setdefault((m["benchmark"], m["model"]), {})[src.name] = (src, *hit[1], info, protocol)
                elif hit is not None and hit[0] == "found":
                    found.append((src, *hit[1]))
            if not seen:
                base["note"] = "no paper_name or published_as (or not a published configuration)"
            elif not found and seen.get("other"):
                base["note"] = f"not compared, published under another protocol: {'; '.join(seen['other'])}"
            elif not found and seen.get("setting"):
                base["note"] = ("not compared, the published row reranks another first stage: "
                                f"{'; '.join(seen['setting'])}")
            elif not found and seen.get("average"):
                base["note"] = (f"published as the mean of the eight tasks only "
                                f"({', '.join(n for n in averaged[(m['benchmark'], m['model'])])}): the run's mean is "
                                "compared")
            elif not found:
                base["note"] = f"no such published row ({', '.join(seen['missing'])})"
        c = mismatch.get(where)
        unlike = c and (f"not comparable: this dataset has {c['queries']} queries / {c['documents']} documents, the "
                        f"paper's {ptask} {c['paper_queries']} / {c['paper_documents']} (statistics below)")
        rows += [_compared(base, src, pub, pub_protocol, info, unlike) for src, pub, pub_protocol in found]
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
    return {"rows": rows + _averages(means, averaged, mismatch), "checks": checks}


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
    return r["benchmark"], r["paper_task"] == AVERAGE, r["task"], r["model"], _rank(r.get("source"))


def _where(r: dict) -> tuple[str, str]:
    """The benchmark/task and R2MED task cells of a row: a mean names the tasks it is over."""
    if r["paper_task"] == AVERAGE:
        return f"{r['benchmark']}: {r['tasks']} task{'s' if r['tasks'] != 1 else ''}", "mean of the 8"
    return f"{r['benchmark']}/{r['task']}", r["paper_task"] or "-"


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
                  f"(run, task) pairs have a published number. A source that publishes the mean of the eight R2MED "
                  f"tasks only is set against the run's mean over the eight (R2MED task `mean of the 8`), and a "
                  f"rerank run's mean names the first stage it reranked. Published sources:", ""]
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
            lines.append(f"| {' | '.join(_where(r))} | {r['model']} | "
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
    rows = [["Mean of the 8" if r["paper_task"] == AVERAGE else r["paper_task"],
             f"{r['model']} ({r['benchmark']})" if r["paper_task"] in several else r["model"],
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
    means = {r["model"]: r["first_stage"] for r in compared if r["paper_task"] == AVERAGE}
    notes += ["Mean of the 8: the run's mean over the eight R2MED tasks against a published mean ("
              + "; ".join(f"{m} reranks {first}" if first else m for m, first in means.items()) + ")."] if means else []
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

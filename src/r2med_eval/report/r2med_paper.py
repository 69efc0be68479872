"""R2MED's published nDCG@10 table (``data/reference/r2med_paper_ndcg10.tsv``) and ``results/r2med_vs_paper.md``:
our scores beside the paper's, with the known reasons for differences. ReasonRank's published R2MED figure
(``data/reference/reasonrank_r2med_ndcg10.tsv``: an average of the eight tasks) is set against a rerank run's mean
over the eight tasks (``averages``), naming the first stage the run reranked."""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

from ..hub.datasets import R2MED_TASKS
from ..io import read_json, write_text
from ..scoring import metric_table

log = logging.getLogger(__name__)

# part of the code hash of the rules using this module
DATA_FILES = ("data/reference/r2med_paper_ndcg10.tsv", "data/reference/reasonrank_r2med_ndcg10.tsv")
PAPER_TABLE = Path(__file__).resolve().parents[3] / DATA_FILES[0]
REASONRANK_TABLE = Path(__file__).resolve().parents[3] / DATA_FILES[1]
# Why ReasonRank's figure and ours may differ, whatever the first stage.
REASONRANK_KNOWN = ("ReasonRank's figure is the R2MED leaderboard's average of the eight tasks (its README, "
                    "2025-08-16; no per-task figures published); its README names no first stage (its repository "
                    "ships e5-mistral-7b-instruct's top 100); its authors note that results vary with vLLM versions.")
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
    "run": "a run file made elsewhere (its maker's code, checkpoint and library versions).",
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


def read_reasonrank_table(path=REASONRANK_TABLE) -> dict[tuple, dict]:
    """(retriever paper_name, reranker paper_name, depth) -> {ndcg_at_10 (a fraction; the file holds x 100), task
    (``average``: the eight tasks' mean), where} of ReasonRank's published figures."""
    rows = {}
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    for row in csv.DictReader(lines, delimiter="\t"):
        rows[(row["retriever"], row["reranker"], row["depth"])] = {
            "ndcg_at_10": round(float(row["ndcg_at_10"]) / 100, 6), "task": row["task"], "where": row["where"]}
    return rows


def first_stage(info: dict) -> str:
    """Which first stage a rerank run reranked, in words (its ``paper_key`` entry's ``first_stage``)."""
    first = info.get("first_stage") or {}
    if first.get("type") == "run":
        return f"`{first['run']}`, imported (type: run, a run file made elsewhere)"
    if first.get("run"):
        return f"`{first['run']}`, run here ({first['type']})"
    return "unknown"


def averages(metric_files, keys: dict, tasks: dict, table=None) -> list[dict]:
    """A rerank run named by ReasonRank's table (its first stage's and reranker's ``paper_name`` and its depth) against
    ReasonRank's published average: the run's mean nDCG@10 over the eight R2MED tasks of each benchmark that holds all
    eight (fewer: listed, not compared), the difference, and which first stage the run reranked."""
    table = read_reasonrank_table() if table is None else table
    per: dict[tuple, dict] = {}
    for _, m in metric_table.records(metric_files):
        info = keys.get(m["model"]) or {}
        key = info.get("key")
        ptask = tasks.get(f"{m['benchmark']}/{m['task']}")
        if not key or ptask is None or key[0] != "reranker" or tuple(key[1:4]) not in table:
            continue
        per.setdefault((m["benchmark"], m["model"]), {})[ptask] = m["metrics"]["ndcg_at_10"]
    out = []
    for (bench, model), scores in sorted(per.items()):
        info = keys[model]
        ref = table[tuple(info["key"][1:4])]
        row = {"benchmark": bench, "model": model, "tasks": len(scores), "first_stage": first_stage(info),
               "theirs": ref["ndcg_at_10"], "source": f"reasonrank_r2med_ndcg10.tsv: {ref['where']}", "ours": None,
               "diff": None, "flag": False, "note": ""}
        if set(scores) != set(R2MED_TASKS):
            row["note"] = f"{len(scores)} of the 8 R2MED tasks: no average to compare"
        else:
            row["ours"] = sum(scores.values()) / len(scores)
            row["diff"] = row["ours"] - row["theirs"]
            row["flag"] = abs(row["diff"]) > FLAG_ABOVE
            row["note"] = REASONRANK_KNOWN if row["flag"] else ""
        out.append(row)
    return out


def averages_markdown(rows: list[dict]) -> list[str]:
    """The section of ``results/r2med_vs_paper.md`` for published averages (none: no lines)."""
    if not rows:
        return []
    lines = ["## Published averages of the eight tasks", "",
             "nDCG@10 x 100, the mean over the eight R2MED tasks. ReasonRank's figure "
             "(`data/reference/reasonrank_r2med_ndcg10.tsv`) reranks e5-mistral-7b-instruct's top 100; each run says "
             "which first stage it reranked.", "",
             "| benchmark | run | first stage | tasks | ours | published | difference | flag | note | source |",
             "|---|---|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        diff = "" if r["diff"] is None else f"{r['diff'] * 100:+.2f}"
        lines.append(f"| {r['benchmark']} | {r['model']} | {r['first_stage']} | {r['tasks']} | {_fmt(r['ours'])} | "
                     f"{_fmt(r['theirs'])} | {diff} | {_flag(r)} | {r['note']} | {r['source']} |")
    return lines + [""]


def _fmt(v) -> str:
    """A score x 100 with two decimals, as in every other table."""
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 100:.2f}"


def compare(metric_files, stats_files, keys: dict, tasks: dict, table=None, empty_hydocs: dict | None = None) -> dict:
    """Rows of the comparison and the statistics checks. ``empty_hydocs``: ``"<run> <benchmark>/<task>"`` ->
    (empty hypothetical documents, queries) for the runs of a model whose R2MED wrapper encodes an empty one as
    NaN (GritLM): a row with any is flagged, whatever the difference and whether the paper has the row."""
    empty_hydocs = empty_hydocs or {}
    table = read_paper_table() if table is None else table
    reasonrank = read_reasonrank_table()
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
        ours = m["metrics"]["ndcg_at_10"]
        row = {"benchmark": m["benchmark"], "task": m["task"], "model": m["model"], "paper_task": ptask,
               "ours": ours, "theirs": None, "diff": None, "flag": False, "note": "", "source": ""}
        if ptask is None:
            row["note"] = "not an R2MED task"
        elif info.get("not_compared"):
            row["note"] = f"not compared, the setting differs from R2MED's: {info['not_compared']}"
        elif info["key"] is None:
            row["note"] = "no paper_name (or not a published configuration)"
        else:
            ref = table.get(tuple(info["key"]) + (ptask,))
            if ref is None and info["key"][0] == "reranker" and tuple(info["key"][1:4]) in reasonrank:
                row["note"] = "R2MED published no such row; ReasonRank published its average only (below)"
            elif ref is None:
                row["note"] = "the paper has no such row"
            else:
                row.update(theirs=ref["ndcg_at_10"], source=f"{ref['source_path']}@{ref['source_commit'][:7]}")
                row["diff"] = ours - ref["ndcg_at_10"]
                if abs(row["diff"]) > FLAG_ABOVE and where in mismatch:
                    c = mismatch[where]
                    row["flag"] = True
                    row["note"] = (f"not comparable: this dataset has {c['queries']} queries / {c['documents']} "
                                   f"documents, the paper's {ptask} {c['paper_queries']} / {c['paper_documents']} "
                                   "(statistics below)")
                elif abs(row["diff"]) > FLAG_ABOVE:
                    row["flag"] = True
                    reasons = [KNOWN_BY_PAPER_NAME.get(info["key"][1]), KNOWN_BY_TYPE.get(info["type"])]
                    if m["model"] == "medcpt-official":
                        reasons[0] = None
                    row["note"] = " ".join(r for r in reasons if r) or "no known reason"
        empty, total = empty_hydocs.get(f"{m['model']} {where}", (0, 0))
        if empty:  # whether or not the paper has the row: R2MED's code would not give this run
            row["flag"] = True
            row["note"] = (f"{empty} of {total} hypothetical documents are empty: R2MED's GritLM wrapper encodes "
                           "them as NaN and BEIR then scores every document of those queries -1 (their top 100 is "
                           "torch.topk's choice among equal scores); here those queries keep their own vector "
                           "(config/r2med_models.yaml). " + row["note"]).strip()
        rows.append(row)
    return {"rows": rows, "checks": checks, "averages": averages(metric_files, keys, tasks)}


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
        elif reason == "not compared, the setting differs from R2MED's":
            why = sorted({f"{r['model']} ({r['note'].split(': ', 1)[1]})" for r in rs})
            out.append(f"{pairs}: the setting differs from R2MED's: {'; '.join(why)}.")
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


def to_markdown(result: dict) -> str:
    rows, checks = result["rows"], result["checks"]
    compared = sorted((r for r in rows if r["theirs"] is not None),
                      key=lambda r: (r["benchmark"], r["task"], r["model"]))
    lines = ["# R2MED: our nDCG@10 against the published numbers", ""]
    if compared:
        lines += [f"nDCG@10 x 100. Published numbers: `data/reference/r2med_paper_ndcg10.tsv` (R2MED repository "
                  f"results/). A difference above {FLAG_ABOVE * 100:g} points is flagged with the known reasons. "
                  f"{len(compared)} of {len(rows)} (run, task) pairs have a published number.", ""]
    else:
        lines += [f"No comparable runs: {_pairs(len(rows))}, none with a published number, so there is no table "
                  "(and `tables/r2med_vs_paper.tex` holds none)"
                  + ("; the published averages of the eight tasks are below." if result.get("averages") else "."), ""]
    bad = [f"{c['benchmark']}/{c['task']}" for c in checks if not c["match"]]
    if bad:
        lines += [f"**Not comparable:** {', '.join(bad)} {'does' if len(bad) == 1 else 'do'} not hold the paper's "
                  "dataset (query and document counts differ, see the statistics below), so differences there "
                  "say nothing about the retrievers.", ""]
    listed = compared + sorted((r for r in rows if r["theirs"] is None and r["flag"]),
                               key=lambda r: (r["benchmark"], r["task"], r["model"]))
    if listed:
        lines += ["| benchmark/task | R2MED task | model | ours | paper | difference | flag | note |",
                  "|---|---|---|---:|---:|---:|---|---|"]
        for r in listed:
            diff = "" if r["diff"] is None else f"{r['diff'] * 100:+.2f}"
            lines.append(f"| {r['benchmark']}/{r['task']} | {r['paper_task'] or '-'} | {r['model']} | "
                         f"{_fmt(r['ours'])} | {_fmt(r['theirs'])} | {diff} | {_flag(r)} | {r['note']} |")
        lines.append("")
    reasons = not_compared([r for r in rows if r not in listed])
    if reasons:
        lines += ["Not listed, without a published number:", ""] + [f"- {x}" for x in reasons] + [""]
    lines += averages_markdown(result.get("averages", []))
    if checks:
        lines += ["## Dataset statistics against the paper", "",
                  "| benchmark/task | R2MED task | queries | paper | documents | paper | |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for c in checks:
            lines.append(f"| {c['benchmark']}/{c['task']} | {c['paper_task']} | {c['queries']} | "
                         f"{c['paper_queries']} | {c['documents']} | {c['paper_documents']} | "
                         f"{'ok' if c['match'] else '**WARNING: differs from the paper**'} |")
        lines.append("")
    sources = sorted({r["source"] for r in compared})
    if sources:
        lines += ["## Sources", ""] + [f"- `{s}`" for s in sources] + [""]
    return "\n".join(lines)


def to_latex(result: dict) -> str:
    """The (run, task) pairs with a published number as booktabs tables (x 100): ours, the paper's, the
    difference, by R2MED task. Without any such pair, no table: a LaTeX comment saying why, so that
    ``\\input`` adds nothing."""
    from .tables import latex_table

    compared = sorted((r for r in result["rows"] if r["theirs"] is not None),
                      key=lambda r: (PAPER_ORDER.get(r["paper_task"], 99), r["paper_task"], r["model"], r["benchmark"]))
    if not compared:
        return ("% R2MED: our nDCG@10 against the published numbers. No table: "
                f"{_pairs(len(result['rows']))}, none with a published number (results/r2med_vs_paper.md).\n")
    several = {r["paper_task"] for r in compared if sum(1 for x in compared if x["paper_task"] == r["paper_task"]
                                                        and x["model"] == r["model"]) > 1}
    rows = [[r["paper_task"], f"{r['model']} ({r['benchmark']})" if r["paper_task"] in several else r["model"],
             r["ours"], r["theirs"], r["diff"]] for r in compared]
    columns = [("nDCG@10 \u00d7 100", "ours"), ("nDCG@10 \u00d7 100", "paper"), ("nDCG@10 \u00d7 100", "difference")]
    flagged = sum(1 for r in compared if r["flag"] and abs(r["diff"]) > FLAG_ABOVE)
    notes = [f"{flagged} of {len(compared)} pairs differ by more than {FLAG_ABOVE * 100:g} points; the reasons are "
             "in results/r2med_vs_paper.md."]
    notes += [f"{c['benchmark']}/{c['task']} differs from the paper's {c['paper_task']} ({c['queries']} queries / "
              f"{c['documents']} documents against {c['paper_queries']} / {c['paper_documents']}): not comparable."
              for c in result["checks"] if not c["match"]]
    return latex_table(columns, rows, caption="R2MED: our nDCG@10 against the published numbers.",
                       label="tab:r2med-vs-paper", stub=("R2MED task", "Run"), notes=notes, bold=False,
                       signed={2})


def write_report(metric_files, stats_files, keys, tasks, target, table_path=PAPER_TABLE, tex_target=None,
                 empty_hydocs: dict | None = None) -> dict:
    result = compare(metric_files, stats_files, keys, tasks, table=read_paper_table(table_path),
                     empty_hydocs=empty_hydocs)
    write_text(target, to_markdown(result))
    if tex_target is not None:
        write_text(tex_target, to_latex(result))
    return result

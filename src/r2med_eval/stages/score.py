"""Stage score (rules/score.smk): trec_eval measures per query and mean under R2MED's result names; CliniQ's
own measures; a benchmark's metric JSONs collected into one file for the reports."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def score_run(sm) -> None:
    from .. import datasets, io, metrics, runs
    from ..errors import InputError

    run = runs.read_run(sm.input.run)
    qrels = datasets.read_qrels(sm.input.qrels)
    queries = datasets.read_queries(sm.input.queries)
    identical = None
    if sm.params.spec["ignore_identical_ids"]:
        run, identical = runs.drop_identical_ids(run)
        log.info("ignore_identical_ids: dropped %d retrieved documents whose id equals the query id", identical)
    result = metrics.evaluate(run, qrels, queries)
    c = result["counts"]
    if not c["judged_queries_scored"]:
        raise InputError("no query of the task is judged: every metric would be undefined (NaN).",
                         path=sm.input.qrels, fix="use the qrels of this task's queries, or remove the task from "
                                                  "config.yaml.")
    if identical is not None:
        c["identical_ids_dropped"] = identical
    log.info("scored %d judged queries; %d unjudged queries excluded (%s); %d judged queries with an empty "
             "run scored 0; %d judged queries have no relevant document", c["judged_queries_scored"],
             c["unjudged_queries_excluded"], ", ".join(c["unjudged_query_ids"]) or "-",
             c["judged_queries_with_empty_run"], c["judged_queries_without_relevant"])
    names = metrics.metric_names()
    io.write_json(sm.output.metrics, {
        "benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "model": sm.wildcards.model,
        "run": str(sm.input.run), "run_depth": runs.run_depth(run),
        "metrics": {m: round(result["metrics"][m], 6) for m in names}, "counts": c,
    })
    io.write_text(sm.output.per_query, metrics.per_query_tsv(result["per_query"], names))
    log.info("ndcg_at_10 = %.5f", result["metrics"]["ndcg_at_10"])


def score_cliniq(sm) -> None:
    from .. import cliniq
    from ..cliniq_files import clean_json, read_cliniq_qrels, read_query_types
    from ..io import read_lines, write_json

    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)
    qtypes = read_query_types(sm.input.query_types)
    ids = read_lines(sm.input.ids)
    tie_order = sm.params.spec["tie_order"]
    ranked = cliniq.read_ranked_run(sm.input.run, ids, tie_order)  # full-depth runs: arrays, not a dict per query
    result = cliniq.evaluate_ranked(ranked, rows, qtypes, ids, irrelevant)
    c = result["counts"]
    depth = ranked.depth()
    log.info("ranking: score descending, equal scores %s", {
        "evalpy": "in the run file's order (a dense run: eval.py's np.argsort order)",
        "corpus": "in corpus order (eval.py's scoring with a stable argsort)", "doc_id": "by chunk id"}[tie_order])
    if c.get("unranked_chunks"):
        log.warning("single-patient: %d chunks of scored notes are not in the run (depth %d); they are ranked after "
                    "the retrieved ones in chunk order. For eval.py's exact figures rank the whole corpus "
                    "(benchmark depth: full, the default) with a model that scores every chunk (%d)",
                    c["unranked_chunks"], depth, len(ids))
    out = {"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "model": sm.wildcards.model,
           "run": str(sm.input.run), "run_depth": depth, "corpus_chunks": len(ids), "tie_order": tie_order, **result}
    write_json(sm.output.metrics, clean_json(out))
    m, s = result["multi"]["all"], result["single"]["all"]
    log.info("multi-patient (%d queries): MRR %.4f nDCG@10 %.4f (CliniQ-compatible %.4f) R@100 %.4f; "
             "single-patient (%d notes): MRR %.4f nDCG %.4f MAP %.4f; judged@10 %.4f; counts %s", m["n"], m["mrr"],
             m["ndcg_at_10"], m["ndcg_at_10_cliniq"], m["recall_at_100"], s["n"], s["mrr"], s["ndcg"], s["map"],
             result["judged_at_10"]["all"]["judged_at_10"],
             {k: v for k, v in c.items() if k != "unjudged_query_ids"})


def collect_metrics(sm) -> None:
    from .. import metric_table

    n = metric_table.write(list(sm.input), sm.output[0])
    log.info("collected the metrics of %d runs of %s", n, sm.wildcards.benchmark)

"""Scoring with pytrec_eval (trec_eval's code), under the names of R2MED's result JSON.

``ndcg_at_k``, ``map_at_k``, ``recall_at_k``, ``precision_at_k`` for k in ``K_VALUES`` and ``mrr``
(trec_eval's ``ndcg_cut``, ``map_cut``, ``recall``, ``P`` and ``recip_rank``). Means are over the
judged queries. Queries without judgments are counted and reported and excluded. A judged query for
which the run returned nothing scores 0 on every measure (trec_eval's ``-c``), and is counted.
"""

from __future__ import annotations

import math

K_VALUES = (1, 10, 25, 50, 100)
FAMILIES = (("ndcg_at_{k}", "ndcg_cut_{k}"), ("map_at_{k}", "map_cut_{k}"),
            ("recall_at_{k}", "recall_{k}"), ("precision_at_{k}", "P_{k}"))


def metric_names(k_values=K_VALUES) -> list[str]:
    names = [ours.format(k=k) for ours, _ in FAMILIES for k in k_values]
    return names + ["mrr"]


def per_query(run: dict, qrels: dict, k_values=K_VALUES) -> dict[str, dict[str, float]]:
    """Per-query metrics for every judged query (zeros where the run has nothing for it)."""
    import pytrec_eval

    ks = ",".join(str(k) for k in k_values)
    measures = {f"ndcg_cut.{ks}", f"map_cut.{ks}", f"recall.{ks}", f"P.{ks}", "recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    judged_run = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if q in qrels and docs}
    raw = evaluator.evaluate(judged_run)
    out: dict[str, dict[str, float]] = {}
    for qid in sorted(qrels):
        scores = raw.get(qid)
        row = {}
        for ours, theirs in FAMILIES:
            for k in k_values:
                row[ours.format(k=k)] = 0.0 if scores is None else float(scores[theirs.format(k=k)])
        row["mrr"] = 0.0 if scores is None else float(scores["recip_rank"])
        out[qid] = row
    return out


def evaluate(run: dict, qrels: dict, queries=None, k_values=K_VALUES) -> dict:
    """Mean metrics plus the accounting of which queries were scored."""
    rows = per_query(run, qrels, k_values)
    names = metric_names(k_values)
    n = len(rows)
    means = {m: (math.fsum(r[m] for r in rows.values()) / n if n else float("nan")) for m in names}
    query_ids = list(queries) if queries is not None else sorted(set(run) | set(qrels))
    unjudged = [q for q in query_ids if q not in qrels]
    empty = [q for q in qrels if not run.get(q)]
    no_relevant = [q for q in qrels if not any(g > 0 for g in qrels[q].values())]
    return {
        "metrics": means,
        "per_query": rows,
        "counts": {
            "queries": len(query_ids),
            "judged_queries_scored": n,
            "unjudged_queries_excluded": len(unjudged),
            "unjudged_query_ids": unjudged,
            "judged_queries_with_empty_run": len(empty),
            "judged_queries_with_empty_run_ids": empty,
            "judged_queries_without_relevant": len(no_relevant),
        },
    }


def per_query_tsv(rows: dict[str, dict[str, float]], names) -> str:
    lines = ["query_id\t" + "\t".join(names)]
    for qid, row in rows.items():
        lines.append(qid + "\t" + "\t".join(f"{row[m]:.6f}" for m in names))
    return "\n".join(lines) + "\n"

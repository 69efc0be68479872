"""ranx's measure names that neither the fast path nor ir_measures knows, through ranx itself (``ranx.evaluate``).

``precision@10``, ``hits@10``, ``hit_rate@10``, ``f1@10``, ``r-precision``, ``dcg@10``, ``dcg_burges@10``,
``ndcg_burges@10`` (ranx's names, with ``-l2`` for a relevance level: ``precision@10-l2``) are computed by ranx
(imported only then), each query's documents handed over in trec_eval's order; ranx sorts them again by score with
its own order of ties. The names the fast path knows keep its meaning: ``ndcg@10``, ``recall@100``, ``map@100``,
``mrr@10`` are trec_eval's ``ndcg_cut_10``, ``recall_100``, ``map_cut_100`` and ``recip_rank`` on the top 10 (ranx's own
give the same figures except where ranx orders equal scores otherwise), ``bpref`` and ``rbp`` trec_eval's. The figure
is ranx's mean over the judged queries (a judged query the run misses: 0, as under trec_eval's ``-c``).
"""

from __future__ import annotations

import math
import re

FAMILY = "ranx"
NAMES = ("hits", "hit_rate", "precision", "recall", "f1", "r-precision", "mrr", "map", "dcg", "dcg_burges", "ndcg",
         "ndcg_burges", "bpref", "rbp")
_PATTERN = re.compile(r"(hits|hit_rate|precision|recall|f1|r-precision|mrr|map|dcg|dcg_burges|ndcg|ndcg_burges|bpref"
                      r"|rbp)(?:@([1-9][0-9]*))?(?:-l([0-9]+))?")


def parse(text: str) -> str | None:
    """The ranx name if ``text`` is one (``precision@10``, ``r-precision``, ``f1@5-l2``), else None."""
    return text if _PATTERN.fullmatch(text) else None


def compute(table, qrels: dict, measures, qids: list[str]) -> dict:
    """{measure name: per judged query value (``qids`` order)} by ``ranx.evaluate`` on the run and the judgments."""
    import numpy as np
    import ranx

    from .irm import _trec_order
    from .runs import table_to_dict

    run = {q: _trec_order(docs) for q, docs in table_to_dict(table).items() if q in qrels}
    judged = {q: {d: int(g) for d, g in qrels[q].items()} for q in qids}
    ranx_run = ranx.Run({q: run.get(q, {}) for q in qids})
    names = [m.params[0] for m in measures]
    ranx.evaluate(ranx.Qrels(judged), ranx_run, names, return_mean=False, save_results_in_run=True)
    return {m.name: np.asarray([float(ranx_run.scores[m.params[0]].get(q, 0.0)) for q in qids], dtype=np.float64)
            for m in measures}


def aggregate(values, scored) -> float:
    chosen = values[scored].tolist()
    return math.fsum(chosen) / len(chosen) if chosen else float("nan")

"""Scoring with pytrec_eval (trec_eval's code), under the names of R2MED's result JSON.

``ndcg_at_k``, ``map_at_k``, ``recall_at_k``, ``precision_at_k`` for k in ``K_VALUES`` and ``mrr``
(trec_eval's ``ndcg_cut``, ``map_cut``, ``recall``, ``P`` and ``recip_rank``). Means are over the
judged queries. Queries without judgments are counted and reported and excluded. A judged query for
which the run returned nothing scores 0 on every measure (trec_eval's ``-c``), and is counted.

Measures can also be named as ir_measures does (``nDCG@10``, ``R@100``, ``P@10``, ``AP@100``, ``AP``, ``RR``,
``RR@10``, ``Success@10``, ``Rprec``, ``Bpref``; ``P(rel=2)@10`` for a relevance level) and as trec_eval does
(``ndcg_cut_10`` or ``ndcg_cut.10``, ``recall_100``, ``P_10``, ``map_cut_100``, ``map``, ``recip_rank``, ...):
``measure(name)``. Every name is computed by trec_eval's code through pytrec_eval, so a measure has the same
value whatever it is called; ``RR@k`` is ``recip_rank`` on each query's top k in trec_eval's order (score
descending, then document id descending), as ir_measures computes it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import InputError, did_you_mean

K_VALUES = (1, 10, 25, 50, 100)
FAMILIES = (("ndcg_at_{k}", "ndcg_cut_{k}"), ("map_at_{k}", "map_cut_{k}"),
            ("recall_at_{k}", "recall_{k}"), ("precision_at_{k}", "P_{k}"))


def metric_names(k_values=K_VALUES) -> list[str]:
    names = [ours.format(k=k) for ours, _ in FAMILIES for k in k_values]
    return names + ["mrr"]


@dataclass(frozen=True)
class Measure:
    """A measure as trec_eval computes it: ``name`` as the user wrote it, ``trec`` the trec_eval measure and its
    cutoff (``ndcg_cut_10``, ``recip_rank``), ``rel`` trec_eval's relevance level (``-l``), ``depth`` the run's
    top k kept first (``RR@k``)."""
    name: str
    trec: str
    rel: int = 1
    depth: int | None = None

    @property
    def request(self) -> str:
        """The measure as pytrec_eval is asked for it (``ndcg_cut.10``)."""
        m = re.fullmatch(r"(.*)_(\d+)", self.trec)
        return f"{m.group(1)}.{m.group(2)}" if m and m.group(1) in _CUT_FAMILIES else self.trec


# ir_measures' names -> trec_eval's measure (with a cutoff) and without one (None: a cutoff is required)
_IR_MEASURES = {"ndcg": ("ndcg_cut", "ndcg"), "ap": ("map_cut", "map"), "map": ("map_cut", "map"),
                "r": ("recall", None), "recall": ("recall", None), "p": ("P", None), "rr": (None, "recip_rank"),
                "mrr": (None, "recip_rank"), "success": ("success", None), "rprec": (None, "Rprec"),
                "bpref": (None, "bpref")}
_CUT_FAMILIES = {"ndcg_cut", "map_cut", "recall", "P", "success"}
_TREC_PLAIN = {"ndcg", "map", "recip_rank", "Rprec", "bpref"}
_OURS = {ours.split("_at_")[0]: theirs.split("_{")[0] for ours, theirs in FAMILIES}
EXAMPLES = ("nDCG@10, R@100, P@10, AP@100, RR, RR@10 (ir_measures) or ndcg_cut_10, recall_100, P_10, recip_rank "
            "(trec_eval)")


def measure(name: str) -> Measure:
    """The measure named ``name`` in ir_measures' notation, trec_eval's or the pipeline's (``ndcg_at_10``)."""
    text = str(name).strip()
    m = re.fullmatch(r"([A-Za-z]+)(?:\(rel=(\d+)\))?(?:@(\d+))?", text)
    if m and m.group(1).lower() in _IR_MEASURES:
        cut_family, plain = _IR_MEASURES[m.group(1).lower()]
        rel = int(m.group(2)) if m.group(2) else 1
        cutoff = int(m.group(3)) if m.group(3) else None
        if m.group(1).lower() in ("rr", "mrr"):
            return _checked(Measure(text, "recip_rank", rel, cutoff), text)
        if cutoff is None and plain is None:
            raise InputError(f"the measure {text!r} needs a cutoff, e.g. {m.group(1)}@100.", fix=f"name {EXAMPLES}.")
        return _checked(Measure(text, f"{cut_family}_{cutoff}" if cutoff is not None else plain, rel), text)
    m = re.fullmatch(r"(ndcg_cut|map_cut|recall|P|success)[._](\d+)", text)
    if m:
        return _checked(Measure(text, f"{m.group(1)}_{m.group(2)}"), text)
    if text in _TREC_PLAIN:
        return Measure(text, text)
    m = re.fullmatch(r"(ndcg|map|recall|precision)_at_(\d+)", text)
    if m:
        return _checked(Measure(text, f"{_OURS[m.group(1)]}_{m.group(2)}"), text)
    if text == "mrr":
        return Measure(text, "recip_rank")
    known = ["nDCG@10", "R@100", "P@10", "AP@100", "AP", "RR", "RR@10", "Success@10", "Rprec", "Bpref",
             "ndcg_cut_10", "recall_100", "P_10", "map_cut_100", "map", "recip_rank", "ndcg"]
    hint = did_you_mean(text, known)
    raise InputError(f"unknown measure {text!r}" + (f"; {hint}" if hint else "."), fix=f"name {EXAMPLES}.")


def _checked(m: Measure, text: str) -> Measure:
    cut = re.search(r"_(\d+)$", m.trec)
    if (cut and int(cut.group(1)) < 1) or (m.depth is not None and m.depth < 1):
        raise InputError(f"the measure {text!r} has a cutoff below 1.", fix="use a cutoff of 1 or more.")
    if m.rel != 1 and m.trec.startswith("ndcg"):
        raise InputError(f"the measure {text!r}: nDCG uses the graded judgments, a relevance level does not apply.",
                         fix="drop (rel=...).")
    return m


def pipeline_measures(k_values=K_VALUES) -> list[Measure]:
    """The measures of ``score_run`` (``metric_names``), as :class:`Measure` s."""
    return [measure(n) for n in metric_names(k_values)]


def prefix_read(measures) -> tuple[int, int | None] | None:
    """How much of each query's ranking in trec_eval's order the measures read: ``(k, rel)``, the top k and, where
    ``rel`` is not None, down to the first document judged ``rel`` or more (``recip_rank`` without a cutoff); None
    where a measure reads the whole ranking (``map``, ``ndcg``, ``Rprec``, ``bpref``). A run cut so
    (:func:`runs.read_run_prefixes`) gives every such measure its value on the whole run: ``ndcg_cut_k``,
    ``map_cut_k``, ``recall_k``, ``P_k`` and ``success_k`` count the top k against the judgments' totals, and
    ``recip_rank`` stops at the first relevant document."""
    k, rel = 1, None
    for m in measures:
        cut = re.fullmatch(r"(.*)_(\d+)", m.trec)
        if cut and cut.group(1) in _CUT_FAMILIES:
            k = max(k, int(cut.group(2)))
        elif m.trec == "recip_rank" and m.depth is not None:
            k = max(k, m.depth)
        elif m.trec == "recip_rank":
            rel = m.rel if rel is None else min(rel, m.rel)
        else:
            return None
    return k, rel


def _top(docs: dict[str, float], k: int) -> dict[str, float]:
    """A query's top ``k`` in trec_eval's order: score descending, then document id descending."""
    return dict(sorted(docs.items(), key=lambda x: (x[1], x[0]), reverse=True)[:k])


def per_query_measures(run: dict, qrels: dict, measures) -> dict[str, dict[str, float]]:
    """{qid: {measure name: value}} for every judged query (zeros where the run has nothing for it), each measure
    computed by trec_eval's code (one pytrec_eval evaluator per relevance level and run depth)."""
    import pytrec_eval

    judged_run = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if q in qrels and docs}
    groups: dict[tuple, list[Measure]] = {}
    for m in measures:
        groups.setdefault((m.rel, m.depth), []).append(m)
    raw: dict[tuple, dict] = {}
    for (rel, depth), group in groups.items():
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {m.request for m in group}, relevance_level=rel)
        scored = judged_run if depth is None else {q: _top(docs, depth) for q, docs in judged_run.items()}
        raw[(rel, depth)] = evaluator.evaluate(scored)
    out: dict[str, dict[str, float]] = {}
    for qid in sorted(qrels):
        row = {}
        for m in measures:
            scores = raw[(m.rel, m.depth)].get(qid)
            row[m.name] = 0.0 if scores is None else float(scores[m.trec])
        out[qid] = row
    return out


def per_query(run: dict, qrels: dict, k_values=K_VALUES) -> dict[str, dict[str, float]]:
    """Per-query metrics of ``score_run`` for every judged query (zeros where the run has nothing for it)."""
    return per_query_measures(run, qrels, pipeline_measures(k_values))


def evaluate(run: dict, qrels: dict, queries=None, k_values=K_VALUES, measures=None) -> dict:
    """Mean metrics plus the accounting of which queries were scored; ``measures`` (a list of names or
    :class:`Measure` s) instead of ``score_run``'s, keyed by the names given."""
    if measures is None:
        rows = per_query(run, qrels, k_values)
        names = metric_names(k_values)
    else:
        chosen = [m if isinstance(m, Measure) else measure(m) for m in measures]
        rows = per_query_measures(run, qrels, chosen)
        names = list(dict.fromkeys(m.name for m in chosen))
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

"""Scoring with trec_eval's measures (``scoring.trec``), under the names of R2MED's result JSON.

``ndcg_at_k``, ``map_at_k``, ``recall_at_k``, ``precision_at_k`` for k in ``K_VALUES`` and ``mrr`` (trec_eval's
``ndcg_cut``, ``map_cut``, ``recall``, ``P`` and ``recip_rank``), and ``judged_at_10`` (ir_measures' ``Judged@10``:
the fraction of each query's top 10 that has a judgment of any grade). Means are over the judged queries. Queries
without judgments are counted and reported and excluded. A judged query for which the run returned nothing scores
0 on every measure and is counted (trec_eval's ``-c``; ``complete=False`` averages over the judged queries the run
retrieved for instead, as trec_eval 9 without ``-c``, pytrec_eval and ir_measures do).

Measures can also be named as ir_measures does (``nDCG@10``, ``R@100``, ``P@10``, ``AP@100``, ``AP``, ``RR``,
``RR@10``, ``Success@10``, ``Rprec``, ``Bpref``, ``Judged@10``, ``IPrec@0.1``, ``NumRet``, ``NumRel``, ``NumQ``;
``P(rel=2)@10`` for a relevance level) and as trec_eval does (``ndcg_cut_10`` or ``ndcg_cut.10``, ``recall_100``,
``P_10``, ``map_cut_100``, ``map``, ``recip_rank``, ``num_ret``, ``num_rel``, ``num_rel_ret``, ``gm_map``,
``iprec_at_recall_0.10``, ``Rprec_mult_0.20``; a family without a cutoff, ``P`` or ``iprec_at_recall``, stands for
trec_eval's default cutoffs, and ``official`` for trec_eval's default measures): ``measures(name)``. A measure has
the same value whatever it is called. ``RR@k`` is ``recip_rank`` on each query's top k in trec_eval's order (score
descending, then document id descending), as trec_eval scores a run cut to k: ir_measures' default for ``RR@k``
(its msmarco provider) breaks equal scores by document id ascending instead, so the two differ where equal scores
straddle a query's first relevant document; ``Judged@k`` also takes the top k in trec_eval's order (ir_measures:
id ascending).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError, did_you_mean
from . import trec

K_VALUES = (1, 10, 25, 50, 100)
FAMILIES = (("ndcg_at_{k}", "ndcg_cut_{k}"), ("map_at_{k}", "map_cut_{k}"),
            ("recall_at_{k}", "recall_{k}"), ("precision_at_{k}", "P_{k}"))
JUDGED = "judged_at_10"  # score_run's judgment rate, beside the metric_names() in its JSON and per-query file


def metric_names(k_values=K_VALUES) -> list[str]:
    names = [ours.format(k=k) for ours, _ in FAMILIES for k in k_values]
    return names + ["mrr"]


@dataclass(frozen=True)
class Measure:
    """A measure as trec_eval computes it: ``name`` as the user wrote it, ``family`` trec_eval's measure
    (``ndcg_cut``, ``recip_rank``, ``judged`` for ir_measures' Judged), ``cut`` its parameter (a cutoff, or the
    fraction of ``iprec_at_recall`` and ``Rprec_mult``), ``rel`` its relevance level (None: the default, trec_eval's
    ``-l``), ``depth`` the run's top k read first (``RR@k``)."""
    name: str
    family: str
    cut: float | int | None = None
    rel: int | None = None
    depth: int | None = None

    @property
    def trec(self) -> str:
        """trec_eval's name of the measure (``ndcg_cut_10``, ``iprec_at_recall_0.10``, ``recip_rank``)."""
        if self.cut is None:
            return self.family
        if self.family in _FRACTIONS:
            return f"{self.family}_{self.cut:3.2f}"
        return f"{self.family}_{self.cut}"

    @property
    def request(self) -> str:
        """The measure as pytrec_eval is asked for it (``ndcg_cut.10``)."""
        if self.cut is None:
            return self.family
        return f"{self.family}.{self.cut}"


# ir_measures' names -> trec_eval's family with a cutoff, and without one (None: a cutoff is required)
_IR_MEASURES = {"ndcg": ("ndcg_cut", "ndcg"), "ap": ("map_cut", "map"), "map": ("map_cut", "map"),
                "r": ("recall", None), "recall": ("recall", None), "p": ("P", None), "rr": (None, "recip_rank"),
                "mrr": (None, "recip_rank"), "success": ("success", None), "rprec": (None, "Rprec"),
                "bpref": (None, "bpref"), "judged": ("judged", None), "iprec": ("iprec_at_recall", None),
                "numret": (None, "num_ret"), "numrel": (None, "num_rel"), "numq": (None, "num_q")}
_FRACTIONS = {"iprec_at_recall", "Rprec_mult"}
_TREC_PLAIN = {"ndcg", "map", "recip_rank", "Rprec", "bpref", "num_ret", "num_rel", "num_rel_ret", "num_q", "gm_map"}
# trec_eval's default cutoffs of a family named without one, and its default measures (``official``, no runid)
TREC_DEFAULTS = {"P": (5, 10, 15, 20, 30, 100, 200, 500, 1000), "recall": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
                 "ndcg_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
                 "map_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000), "success": (1, 5, 10),
                 "iprec_at_recall": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
                 "Rprec_mult": (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)}
OFFICIAL = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            "iprec_at_recall", "P")
_OURS = {ours.split("_at_")[0]: theirs.split("_{")[0] for ours, theirs in FAMILIES}
EXAMPLES = ("nDCG@10, R@100, P@10, AP@100, RR, RR@10 (ir_measures) or ndcg_cut_10, recall_100, P_10, recip_rank "
            "(trec_eval)")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"


def measures(name: str) -> list[Measure]:
    """The measures a name stands for: one, or a trec_eval family's default cutoffs (``P``: P_5 ... P_1000) or its
    default measures (``official``)."""
    text = str(name).strip()
    if text == "official":
        return [m for n in OFFICIAL for m in measures(n)]
    if text in TREC_DEFAULTS:
        fraction = text in _FRACTIONS
        return [Measure(f"{text}_{c:3.2f}" if fraction else f"{text}_{c}", text, c) for c in TREC_DEFAULTS[text]]
    return [measure(text)]


def measure(name: str) -> Measure:
    """The measure named ``name`` in ir_measures' notation, trec_eval's or the pipeline's (``ndcg_at_10``)."""
    text = str(name).strip()
    m = re.fullmatch(rf"([A-Za-z]+)(?:\(rel=(-?\d+)\))?(?:@({_NUMBER}))?", text)
    if m and m.group(1).lower() in _IR_MEASURES:
        key = m.group(1).lower()
        cut_family, plain = _IR_MEASURES[key]
        rel = int(m.group(2)) if m.group(2) else None
        cutoff = m.group(3)
        if key in ("rr", "mrr"):
            return _checked(Measure(text, "recip_rank", None, rel, _int(cutoff, text)), text)
        if key == "numret" and rel is not None:  # ir_measures' NumRet(rel=1): trec_eval's num_rel_ret
            plain = "num_rel_ret"
        if cutoff is None and plain is None:
            example = "0.1" if cut_family in _FRACTIONS else "10" if key == "judged" else "100"
            raise InputError(f"the measure {text!r} needs a cutoff, e.g. {m.group(1)}@{example}.",
                             fix=f"name {EXAMPLES}.")
        if cutoff is None:
            return _checked(Measure(text, plain, None, rel), text)
        if cut_family is None:
            raise InputError(f"the measure {text!r} takes no cutoff.", fix=f"write {m.group(1)} alone.")
        value = float(cutoff) if cut_family in _FRACTIONS else _int(cutoff, text)
        return _checked(Measure(text, cut_family, value, rel), text)
    m = re.fullmatch(r"(ndcg_cut|map_cut|recall|P|success)[._](\d+)", text)
    if m:
        return _checked(Measure(text, m.group(1), int(m.group(2))), text)
    m = re.fullmatch(rf"(iprec_at_recall|Rprec_mult)[._]({_NUMBER})", text)
    if m:
        return _checked(Measure(text, m.group(1), float(m.group(2))), text)
    if text in _TREC_PLAIN:
        return Measure(text, text)
    m = re.fullmatch(r"(ndcg|map|recall|precision)_at_(\d+)", text)
    if m:
        return _checked(Measure(text, _OURS[m.group(1)], int(m.group(2))), text)
    if text == "mrr":
        return Measure(text, "recip_rank")
    m = re.fullmatch(r"judged_at_(\d+)", text)
    if m:
        return _checked(Measure(text, "judged", int(m.group(1))), text)
    known = ["nDCG@10", "R@100", "P@10", "AP@100", "AP", "RR", "RR@10", "Success@10", "Rprec", "Bpref", "Judged@10",
             "ndcg_cut_10", "recall_100", "P_10", "map_cut_100", "map", "recip_rank", "ndcg", "num_ret", "num_rel",
             "num_rel_ret", "gm_map", "iprec_at_recall_0.10", "Rprec_mult_0.20"]
    hint = did_you_mean(text, known)
    raise InputError(f"unknown measure {text!r}" + (f"; {hint}" if hint else "."), fix=f"name {EXAMPLES}.")


def _int(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    if not re.fullmatch(r"\d+", text):
        raise InputError(f"the measure {name!r} needs a whole number as its cutoff.", fix="write e.g. @10.")
    return int(text)


def _checked(m: Measure, text: str) -> Measure:
    if m.family not in _FRACTIONS and ((m.cut is not None and m.cut < 1) or (m.depth is not None and m.depth < 1)):
        raise InputError(f"the measure {text!r} has a cutoff below 1.", fix="use a cutoff of 1 or more.")
    if m.rel is not None and m.family in ("ndcg", "ndcg_cut"):
        raise InputError(f"the measure {text!r}: nDCG uses the graded judgments, a relevance level does not apply.",
                         fix="drop (rel=...).")
    if m.rel is not None and m.family == "judged":
        raise InputError(f"the measure {text!r}: Judged counts judgments of any grade, a relevance level does not "
                         "apply.", fix="drop (rel=...).")
    return m


def pipeline_measures(k_values=K_VALUES) -> list[Measure]:
    """The measures of ``score_run`` (``metric_names`` and ``judged_at_10``), as :class:`Measure` s."""
    return [measure(n) for n in metric_names(k_values)] + [measure(JUDGED)]


def chosen(names) -> list[Measure]:
    """Names (or :class:`Measure` s) as measures, families expanded, each name once."""
    out: dict[str, Measure] = {}
    for n in names:
        for m in ([n] if isinstance(n, Measure) else measures(n)):
            out.setdefault(m.name, m)
    return list(out.values())


def score(table, qrels: dict, measures_, *, level: int = 1, depth: int | None = None, complete: bool = True,
          ignore_identical_ids: bool = False, queries=None) -> dict:
    """Score a run held as a ``runfile.RunTable``: {"metrics": {name: figure}, "per_query": {qid: {name: value}},
    "counts": which queries were scored, "run_depth": the run's most documents for one query}. ``level``:
    trec_eval's ``-l``; ``depth``: ``-M`` (each query's first documents only); ``complete``: ``-c`` (the default:
    every judged query, one the run misses scoring 0); ``queries``: the task's query ids, to count unjudged ones."""
    import numpy as np

    if depth is not None and depth < 1:
        raise ValueError("depth (-M) must be 1 or more")
    judgments = trec.Judgments(qrels)
    ranked, run_depth, dropped = trec.rank(table, judgments, ignore_identical_ids)
    if depth is not None:
        ranked = ranked.cut(depth)
    values = trec.compute(ranked, judgments, measures_, level)
    retrieved = ranked.ret > 0
    scored = np.ones(len(judgments), dtype=bool) if complete else retrieved
    names = [m.name for m in measures_]
    figures = {m.name: trec.aggregate(m, values[m.name], scored, judgments, complete, level) for m in measures_}
    rows = {}
    columns = [values[n].tolist() for n in names]
    for i in np.flatnonzero(scored).tolist():
        rows[judgments.qids[i]] = {n: col[i] for n, col in zip(names, columns)}
    query_ids = list(queries) if queries is not None else _all_qids(table, judgments)
    unjudged = [q for q in query_ids if q not in judgments.index]
    empty = [judgments.qids[i] for i in np.flatnonzero(~retrieved).tolist()]
    without = judgments.num_rel(1) == 0
    counts = {"queries": len(query_ids), "judged_queries_scored": int(np.count_nonzero(scored)),
              "unjudged_queries_excluded": len(unjudged), "unjudged_query_ids": unjudged,
              "judged_queries_with_empty_run": len(empty), "judged_queries_with_empty_run_ids": empty,
              "judged_queries_without_relevant": int(np.count_nonzero(without))}
    if ignore_identical_ids:
        counts["identical_ids_dropped"] = dropped
    return {"metrics": figures, "per_query": rows, "counts": counts, "run_depth": run_depth}


def _all_qids(table, judgments) -> list[str]:
    return sorted(set(table.qids) | set(judgments.qids))


def evaluate(run, qrels: dict, queries=None, k_values=K_VALUES, measures=None, **options) -> dict:
    """Mean metrics plus the accounting of which queries were scored; ``run`` a ``runfile.RunTable`` or {qid:
    {docid: score}}; ``measures`` (names or :class:`Measure` s, families expanded) instead of ``score_run``'s
    (``metric_names`` and ``judged_at_10``), keyed by the names given; ``options`` those of :func:`score`."""
    from .runs import as_table

    chosen_ = pipeline_measures(k_values) if measures is None else chosen(measures)
    return score(as_table(run, duplicates=False), qrels, chosen_, queries=queries, **options)


def per_query(run, qrels: dict, k_values=K_VALUES) -> dict[str, dict[str, float]]:
    """Per-query metrics of ``score_run`` for every judged query (zeros where the run has nothing for it)."""
    return evaluate(run, qrels, k_values=k_values)["per_query"]


def per_query_tsv(rows: dict[str, dict[str, float]], names) -> str:
    lines = ["query_id\t" + "\t".join(names)]
    for qid, row in rows.items():
        lines.append(qid + "\t" + "\t".join(f"{row[m]:.6f}" for m in names))
    return "\n".join(lines) + "\n"


COUNT_FAMILIES = trec.SUMMED + ("num_q",)  # printed as integers, as trec_eval prints them
PER_QUERY_SILENT = ("gm_map", "num_q")  # trec_eval prints no per-query line for these

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
from . import ranx_measures, trec, trec_all, trec_jg, trec_prefs

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
    params: tuple | None = None  # trec_eval's parameters of the measures that take them (utility, ndcg's gains)
    label: str | None = None  # those parameters as written (trec_eval's name: utility_2,-1,0,0)

    @property
    def trec(self) -> str:
        """trec_eval's name of the measure (``ndcg_cut_10``, ``iprec_at_recall_0.10``, ``recip_rank``)."""
        if self.label is not None:
            return f"{self.family}_{self.label}"
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
_FRACTIONS = {"iprec_at_recall", "Rprec_mult", "Rprec_mult_avgjg"}
_TREC_PLAIN = {r.name for r in trec_all.ROOTS.values() if r.kind not in ("cut", "cutd")}
# trec_eval's default cutoffs of a family named without one, and its nicknames (``official``, ``all_trec``, ``set``)
TREC_DEFAULTS = {r.name: r.defaults for r in trec_all.ROOTS.values() if r.kind in ("cut", "cutd")}
OFFICIAL = trec_all.NICKNAMES["official"]
_OURS = {ours.split("_at_")[0]: theirs.split("_{")[0] for ours, theirs in FAMILIES}
EXAMPLES = ("nDCG@10, R@100, P@10, AP@100, RR, RR@10 (ir_measures) or ndcg_cut_10, recall_100, P_10, recip_rank "
            "(trec_eval)")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"


def measures(name: str) -> list[Measure]:
    """The measures a name stands for: one, or a trec_eval family's default cutoffs (``P``: P_5 ... P_1000) or its
    default measures (``official``)."""
    text = str(name).strip()
    if text in trec_all.NICKNAMES:  # in trec_eval's table order, the order it prints them in
        return [m for n in sorted(trec_all.NICKNAMES[text], key=trec_all.ORDER.__getitem__) for m in measures(n)]
    if text in TREC_DEFAULTS:
        fraction = text in _FRACTIONS
        return [Measure(f"{text}_{c:3.2f}" if fraction else f"{text}_{c}", text, c) for c in TREC_DEFAULTS[text]]
    root, dot, params = text.partition(".")
    if dot and "," in params and root in TREC_DEFAULTS:  # P.5,10: one measure per cutoff
        return [measure(f"{root}.{p}") for p in dict.fromkeys(params.split(","))]
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

            try:
                found = _from_ir_measures(text)  # Judged without a cutoff: ir_measures' whole ranking
            except InputError:  # ir_measures needs the cutoff too: our message names an example
                found = None
            if found is not None:
                return found
            example = "0.1" if cut_family in _FRACTIONS else "10" if key == "judged" else "100"
            raise InputError(f"the measure {text!r} needs a cutoff, e.g. {m.group(1)}@{example}.",
                             fix=f"name {EXAMPLES}.")
        if cutoff is None:
            return _checked(Measure(text, plain, None, rel), text)
        if cut_family is None:
            raise InputError(f"the measure {text!r} takes no cutoff.", fix=f"write {m.group(1)} alone.")
        value = float(cutoff) if cut_family in _FRACTIONS else _int(cutoff, text)
        return _checked(Measure(text, cut_family, value, rel), text)
    cut_roots = "|".join(sorted((r for r in TREC_DEFAULTS if r not in _FRACTIONS), key=len, reverse=True))
    m = re.fullmatch(rf"({cut_roots})[._](\d+)", text)
    if m:
        return _checked(Measure(text, m.group(1), int(m.group(2))), text)
    m = re.fullmatch(rf"(iprec_at_recall|Rprec_mult_avgjg|Rprec_mult)[._]({_NUMBER})", text)
    if m:
        return _checked(Measure(text, m.group(1), float(m.group(2))), text)
    if text in _TREC_PLAIN:
        return Measure(text, text)
    root, dot, params = text.partition(".")
    if dot and root in _TREC_PLAIN:
        return _with_params(text, root, params)
    m = re.fullmatch(r"(ndcg|map|recall|precision)_at_(\d+)", text)
    if m:
        return _checked(Measure(text, _OURS[m.group(1)], int(m.group(2))), text)
    if text == "mrr":
        return Measure(text, "recip_rank")
    m = re.fullmatch(r"judged_at_(\d+)", text)
    if m:
        return _checked(Measure(text, "judged", int(m.group(1))), text)
    found = _from_ir_measures(text)
    if found is not None:
        return found
    if ranx_measures.parse(text):  # ranx's names (precision@10, hit_rate@10, r-precision, ...): through ranx
        return Measure(text, ranx_measures.FAMILY, None, None, None, (text,))
    known = ["nDCG@10", "R@100", "P@10", "AP@100", "AP", "RR", "RR@10", "Success@10", "Rprec", "Bpref", "Judged@10",
             "ndcg_cut_10", "recall_100", "P_10", "map_cut_100", "map", "recip_rank", "ndcg", "num_ret", "num_rel",
             "num_rel_ret", "gm_map", "iprec_at_recall_0.10", "Rprec_mult_0.20"]
    hint = did_you_mean(text, known)
    raise InputError(f"unknown measure {text!r}" + (f"; {hint}" if hint else "."), fix=f"name {EXAMPLES}.")


def _with_params(text: str, root: str, params: str) -> Measure:
    """A trec_eval measure with its parameters (``-m utility.2,-1,0,0``, ``-m ndcg.1=3,2=9``, ``-m rbp.p=0.8``,
    ``-m 11pt_avg..25,.5,.75``, ``-m set_F.0.5``, ``-m relstring.20``), read as trec_eval reads them; named
    ``<root>_<parameters>`` as trec_eval prints it."""
    kind = trec_all.ROOTS[root].kind
    parts = params.split(",")
    if kind == "pair":
        pairs = [p.partition("=") for p in parts]
        if not params or any(not sep or not n or not re.fullmatch(_SIGNED, v) for n, sep, v in pairs):
            raise InputError(f"the measure {text!r}: trec_eval's {root} takes name=value parameters.",
                             fix=f"write e.g. {root}.p=0.8" if root.startswith("rbp") else
                             f"write e.g. {root}.1=1,2=3 (gain of each relevance level).")
        return Measure(text, root, None, None, None, tuple((n, float(v)) for n, _, v in pairs), params)
    if kind in ("pdouble", "string") and all(re.fullmatch(_SIGNED, p) for p in parts):
        values = tuple(float(p) for p in parts)
        need = {"utility": 4, "set_F": 1, "relstring": 1}.get(root)
        if need is None or len(values) == need:
            return Measure(text, root, None, None, None, values, params)
        raise InputError(f"the measure {text!r}: trec_eval's {root} takes {need} number(s), got {len(values)}.",
                         fix="write e.g. utility.1,-1,0,0" if root == "utility" else f"write e.g. {root}.1")
    raise InputError(f"the measure {text!r}: trec_eval's {root} takes no such parameters.",
                     fix=f"write {root} alone.")


_SIGNED = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"


def _from_ir_measures(text: str) -> Measure | None:
    """A name ir_measures parses, as a Measure computed through ir_measures (``scoring.irm``); None if unknown."""
    from . import irm

    parsed = irm.parse(text)
    return None if parsed is None else Measure(text, irm.FAMILY, None, None, None, (parsed[0],), parsed[1])


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
    """Names (or :class:`Measure` s) as measures, families expanded, each name once. As in trec_eval, a measure
    given with parameters (``relstring.20``, ``P.5``) replaces its defaults in a nickname (``all_trec``)."""
    out: dict[str, Measure] = {}
    names = list(names)
    given = {str(n).partition(".")[0] for n in names if isinstance(n, str) and "." in n}
    for n in names:
        nickname = isinstance(n, str) and n.strip() in trec_all.NICKNAMES
        for m in ([n] if isinstance(n, Measure) else measures(n)):
            if not (nickname and m.family in given):
                out.setdefault(m.name, m)
    return list(out.values())


def score(table, qrels: dict, measures_, *, level: int = 1, depth: int | None = None, complete: bool | None = None,
          ignore_identical_ids: bool = False, queries=None, judged_only: bool = False, num_docs: int = 0,
          zscores: dict | None = None, groups: dict | None = None, prefs=None) -> dict:
    """Score a run held as a ``runfile.RunTable``: {"metrics": {name: figure}, "per_query": {qid: {name: value}},
    "counts": which queries were scored, "run_depth": the run's most documents for one query}. trec_eval's options:
    ``level`` ``-l``; ``depth`` ``-M`` (each query's first documents only); ``complete`` ``-c`` (None, the default,
    and True: every judged query, one the run misses scoring 0; True is trec_eval's ``-c`` itself, whose ``num_rel``
    sum counts every judgment graded above 0; False: the judged queries the run retrieved for); ``judged_only``
    ``-J`` (unjudged documents dropped before ranking); ``num_docs`` ``-N`` (the collection's size: ``utility``);
    ``zscores`` ``-Z`` (``zscores.read``'s table: every value as a z-score); ``groups``: ``-R qrels_jg``'s judgments
    in groups (``trec_jg.read``; ``qrels`` is then ``trec_jg.merged(groups)``), which its measures read; ``prefs``:
    ``-R prefs`` or ``-R qrels_prefs`` (``trec_prefs.read``: ``qrels`` is not read), for the preference measures
    alone; ``queries``: the task's query ids, to count unjudged ones."""
    import numpy as np

    from . import irm
    from . import zscores as zs

    if depth is not None and depth < 1:
        raise ValueError("depth (-M) must be 1 or more")
    if prefs is not None:
        return trec_prefs.score(table, prefs, measures_, depth=depth, complete=complete, zscores=zscores,
                                ignore_identical_ids=ignore_identical_ids, queries=queries)
    preferring = [m for m in measures_ if m.family in trec_prefs.FAMILIES]
    if preferring:
        raise InputError(f"{preferring[0].name} reads preferences.", fix="pass -R prefs (qid jg jsg docno level) or "
                                                                          "-R qrels_prefs (TREC qrels) and that file.")
    judgments = trec.Judgments(qrels)
    ranked, run_depth, dropped = trec.rank(table, judgments, ignore_identical_ids)
    if depth is not None:
        ranked = ranked.cut(depth)
    retrieved = ranked.ret > 0  # before -J, as trec_eval's queries with results
    if complete is not False:  # a judged query the run misses: trec_eval's stand-in, one document outside the pool
        ranked = ranked.with_placeholders(~retrieved)
    if judged_only:
        ranked = ranked.judged()
    here = [m for m in measures_ if trec_all.here(m)]
    outside = [m for m in measures_ if irm.outside(m)]
    grouped = [m for m in measures_ if m.family in trec_jg.FAMILIES]
    by_ranx = [m for m in measures_ if m.family == ranx_measures.FAMILY]
    if grouped and groups is None:
        raise InputError(f"{grouped[0].name} reads judgments in groups.", fix="pass -R qrels_jg and qrels_jg "
                                                                                "judgments (qid jg docno rel).")
    values = trec.compute(ranked, judgments, [m for m in measures_ if m not in here + outside + grouped + by_ranx],
                          level)
    if by_ranx:
        values.update(ranx_measures.compute(table, qrels, by_ranx, judgments.qids))
    if grouped:
        values.update(trec_jg.compute(table, groups, grouped, judgments.qids, level, depth, judged_only, complete))
    values.update(trec_all.compute(ranked, judgments, here, level, num_docs, judged_only, table.tag, ~retrieved))
    if outside:
        values.update(irm.compute(table, qrels, outside, judgments.qids))
    for m in measures_:
        if m.family == "num_ret":  # the stand-in of a missing query retrieved nothing
            values[m.name] = np.where(retrieved, values[m.name], 0.0)
    scored = retrieved if complete is False else np.ones(len(judgments), dtype=bool)
    names = [m.name for m in measures_]
    strings = {m.name for m in measures_ if m.family in trec_all.STRINGS}
    if zscores is not None:
        for m in measures_:
            if m.name not in strings:
                values[m.name] = zs.convert(values[m.name], judgments.qids, m.trec, zscores, m.family)
    figures = {}
    for m in measures_:
        if m.family == "runid":
            figures[m.name] = table.tag or ""
        elif irm.outside(m):
            figures[m.name] = irm.aggregate(m, values[m.name], scored)
        elif m.family == ranx_measures.FAMILY:
            figures[m.name] = ranx_measures.aggregate(values[m.name], scored)
        elif m.name not in strings:
            figures[m.name] = trec.aggregate(m, values[m.name], scored, judgments, complete, level,
                                             logged=zscores is not None)
    rows = {}
    columns = [values[n] if n in strings else values[n].tolist() for n in names]
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


COUNT_FAMILIES = trec.SUMMED + ("num_q",) + trec_prefs.COUNTS  # printed as integers, as trec_eval prints them
PER_QUERY_SILENT = ("gm_map", "gm_bpref", "num_q", "runid")  # trec_eval prints no per-query line for these

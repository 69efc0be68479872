"""trec_eval's measures, computed for every query at once over a run held as arrays.

Each measure is a transcription of trec_eval 10.0's ``m_<measure>.c`` on the same ranking: each query's documents by
score descending, then document id descending (``form_res_rels.c``: ``strcmp`` on the ids, so code point order
of the UTF-8 text), each document's relevance value as trec_eval's ``results_rel_list`` holds it (its grade when
judged with a grade of 0 or more; -2 when judged with a negative grade, "in the pool but unjudged"; -1 when not
judged, "not in the pool"), and the relevance level ``level`` (trec_eval's ``-l``: a document is relevant when its
value is at least the level). Sums run in rank order as trec_eval's loops do (``numpy.bincount`` adds each query's
terms in array order), so values agree with trec_eval's to the last digits; ``tests/test_trec_measures.py`` checks
every measure against pytrec_eval (trec_eval's code) and trec_eval 10.0's published test outputs.

``num_rel`` of a query counts its judgments graded at least ``max(level, 0)``; nDCG's gains are the grades (the
level does not apply, as in trec_eval); ``iprec_at_recall`` rounds its cutoffs with ``lround`` (trec_eval 10.0;
9.x truncated after adding 0.9) and ``Rprec_mult`` truncates after adding 0.9 (both versions). ``judged_k``
(ir_measures' ``Judged@k``, not a trec_eval measure) is the fraction of a query's top ``min(k, retrieved)`` that
has a judgment of any grade.
"""

from __future__ import annotations

import math

from . import binrun

NONPOOL = -1   # trec_eval's RELVALUE_NONPOOL: a retrieved document without a judgment
UNJUDGED = -2  # trec_eval's RELVALUE_UNJUDGED: a judgment with a negative grade
MIN_GEO_MEAN = 1e-5  # trec_eval.h: gm_map's floor
SUMMED = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")  # summed over the queries, as trec_eval does
GEOMETRIC = ("gm_map", "gm_bpref")  # geometric means over the queries (each value floored at 1e-5)
DENSE_CELLS = 1 << 25  # (query, judged document) pairs up to which relevance is looked up in a table (128 MB)
CUT_FAMILIES = ("P", "recall", "success", "map_cut", "ndcg_cut", "judged")  # read only each query's top k


class Judgments:
    """Judgments {qid: {docid: grade}} as arrays: ``qids`` (sorted), and per judgment its query index ``qi``, its
    document's index into ``docs`` (sorted ids) and its ``grade``, ordered by (query, document)."""

    def __init__(self, qrels: dict):
        import numpy as np

        self.qids = sorted(qrels)
        self.index = {q: i for i, q in enumerate(self.qids)}
        counts, flat, grade = [], [], []
        for q in self.qids:
            judged = qrels[q]
            counts.append(len(judged))
            flat.extend(judged)
            grade.extend(judged.values())
        self.docs = sorted(set(flat))
        doc_index = {d: i for i, d in enumerate(self.docs)}
        qi = np.repeat(np.arange(len(self.qids), dtype=np.int64), counts)
        dc = np.fromiter(map(doc_index.__getitem__, flat), dtype=np.int64, count=len(flat))
        key = qi * max(len(self.docs), 1) + dc
        order = np.argsort(key, kind="stable")
        self.key, self.qi = key[order], qi[order]
        self.grade = np.asarray(grade, dtype=np.int64)[order]

    def __len__(self) -> int:
        return len(self.qids)

    def count(self, mask):
        """Per query, how many of its judgments ``mask`` selects (int64)."""
        import numpy as np

        return np.bincount(self.qi[mask], minlength=len(self.qids)).astype(np.int64)

    def num_rel(self, level: int):
        """trec_eval's ``num_rel``: judgments graded at least the level (negative grades never count)."""
        return self.count((self.grade >= 0) & (self.grade >= level))

    def values(self, qi, doc_index):
        """trec_eval's relevance value of each retrieved document (int32): ``qi`` its query, ``doc_index`` its index
        into ``docs`` (-1 where the id is judged for no query). A table of every (query, judged document) where it
        is small (a CliniQ run: 1,246 x 16,550), else a binary search of the sorted judgments."""
        import numpy as np

        out = np.full(len(qi), NONPOOL, dtype=np.int32)
        if not len(qi) or not len(self.key):
            return out
        value = np.where(self.grade >= 0, self.grade, UNJUDGED).astype(np.int32)
        n_docs = max(len(self.docs), 1)
        if len(self.qids) * n_docs <= DENSE_CELLS:
            table = np.full(len(self.qids) * n_docs + 1, NONPOOL, dtype=np.int32)  # the last cell: not judged
            table[self.key] = value
            key = qi.astype(np.int64) * n_docs + doc_index
            key[doc_index < 0] = len(table) - 1
            return table[key]
        known = np.flatnonzero(doc_index >= 0)
        key = qi[known].astype(np.int64) * n_docs + doc_index[known]
        at = np.minimum(np.searchsorted(self.key, key), len(self.key) - 1)
        hit = self.key[at] == key
        out[known[hit]] = value[at[hit]]
        return out

    def ideal(self):
        """(query index, place, gain) of each query's positive grades in descending order: the ideal ranking of
        nDCG (trec_eval's levels from the highest down)."""
        import numpy as np

        positive = np.flatnonzero(self.grade > 0)
        qi, gain = self.qi[positive], self.grade[positive]
        order = np.lexsort((-gain, qi))
        qi, gain = qi[order], gain[order]
        starts = np.r_[0, np.cumsum(np.bincount(qi, minlength=len(self.qids)))][:-1]
        return qi, np.arange(len(qi)) - starts[qi], gain.astype(np.float64)


class Ranked:
    """A run ranked as trec_eval ranks it, restricted to the judged queries: per retrieved document its query index
    ``qi`` (ascending, each query's documents together), its place ``pos`` (0 for the first) and its relevance
    value ``rv`` (int32 each: a full-depth CliniQ run is 20.6 M documents); ``ret`` the documents each judged query
    retrieved (of the whole run, also in a :meth:`cut` view)."""

    def __init__(self, qi, rv, n_queries: int, ret=None):
        import numpy as np

        self.qi, self.rv = qi.astype(np.int32, copy=False), rv.astype(np.int32, copy=False)
        here = np.bincount(self.qi, minlength=n_queries).astype(np.int64)
        self.ret = here if ret is None else ret
        self.start = np.r_[0, np.cumsum(here)][:-1]
        self.pos = (np.arange(len(qi), dtype=np.int64) - self.start[self.qi]).astype(np.int32)

    def cut(self, depth: int, keep_ret: bool = False) -> Ranked:
        """Only each query's first ``depth`` documents: trec_eval's ``-M`` (``keep_ret`` False), or the part of the
        ranking that measures cut at ``depth`` read (``keep_ret``: ``ret`` stays the whole run's)."""
        keep = self.pos < depth
        if keep.all():
            return self
        return Ranked(self.qi[keep], self.rv[keep], len(self.ret), self.ret if keep_ret else None)

    def with_placeholders(self, absent) -> Ranked:
        """The ranking with one document outside the pool for each query ``absent`` marks (a boolean mask): what
        trec_eval 10.0 ranks for a judged query the run misses under ``-c`` (its one-line stand-in run); its
        ``num_ret`` and the measures it resets are set back by the caller."""
        import numpy as np

        extra = np.flatnonzero(absent).astype(np.int32)
        if not len(extra):
            return self
        qi = np.concatenate([self.qi, extra])
        rv = np.concatenate([self.rv, np.full(len(extra), NONPOOL, dtype=np.int32)])
        order = np.argsort(qi, kind="stable")
        return Ranked(qi[order], rv[order], len(self.ret))

    def judged(self) -> Ranked:
        """Only the judged documents (a grade of 0 or more), ranked among themselves: trec_eval's ``-J``."""
        keep = self.rv >= 0
        return self if keep.all() else Ranked(self.qi[keep], self.rv[keep], len(self.ret))


def rank(table, judgments: Judgments, ignore_identical_ids: bool = False):
    """(:class:`Ranked` of ``table``, a ``runfile.RunTable``; the run's depth, its most documents for one query; how
    many documents were dropped as their id is the query's (``ignore_identical_ids``, BEIR's option)). A text run
    is sorted by (query, document id descending) once, where a document twice for a query shows as equal
    neighbours, then stably by (query, score descending): trec_eval's order. Document ids are compared as text
    only there and in the one lookup of the judged ones; everything else is integers."""
    import numpy as np
    import pyarrow.compute as pc

    q, score = table.q, table.score
    binary = table.doc_text is None
    same = tie = None
    if binary:
        doc_ids, d = table.doc_ids, table.d
        where = {x: i for i, x in enumerate(judgments.docs)}
        doc_index = np.asarray([where.get(x, -1) for x in doc_ids], dtype=np.int32)[d] if len(d) \
            else np.zeros(0, dtype=np.int32)
        if ignore_identical_ids and len(q):
            own = {x: i for i, x in enumerate(doc_ids)}
            same = d == np.asarray([own.get(x, -1) for x in table.qids], dtype=np.int64)[q]
        tie = binrun.id_rank(doc_ids) if table.order != "trec_eval" else None
    else:
        doc = table.doc_text
        found = pc.index_in(doc, value_set=binrun.text_array(judgments.docs).cast(doc.type))
        # the codes as stored (a null's slot holds some value), -1 where the id is judged for no query
        doc_index = np.where(binrun.numpy_of(pc.is_null(found)), -1, binrun.numpy_of(found)).astype(np.int32)
        if ignore_identical_ids and len(q):
            same = binrun.numpy_of(pc.equal(doc, binrun.text_array(table.qids).cast(doc.type).take(binrun.arrow_of(q))))
        if len(q) > 1:
            order = pc.sort_indices(binrun.table_of({"q": q, "d": doc}), sort_keys=[("q", "ascending"),
                                                                                   ("d", "descending")])
            table.check_duplicates(order)
            order = binrun.numpy_of(order)
            q, score, doc_index = q[order], score[order], doc_index[order]
            same = same[order] if same is not None else None
    dropped = int(np.count_nonzero(same)) if same is not None else 0
    if dropped:
        keep = ~same
        q, score, doc_index = q[keep], score[keep], doc_index[keep]
        d = d[keep] if binary else None
    depth = int(np.bincount(q, minlength=len(table.qids)).max()) if len(q) else 0
    qi = np.asarray([judgments.index.get(x, -1) for x in table.qids], dtype=np.int32)[q] if len(q) \
        else np.zeros(0, dtype=np.int32)
    if not (qi >= 0).all():
        keep = qi >= 0
        qi, score, doc_index = qi[keep], score[keep], doc_index[keep]
        d = d[keep] if binary else None
    if len(qi) and binary:
        # each query's entries in rank order already, scores not increasing: equal scores of a ranking made
        # elsewhere by document id descending (their runs alone sorted), the queries in the judgments' order
        if tie is not None:
            order = _ties_by_id(qi, score, tie[d])
            if order is not None:
                qi, doc_index = qi[order], doc_index[order]
        if bool((qi[1:] < qi[:-1]).any()):
            order = binrun.numpy_of(pc.sort_indices(binrun.table_of({"q": qi}), sort_keys=[("q", "ascending")]))
            qi, doc_index = qi[order], doc_index[order]
    elif len(qi):  # stable: equal scores keep the document id descending order of the first sort
        order = binrun.numpy_of(pc.sort_indices(binrun.table_of({"q": qi, "s": score}), sort_keys=[
            ("q", "ascending"), ("s", "descending")]))
        qi, doc_index = qi[order], doc_index[order]
    ranked = Ranked(qi, judgments.values(qi, doc_index), len(judgments))
    return ranked, depth, dropped


def _ties_by_id(qi, score, id_rank):
    """The permutation that orders each run of equal scores within a query by ``id_rank`` descending, the rest left
    in place (entries already grouped by query, scores not increasing); None where there is no tie."""
    import numpy as np

    same = (qi[1:] == qi[:-1]) & (score[1:] == score[:-1])  # entry i ties with entry i + 1
    pairs = np.flatnonzero(same)
    if not len(pairs):
        return None
    mask = np.zeros(len(qi), dtype=bool)
    mask[pairs] = mask[pairs + 1] = True
    tied = np.flatnonzero(mask)  # every entry of a tie, in order
    group = np.cumsum(np.r_[True, (np.diff(tied) > 1) | ~same[tied[1:] - 1]])
    order = np.arange(len(qi))
    order[tied] = tied[np.lexsort((-id_rank[tied], group))]
    return order


# ------------------------------------------------------------------ the measures

def _per_query(ranked: Ranked, weights):
    import numpy as np

    return np.bincount(ranked.qi, weights=weights, minlength=len(ranked.ret))


def _divide(num, den):
    """num / den where den > 0, else 0 (trec_eval leaves the value at 0)."""
    import numpy as np

    out = np.zeros(len(num), dtype=np.float64)
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return out


def _cum(ranked: Ranked, flags):
    """Per document: how many documents of its query up to and including it ``flags`` selects."""
    import numpy as np

    c = np.cumsum(flags, dtype=np.int64)
    before = np.r_[0, c][ranked.start]
    return c - before[ranked.qi]


def average_precision(ranked: Ranked, rel, num_rel, k=None):
    """``map`` (``k`` None) or ``map_cut_k``: the precision at each relevant document in the top k, summed in rank
    order, over the query's relevant count."""
    import numpy as np

    cum = _cum(ranked, rel)
    take = rel if k is None else rel & (ranked.pos < k)
    terms = np.where(take, cum / (ranked.pos + 1.0), 0.0)
    return _divide(_per_query(ranked, terms), num_rel.astype(np.float64))


def dcg(ranked: Ranked, k=None):
    import numpy as np

    gain = np.where(ranked.rv > 0, ranked.rv, 0).astype(np.float64)
    take = gain > 0 if k is None else (gain > 0) & (ranked.pos < k)
    return _per_query(ranked, np.where(take, gain / np.log2(ranked.pos + 2.0), 0.0))


def ideal_dcg(judgments: Judgments, k=None):
    import numpy as np

    qi, place, gain = judgments.ideal()
    take = np.ones(len(qi), dtype=bool) if k is None else place < k
    return np.bincount(qi, weights=np.where(take, gain / np.log2(place + 2.0), 0.0), minlength=len(judgments))


def first_relevant(ranked: Ranked, rel):
    """Per query the place of its first relevant document, -1 where none was retrieved."""
    import numpy as np

    out = np.full(len(ranked.ret), -1, dtype=np.int64)
    hits = np.flatnonzero(rel)
    if len(hits):
        firsts = hits[np.r_[True, ranked.qi[hits][1:] != ranked.qi[hits][:-1]]]
        out[ranked.qi[firsts]] = ranked.pos[firsts]
    return out


def bpref(ranked: Ranked, judgments: Judgments, level: int):
    """m_bpref.c: each judged relevant document scores 1 minus the judged non-relevant ones above it (at most R)
    over min(judged non-relevant, R); the sum over R."""
    import numpy as np

    rv = ranked.rv
    nonrel = (rv >= 0) & (rv < level)
    rel = (rv >= 0) & (rv >= level)
    above = _cum(ranked, nonrel) - nonrel
    num_rel = judgments.num_rel(level)
    num_nonrel = judgments.count((judgments.grade >= 0) & (judgments.grade < level))
    r = num_rel[ranked.qi].astype(np.float64)
    denom = np.minimum(num_nonrel, num_rel)[ranked.qi].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(above > 0, 1.0 - np.minimum(above, r) / denom, 1.0)
    return _divide(_per_query(ranked, np.where(rel, terms, 0.0)), num_rel.astype(np.float64))


def _lround(x: float) -> int:
    """C's ``lround``: the nearest integer, halves away from zero."""
    whole = math.trunc(x)
    frac = x - whole
    return whole + (1 if frac >= 0.5 else -1 if frac <= -0.5 else 0)


def iprec_at_recall(ranked: Ranked, rel, num_rel, fraction: float):
    """m_iprec_at_recall.c (10.0): the cutoff lround(fraction x R) in relevant documents; the interpolated precision
    there (the highest precision at that relevant document or below it), 0 past the retrieved relevant ones."""
    import numpy as np

    out = np.zeros(len(ranked.ret), dtype=np.float64)
    hits = np.flatnonzero(rel)
    prec = _cum(ranked, rel)[hits] / (ranked.pos[hits] + 1.0)
    qi = ranked.qi[hits]
    bounds = np.r_[0, np.flatnonzero(qi[1:] != qi[:-1]) + 1, len(hits)] if len(hits) else np.zeros(1, np.int64)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        q = int(qi[lo])
        best = np.maximum.accumulate(prec[lo:hi][::-1])[::-1]  # interpolated: the highest from here down
        cut = _lround(fraction * float(num_rel[q]))
        if cut <= hi - lo:
            out[q] = best[max(cut, 1) - 1]
    # nothing retrieved (-J can leave a query so) and a cutoff of 0: trec_eval's 0 / 0 precision
    empty = np.flatnonzero(ranked.ret == 0)
    out[empty[[_lround(fraction * float(num_rel[q])) <= 0 for q in empty.tolist()]]] = np.nan
    return out


def rprec_mult(ranked: Ranked, rel, num_rel, multiple: float):
    """m_Rprec_mult.c: the precision at (long)(multiple x R + 0.9) documents (past the retrieved ones: the retrieved
    relevant over that cutoff); 0 for a cutoff of 0."""
    import numpy as np

    cut = np.asarray([int(multiple * float(r) + 0.9) for r in num_rel.tolist()], dtype=np.int64)
    count = _per_query(ranked, (rel & (ranked.pos < cut[ranked.qi])).astype(np.float64))
    return _divide(count, cut.astype(np.float64))


def compute(ranked: Ranked, judgments: Judgments, measures, level: int = 1) -> dict:
    """{measure name: per judged query value (float64, ``judgments.qids`` order)} for ``measures`` (each with
    ``name``, ``family``, ``cut``, ``rel`` (None: ``level``) and ``depth`` (RR@k); see ``metrics.Measure``)."""
    import numpy as np

    out = {}
    cache: dict = {}
    # the cut measures read each query's top k only: a view of that prefix (of a full-depth run, a small part)
    cuts = [m.cut for m in measures if m.family in CUT_FAMILIES] + [m.depth for m in measures if m.depth]
    head = ranked.cut(int(max(cuts)), keep_ret=True) if cuts else ranked
    full = ranked

    def at_level(lv, r):
        if (lv, id(r)) not in cache:
            cache[(lv, id(r))] = (r.rv >= lv, judgments.num_rel(lv))
        return cache[(lv, id(r))]

    ret = ranked.ret.astype(np.float64)
    for m in measures:
        lv = level if m.rel is None else m.rel
        fam, k = m.family, m.cut
        ranked = head if fam in CUT_FAMILIES or m.depth else full
        rel, num_rel = at_level(lv, ranked)
        if fam in ("P", "recall", "success"):
            hits = _per_query(ranked, (rel & (ranked.pos < k)).astype(np.float64))
            value = hits / k if fam == "P" else _divide(hits, num_rel.astype(np.float64)) if fam == "recall" \
                else (hits > 0).astype(np.float64)
        elif fam in ("map", "map_cut", "gm_map"):
            value = average_precision(ranked, rel, num_rel, k if fam == "map_cut" else None)
        elif fam in ("ndcg", "ndcg_cut"):
            kk = k if fam == "ndcg_cut" else None
            value = _divide(dcg(ranked, kk), ideal_dcg(judgments, kk))
        elif fam == "recip_rank":
            first = first_relevant(ranked, rel if m.depth is None else rel & (ranked.pos < m.depth))
            value = _divide(np.ones(len(first)), first + 1.0)
        elif fam == "Rprec":
            top = np.minimum(ranked.ret, num_rel)
            hits = _per_query(ranked, (rel & (ranked.pos < top[ranked.qi])).astype(np.float64))
            value = np.where(top > 0, _divide(hits, num_rel.astype(np.float64)), 0.0)
        elif fam == "bpref":
            value = bpref(ranked, judgments, lv)
        elif fam == "num_ret":
            value = ret.copy()
        elif fam == "num_rel":
            value = num_rel.astype(np.float64)
        elif fam == "num_rel_ret":
            value = _per_query(ranked, rel.astype(np.float64))
        elif fam == "num_q":
            value = np.ones(len(ret))
        elif fam == "iprec_at_recall":
            value = iprec_at_recall(ranked, rel, num_rel, k)
        elif fam == "Rprec_mult":
            value = rprec_mult(ranked, rel, num_rel, k)
        elif fam == "judged":
            hits = _per_query(ranked, ((ranked.rv != NONPOOL) & (ranked.pos < k)).astype(np.float64))
            value = _divide(hits, np.minimum(ret, float(k)))
        else:
            raise ValueError(f"no such measure family {fam!r}")
        out[m.name] = value
    return out


def aggregate(m, values, scored, judgments: Judgments, complete: bool, level: int = 1, logged: bool = False) -> float:
    """The figure trec_eval prints on its ``all`` line: the mean over the ``scored`` queries (a boolean mask), a sum
    for the counts, the number of queries for ``num_q``, the geometric mean (floored at 1e-5) for ``gm_map`` and
    ``gm_bpref`` (``logged``: the values are the logs already, as under ``-Z``). As in trec_eval, ``num_rel`` under
    an explicit ``-c`` (``complete`` True) counts every judgment graded above 0 of every judged query, whatever the
    level."""
    import numpy as np

    n = int(np.count_nonzero(scored))
    if m.family == "num_q":
        return float(n)
    if m.family == "num_rel" and complete is True:
        return float(np.count_nonzero(judgments.grade > 0))
    if m.family in SUMMED:
        return float(math.fsum(values[scored].tolist()))
    if not n:
        return float("nan")
    if m.family in GEOMETRIC:
        logs = values[scored] if logged else np.log(np.maximum(values[scored], MIN_GEO_MEAN))
        return math.exp(math.fsum(logs.tolist()) / n)
    return math.fsum(values[scored].tolist()) / n

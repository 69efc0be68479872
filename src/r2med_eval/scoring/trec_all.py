"""trec_eval 10.0's measures that ``scoring.trec`` does not vectorise, computed query by query.

Each measure is a transcription of trec_eval 10.0's ``m_<measure>.c`` (usnistgov/trec_eval at f4253652), applied to
the same ranking as the fast path (``trec.rank``: score descending, then document id descending; ``-M`` and ``-J``
applied as trec_eval applies them): per query the relevance value of each retrieved document in rank order
(``rel``: its grade, -1 not in the pool, -2 judged with a negative grade) and the number of judgments at each grade
of 0 or more (``levels``). Loops run in trec_eval's order, so sums round as trec_eval's do. The measures:

* ``infAP``, ``gm_bpref``, ``utility`` (parameters p1..p4, with ``-N``), ``11pt_avg`` (recall points), ``binG``,
  ``G``, ``ndcg`` with gains (``ndcg.1=3,2=9``), ``ndcg_rel``, ``Rndcg``, ``relative_P``, ``set_P``,
  ``set_relative_P``, ``set_recall``, ``set_map``, ``set_F`` (its beta), ``num_nonrel_judged_ret``, ``rbp`` and
  ``rbp_resid`` (``p=``), ``unj`` (cutoffs), ``relstring`` (a string per query), ``runid`` (the run's tag), and
  ``yaap`` (not in ``all_trec``); the ``-R qrels_jg`` measures are ``scoring.trec_jg``'s, the ``-R prefs`` ones
  ``scoring.trec_prefs``'s.

``rbp`` reads two variables trec_eval leaves uninitialised (the smallest and largest gain); this module takes them
as the gains' true minimum and maximum, which is what trec_eval's own test outputs show and what the built trec_eval
gives with ``-m all_trec``; with ``yaap`` computed before it (``-m all_trec -m yaap``) trec_eval's stack leaves other
values there and its ``rbp`` of graded judgments changes, a bug of trec_eval's not reproduced here. ``ROOTS`` is
trec_eval's measure table in its order (``measures.c``), the fast path's measures included, with each root's kind
(how its parameters read, how it is named, printed and averaged) and defaults; ``NICKNAMES`` its nicknames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NONPOOL, UNJUDGED = -1, -2
MIN_GEO_MEAN = 1e-5
INFAP_EPSILON = 1e-5
MISSING_ZSCORE = -1000000.0  # trec_eval.h: MISSING_ZSCORE_VALUE

# kind: "long" (a count, summed), "double" (a mean), "cut" (whole-number cutoffs, one value each: name_k),
# "cutd" (fractional cutoffs: name_%3.2f), "pdouble" (numbers as parameters, one value: name_params), "pair"
# (name=value parameters), "gm" (geometric mean, no per-query line), "string" (relstring), "runid", "num_q"
KINDS = ("long", "double", "cut", "cutd", "pdouble", "pair", "gm", "string", "runid", "num_q")
CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
FRACTIONS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class Root:
    name: str
    kind: str
    defaults: tuple = ()


ROOTS = {r.name: r for r in (
    Root("runid", "runid"), Root("num_q", "num_q"), Root("num_ret", "long"), Root("num_rel", "long"),
    Root("num_rel_ret", "long"), Root("map", "double"), Root("gm_map", "gm"), Root("Rprec", "double"),
    Root("bpref", "double"), Root("recip_rank", "double"), Root("iprec_at_recall", "cutd", FRACTIONS),
    Root("P", "cut", CUTS), Root("relstring", "string", (10.0,)), Root("recall", "cut", CUTS),
    Root("infAP", "double"), Root("gm_bpref", "gm"),
    Root("Rprec_mult", "cutd", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    Root("utility", "pdouble", (1.0, -1.0, 0.0, 0.0)), Root("11pt_avg", "pdouble", FRACTIONS),
    Root("binG", "double"), Root("G", "pair"), Root("ndcg", "pair"), Root("ndcg_rel", "pair"),
    Root("Rndcg", "pair"), Root("ndcg_cut", "cut", CUTS), Root("map_cut", "cut", CUTS),
    Root("relative_P", "cut", CUTS), Root("success", "cut", (1, 5, 10)), Root("set_P", "double"),
    Root("set_relative_P", "double"), Root("set_recall", "double"), Root("set_map", "double"),
    Root("set_F", "pdouble", (1.0,)), Root("num_nonrel_judged_ret", "long"),
    # -R prefs's and -R qrels_prefs's measures (scoring.trec_prefs)
    Root("prefs_num_prefs_poss", "long"), Root("prefs_num_prefs_ful", "long"), Root("prefs_num_prefs_ful_ret", "long"),
    Root("prefs_simp", "double"), Root("prefs_pair", "double"), Root("prefs_avgjg", "double"),
    Root("prefs_avgjg_Rnonrel", "double"), Root("prefs_simp_ret", "double"), Root("prefs_pair_ret", "double"),
    Root("prefs_avgjg_ret", "double"), Root("prefs_avgjg_Rnonrel_ret", "double"), Root("prefs_simp_imp", "double"),
    Root("prefs_pair_imp", "double"), Root("prefs_avgjg_imp", "double"),
    # -R qrels_jg's measures (scoring.trec_jg)
    Root("map_avgjg", "double"), Root("P_avgjg", "cut", CUTS),
    Root("Rprec_mult_avgjg", "cutd", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    Root("yaap", "double"), Root("rbp", "pair"), Root("rbp_resid", "pair"), Root("unj", "cut", (5, 10, 20)),
)}
ORDER = {name: i for i, name in enumerate(ROOTS)}
NICKNAMES = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                 "recip_rank", "iprec_at_recall", "P"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                 "recip_rank", "iprec_at_recall", "P", "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP",
                 "gm_bpref", "utility", "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut",
                 "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map",
                 "set_F", "num_nonrel_judged_ret"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
            "set_relative_P", "set_map", "set_F"),
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"),
    "all_prefs": ("runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret",
                  "prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
                  "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp"),
    "prefs": ("runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
              "prefs_pair", "prefs_avgjg"),
}
# the measures of this module (the others are scoring.trec's), by the trec_eval root a Measure's family names
COMPUTED_HERE = {"infAP", "gm_bpref", "utility", "11pt_avg", "binG", "G", "ndcg_rel", "Rndcg",
                 "relative_P", "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret",
                 "rbp", "rbp_resid", "unj", "relstring", "runid", "yaap"}
STRINGS = ("relstring", "runid")  # measures whose value is text


def here(m) -> bool:
    """Whether this module computes the measure ``m`` (a ``metrics.Measure``); ``ndcg`` with gains too."""
    return m.family in COMPUTED_HERE or (m.family == "ndcg" and bool(m.params))


class Query:
    """One query as trec_eval's ``RES_RELS`` holds it: ``rel`` (rank order), ``levels`` (judgments per grade, grades
    0 up to the highest with one), and the counts trec_eval keeps beside them."""

    __slots__ = ("rel", "levels", "level", "num_rel", "num_ret", "num_rel_ret", "nonpool", "unjudged", "num_docs")

    def __init__(self, rel: list, levels: list, level: int, num_docs: int = 0, judged_only: bool = False):
        self.rel, self.levels, self.level, self.num_docs = rel, levels, level, num_docs
        self.num_ret = len(rel)
        self.num_rel = sum(levels[max(level, 0):]) if level < len(levels) else 0
        self.num_rel_ret = sum(1 for r in rel if r >= 0 and r >= level)
        self.nonpool = 0 if judged_only else rel.count(NONPOOL)
        self.unjudged = 0 if judged_only else rel.count(UNJUDGED)


def _div(a: float, b: float) -> float:
    """a / b as C computes it in doubles (inf or nan where b is 0)."""
    if b:
        return a / b
    return -math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)  # x86's 0 / 0 is -nan


# ------------------------------------------------------------------ gains (gain_init.c)

def _gains(q: Query, pairs: tuple):
    """setup_gains: (rel level, gain, number at the level) sorted by gain as trec_eval's qsort compares them (the
    difference truncated to an int); parameters with a whole-number name set a level's gain."""
    import functools

    gains = []
    for name, value in pairs:
        if _valid_int(name):
            gains.append([int(name), float(value), 0])
    for i, count in enumerate(q.levels):
        for g in gains:
            if g[0] == i:
                g[2] = count
                break
        else:
            gains.append([i, float(i), count])
    gains.sort(key=functools.cmp_to_key(lambda a, b: int(a[1] - b[1])))
    return gains


def _valid_int(text: str) -> bool:
    text = text.lstrip()
    text = text[1:] if text[:1] in "+-" else text
    return text.isdigit() and text.isascii()


def _gain(rel: int, gains) -> float:
    for level, gain, _ in gains:
        if level == rel:
            return gain
    return 0.0


class _Ideal:
    """The ideal ranking's gains, from the highest level down, as ndcg, G, Rndcg and ndcg_rel walk it."""

    def __init__(self, gains):
        self.gains, self.cur = gains, len(gains) - 1
        self.gain = gains[self.cur][1] if self.cur >= 0 else 0.0
        self.at = 0

    def step(self) -> float:
        self.at += 1
        while self.cur >= 0 and self.at > self.gains[self.cur][2]:
            self.at = 1
            self.cur -= 1
            self.gain = self.gains[self.cur][1] if self.cur >= 0 else 0.0
        return self.gain


def _dcg_walk(q: Query, gains):
    """m_ndcg.c's and m_ndcg_rel.c's walk: after each place, (the document's gain or None past the retrieved ones,
    the ideal ranking's gain there or None once it is exhausted, DCG so far, ideal DCG so far)."""
    ideal = _Ideal(gains)
    results_dcg = ideal_dcg = 0.0
    i = 0
    while i < q.num_ret or ideal.gain > 0.0:
        g = step = None
        if i < q.num_ret:
            g = _gain(q.rel[i], gains)
            if g != 0:
                results_dcg += g / math.log2(i + 2)
        if ideal.gain > 0.0:
            step = ideal.step()
            if step > 0.0:
                ideal_dcg += step / math.log2(i + 2)
        yield g, step, results_dcg, ideal_dcg
        i += 1


def ndcg(q: Query, pairs: tuple) -> float:
    walk = list(_dcg_walk(q, _gains(q, pairs)))
    results_dcg, ideal_dcg = walk[-1][2:] if walk else (0.0, 0.0)
    return results_dcg / ideal_dcg if ideal_dcg > 0.0 else 0.0


def ndcg_rel(q: Query, pairs: tuple) -> float:
    results_dcg = ideal_dcg = total = 0.0
    num_rel_ret = num_rel = 0
    for g, step, results_dcg, ideal_dcg in _dcg_walk(q, _gains(q, pairs)):
        if step is not None and step > 0.0:
            num_rel += 1
        if g is not None and g > 0:
            total += _div(results_dcg, ideal_dcg)
            num_rel_ret += 1
    total += _div((num_rel - num_rel_ret) * results_dcg, ideal_dcg)
    return _div(total, num_rel) if total > 0.0 else 0.0


def rndcg(q: Query, pairs: tuple) -> float:
    """m_Rndcg.c: nDCG taken wherever the ideal ranking's gain changes, averaged over those points."""
    gains = _gains(q, pairs)
    if q.num_rel == 0:
        return 0.0
    ideal = _Ideal(gains)
    old = ideal.gain
    results_dcg = ideal_dcg = total = 0.0
    changed = 0

    def point():
        nonlocal total, changed
        if ideal_dcg > 0.0:
            total += results_dcg / ideal_dcg
            changed += 1

    def step():
        nonlocal old
        ideal.step()
        if old != ideal.gain:
            point()
            old = ideal.gain

    i = 0
    while i < q.num_ret and ideal.gain > 0.0:
        g = _gain(q.rel[i], gains)
        step()
        if g != 0:
            results_dcg += g / math.log2(i + 2)
        if ideal.gain > 0.0:
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    if i < q.num_ret:
        while i < q.num_ret:
            g = _gain(q.rel[i], gains)
            if g != 0:
                results_dcg += g / math.log2(i + 2)
            i += 1
        point()
    while ideal.gain > 0.0:
        step()
        if ideal.gain > 0.0:
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    return _div(total, changed)


def g_measure(q: Query, pairs: tuple) -> float:
    gains = _gains(q, pairs)
    ideal = _Ideal(gains)
    results_g = sum_results = sum_ideal = sum_cost = 0.0
    min_cost = 1.0
    i = 0
    while i < q.num_ret and ideal.gain > 0.0:
        g = _gain(q.rel[i], gains)
        sum_results += g
        ideal.step()
        if ideal.gain > 0.0:
            sum_ideal += ideal.gain
        sum_cost += ideal.gain if ideal.gain >= min_cost else min_cost
        if g != 0:
            results_g += g / math.log2(2 + sum_cost - sum_results)
        i += 1
    while i < q.num_ret:
        g = _gain(q.rel[i], gains)
        sum_results += g
        sum_cost += min_cost
        if g != 0:
            results_g += g / math.log2(2 + sum_cost - sum_results)
        i += 1
    while ideal.gain > 0.0:
        ideal.step()
        if ideal.gain > 0.0:
            sum_ideal += ideal.gain
        i += 1
    return results_g / sum_ideal if sum_ideal > 0.0 else 0.0


def rbp(q: Query, pairs: tuple) -> float:
    p = _pair_value(pairs, "p", 0.9)
    gains = _gains(q, pairs)
    if gains:
        low, high = min(g[1] for g in gains), max(g[1] for g in gains)
        if low < 0 or high > 1:
            for g in gains:
                g[1] = (g[1] - low) / (high - low)
    total, cur = 0.0, 1.0
    for r in q.rel:
        g = _gain(r, gains)
        if g != 0:
            total += g * cur
        cur *= p
    return (1.0 - p) * total


def rbp_resid(q: Query, pairs: tuple) -> float:
    p = _pair_value(pairs, "p", 0.9)
    unj, total, cur = 0, 0.0, 1.0
    for r in q.rel:
        if r < 0:
            unj += 1
            total += cur
        cur *= p
    return cur + (1 - p) * total if unj else 0.0


def _pair_value(pairs: tuple, name: str, default: float) -> float:
    value = default
    for n, v in pairs:
        if n == name:
            value = float(v)
    return value


# ------------------------------------------------------------------ the other measures

def infap(q: Query) -> float:
    nonrel = rel = unjudged = 0
    total = 0.0
    for j, r in enumerate(q.rel):
        if r == NONPOOL:
            continue
        if r == UNJUDGED:
            unjudged += 1
            continue
        if 0 <= r < q.level:
            nonrel += 1
            continue
        rel += 1
        if j == 0:
            total += 1.0
        else:
            fj = float(j)
            total += 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel - 1 + nonrel + unjudged) / fj) * (
                (rel - 1 + INFAP_EPSILON) / (rel - 1 + nonrel + 2 * INFAP_EPSILON))
    return total / q.num_rel if q.num_rel else total


def gm_bpref(q: Query) -> float:
    """bpref (trec_eval keeps its log, floored at 1e-5, and prints only the geometric mean: ``trec.aggregate``)."""
    num_nonrel = sum(q.levels[:max(q.level, 0)])
    nonrel = 0
    total = 0.0
    for r in q.rel:
        if r < 0:
            continue
        if r < q.level:
            nonrel += 1
        elif nonrel > 0:
            total += 1.0 - _div(min(nonrel, q.num_rel), min(num_nonrel, q.num_rel))
        else:
            total += 1.0
    return total / q.num_rel if q.num_rel else total


def utility(q: Query, params: tuple) -> float:
    p = params
    return (p[0] * q.num_rel_ret + p[1] * (q.num_ret - q.num_rel_ret) + p[2] * (q.num_rel - q.num_rel_ret)
            + p[3] * (q.num_docs + q.num_rel_ret - q.num_ret - q.num_rel))


def _lround(x: float) -> int:
    whole = math.trunc(x)
    frac = x - whole
    return whole + (1 if frac >= 0.5 else -1 if frac <= -0.5 else 0)


def eleven_pt(q: Query, params: tuple) -> float:
    cutoffs = [_lround(c * q.num_rel) for c in params]
    current = len(cutoffs) - 1
    while current >= 0 and cutoffs[current] > q.num_rel_ret:
        current -= 1
    precis = _div(q.num_rel_ret, q.num_ret)
    int_precis = precis
    rel_so_far = q.num_rel_ret
    total = 0.0
    i = q.num_ret
    while i > 0 and rel_so_far > 0:
        precis = rel_so_far / i
        if int_precis < precis:
            int_precis = precis
        if q.rel[i - 1] >= q.level:
            while current >= 0 and rel_so_far == cutoffs[current]:
                total += int_precis
                current -= 1
            rel_so_far -= 1
        i -= 1
    while current >= 0:
        total += int_precis
        current -= 1
    return total / len(params)


def bin_g(q: Query) -> float:
    rel_so_far = 0
    total = 0.0
    for i, r in enumerate(q.rel):
        if r >= q.level:
            rel_so_far += 1
            total += 1.0 / math.log2(3 + i - rel_so_far)
    return _div(total, q.num_rel) if rel_so_far else 0.0


def relative_p(q: Query, k: int) -> float:
    if q.num_rel == 0:
        return 0.0
    hits = sum(1 for r in q.rel[:k] if r >= q.level)
    return hits / min(k, q.num_rel)


def unj(q: Query, k: int) -> float:
    return sum(1 for r in q.rel[:k] if r in (NONPOOL, UNJUDGED)) / k


def set_measure(q: Query, name: str, params: tuple = ()) -> float:
    ret, rel, hit = q.num_ret, q.num_rel, q.num_rel_ret
    if name == "set_P":
        return hit / ret if ret else 0.0
    if name == "set_recall":
        return hit / rel if rel else 0.0
    if name == "set_relative_P":
        return hit / min(ret, rel) if ret and rel else 0.0
    if name == "set_map":
        return (hit * hit) / (ret * rel) if ret and rel else 0.0
    if name == "set_F":
        if not hit:
            return 0.0
        x = params[0]
        p, r = hit / ret, hit / rel
        return _div((x + 1.0) * p * r, x * p + r)
    raise ValueError(name)


def relstring(q: Query, params: tuple) -> str:
    n = max(min(int(params[0]), q.num_ret), 0)
    return "".join(">" if r > 9 else str(r) if r >= 0 else "-" if r == NONPOOL else "." if r == UNJUDGED else "<"
                   for r in q.rel[:n])


def precision_sum(q: Query) -> tuple[int, float]:
    """(relevant documents retrieved, the sum of the precisions at each of them), in rank order."""
    rel_so_far, total = 0, 0.0
    for i, r in enumerate(q.rel):
        if r >= q.level:
            rel_so_far += 1
            total += rel_so_far / (i + 1)
    return rel_so_far, total


def yaap(q: Query) -> float:
    """m_yaap.c: log((1 + the sum of the precisions at the relevant documents) / (1 + R - that sum))."""
    total = precision_sum(q)[1]
    return math.log((1.0 + total) / (1.0 + q.num_rel - total))


# family -> the value of one query, from (query, cut, params)
MEASURES = {
    "infAP": lambda q, k, p: infap(q), "gm_bpref": lambda q, k, p: gm_bpref(q),
    "utility": lambda q, k, p: utility(q, p), "11pt_avg": lambda q, k, p: eleven_pt(q, p),
    "binG": lambda q, k, p: bin_g(q), "G": lambda q, k, p: g_measure(q, p), "ndcg": lambda q, k, p: ndcg(q, p),
    "ndcg_rel": lambda q, k, p: ndcg_rel(q, p), "Rndcg": lambda q, k, p: rndcg(q, p),
    "rbp": lambda q, k, p: rbp(q, p), "rbp_resid": lambda q, k, p: rbp_resid(q, p),
    "relative_P": lambda q, k, p: relative_p(q, k), "unj": lambda q, k, p: unj(q, k), "yaap": lambda q, k, p: yaap(q),
    "num_nonrel_judged_ret": lambda q, k, p: float(q.num_ret - q.nonpool - q.unjudged - q.num_rel_ret),
    "relstring": lambda q, k, p: relstring(q, p),
    **{name: (lambda q, k, p, name=name: set_measure(q, name, p))
       for name in ("set_P", "set_relative_P", "set_recall", "set_map", "set_F")},
}


def value(q: Query, family: str, cut, params: tuple):
    """The value trec_eval computes for one query (``gm_bpref``: the bpref whose log trec_eval accumulates)."""
    if family not in MEASURES:
        raise ValueError(f"no such measure family {family!r}")
    return MEASURES[family](q, cut, params)


# names that, on a missing query under -c, trec_eval resets after computing them on its one-document stand-in
RESET_WHEN_MISSING = {"utility": 0.0, "relstring": "", "unj": 0.0, "rbp_resid": 0.0}


def queries(ranked, judgments, level: int, num_docs: int = 0, judged_only: bool = False) -> list[Query]:
    """A :class:`Query` for each judged query (``judgments.qids`` order) from a ``trec.Ranked`` ranking."""
    import numpy as np

    n = len(judgments.qids)
    bounds = np.r_[ranked.start, len(ranked.qi)] if len(ranked.start) else np.zeros(1, dtype=np.int64)
    rv = ranked.rv.tolist()
    # judgments per grade of 0 or more, per query
    levels: list[list[int]] = [[] for _ in range(n)]
    for qi, grade in zip(judgments.qi.tolist(), judgments.grade.tolist()):
        if grade >= 0:
            row = levels[qi]
            if len(row) <= grade:
                row.extend([0] * (grade + 1 - len(row)))
            row[grade] += 1
    starts, ends = bounds[:-1].tolist(), bounds[1:].tolist()
    out = []
    for i in range(n):
        rel = rv[starts[i]:ends[i]] if i < len(starts) else []
        out.append(Query(rel, levels[i], level, num_docs, judged_only))
    return out


def compute(ranked, judgments, measures, level: int = 1, num_docs: int = 0, judged_only: bool = False,
            tag: str | None = None, absent=None) -> dict:
    """{measure name: per judged query value} for the measures of this module (:func:`here`): floats in a numpy
    array, or a list of str for ``relstring`` and ``runid``. ``ranked`` as ``trec.compute`` takes it; ``absent``: the
    judged queries the run has no line for (a boolean mask), whose ``utility``, ``unj``, ``rbp_resid`` and
    ``relstring`` trec_eval resets under ``-c``."""
    import numpy as np

    out = {}
    cache: dict = {}
    missing = absent.tolist() if absent is not None else (ranked.ret == 0).tolist()
    for m in measures:
        lv = level if m.rel is None else m.rel
        if lv not in cache:
            cache[lv] = queries(ranked, judgments, lv, num_docs, judged_only)
        qs = cache[lv]
        if m.family == "runid":
            out[m.name] = [tag or ""] * len(qs)
            continue
        params = m.params if m.params is not None else ROOTS[m.family].defaults if m.family in ROOTS else ()
        # trec_eval resets utility, relstring and rbp_resid by their plain names only (not utility_1,-1,0,0), unj_*
        reset = RESET_WHEN_MISSING.get(m.family) if m.label is None or m.family == "unj" else None
        values = [reset if (reset is not None and gone) else value(q, m.family, m.cut, params)
                  for q, gone in zip(qs, missing)]
        out[m.name] = values if m.family == "relstring" else np.asarray(values, dtype=np.float64)
    return out

"""trec_eval 10.0's preference counts of one query (``form_prefs_counts.c``) and the measures read from them
(``m_prefs_*.c``): the ``-R prefs`` and ``-R qrels_prefs`` measures of ``scoring.trec_prefs``.

A query's preferences are lines (judgment group ``jg``, sub-group ``jsg``, document, level). Its judged documents get
an internal rank: the judged documents the run retrieved, in the run's order (score descending, then document id
*ascending*: ``comp_sim_docno``, unlike ``-R qrels``; ``-M`` cuts that order), take 0 .. NJR - 1; the judged
documents it did not retrieve follow in id order. Each judgment group is either

* one sub-group: equivalence classes (ECs), one per level, highest first, every document of a class preferred to every
  document of each lower class (a level of 0 or below counts as not relevant); or
* several sub-groups: a preference array, ``a[i][j]`` when some sub-group puts i above j, closed under transitivity
  (a level above 0 is relevant, exactly 0 not relevant, any other neither).

Each preference of a group is counted as fulfilled or not, among the retrieved (both documents retrieved), implied
(one) or not occurring (neither), and summed over the groups into a count array (``pair`` measures). The measures
divide these counts as trec_eval's ``m_prefs_*.c`` do, in its loop order (sums of doubles add in that order).

trec_eval's quirks are kept where its result is defined: a document twice at one level of a one-sub-group group
counts twice; a group whose highest level is exactly -3.0 (trec_eval's "illegal level" marker) loses its lowest class;
the ``Rnonrel`` measures' recalculation counts the lowest class against itself. Where trec_eval stops (a document at
two levels of one sub-group, a level 0 and a level above 0 for one document, contradicting preferences) or reads past
its data (the ``Rnonrel`` measures where the lowest class holds fewer documents than they take from it), the query is
refused with an ``InputError`` rather than given a number trec_eval does not define.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..errors import InputError

ILLEGAL_LEVEL = -3.0  # form_prefs_counts.c starts each group's level count from this "illegal" level


@dataclass
class Group:
    """One judgment group: its ECs ([(level, ranks ascending)], the classes trec_eval counts) or its preference
    array ``pa`` (bool, n x n) and ``rel`` (each document's level, -1.0 where not in the group); and its counts."""
    name: str
    ecs: list | None = None
    pa: object = None
    rel: object = None
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    notoccur: int = 0
    num_rel: int = 0
    num_rel_ret: int = 0
    num_nonrel: int = 0
    num_nonrel_ret: int = 0


@dataclass
class Counts:
    """A query's groups (in ``jg`` order), its count array (uint16, as trec_eval's ``unsigned short``), the number
    of judged documents retrieved (NJR) and judged."""
    qid: str
    groups: list = field(default_factory=list)
    counts: object = None
    njr: int = 0
    num_judged: int = 0
    pairs: tuple | None = None  # the pair measures' terms, once (_pair_terms)


def form(qid: str, entries: list, docs: list, depth: int | None = None) -> Counts:
    """The counts of one query: ``entries`` its (jg, jsg, docno, level) lines, ``docs`` the run's (docno, score)
    for it, ``depth`` trec_eval's ``-M``."""
    import numpy as np

    ranked = sorted(docs, key=lambda x: (-x[1], x[0]))
    if depth is not None:
        ranked = ranked[:depth]
    judged = {e[2] for e in entries}
    rank = {}
    for doc, _ in ranked:
        if doc in judged:
            rank[doc] = len(rank)
    njr = len(rank)
    for doc in sorted(judged.difference(rank)):
        rank[doc] = len(rank)
    n = len(rank)
    out = Counts(qid, [], np.zeros((n, n), dtype=np.uint16), njr, n)
    rows = sorted((jg, jsg, -level, rank[doc], level, doc) for jg, jsg, doc, level in entries)
    for jg, lines in itertools.groupby(rows, key=lambda r: r[0]):
        lines = list(lines)
        group = Group(jg)
        if len({r[1] for r in lines}) > 1:
            _form_pa(out, group, lines)
        else:
            _form_ec(out, group, lines)
        out.groups.append(group)
    return out


def _form_ec(out: Counts, group: Group, lines: list) -> None:
    """form_jg_ec and add_ec_pref_to_jg: the classes, their pairs counted."""
    import numpy as np

    levels, ranks = [], []
    for _, _, _, rank, level, _ in lines:
        if not levels or level != levels[-1]:
            levels.append(level)
            ranks.append([])
        ranks[-1].append(rank)
    used = len(levels) - (levels[0] == ILLEGAL_LEVEL)
    group.ecs = [(lv, np.asarray(r, dtype=np.int64)) for lv, r in zip(levels[:used], ranks[:used])]
    njr, c = out.njr, out.counts
    for k, (level, r1) in enumerate(group.ecs):
        ret = int(np.searchsorted(r1, njr))
        if level > 0.0:
            group.num_rel_ret += ret
            group.num_rel += len(r1)
        else:
            group.num_nonrel_ret += ret
            group.num_nonrel += len(r1)
        for _, r2 in group.ecs[k + 1:]:
            a, b = r1[:, None], r2[None, :]
            if (a == b).any():
                doc = next(r[5] for r in lines if r[3] == int(r1[(a == b).any(axis=1)][0]))
                raise InputError(f"query {out.qid[:80]!r}, judgment group {group.name[:40]!r}: document "
                                 f"{doc[:80]!r} has two levels in one sub-group (trec_eval 10.0 stops there).",
                                 fix="give each document one level per sub-group.")
            if len(np.unique(r1)) == len(r1) and len(np.unique(r2)) == len(r2):
                c[np.ix_(r1, r2)] += 1
            else:  # a document twice at one level: each line counts
                np.add.at(c, (np.broadcast_to(a, (len(r1), len(r2))), np.broadcast_to(b, (len(r1), len(r2)))), 1)
            ful = a < b
            a_ret, b_ret = a < njr, b < njr
            group.ful_ret += int(np.count_nonzero(ful & b_ret))
            group.ful_imp += int(np.count_nonzero(ful & ~b_ret & a_ret))
            group.notoccur += int(np.count_nonzero(ful & ~a_ret))
            group.poss_ret += int(np.count_nonzero(~ful & a_ret))
            group.poss_imp += int(np.count_nonzero(~ful & ~a_ret & b_ret))
            group.notoccur += int(np.count_nonzero(~ful & ~b_ret))
    group.poss_ret += group.ful_ret
    group.poss_imp += group.ful_imp


def _form_pa(out: Counts, group: Group, lines: list) -> None:
    """form_jg_pa, add_transitives and add_pa_pref_to_jg: the preference array, closed, its areas counted."""
    import numpy as np

    n, njr = out.num_judged, out.njr
    rel = np.full(n, -1.0)
    pa = np.zeros((n, n), dtype=bool)
    for _, sub in itertools.groupby(lines, key=lambda r: r[1]):
        sub = list(sub)
        for _, _, _, rank, level, doc in sub:
            if (rel[rank] > 0.0 and level == 0.0) or (rel[rank] == 0.0 and level > 0.0):
                raise InputError(f"query {out.qid[:80]!r}, judgment group {group.name[:40]!r}: document "
                                 f"{doc[:80]!r} has level 0 and a level above 0 (trec_eval 10.0 stops there).",
                                 fix="give a document level 0 in every sub-group of a group or in none.")
            rel[rank] = level
        ranks = np.asarray([r[3] for r in sub], dtype=np.int64)
        levels = np.asarray([r[4] for r in sub])
        i, j = np.nonzero(levels[:, None] > levels[None, :])
        pa[ranks[i], ranks[j]] = True
    pa[np.arange(n), np.arange(n)] = True
    while True:  # the transitive closure, trec_eval's fixed point of repeated products
        f = pa.astype(np.float32)
        closed = (f @ f) > 0
        if (closed == pa).all():
            break
        pa = closed
    pa[np.arange(n), np.arange(n)] = False
    if (pa & pa.T).any():
        i, j = (int(x[0]) for x in np.nonzero(pa & pa.T))
        docs = {r[3]: r[5] for r in lines}
        raise InputError(f"query {out.qid[:80]!r}, judgment group {group.name[:40]!r}: documents "
                         f"{docs[i][:80]!r} and {docs[j][:80]!r} are each preferred to the other (trec_eval 10.0 "
                         "aborts there).", fix="keep one judgment group consistent; put disagreeing judges in "
                                               "separate groups.")
    group.pa, group.rel = pa, rel
    group.num_rel_ret = int(np.count_nonzero(rel[:njr] > 0.0))
    group.num_nonrel_ret = int(np.count_nonzero(rel[:njr] == 0.0))
    group.num_rel = int(np.count_nonzero(rel > 0.0))
    group.num_nonrel = int(np.count_nonzero(rel == 0.0))
    areas = _areas(pa, njr)
    group.ful_ret, group.ful_imp, group.notoccur = areas["A1"], areas["A3"], areas["A5"]
    group.poss_ret, group.poss_imp = areas["A2"] + areas["A1"], areas["A4"] + areas["A3"]
    out.counts += pa.astype(np.uint16)


def _areas(pa, njr: int) -> dict:
    """The marks of the preference array in form_prefs_counts.c's five areas (A1 fulfilled among the retrieved, A2
    not fulfilled among them, A3 implied fulfilled, A4 implied not, A5 neither retrieved)."""
    import numpy as np

    top = pa[:njr, :njr]
    return {"A1": int(np.count_nonzero(np.triu(top, 1))), "A2": int(np.count_nonzero(np.tril(top, -1))),
            "A3": int(np.count_nonzero(pa[:njr, njr:])), "A4": int(np.count_nonzero(pa[njr:, :njr])),
            "A5": int(np.count_nonzero(pa[njr:, njr:]))}


# ------------------------------------------------------------------ the measures (m_prefs_*.c)

def value(q: Counts, family: str) -> float:
    """One query's value of the preference measure ``family`` (``prefs_simp``, ``prefs_avgjg_Rnonrel_ret``, ...)."""
    g = q.groups
    if family.startswith("prefs_num_prefs_"):
        if family == "prefs_num_prefs_poss":
            return float(sum(x.poss_ret + x.poss_imp + x.notoccur for x in g))
        return float(sum(x.ful_ret + (x.ful_imp if family == "prefs_num_prefs_ful" else 0) for x in g))
    kind = family.removeprefix("prefs_")
    variant = next((v for v in ("_ret", "_imp") if kind.endswith(v)), "")
    kind = kind.removesuffix(variant)
    if kind == "pair":
        return _pair(q, variant)
    if kind == "avgjg_Rnonrel":
        total = 0.0
        for x in g:
            ful, poss = _rnonrel(q, x, variant == "_ret")
            total = _add_ratio(total, ful, poss)
        return total / len(g) if total > 0.0 else 0.0
    parts = [(_ful(x, variant), _poss(x, variant)) for x in g]
    if kind == "simp":
        poss = sum(p for _, p in parts)
        return sum(f for f, _ in parts) / poss if poss else 0.0
    if kind == "avgjg":
        total = 0.0
        for ful, poss in parts:
            if poss:
                total += ful / poss
        return total / len(g) if total > 0.0 else 0.0
    raise ValueError(f"no such preference measure {family!r}")


def _ful(x: Group, variant: str) -> int:
    return x.ful_ret + (x.ful_imp if variant != "_ret" else 0)


def _poss(x: Group, variant: str) -> int:
    return x.poss_ret + (x.poss_imp if variant != "_ret" else 0) + (x.notoccur if not variant else 0)


def _add_ratio(total: float, ful: int, poss: int) -> float:
    """total + ful / poss in C doubles: 0 / 0 is NaN, which then fails trec_eval's ``sum > 0.0``."""
    return total + (ful / poss if poss else float("nan"))


def _pair(q: Counts, variant: str) -> float:
    """m_prefs_pair*.c: the mean over document pairs with a preference of the fraction of their preferences that
    the run fulfils; ``_ret`` pairs both retrieved, ``_imp`` at least one, plain all (a pair neither retrieved: 0)."""
    import numpy as np

    if q.pairs is None:
        q.pairs = _pair_terms(q)
    both, one, neither = q.pairs
    terms = both if variant == "_ret" else np.concatenate([both, one])
    num_pairs = len(terms) + (neither if not variant else 0)
    total = float(np.cumsum(terms)[-1]) if len(terms) else 0.0  # added one by one, as trec_eval's loops
    return total / num_pairs if num_pairs else 0.0


def _pair_terms(q: Counts) -> tuple:
    """Each pair's fraction, in trec_eval's loop order (row-major), for the pairs both retrieved and those one
    retrieved; the number of pairs neither retrieved."""
    import numpy as np

    c, njr = q.counts, q.njr
    out = []
    for fwd, back, upper in ((c[:njr, :njr], c[:njr, :njr].T, True), (c[:njr, njr:], c[njr:, :njr].T, False)):
        has = (fwd > 0) | (back > 0)
        i, j = np.nonzero(np.triu(has, 1) if upper else has)
        f, b = fwd[i, j].astype(np.float64), back[i, j].astype(np.float64)
        out.append(f / (f + b))
    rest = c[njr:, njr:]
    out.append(int(np.count_nonzero(np.triu((rest > 0) | (rest.T > 0), 1))))
    return tuple(out)


def _rnonrel(q: Counts, x: Group, ret: bool) -> tuple[int, int]:
    """m_prefs_avgjg_Rnonrel(_ret).c: a group's (fulfilled, possible) with its not relevant documents taken as many
    as its relevant ones (R): R x (R - N) fulfilled preferences added where there are fewer, else counted anew with
    the first R of the lowest class (or of the not relevant documents in rank order)."""
    big_r = x.num_rel_ret if ret else x.num_rel
    big_n = x.num_nonrel_ret if ret else x.num_nonrel
    if big_r >= big_n:
        ful = x.ful_ret + (0 if ret else x.ful_imp) + x.num_rel_ret * (big_r - big_n)
        poss = x.poss_ret + (0 if ret else x.poss_imp + x.notoccur) + x.num_rel * (big_r - big_n)
        return ful, poss
    if x.pa is None:
        return _recount_ec(q, x, big_r, ret)
    return _recount_pa(q, x, ret)


def _recount_ec(q: Counts, x: Group, take: int, ret: bool) -> tuple[int, int]:
    import numpy as np

    njr = q.njr
    last = x.ecs[-1][1]
    if take > len(last) and (not ret or (last < njr).all()):
        raise InputError(f"query {q.qid[:80]!r}, judgment group {x.name[:40]!r}: prefs_avgjg_Rnonrel"
                         f"{'_ret' if ret else ''} takes {take} documents from the group's lowest level, which holds "
                         f"{len(last)}; trec_eval 10.0 reads past its data there, so the value is undefined.",
                         fix="give the documents that are not relevant level 0 (none below it), or leave this measure "
                             "out.")
    nonrel = last[:take]

    def pairs(r1, r2) -> tuple[int, int]:
        if ret:  # trec_eval's loops stop at the first document not retrieved (the ranks ascend)
            r1, r2 = r1[r1 < njr], r2[r2 < njr]
            ful = r1[:, None] < r2[None, :]
        else:
            ful = (r1[:, None] < r2[None, :]) & (r1[:, None] < njr)
        return int(np.count_nonzero(ful)), ful.size - int(np.count_nonzero(ful))

    ful = poss = 0
    for k, (_, r1) in enumerate(x.ecs):
        for _, r2 in x.ecs[k + 1:len(x.ecs) - 1]:
            f, p = pairs(r1, r2)
            ful, poss = ful + f, poss + p
    for _, r1 in x.ecs:  # the lowest class too, against its own first R
        f, p = pairs(r1, nonrel)
        ful, poss = ful + f, poss + p
    return ful, poss + ful


def _recount_pa(q: Counts, x: Group, ret: bool) -> tuple[int, int]:
    import numpy as np

    njr = q.njr
    end = njr if ret else q.num_judged
    zero = np.flatnonzero(x.rel[:end] == 0.0)
    first_discarded = int(zero[x.num_rel]) if len(zero) > x.num_rel else end
    index = np.arange(q.num_judged)
    keep = ~((index >= first_discarded) & (x.rel == 0.0))
    pa = x.pa & keep[:, None] & keep[None, :]
    areas = _areas(pa, njr)
    if ret:
        return areas["A1"], areas["A2"] + areas["A1"]
    ful = areas["A1"] + areas["A3"]
    return ful, areas["A2"] + areas["A4"] + areas["A5"] + ful

"""trec_eval's ``-R qrels_jg``: judgments in groups (``qid jg docno rel``, the second field a judgment group: one user's
or assessor's set of judgments), and its measures ``map_avgjg``, ``P_avgjg`` and ``Rprec_mult_avgjg``.

trec_eval 10.0 (``get_qrels_jg.c``, ``form_res_rels_jg.c``, ``m_*_avgjg.c``) ranks a query's documents once and reads
them against each group's judgments as ``-R qrels`` reads them against all (``-M``, ``-J`` and ``-l`` alike): a
measure is computed per group and averaged over the query's groups. Here each group is scored by the same ranking
(``trec.rank``) with that group's judgments, query by query (``trec_all.Query``); a judged query the run misses gets
trec_eval's stand-in ranking (one document outside the pool) under ``-c``.
"""

from __future__ import annotations

from ..errors import InputError
from . import trec, trec_all

FAMILIES = ("map_avgjg", "P_avgjg", "Rprec_mult_avgjg")
WHAT, NAMES = "judgments in groups", "map_avgjg, P_avgjg, Rprec_mult_avgjg, num_q, runid or qrels_jg"
FIX = "write one judgment per line: `qid jg docno rel` (trec_eval's qrels_jg; jg names the judgment group)."


def read(path) -> dict:
    """{qid: {jg: {docid: grade}}} of a qrels_jg file: 4 fields a line, lines whose first field starts with ``#``
    skipped, whole-number grades, no (query, group, document) twice."""
    from .runfile import regular_file

    path = regular_file(path, "qrels file")
    out: dict = {}
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if not parts or parts[0].startswith(b"#"):
                continue
            if len(parts) != 4:
                raise InputError(f"expected 4 columns (qid jg docno rel), found {len(parts)}.", path=path,
                                 line=lineno, fix=FIX)
            try:
                qid, jg, doc = (p.decode("utf-8") for p in parts[:3])
                grade = int(parts[3])
            except (UnicodeDecodeError, ValueError):
                raise InputError("a field that is not UTF-8 or a grade that is not a whole number.", path=path,
                                 line=lineno, fix=FIX) from None
            docs = out.setdefault(qid, {}).setdefault(jg, {})
            if doc in docs:
                raise InputError(f"document {doc[:80]!r} is judged twice in group {jg[:40]!r} of query "
                                 f"{qid[:80]!r}.", path=path, line=lineno, fix="keep one judgment per group.")
            docs[doc] = grade
    return out


def merged(groups: dict) -> dict:
    """{qid: {docid: grade}}: every group's judgments of a query together (a document's highest grade), for the
    accounting of judged queries."""
    out: dict = {}
    for qid, by_group in groups.items():
        docs = out.setdefault(qid, {})
        for judged in by_group.values():
            for d, g in judged.items():
                docs[d] = max(g, docs.get(d, g))
    return out


def compute(table, groups: dict, measures, qids: list[str], level: int = 1, depth: int | None = None,
            judged_only: bool = False, complete: bool | None = None) -> dict:
    """{measure name: per query value (``qids`` order)} of the qrels_jg measures: each query's value averaged over
    its judgment groups, each group's from the ranking of the run read against that group's judgments."""
    import numpy as np

    names = sorted({jg for by_group in groups.values() for jg in by_group})
    index = {q: i for i, q in enumerate(qids)}
    sums = {m.name: np.zeros(len(qids)) for m in measures}
    count = np.zeros(len(qids))
    for jg in names:
        judgments = trec.Judgments({q: g[jg] for q, g in groups.items() if jg in g})
        ranked, _, _ = trec.rank(table, judgments)
        if depth is not None:
            ranked = ranked.cut(depth)
        if complete is not False:
            ranked = ranked.with_placeholders(ranked.ret == 0)
        if judged_only:
            ranked = ranked.judged()
        at = np.asarray([index[q] for q in judgments.qids], dtype=np.int64)
        count[at] += 1
        for m in measures:
            lv = level if m.rel is None else m.rel
            qs = trec_all.queries(ranked, judgments, lv, judged_only=judged_only)
            sums[m.name][at] += [value(q, m.family, m.cut) for q in qs]
    with np.errstate(invalid="ignore", divide="ignore"):
        return {n: np.where(count > 1, s / np.maximum(count, 1), s) for n, s in sums.items()}


def value(q, family: str, cut) -> float:
    """One group's value of a query (``m_map_avgjg.c``, ``m_P_avgjg.c``, ``m_Rprec_mult_avgjg.c``)."""
    if family == "map_avgjg":
        rel_so_far, total = trec_all.precision_sum(q)
        return trec_all._div(total, q.num_rel) if rel_so_far else 0.0
    if family == "P_avgjg":
        return sum(1 for r in q.rel[:cut] if r >= q.level) / cut
    if family == "Rprec_mult_avgjg":
        k = int(cut * q.num_rel + 0.9)
        if k > q.num_ret:
            return trec_all._div(q.num_rel_ret, k)
        if k == 0:
            return 0.0
        return sum(1 for r in q.rel[:k] if r >= q.level) / k
    raise ValueError(f"no such measure family {family!r}")

"""CliniQ metrics: multi-patient and single-patient retrieval, per query type and per match type.

Pure functions over rankings (lists of chunk ids, best first) and judgments. The formulas follow the
official ``eval.py`` of github.com/zhao-zy15/CliniQ (commit pinned in ``cliniq_corpus``):

* ``mrr``: reciprocal rank of the first relevant chunk (0 when none is ranked).
* ``ndcg_cliniq``: eval.py's nDCG@k, binary gains; its ideal DCG sorts the relevances *of the
  retrieved top k*, so it only asks where in the top k the retrieved relevant chunks sit (1.0 when
  they fill the first places), not how many of all relevant chunks were found; 0 when none is there.
* ``ndcg_standard``: trec_eval's ``ndcg_cut_k`` with binary gains: the ideal DCG puts every judged
  relevant chunk first (min(k, number of relevant chunks) ones).
* ``recall_at_k``: relevant chunks in the top k over the number of judgment rows (eval.py divides by
  the length of its list of relevant chunks, which repeats a chunk judged under two match types).
* ``average_precision``: eval.py's, divided by the same list length.

The ranking of a query is its run sorted by score. Equal scores (``tie_order``): ``evalpy``, in the order of the
run's own lines, which for a dense run on a CliniQ benchmark is the order eval.py's ``np.argsort(-similarities)``
gave (``dense.search.evalpy_rank`` ranks the cached embeddings so and the run file keeps it); ``corpus``, in corpus
order, the order a *stable* argsort over the corpus list gives (runs without eval.py's similarities: BM25,
imported, fused, reranked); ``doc_id``, by chunk id (the order of our other run files).

Single-patient retrieval (eval.py's "inner" metrics): for each query and each note (HADM_ID) holding
a relevant chunk, the note's chunks are ranked in the order of the corpus-wide ranking; the note is
skipped when it has fewer than 5 chunks, or when it has as many relevant entries as chunks (all
relevant); otherwise MRR, nDCG over the whole list (``ndcg_cliniq`` at k = list length, which equals
the standard one there) and AP are scored. Per match type, within a note that was scored: skip the
type when no relevant chunk of the note has it; remove the note's relevant chunks of other types;
skip when what remains is all relevant; else score the same three.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict

from ..progress import Progress, phase
from .corpus import MATCH_TYPES, QUERY_TYPES

log = logging.getLogger(__name__)

MIN_NOTE_CHUNKS = 5
MULTI_METRICS = ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100")
SINGLE_METRICS = ("mrr", "ndcg", "map")


def note_of(chunk_id: str) -> str:
    """The note (HADM_ID) of a chunk id ``{HADM_ID}_{i}``, as eval.py takes it (text before the first '_')."""
    return chunk_id.split("_")[0]


def mrr(ranking, relevant) -> float:
    rel = set(relevant)
    for i, d in enumerate(ranking):
        if d in rel:
            return 1.0 / (i + 1)
    return 0.0


def _dcg(gains) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_cliniq(ranking, relevant, k: int) -> float:
    rel = set(relevant)
    gains = [1 if d in rel else 0 for d in ranking[:k]]
    if 1 not in gains:
        return 0.0
    return _dcg(gains) / _dcg(sorted(gains, reverse=True))


def ndcg_standard(ranking, relevant, k: int) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    gains = [1 if d in rel else 0 for d in ranking[:k]]
    return _dcg(gains) / _dcg([1] * min(k, len(rel)))


def recall_at_k(ranking, relevant_list, k: int) -> float:
    if not relevant_list:
        return 0.0
    rel = set(relevant_list)
    return sum(1 for d in ranking[:k] if d in rel) / len(relevant_list)


def average_precision(ranking, relevant_list) -> float:
    if not relevant_list:
        return 0.0
    rel = set(relevant_list)
    hits, score = 0, 0.0
    for i, d in enumerate(ranking):
        if d in rel:
            hits += 1
            score += hits / (i + 1)
    return score / len(relevant_list)


def multi_metrics(ranking, relevant_list) -> dict:
    return {"mrr": mrr(ranking, relevant_list), "ndcg_at_10": ndcg_standard(ranking, relevant_list, 10),
            "ndcg_at_10_cliniq": ndcg_cliniq(ranking, relevant_list, 10),
            "recall_at_100": recall_at_k(ranking, relevant_list, 100)}


def single_metrics(ranking, relevant_list) -> dict:
    return {"mrr": mrr(ranking, relevant_list), "ndcg": ndcg_cliniq(ranking, relevant_list, len(ranking)),
            "map": average_precision(ranking, relevant_list)}


def note_ranking(note_chunks, rank_of: dict) -> tuple[list[str], int]:
    """A note's chunks in the corpus-wide order; chunks the run did not retrieve follow, in chunk order.
    Returns the list and how many were not retrieved."""
    inf = math.inf
    order = sorted(range(len(note_chunks)), key=lambda i: (rank_of.get(note_chunks[i], inf), i))
    return [note_chunks[i] for i in order], sum(1 for c in note_chunks if c not in rank_of)


def single_patient(rank_of: dict, rows, chunks_by_note: dict) -> tuple[list[dict], dict, dict]:
    """eval.py's single-patient evaluation of one query.

    ``rows``: the query's judgments as (chunk id, match type) in file order (repeats kept).
    Returns (scored notes: dicts with the three metrics, ``note``), per match type lists of scored
    dicts, and counts of skips and of chunks the run did not rank.
    """
    relevant = [c for c, _ in rows]
    by_type: dict[str, list[str]] = defaultdict(list)
    for c, t in rows:
        by_type[t].append(c)
    counts = {"skipped_fewer_than_5_chunks": 0, "skipped_all_relevant": 0, "type_skipped_all_relevant": 0,
              "unranked_chunks": 0}
    scored, per_type = [], defaultdict(list)
    for note in sorted({note_of(c) for c in relevant}):
        pred, unranked = note_ranking(chunks_by_note.get(note, []), rank_of)
        corr = [c for c in relevant if note_of(c) == note]
        if len(pred) < MIN_NOTE_CHUNKS:
            counts["skipped_fewer_than_5_chunks"] += 1
            continue
        if len(pred) == len(corr):
            counts["skipped_all_relevant"] += 1
            continue
        counts["unranked_chunks"] += unranked
        scored.append({"note": note, **single_metrics(pred, corr)})
        corr_set = set(corr)
        for typ in MATCH_TYPES:
            typ_corr = [c for c in by_type.get(typ, []) if c in corr_set]
            if not typ_corr:
                continue
            keep = set(typ_corr)
            remove = {c for c in corr if c not in keep}
            typ_pred = [c for c in pred if c not in remove]
            if len(typ_pred) == len(typ_corr):
                counts["type_skipped_all_relevant"] += 1
                continue
            per_type[typ].append({"note": note, **single_metrics(typ_pred, typ_corr)})
    return scored, dict(per_type), counts


def multi_by_match_type(ranking, rows) -> dict[str, dict]:
    """Multi-patient per match type (our extension, mirroring the single-patient rule): for each type
    the query has, rank without the relevant chunks of other types and score against that type's."""
    out = {}
    for typ in MATCH_TYPES:
        typ_rel = [c for c, t in rows if t == typ]
        if not typ_rel:
            continue
        keep = set(typ_rel)
        remove = {c for c, t in rows if c not in keep}
        out[typ] = multi_metrics([d for d in ranking if d not in remove], typ_rel)
    return out


def judged_at_k(ranking, judged: set, k: int = 10) -> float:
    return sum(1 for d in ranking[:k] if d in judged) / k


TIE_ORDERS = ("evalpy", "corpus", "doc_id")


def _check_tie_order(tie_order: str) -> None:
    if tie_order not in TIE_ORDERS:
        raise ValueError(f"tie_order must be one of {TIE_ORDERS}, not {tie_order!r}")


def ranking_of(docs: dict[str, float], position: dict[str, int] | None = None, in_order: bool = False) -> list[str]:
    """Score descending. Ties: ``in_order``, in the order of ``docs`` (a run file's lines; tie order ``evalpy``);
    with ``position`` (chunk -> its index in the corpus) by corpus order, which is the order a stable
    ``np.argsort(-similarities)`` over the corpus gives; chunks not in the corpus after those, by id. Otherwise
    by chunk id (the order of our run files)."""
    if in_order:
        items = list(docs.items())
        return [items[i][0] for i in sorted(range(len(items)), key=lambda i: (-items[i][1], i))]
    if position is None:
        return [d for d, _ in sorted(docs.items(), key=lambda x: (-x[1], x[0]))]
    end = len(position)
    return [d for d, _ in sorted(docs.items(), key=lambda x: (-x[1], position.get(x[0], end), x[0]))]


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def _summary(items: list[dict], names) -> dict:
    out = {m: _mean(x[m] for x in items) for m in names}
    out["n"] = len(items)
    return out


def _judgments(rows, irrelevant: set | None, chunk_ids: list[str]):
    """(query -> its (chunk, match type) relevance rows, query -> every judged chunk, note -> its chunks in
    corpus order)."""
    judged_rows: dict[str, list] = defaultdict(list)
    for q, c, t in rows:
        judged_rows[q].append((c, t))
    judged_sets: dict[str, set] = defaultdict(set)
    for q, c, _ in rows:
        judged_sets[q].add(c)
    for q, c in irrelevant or set():
        judged_sets[q].add(c)
    chunks_by_note: dict[str, list[str]] = defaultdict(list)
    for c in chunk_ids:
        chunks_by_note[note_of(c)].append(c)
    return judged_rows, judged_sets, chunks_by_note


def _result(multi, multi_type, single, single_type, condensed, judged10, counts, *, queries: int,
            judged_queries: int, unjudged: list) -> dict:
    """The result of :func:`evaluate` (and :func:`evaluate_ranked`) from the per-query items."""
    def by_qtype(items, names):
        return {t: _summary([x for x in items if x["query_type"] == t], names) for t in QUERY_TYPES}

    return {
        "multi": {"all": _summary(multi, MULTI_METRICS), "by_query_type": by_qtype(multi, MULTI_METRICS),
                  "by_match_type": {t: _summary(multi_type.get(t, []), MULTI_METRICS) for t in MATCH_TYPES}},
        "single": {"all": _summary(single, SINGLE_METRICS), "by_query_type": by_qtype(single, SINGLE_METRICS),
                   "by_match_type": {t: _summary(single_type.get(t, []), SINGLE_METRICS) for t in MATCH_TYPES}},
        "condensed": {"all": _summary(condensed, MULTI_METRICS), "by_query_type": by_qtype(condensed, MULTI_METRICS)},
        "judged_at_10": {"all": _summary(judged10, ("judged_at_10",)),
                         "by_query_type": by_qtype(judged10, ("judged_at_10",))},
        "counts": {"queries": queries, "judged_queries": judged_queries, "unjudged_queries": len(unjudged),
                   "unjudged_query_ids": unjudged, "single_patient_notes_scored": len(single), **dict(counts)},
        "per_query": [{**m, "judged_at_10": j["judged_at_10"]} for m, j in zip(multi, judged10)],
    }


def evaluate(run: dict, rows, query_types: dict[str, str], chunk_ids: list[str],
             irrelevant: set | None = None, tie_order: str = "corpus") -> dict:
    """Every CliniQ measure for one run.

    ``run``: qid -> {chunk: score}. ``rows``: (query id, chunk id, match type) judgments of relevance,
    repeats kept. ``irrelevant``: (query id, chunk id) judged not relevant (new judgments).
    ``chunk_ids``: the corpus, in corpus order. ``tie_order``: ``evalpy`` keeps equal scores in the order of each
    query's dict (the run file's lines), ``corpus`` ranks them in corpus order, ``doc_id`` by chunk id. Queries
    without a relevance judgment are counted and excluded.
    """
    _check_tie_order(tie_order)
    position = {c: i for i, c in enumerate(chunk_ids)} if tie_order == "corpus" else None
    in_order = tie_order == "evalpy"
    judged_rows, judged_sets, chunks_by_note = _judgments(rows, irrelevant, chunk_ids)

    multi, multi_type = [], defaultdict(list)
    single, single_type = [], defaultdict(list)
    condensed, judged10 = [], []
    counts = defaultdict(int)
    unjudged = sorted(q for q in query_types if q not in judged_rows)
    for q in sorted(judged_rows):
        qtype = query_types[q]
        docs = run.get(q, {})
        if not docs:
            counts["judged_queries_with_empty_run"] += 1
        ranking = ranking_of(docs, position, in_order)
        relevant = [c for c, _ in judged_rows[q]]
        multi.append({"query": q, "query_type": qtype, **multi_metrics(ranking, relevant)})
        for typ, m in multi_by_match_type(ranking, judged_rows[q]).items():
            multi_type[typ].append({"query": q, **m})
        judged10.append({"query": q, "query_type": qtype, "judged_at_10": judged_at_k(ranking, judged_sets[q])})
        cond = [d for d in ranking if d in judged_sets[q]]
        condensed.append({"query": q, "query_type": qtype, **multi_metrics(cond, relevant)})
        rank_of = {d: i for i, d in enumerate(ranking)}
        scored, per_type, c = single_patient(rank_of, judged_rows[q], chunks_by_note)
        for key, value in c.items():
            counts[key] += value
        single.extend({"query": q, "query_type": qtype, **s} for s in scored)
        for typ, items in per_type.items():
            single_type[typ].extend(items)

    return _result(multi, multi_type, single, single_type, condensed, judged10, counts,
                   queries=len(query_types), judged_queries=len(judged_rows), unjudged=unjudged)


def table_rows(model: str, result: dict, grouping: str) -> list[dict]:
    """Long-format rows ``model,setting,group,metric,value,n_queries`` for ``by_match_type`` or
    ``by_query_type`` (each with the ``all`` group)."""
    rows = []
    for setting, names in (("multi", MULTI_METRICS), ("single", SINGLE_METRICS)):
        groups = {"all": result[setting]["all"], **result[setting][grouping]}
        for group, summary in groups.items():
            for metric in names:
                value = summary[metric]
                rows.append({"model": model, "setting": setting, "group": group, "metric": metric,
                             "value": None if value != value else round(value, 6), "n_queries": summary["n"]})
    return rows


def pool(runs: dict[str, dict], judged: dict[str, set], depth: int, queries=None,
         position: dict[str, int] | None = None, in_order=()) -> list[dict]:
    """Unjudged chunks in the top ``depth`` of any run, per query of ``queries`` (default: the judged
    ones; queries without any judgment are pooled too when listed): best rank and which systems. Equal
    scores are ranked as ``ranking_of`` does with ``position``, or in the run's own order for the runs named in
    ``in_order`` (the scoring's tie order of each run)."""
    queries = set(judged if queries is None else queries)
    found: dict[tuple[str, str], dict] = {}
    for name in sorted(runs):
        for q, docs in runs[name].items():
            if q not in queries:
                continue
            for rank, d in enumerate(ranking_of(docs, position, name in in_order)[:depth], start=1):
                if d in judged.get(q, ()):
                    continue
                entry = found.setdefault((q, d), {"query_id": q, "chunk_id": d, "best_rank": rank, "systems": []})
                entry["best_rank"] = min(entry["best_rank"], rank)
                entry["systems"].append(name)
    return [found[key] for key in sorted(found, key=lambda k: (k[0], found[k]["best_rank"], k[1]))]


# ------------------------------------------------------------------ vectorised scoring of large runs

def pool_files(run_files: dict[str, str], orders: dict[str, str], ids: list[str], judged, depth: int, queries):
    """``cliniq.pool`` of the runs in ``run_files`` (name -> TREC file) with their tie orders, reading one run at a
    time as arrays and keeping its top ``depth`` chunks per query: a full-depth CliniQ run is 20 M lines, and dicts
    of all the runs at once do not fit in memory. Equal to ``cliniq.pool`` of the runs read whole."""
    position = {c: i for i, c in enumerate(ids)} if "corpus" in orders.values() else None
    in_order = {m for m, o in orders.items() if o == "evalpy"}
    tops = {}
    for m, path in run_files.items():
        # ranked as cliniq.pool ranks it (ranking_of with this position and in_order); scores -1, -2, ... keep that
        ranked = read_ranked_run(path, ids, "evalpy" if m in in_order else
                                 "corpus" if position is not None else "doc_id")
        tops[m] = {q: {ranked.vocab[i]: -float(r) for r, i in enumerate(ranked.ranking(q)[:depth].tolist(), 1)}
                   for q in ranked.qids}
        del ranked
    return pool(tops, judged, depth, queries=queries, position=position, in_order=in_order)


class RankedRun:
    """A run as arrays: per query, its documents in ranking order (score descending, ties in the file's order,
    in corpus order or by id, as :func:`ranking_of`), as indices into ``vocab``. ``chunk_ids`` come first in ``vocab``,
    then documents of the run that are not chunks."""

    def __init__(self, qids: list[str], offsets, docs, vocab: list[str]):
        self.qids, self.offsets, self.docs, self.vocab = qids, offsets, docs, vocab
        self.row = {q: i for i, q in enumerate(qids)}

    def ranking(self, qid: str):
        import numpy as np

        i = self.row.get(qid)
        return self.docs[self.offsets[i]:self.offsets[i + 1]] if i is not None else np.zeros(0, dtype=np.int64)

    def depth(self) -> int:
        import numpy as np

        return int(np.diff(self.offsets).max(initial=0))


def ranked_from_dict(run: dict, chunk_ids: list[str], tie_order: str = "corpus") -> RankedRun:
    import numpy as np

    _check_tie_order(tie_order)
    vocab = list(chunk_ids)
    index = {c: i for i, c in enumerate(vocab)}
    position = dict(index) if tie_order == "corpus" else None
    qids, offsets, docs = sorted(run), [0], []
    for q in qids:
        for d in ranking_of(run[q], position, tie_order == "evalpy"):
            if d not in index:
                index[d] = len(vocab)
                vocab.append(d)
            docs.append(index[d])
        offsets.append(len(docs))
    return RankedRun(qids, np.asarray(offsets, dtype=np.int64), np.asarray(docs, dtype=np.int64), vocab)


def read_ranked_run(path, chunk_ids: list[str], tie_order: str = "corpus") -> RankedRun:
    """A run file (TREC text or binary, ``scoring.runfile.read``) as a :class:`RankedRun`, equal to
    ``ranked_from_dict(runs.read_run(path), chunk_ids, tie_order)`` (equal scores in the file's order, in corpus
    order, or by id). A bad file stops with the reader's message naming the file and line."""
    import numpy as np

    from ..scoring import binrun, runfile

    _check_tie_order(tie_order)
    phase("reading the run")
    cols = runfile.read(path)
    n = len(cols)
    if n == 0:
        return RankedRun([], np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), list(chunk_ids))
    d_names, d_code = cols.codes()
    q_names, q_code, score = cols.qids, cols.q, cols.score
    vocab = list(chunk_ids)
    index = {c: i for i, c in enumerate(vocab)}
    for d in d_names:
        if d not in index:
            index[d] = len(vocab)
            vocab.append(d)
    doc = np.asarray([index[d] for d in d_names], dtype=np.int32)[d_code]
    del cols, d_code
    # ranking order: query (by id), score descending, then the tie key; skip the sort when the file has it
    q_rank = np.empty(len(q_names), dtype=np.int32)
    q_rank[np.argsort(np.asarray(q_names, dtype=object), kind="stable")] = np.arange(len(q_names))
    # the tie key of each line: its line number (evalpy); or of its document: its rank by id (doc_id), or its
    # corpus position with the run's documents that are not chunks after the chunks, by id (corpus; as
    # ranking_of with a position)
    if tie_order == "evalpy":
        dr = np.arange(n, dtype=np.int64)
    else:
        v_rank = np.empty(len(vocab), dtype=np.int32)
        if tie_order == "doc_id":
            v_rank[sorted(range(len(vocab)), key=vocab.__getitem__)] = np.arange(len(vocab))
        else:
            n_chunks = len(chunk_ids)
            v_rank[:n_chunks] = np.arange(n_chunks)
            v_rank[sorted(range(n_chunks, len(vocab)), key=vocab.__getitem__)] = np.arange(n_chunks, len(vocab))
        dr = v_rank[doc]
    qr = q_rank[q_code]
    del q_code
    dq = qr[1:] - qr[:-1]
    in_order = not bool((dq < 0).any())
    if in_order:
        s0, s1 = score[:-1], score[1:]
        in_order = not bool(((dq == 0) & ((s1 > s0) | ((s1 == s0) & (dr[1:] <= dr[:-1])))).any())
    del dq
    if not in_order:  # a total order (no document twice for a query): pyarrow's sort, as numpy's lexsort would
        import pyarrow.compute as pc

        order = binrun.numpy_of(pc.sort_indices(binrun.table_of({"q": qr, "s": score, "t": dr}), sort_keys=[
            ("q", "ascending"), ("s", "descending"), ("t", "ascending")]))
        qr, doc = qr[order], doc[order]
    del score, dr
    starts = np.flatnonzero(np.r_[True, qr[1:] != qr[:-1]])
    q_sorted = sorted(q_names)
    offsets = np.r_[starts, n].astype(np.int64)
    return RankedRun([q_sorted[r] for r in qr[starts].tolist()], offsets, doc, vocab)


def evaluate_ranked(ranked: RankedRun, rows, query_types: dict[str, str], chunk_ids: list[str],
                    irrelevant: set | None = None) -> dict:
    """:func:`evaluate` on a :class:`RankedRun`, with the same result (every figure equal): each query's
    measures are computed by the same functions on the same lists, cut to the prefix of the ranking they
    read (the top 100 plus one place per judgment row, and down to the first relevant chunk of each match
    type for MRR); the condensed list and the single-patient note rankings come from the ranks of the
    judged and note chunks alone."""
    import numpy as np

    judged_rows, judged_sets, chunks_by_note = _judgments(rows, irrelevant, chunk_ids)
    vocab = ranked.vocab
    index = {c: i for i, c in enumerate(vocab)}
    unranked = np.iinfo(np.int64).max
    pos = np.full(len(vocab), unranked, dtype=np.int64)

    def positions(ids) -> np.ndarray:
        idx = np.fromiter((index.get(c, -1) for c in ids), dtype=np.int64, count=len(ids))
        out = np.full(len(ids), unranked, dtype=np.int64)
        known = idx >= 0
        out[known] = pos[idx[known]]
        return out

    multi, multi_type = [], defaultdict(list)
    single, single_type = [], defaultdict(list)
    condensed, judged10 = [], []
    counts = defaultdict(int)
    unjudged = sorted(q for q in query_types if q not in judged_rows)
    progress = Progress("CliniQ scoring", len(judged_rows), "queries", log)
    for q in sorted(judged_rows):
        qtype = query_types[q]
        r = ranked.ranking(q)
        if not len(r):
            counts["judged_queries_with_empty_run"] += 1
        pos[r] = np.arange(len(r))
        qrows = judged_rows[q]
        relevant = [c for c, _ in qrows]
        rel_pos = positions(relevant).tolist()
        cut = 100 + len(qrows)  # enough for the top 100 once any judged chunks are removed
        ranking = [vocab[i] for i in r[:cut].tolist()]

        def with_mrr(metrics: dict, first: int, removed_before: int) -> dict:
            """MRR from positions: the first relevant chunk may lie beyond the prefix the list holds."""
            metrics["mrr"] = 0.0 if first == unranked else 1.0 / (first - removed_before + 1)
            return metrics

        multi.append({"query": q, "query_type": qtype,
                      **with_mrr(multi_metrics(ranking, relevant), min(rel_pos, default=unranked), 0)})
        for typ in MATCH_TYPES:  # multi_by_match_type on the prefix; MRR from the positions
            typ_rel = [c for c, t in qrows if t == typ]
            if not typ_rel:
                continue
            keep = set(typ_rel)
            remove = {c for c, _ in qrows if c not in keep}
            short = [d for d in ranking if d not in remove][:100]
            first = min((p for p, (c, _) in zip(rel_pos, qrows) if c in keep), default=unranked)
            before = len({c for p, (c, _) in zip(rel_pos, qrows) if c in remove and p < first})
            multi_type[typ].append({"query": q, **with_mrr(multi_metrics(short, typ_rel), first, before)})
        judged10.append({"query": q, "query_type": qtype, "judged_at_10": judged_at_k(ranking, judged_sets[q])})
        judged = sorted(judged_sets[q])
        jp = positions(judged)
        keep = np.flatnonzero(jp != unranked)
        cond = [judged[i] for i in keep[np.argsort(jp[keep], kind="stable")].tolist()]
        condensed.append({"query": q, "query_type": qtype, **multi_metrics(cond, relevant)})
        note_chunks = [c for note in {note_of(c) for c in relevant} for c in chunks_by_note.get(note, [])]
        npos = positions(note_chunks)
        rank_of = {c: p for c, p in zip(note_chunks, npos.tolist()) if p != unranked}
        scored, per_type, c = single_patient(rank_of, qrows, chunks_by_note)
        for key, value in c.items():
            counts[key] += value
        single.extend({"query": q, "query_type": qtype, **s} for s in scored)
        for typ, items in per_type.items():
            single_type[typ].extend(items)
        pos[r] = unranked
        progress.update()
    progress.finish()

    return _result(multi, multi_type, single, single_type, condensed, judged10, counts,
                   queries=len(query_types), judged_queries=len(judged_rows), unjudged=unjudged)

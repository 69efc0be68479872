"""Run files: TREC text (``qid Q0 docid rank score tag``) and the binary format of full-depth runs (``binrun``).

Order within a query is trec_eval's: score descending, ties broken by document id descending, so the rank column is
the rank trec_eval scores and the same scores always give the same bytes. TREC scores are written with a fixed
number of decimals and the ranking is made on the written (rounded) value, so that the order in the file is the
order any reader of the file sees; a binary run keeps the scores as computed. The one exception is a ranking made
elsewhere and written as it is (``keep_order``: a dense run on a CliniQ benchmark in the order of CliniQ's eval.py);
its equal scores are in that order, which CliniQ's scoring reads back (``cliniq`` tie order ``evalpy``). A path
ending in ``.run.npz`` is written in the binary format; ``read_run`` and every reader here read either
(``runfile.read``: one set of checks for the pipeline, the command line and the API).
"""

from __future__ import annotations

from ..errors import InputError
from ..io import atomic_path
from . import binrun, runfile
from . import identity as id_check
from .runfile import RunTable, query_blocks

Run = dict  # qid -> {docid: score}


def ranked(docs: dict[str, float], decimals: int = 6) -> list[tuple[str, float]]:
    """A query's documents in trec_eval's order of their scores rounded to ``decimals``: score descending, then
    document id descending (code point order: trec_eval's ``strcmp`` of UTF-8 ids)."""
    items = sorted(((d, round(float(s), decimals)) for d, s in docs.items()), key=lambda x: x[0], reverse=True)
    items.sort(key=lambda x: x[1], reverse=True)  # stable: equal scores keep the id-descending order
    return items


def _kept(qid: str, docs: dict[str, float], decimals: int) -> list[tuple[str, float]]:
    items = [(d, round(float(s), decimals)) for d, s in docs.items()]
    if any(b[1] > a[1] for a, b in zip(items, items[1:])):
        raise ValueError(f"query {qid}: keep_order needs a ranking whose scores do not increase")
    return items


def top_k(docs: dict[str, float], k: int, decimals: int = 6) -> dict[str, float]:
    return dict(ranked(docs, decimals)[:k])


def _check_tag(tag: str) -> None:
    if any(ch.isspace() for ch in tag) or not tag:
        raise InputError(f"run tag {tag!r} is empty or holds white space.", fix="use a model name without spaces.")


def write_run(run: Run, target, tag: str, decimals: int = 6, query_order=None, keep_order: bool = False,
              identity: dict | None = None) -> int:
    """Write ``run`` atomically; queries in ``query_order`` (default: sorted ids). ``keep_order``: each query's
    documents in the order of its dict (a ranking made elsewhere, e.g. CliniQ's eval.py order), whose scores must
    not increase; otherwise trec_eval's order. A ``.run.npz`` target is written in the binary format (the scores
    as they are, ``decimals`` unused), anything else as TREC text. ``identity`` (``scoring.identity.make``): what
    made the run, in a binary run's metadata or a TREC run's sidecar. Returns the number of lines (entries)."""
    order = list(query_order) if query_order is not None else sorted(run)
    return write_run_stream(((qid, run.get(qid, {})) for qid in order), target, tag, decimals, keep_order, identity)


def write_run_stream(queries, target, tag: str, decimals: int = 6, keep_order: bool = False,
                     identity: dict | None = None) -> int:
    """:func:`write_run` of ``(qid, docs)`` pairs made one at a time, in the order given: a TREC run that is never
    held whole (a fusion of full-depth runs); a binary run is gathered as arrays first."""
    _check_tag(tag)
    if binrun.suffix_is_binary(target):
        qids, offsets, docs, ids, scores, order = binrun.from_queries(queries, keep_order)
        return binrun.write(target, qids, offsets, docs, ids, scores, tag, order=order, identity=identity)
    lines = 0
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for qid, docs in queries:
                items = _kept(qid, docs, decimals) if keep_order else ranked(docs, decimals)
                handle.write("".join(f"{qid} Q0 {did} {rank} {score:.{decimals}f} {tag}\n"
                                     for rank, (did, score) in enumerate(items, start=1)))
                lines += len(items)
    if identity is not None:
        id_check.write_sidecar(target, identity)
    return lines


def write_arrays(target, qids, offsets, docs, ids, scores, tag: str, keep_order: bool = False,
                 decimals: int = 6, identity: dict | None = None) -> int:
    """Write a run given as arrays (a full-depth search's output, never held as dicts): ``offsets`` (one more than
    ``qids``), each entry's index into ``ids`` and its score. Entries within a query in trec_eval's order, or as
    given (``keep_order``, scores not increasing). Binary or TREC text by the target's name."""
    import numpy as np

    _check_tag(tag)
    if binrun.suffix_is_binary(target):
        if keep_order:
            return binrun.write(target, qids, offsets, docs, ids, scores, tag, order="given", identity=identity)
        rank = binrun.id_rank(list(ids))
        order = binrun.trec_order(offsets, scores, rank[np.asarray(docs)])
        return binrun.write(target, qids, offsets, np.asarray(docs)[order], ids, np.asarray(scores)[order], tag,
                            identity=identity)
    bounds = np.asarray(offsets).tolist()
    return write_run_stream(((q, dict(zip([ids[i] for i in docs[lo:hi].tolist()], scores[lo:hi].tolist())))
                             for q, lo, hi in zip(qids, bounds[:-1], bounds[1:])), target, tag, decimals, keep_order,
                            identity)


def read_run(path) -> Run:
    """A run file (TREC text or binary) as {qid: {docid: score}}, each query's documents in the file's order."""
    return table_to_dict(runfile.read(path))


def table_to_dict(table: RunTable) -> Run:
    """A ``RunTable`` as {qid: {docid: score}}, each query's documents in the table's order."""
    doc_ids, d = table.codes()
    out: Run = {}
    for i, at in query_blocks(table.q, len(table.qids)):
        out[table.qids[i]] = dict(zip([doc_ids[x] for x in d[at].tolist()], table.score[at].tolist()))
    return out


def as_table(run, duplicates: bool = True) -> RunTable:
    """A run as a ``runfile.RunTable``: read from a path, kept as one, or made from {qid: {docid: score}}.
    ``duplicates=False``: a path's check for a document twice is left to the scorer's sort (``trec.rank``)."""
    import numpy as np

    if isinstance(run, RunTable):
        return run
    if not isinstance(run, dict):
        return runfile.read(run, duplicates=duplicates)
    qids, q, docs, values = [], [], [], []
    for i, (qid, items) in enumerate(run.items()):
        qids.append(qid)
        q.extend([i] * len(items))
        docs.extend(items)
        values.extend(float(s) for s in items.values())
    return RunTable(qids, np.asarray(q, dtype=np.int32), np.asarray(values, dtype=np.float64),
                    doc_text=binrun.text_array(docs))


class QueryDocs:
    """A run file held as columns (``runfile.read``), each query's documents read out as a dict on demand, in the
    file's order: what :func:`read_run` gives for that query, without the dicts of every query at once."""

    def __init__(self, path):
        self._table = runfile.read(path)
        self._docs, self._d = self._table.codes()
        self._at = {self._table.qids[i]: at for i, at in query_blocks(self._table.q, len(self._table.qids))}

    def qids(self) -> list[str]:
        return list(self._at)

    def __contains__(self, qid: str) -> bool:
        return qid in self._at

    def docs(self, qid: str) -> dict[str, float]:
        at = self._at.get(qid)
        if at is None:
            return {}
        return dict(zip([self._docs[x] for x in self._d[at].tolist()], self._table.score[at].tolist()))


def read_run_tops(path, k: int) -> tuple[Run, int]:
    """Each query's top ``k`` in the run's own order (:func:`ranked`: the score rounded to 6 decimals descending,
    then document id descending), with the scores as read, and the run's depth (its most documents for one query):
    what a truncating reranker reads of a run, without holding the whole run as dicts. Every query of the file is
    in the result."""
    import numpy as np

    table = runfile.read(path)
    docs, d = table.codes()
    q, score = table.q, table.score
    if not len(q):
        return {}, 0
    depth = int(np.bincount(q, minlength=len(table.qids)).max())
    out: Run = {}
    for i, at in query_blocks(q, len(table.qids)):
        seg_d, seg_s = d[at], score[at]
        if len(seg_s) > k:
            # the candidates: every document whose rounded score can reach the k-th largest exact score's rounded
            # value (rounding to 6 decimals moves a score by at most 5e-7 and an ulp); ranked() orders them exactly
            t = -np.partition(-seg_s, k - 1)[k - 1]
            near = np.flatnonzero(seg_s >= t - (1.5e-6 + 1e-9 * abs(t)))
            seg_d, seg_s = seg_d[near], seg_s[near]
        cand = dict(zip([docs[x] for x in seg_d.tolist()], seg_s.tolist()))
        out[table.qids[i]] = {did: cand[did] for did, _ in ranked(cand)[:k]}
    return out, depth


def run_depth(run: Run) -> int:
    return max((len(d) for d in run.values()), default=0)


def drop_identical_ids(run: Run) -> tuple[Run, int]:
    """BEIR's ignore_identical_ids: the run without documents whose id is the query id, and how many went."""
    dropped = 0
    out = {}
    for qid, docs in run.items():
        if qid in docs:
            dropped += 1
            docs = {d: s for d, s in docs.items() if d != qid}
        out[qid] = docs
    return out, dropped


# ------------------------------------------------------------------ external runs (model type ``run``)

MAX_DECIMALS = 12
_FIX = ("write one line per retrieved document, `qid Q0 docid rank score tag`, with the ids of the task's "
        "queries.jsonl and corpus")
trec_score = runfile.score  # the score grammar of every run reader


def _decimals(text: str) -> int:
    """Decimals a score was written with (``0.25`` 2, ``1e-05`` 5, ``3`` 0)."""
    from decimal import Decimal, InvalidOperation

    try:
        exponent = Decimal(text).as_tuple().exponent
    except InvalidOperation:
        return 0
    return min(MAX_DECIMALS, max(0, -exponent)) if isinstance(exponent, int) else 0


def validate_external_run(path, doc_ids, query_ids, missing: str = "error", queries_file=None) -> tuple[Run, dict]:
    """Read a TREC run produced outside the pipeline and check it against the task: 6 fields, a numeric finite
    score, a known query id and document id, no document twice for one query, and (``missing: error``) every
    query of the task present (a missing query is named with its line in ``queries_file``, one query per
    line). The first problem stops with one InputError naming the file, the line and the
    fix. Returns (run, info): info holds the counts and the decimals the scores were written with (at most 12),
    so that the copy keeps the run's precision."""
    docs, queries = set(doc_ids), list(query_ids)
    known_q = set(queries)
    run: Run = {}
    decimals = 0
    lines = 0
    for lineno, parts in runfile.lines(path, fix=_FIX + "."):
        qid, did, score = parts[0], parts[2], parts[4]
        value = trec_score(score, path, lineno)
        if qid not in known_q:
            raise InputError("the query id of this line (its 1st field) is not a query of this task.", path=path,
                             line=lineno,
                             fix=f"{_FIX}; a run of another task or split does not fit (check the path "
                                 "pattern's {benchmark}/{task}).")
        if did not in docs:
            raise InputError("the document id of this line (its 3rd field) is not in the task's corpus.", path=path,
                             line=lineno, fix=f"{_FIX}; a run over another corpus or version does not fit.")
        entry = run.setdefault(qid, {})
        if did in entry:
            first = next(n for n, p in runfile.lines(path) if p[0] == qid and p[2] == did)
            raise InputError(f"the document of this line appears twice for its query (first on line {first}).",
                             path=path, line=lineno,
                             fix="keep one line per (query, document): the retriever's best score.")
        entry[did] = value
        decimals = max(decimals, _decimals(score))
        lines += 1
    absent = [(i, q) for i, q in enumerate(queries, start=1) if q not in run]
    if absent and missing == "error":
        i, q = absent[0]
        where = f"line {i} of {queries_file}" if queries_file else f"query {i} of the task's {len(queries)}"
        raise InputError(f"query {q!r} ({where}) has no line in the run"
                         + (f", nor have {len(absent) - 1} other queries" if len(absent) > 1 else "") + ".",
                         path=path,
                         fix="run the retriever on every query of the task, or set the model's missing_queries: "
                             "empty to score absent queries as retrieving nothing.")
    info = {"lines": lines, "queries": len(run), "queries_missing": len(absent),
            "missing_query_ids": [q for _, q in absent][:50], "max_depth": run_depth(run), "decimals": decimals}
    return run, info

"""TREC run files: ``qid Q0 docid rank score tag``.

Order within a query is score descending, ties broken by document id ascending, so the same
scores always give the same bytes. Scores are written with a fixed number of decimals and the
ranking is made on the written (rounded) value, so that the order in the file is the order any
reader of the file sees. The one exception is a ranking made elsewhere and written as it is
(``keep_order``: a dense run on a CliniQ benchmark in the order of CliniQ's eval.py); its equal
scores are in that order, which CliniQ's scoring reads back (``cliniq`` tie order ``evalpy``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..bounds import shown
from ..errors import InputError
from ..io import atomic_path

Run = dict  # qid -> {docid: score}


def ranked(docs: dict[str, float], decimals: int = 6) -> list[tuple[str, float]]:
    items = [(d, round(float(s), decimals)) for d, s in docs.items()]
    items.sort(key=lambda x: (-x[1], x[0]))
    return items


def _kept(qid: str, docs: dict[str, float], decimals: int) -> list[tuple[str, float]]:
    items = [(d, round(float(s), decimals)) for d, s in docs.items()]
    if any(b[1] > a[1] for a, b in zip(items, items[1:])):
        raise ValueError(f"query {qid}: keep_order needs a ranking whose scores do not increase")
    return items


def top_k(docs: dict[str, float], k: int, decimals: int = 6) -> dict[str, float]:
    return dict(ranked(docs, decimals)[:k])


def write_run(run: Run, target, tag: str, decimals: int = 6, query_order=None, keep_order: bool = False) -> int:
    """Write ``run`` atomically; queries in ``query_order`` (default: sorted ids). ``keep_order``: each query's
    documents in the order of its dict (a ranking made elsewhere, e.g. CliniQ's eval.py order), whose rounded
    scores must not increase; otherwise score descending, ties by document id."""
    order = list(query_order) if query_order is not None else sorted(run)
    return write_run_stream(((qid, run.get(qid, {})) for qid in order), target, tag, decimals, keep_order)


def write_run_stream(queries, target, tag: str, decimals: int = 6, keep_order: bool = False) -> int:
    """:func:`write_run` of ``(qid, docs)`` pairs made one at a time, in the order given: a run that is never
    held whole (a fusion of full-depth runs)."""
    if any(ch.isspace() for ch in tag) or not tag:
        raise InputError(f"run tag {tag!r} is empty or holds white space.", fix="use a model name without spaces.")
    lines = 0
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for qid, docs in queries:
                items = _kept(qid, docs, decimals) if keep_order else ranked(docs, decimals)
                handle.write("".join(f"{qid} Q0 {did} {rank} {score:.{decimals}f} {tag}\n"
                                     for rank, (did, score) in enumerate(items, start=1)))
                lines += len(items)
    return lines


def run_lines(path, fix: str = "regenerate the run file."):
    """(line number, qid, docid, score text) of each line of a TREC run, read as trec_eval reads one: fields split at
    ASCII white space (C's ``isspace``), blank lines and lines starting with ``#`` skipped. Stops with an InputError
    naming the file and line at a NUL byte (trec_eval refuses them: a binary file), at bytes that are not UTF-8, and
    at a line that does not hold 6 columns."""
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()  # bytes.split: exactly C's isspace in the C locale
            if not parts or parts[0].startswith(b"#"):
                continue
            nul = raw.find(b"\0")
            if nul >= 0:
                raise InputError(f"a NUL byte at column {nul + 1} (a binary or UTF-16 file?).", path=path,
                                 line=lineno, fix="write the run as UTF-8 text, one line per document.")
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"bytes that are not UTF-8 at column {exc.start + 1} (a binary or compressed "
                                 "file, or another encoding?).", path=path, line=lineno,
                                 fix="write the run as UTF-8 text (decompress it, or re-encode it, e.g. iconv -f "
                                     "latin1 -t utf-8).") from None
            if len(parts) != 6:
                raise InputError(f"expected 6 columns (qid Q0 docid rank score tag), found {len(parts)}.",
                                 path=path, line=lineno, fix=fix)
            yield lineno, parts[0].decode(), parts[2].decode(), parts[4].decode()


def read_run(path) -> Run:
    run: Run = {}
    for lineno, qid, did, score in run_lines(path):
        try:
            value = float(score)
        except ValueError:
            raise InputError(f"score {score!r} is not a number.", path=path, line=lineno,
                             fix="regenerate the run file.") from None
        docs = run.setdefault(qid, {})
        if did in docs:
            raise InputError(f"document {did!r} appears twice for query {qid!r}.", path=path, line=lineno,
                             fix="regenerate the run file.")
        docs[did] = value
    return run


class RunColumns(NamedTuple):
    """A run's lines as columns: ``qids`` and ``docs`` the distinct ids, ``q`` and ``d`` each line's index into
    them (int32), ``score`` each line's score (float64), in the file's line order."""
    qids: list
    q: object
    docs: list
    d: object
    score: object

    def __len__(self) -> int:
        return len(self.score)


def _spaces_only(path) -> bool:
    """Whether the file's only white space are spaces and line feeds: no tab, carriage return, vertical tab, form
    feed or NUL, which pyarrow's reader would keep inside a field (or take for a line end) where :func:`run_lines`
    splits the line or refuses it."""
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            if len(chunk.translate(None, b"\t\r\x0b\x0c\x00")) != len(chunk):
                return False
    return True


def read_run_columns(path) -> RunColumns | None:
    """The run's lines as :class:`RunColumns`, read with pyarrow: a 20 M-line run in seconds at 16 bytes a line,
    where :func:`read_run`'s dicts take about 190 bytes a line. The values are :func:`read_run`'s (both read a
    score to the nearest double). None where pyarrow's reader does not take the file (other white space than
    single spaces, a line without 6 columns, a score that is not a plain number, a comment line, a NUL) or a document
    appears twice for a query: :func:`read_run` then reads it, or names the file and line of the problem."""
    import numpy as np
    import pyarrow as pa
    from pyarrow import csv as pacsv

    if not _spaces_only(path):  # other white space, or a NUL: read_run splits (or refuses) the line as trec_eval
        return None
    names = ["qid", "q0", "doc", "rank", "score", "tag"]
    dict_type = pa.dictionary(pa.int32(), pa.string())
    try:
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(column_names=names, block_size=64 << 20),
            parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False,
                                              ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(include_columns=["qid", "doc", "score"], strings_can_be_null=False,
                                                 column_types={"qid": dict_type, "doc": dict_type,
                                                               "score": pa.float64()}))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None
    n = table.num_rows
    if n == 0:
        empty = np.zeros(0, dtype=np.int32)
        return RunColumns([], empty, [], empty.copy(), np.zeros(0, dtype=np.float64))
    table = table.unify_dictionaries()  # one dictionary per column across the read blocks

    def codes(table, column):
        chunks = table.column(column).chunks
        return (np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int32,
                                                                                                   copy=False),
                chunks[0].dictionary.to_pylist())

    q_code, q_names = codes(table, "qid")
    d_code, d_names = codes(table, "doc")
    score = table.column("score").to_numpy()
    del table
    if any(q.startswith("#") for q in q_names):  # a comment line of 6 words: read_run skips it, as trec_eval
        return None
    cells = len(q_names) * len(d_names)
    if cells <= 1 << 29:  # one flag per (query, document): a scatter, not a sort
        seen = np.zeros(cells, dtype=bool)
        for lo in range(0, n, 1 << 22):
            seen[q_code[lo:lo + (1 << 22)].astype(np.int64) * len(d_names) + d_code[lo:lo + (1 << 22)]] = True
        repeated = int(np.count_nonzero(seen)) != n
        del seen
    else:
        repeated = len(np.unique(q_code.astype(np.int64) * len(d_names) + d_code)) != n
    return None if repeated else RunColumns(q_names, q_code, d_names, d_code, score)


def columns_of(run: Run) -> RunColumns:
    """A run read by :func:`read_run` as :class:`RunColumns` (each query's documents in the dict's order)."""
    import numpy as np

    qids = list(run)
    docs: list[str] = []
    index: dict[str, int] = {}
    q, d, score = [], [], []
    for i, qid in enumerate(qids):
        for did, value in run[qid].items():
            if did not in index:
                index[did] = len(docs)
                docs.append(did)
            q.append(i)
            d.append(index[did])
            score.append(value)
    return RunColumns(qids, np.asarray(q, dtype=np.int32), docs, np.asarray(d, dtype=np.int32),
                      np.asarray(score, dtype=np.float64))


def _columns(path) -> RunColumns:
    """:func:`read_run_columns`, or :func:`read_run` as columns for a file it declines (which read_run reads, or
    refuses naming the line)."""
    cols = read_run_columns(path)
    return cols if cols is not None else columns_of(read_run(path))


def _query_lines(q, n_queries: int):
    """(query index, its lines) for each query with lines: slices where the file holds each query's lines together
    (a file written query by query, in any query order), else index arrays (the lines grouped by a stable sort)."""
    import numpy as np

    counts = np.bincount(q, minlength=n_queries)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if len(starts) == np.count_nonzero(counts):
        for i, lo, hi in zip(q[starts].tolist(), starts.tolist(), np.r_[starts[1:], len(q)].tolist()):
            yield i, slice(lo, hi)
        return
    lines = np.argsort(q, kind="stable")
    ends = np.cumsum(counts)
    for i in np.flatnonzero(counts).tolist():
        yield i, lines[ends[i] - counts[i]:ends[i]]


class QueryDocs:
    """A run file held as columns (:func:`read_run_columns`), each query's documents read out as a dict on demand,
    in the file's order: what :func:`read_run` gives for that query, without the dicts of every query at once."""

    def __init__(self, path):
        self._cols = _columns(path)
        self._at = {self._cols.qids[i]: at for i, at in _query_lines(self._cols.q, len(self._cols.qids))}

    def qids(self) -> list[str]:
        return list(self._at)

    def __contains__(self, qid: str) -> bool:
        return qid in self._at

    def docs(self, qid: str) -> dict[str, float]:
        at = self._at.get(qid)
        if at is None:
            return {}
        c = self._cols
        return dict(zip([c.docs[x] for x in c.d[at].tolist()], c.score[at].tolist()))


def read_run_tops(path, k: int) -> tuple[Run, int]:
    """Each query's top ``k`` in the run's own order (:func:`ranked`: the score rounded to 6 decimals descending,
    then document id ascending), with the scores as read, and the run's depth (its most documents for one query):
    what a truncating reranker reads of a run, without holding the whole run as dicts. Every query of the file is
    in the result."""
    import numpy as np

    cols = _columns(path)
    qids, q, docs, d, score = cols
    if not len(q):
        return {}, 0
    depth = int(np.bincount(q, minlength=len(qids)).max())
    out: Run = {}
    for i, at in _query_lines(q, len(qids)):
        seg_d, seg_s = d[at], score[at]
        if len(seg_s) > k:
            # the candidates: every document whose rounded score can reach the k-th largest exact score's rounded
            # value (rounding to 6 decimals moves a score by at most 5e-7 and an ulp); ranked() orders them exactly
            t = -np.partition(-seg_s, k - 1)[k - 1]
            near = np.flatnonzero(seg_s >= t - (1.5e-6 + 1e-9 * abs(t)))
            seg_d, seg_s = seg_d[near], seg_s[near]
        cand = dict(zip([docs[x] for x in seg_d.tolist()], seg_s.tolist()))
        out[qids[i]] = {did: cand[did] for did, _ in ranked(cand)[:k]}
    return out, depth


def read_run_prefixes(path, depth: int, relevant: dict[str, set] | None = None, queries=None,
                      ignore_identical_ids: bool = False) -> tuple[Run, int, int]:
    """What trec_eval's cut measures read of a run, without holding the run as dicts: each query's top ``depth``
    in trec_eval's order (score descending, then document id descending), and, for a query of ``relevant``, down to
    its first document in that set (where ``recip_rank`` stops). Only the queries in ``queries`` (default: all).
    ``ignore_identical_ids``: first drop the documents whose id is the query id (BEIR's option, as
    :func:`drop_identical_ids`). Returns (the prefixes as a run, the run's depth after that drop: its most documents
    for one query, how many were dropped). A query whose every document was dropped stays, with none."""
    import numpy as np

    cols = _columns(path)
    qids, q, docs, d, score = cols
    dropped = 0
    if ignore_identical_ids and len(q):
        doc_index = {did: i for i, did in enumerate(docs)}
        own = np.asarray([doc_index.get(qid, -1) for qid in qids], dtype=np.int64)
        keep = d != own[q]
        dropped = int(len(keep) - np.count_nonzero(keep))
        if dropped:
            q, d, score = q[keep], d[keep], score[keep]
        del keep
    run_depth_ = int(np.bincount(q, minlength=len(qids)).max(initial=0)) if len(q) else 0
    out: Run = {qid: {} for qid in qids if queries is None or qid in queries}
    if not len(q):
        return out, run_depth_, dropped
    d_rank = np.empty(len(docs), dtype=np.int64)
    d_rank[sorted(range(len(docs)), key=docs.__getitem__)] = np.arange(len(docs))  # code point order = strcmp's
    doc_index = {did: i for i, did in enumerate(docs)} if relevant else {}
    for i, at in _query_lines(q, len(qids)):
        qid = qids[i]
        if qid not in out:
            continue
        seg_d, seg_s = d[at], score[at]
        order = np.lexsort((-d_rank[seg_d], -seg_s))  # score descending, then document id descending
        n = depth
        wanted = [doc_index[x] for x in relevant.get(qid, ()) if x in doc_index] if relevant else []
        if wanted:
            hit = np.flatnonzero(np.isin(seg_d[order], np.asarray(wanted, dtype=seg_d.dtype)))
            if len(hit):
                n = max(n, int(hit[0]) + 1)
        top = order[:n]
        out[qid] = dict(zip([docs[x] for x in seg_d[top].tolist()], seg_s[top].tolist()))
    return out, run_depth_, dropped


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


# A score as trec_eval reads it: C's atof, which reads the longest prefix that is a number and ignores the rest
# ("1_000" is 1, "0.5x" is 0.5, "high" is 0). Accepted are the fields atof reads whole and Python's float reads to
# the same value (both round correctly): an optional sign, digits with an optional decimal point (or a point and
# digits), an optional exponent. Refused, though one or the other reads them: Python-only syntax (underscores,
# non-ASCII digits), C-only syntax (hexadecimal floats, 0x1p-3), anything after the number, and non-finite values
# (nan, inf, or an exponent beyond a double's range).
_SCORE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SCORE_FIX = ("write the retriever's score as a decimal number in the fifth column (e.g. 12, -0.25, 1.5e-3: no "
              "underscores, no hexadecimal, no nan or inf).")


def trec_score(text: str, path=None, lineno: int | None = None) -> float:
    """The score field of a run line as a finite float, in the grammar above; anything else stops with an InputError
    saying what trec_eval would have read instead."""
    import math

    if _SCORE.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
        raise InputError(f"score {shown(text)} is beyond a double's range (trec_eval reads it as infinite).",
                         path=path, line=lineno, fix=_SCORE_FIX)
    lower = text.lower().lstrip("+-")
    if lower.startswith(("nan", "inf")):
        problem = "is not a finite number"
    elif lower.startswith("0x"):
        problem = "is a hexadecimal float, which Python's float does not read"
    else:
        prefix = _SCORE.match(text)
        read = float(prefix.group(0)) if prefix else 0.0
        problem = f"is not a finite number in trec_eval's format (trec_eval, with C's atof, would read it as {read!r})"
    raise InputError(f"score {shown(text)} {problem}.", path=path, line=lineno, fix=_SCORE_FIX)


def _decimals(text: str) -> int:
    """Decimals a score was written with (``0.25`` 2, ``1e-05`` 5, ``3`` 0)."""
    from decimal import Decimal, InvalidOperation

    try:
        exponent = Decimal(text).as_tuple().exponent
    except InvalidOperation:
        return 0
    return min(MAX_DECIMALS, max(0, -exponent)) if isinstance(exponent, int) else 0


def validate_external_run(path, doc_ids, query_ids, missing: str = "error", queries_file=None) -> tuple[Run, dict]:
    """Read a TREC run produced outside the pipeline and check it against the task: 6 columns, a numeric finite
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
    for lineno, qid, did, score in run_lines(path, fix=_FIX + "."):
        value = trec_score(score, path, lineno)
        if qid not in known_q:
            raise InputError(f"query id {shown(qid)} is not a query of this task.", path=path, line=lineno,
                             fix=f"{_FIX}; a run of another task or split does not fit (check the path "
                                 "pattern's {benchmark}/{task}).")
        if did not in docs:
            raise InputError(f"document id {shown(did)} (query {shown(qid)}) is not in the task's corpus.", path=path,
                             line=lineno, fix=f"{_FIX}; a run over another corpus or version does not fit.")
        entry = run.setdefault(qid, {})
        if did in entry:
            raise InputError(f"document {shown(did)} appears twice for query {shown(qid)}.", path=path, line=lineno,
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

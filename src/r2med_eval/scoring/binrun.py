"""The binary run format (``<model>.run.npz``): a run as arrays, for full-depth runs (CliniQ's 16,550 chunks for
each of 1,246 queries are 20.6 M entries: about 8 bytes an entry here, 41 as TREC text).

A NumPy ``.npz`` archive (a zip of ``.npy`` arrays, stored without compression, read with ``numpy.load`` and
``allow_pickle=False``) holding:

* ``meta``: UTF-8 JSON, {"format": "r2med-eval run 1", "qids": the query ids, "order", "tag"}: ``order`` is
  ``trec_eval`` (each query's entries by score descending, then document id descending: trec_eval's order, so an
  entry's place is the rank trec_eval scores) or ``given`` (a ranking made elsewhere whose scores do not increase,
  e.g. CliniQ's eval.py order of a dense run; ties stay in that order); ``tag`` the run's name (a TREC file's last
  column);
* ``ids``: the document id table, UTF-8, one per line, zlib-compressed;
* ``offsets`` (int64, one more than the queries): query ``i`` holds entries ``offsets[i]`` to ``offsets[i+1]``;
* ``docs`` (int32): each entry's index into ``ids``, each query's entries in rank order;
* ``scores``: each entry's score as the retriever computed it, float32 where every score is a float32 value (a
  dense model's cosine, Lucene's BM25), float64 otherwise (nothing is rounded).

The zip entries carry a fixed date, so the same run gives the same bytes.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

from ..errors import InputError
from ..io import atomic_path

FORMAT = "r2med-eval run 1"
SUFFIX = ".run.npz"
ORDERS = ("trec_eval", "given")
_FIX = "write it again with the pipeline (delete it and rerun the rule that made it) or r2med_eval.write_run."
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def is_binary(path) -> bool:
    """Whether ``path`` is a zip archive (the binary format), told by its first bytes, not its name."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def write(target, qids, offsets, docs, ids, scores, tag: str, order: str = "trec_eval") -> int:
    """Write a run given as arrays (see the module's docstring) atomically; returns the number of entries."""
    import numpy as np

    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}")
    scores = np.asarray(scores, dtype=np.float64)
    narrow = scores.astype(np.float32)
    if np.array_equal(narrow.astype(np.float64), scores):
        scores = narrow
    meta = {"format": FORMAT, "order": order, "tag": tag, "qids": list(qids)}
    members = {
        "meta": np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
        "ids": np.frombuffer(zlib.compress("\n".join(ids).encode("utf-8"), 6), dtype=np.uint8),
        "offsets": np.asarray(offsets, dtype=np.int64),
        "docs": np.asarray(docs, dtype=np.int32),
        "scores": scores,
    }
    with atomic_path(target) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, array in members.items():
                info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
                info.external_attr = 0o644 << 16
                with archive.open(info, "w", force_zip64=array.nbytes > (1 << 30)) as handle:
                    np.lib.format.write_array(handle, np.ascontiguousarray(array), allow_pickle=False)
    return len(members["docs"])


class BinaryRun:
    """A binary run read back: ``qids``, ``offsets``, ``docs``, ``ids``, ``scores`` (as stored: float32 or
    float64), ``order``, ``tag``."""

    def __init__(self, qids, offsets, docs, ids, scores, order: str, tag: str):
        self.qids, self.offsets, self.docs, self.ids = qids, offsets, docs, ids
        self.scores, self.order, self.tag = scores, order, tag

    def __len__(self) -> int:
        return len(self.docs)


def read(path) -> BinaryRun:
    """A binary run, checked: every member present with its type, offsets that cover the entries in order, document
    indices within the id table, finite scores that do not increase within a query, no document twice for a query.
    Anything else stops with an InputError naming the file."""
    import numpy as np

    def bad(problem: str):
        return InputError(f"not a readable r2med-eval binary run: {problem}.", path=path, fix=_FIX)

    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = sorted({"meta", "ids", "offsets", "docs", "scores"} - set(archive.files))
            if missing:
                raise bad(f"no {', '.join(missing)} in the archive")
            meta = json.loads(bytes(archive["meta"]).decode("utf-8"))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise bad(f"format {str(meta.get('format') if isinstance(meta, dict) else meta)[:40]!r}, "
                          f"expected {FORMAT!r}")
            qids, order, tag = meta.get("qids"), meta.get("order"), meta.get("tag")
            if not isinstance(qids, list) or not all(isinstance(q, str) for q in qids) or not isinstance(tag, str):
                raise bad("query ids or tag of the wrong type")
            ids = zlib.decompress(bytes(archive["ids"])).decode("utf-8")
            ids = ids.split("\n") if ids else []
            offsets, docs, scores = archive["offsets"], archive["docs"], archive["scores"]
    except InputError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error, UnicodeDecodeError) as exc:
        raise bad(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if offsets.dtype != np.int64 or docs.dtype != np.int32 or scores.dtype not in (np.float32, np.float64):
        raise bad(f"array types {offsets.dtype}/{docs.dtype}/{scores.dtype}")
    n = len(docs)
    if (offsets.ndim != 1 or len(offsets) != len(qids) + 1 or docs.ndim != 1 or scores.shape != docs.shape
            or (len(offsets) and (offsets[0] != 0 or offsets[-1] != n)) or bool((np.diff(offsets) < 0).any())):
        raise bad("offsets, entries and scores do not agree")
    if order not in ORDERS:
        raise bad(f"order {order!r}")
    if len(set(qids)) != len(qids):
        raise bad("a query holds two blocks")
    if n and (int(docs.min()) < 0 or int(docs.max()) >= len(ids)):
        raise bad("a document index outside the id table")
    if not np.isfinite(scores).all():
        raise bad("a score that is not finite")
    q = np.repeat(np.arange(len(qids), dtype=np.int32), np.diff(offsets))
    same = q[1:] == q[:-1]
    if bool((same & (scores[1:] > scores[:-1])).any()):
        raise bad("a query whose scores increase down its ranking")
    if order == "trec_eval":
        rank = id_rank(ids).astype(np.int32)[docs]
        if bool((same & (scores[1:] == scores[:-1]) & (rank[1:] > rank[:-1])).any()):
            raise bad("equal scores not in trec_eval's order (document id descending)")
        del rank
    del same
    if _repeats(q, docs, len(ids)):
        raise bad("a document twice for one query")
    return BinaryRun(qids, offsets, docs, ids, scores, order, tag)


def id_rank(ids: list[str]):
    """Each id's place in code point order (strcmp's order of UTF-8 text), as an int64 array."""
    import numpy as np

    rank = np.empty(len(ids), dtype=np.int64)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return rank


def _repeats(q, d, n_docs: int) -> bool:
    """Whether a (query, document) pair occurs twice: a flag per pair where that fits in memory (set a block of
    entries at a time), else a sort."""
    import numpy as np

    n = len(d)
    if not n:
        return False
    cells = (int(q.max()) + 1) * max(n_docs, 1)
    if cells <= 1 << 30:
        seen = np.zeros(cells, dtype=bool)
        for lo in range(0, n, 1 << 22):
            seen[q[lo:lo + (1 << 22)].astype(np.int64) * n_docs + d[lo:lo + (1 << 22)]] = True
        return int(np.count_nonzero(seen)) != n
    import pyarrow.compute as pc

    key = q.astype(np.int64) * n_docs + d
    ordered = key[numpy_of(pc.sort_indices(arrow_of(key)))]
    return bool((ordered[1:] == ordered[:-1]).any())


def from_queries(queries, keep_order: bool = False):
    """(qids, offsets, docs, ids, scores, order) of ``(qid, {docid: score})`` pairs in the given query order: each
    query's documents by score descending, then document id descending (trec_eval's order); ``keep_order``: in the
    order of each dict (a ranking made elsewhere; its scores must not increase)."""
    import numpy as np

    qids, sizes, doc_names, values = [], [], [], []
    for qid, docs in queries:
        qids.append(qid)
        sizes.append(len(docs))
        doc_names.extend(docs)
        values.extend(docs.values())
    ids = sorted(set(doc_names))
    index = {d: i for i, d in enumerate(ids)}  # code order is the ids' string order
    docs = np.fromiter((index[d] for d in doc_names), dtype=np.int32, count=len(doc_names))
    scores = np.asarray(values, dtype=np.float64)
    offsets = np.zeros(len(qids) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if keep_order:
        q = np.repeat(np.arange(len(qids)), sizes)
        rising = np.flatnonzero((q[1:] == q[:-1]) & (scores[1:] > scores[:-1]))
        if len(rising):
            raise ValueError(f"query {qids[q[rising[0]]]}: keep_order needs a ranking whose scores do not increase")
        return qids, offsets, docs, ids, scores, "given"
    order = trec_order(offsets, scores, docs)
    return qids, offsets, docs[order], ids, scores[order], "trec_eval"


def trec_order(offsets, scores, docs):
    """The permutation that puts each query's entries (``offsets``) in trec_eval's order: score descending, then
    document index descending (the id table sorted, index order is id order)."""
    import numpy as np
    import pyarrow.compute as pc

    q = np.repeat(np.arange(len(offsets) - 1, dtype=np.int32), np.diff(offsets))
    table = table_of({"q": q, "s": np.asarray(scores, dtype=np.float64), "d": np.asarray(docs, dtype=np.int32)})
    return numpy_of(pc.sort_indices(table, sort_keys=[("q", "ascending"), ("s", "descending"),
                                             ("d", "descending")]))


def arrow_of(values):
    """A numpy array of numbers as a pyarrow array, sharing its memory (``pyarrow.array`` on a numpy array, or on a
    list, imports pandas: a fifth of a second of a command's start)."""
    import numpy as np
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype == bool:
        values = values.astype(np.uint8)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def text_array(strings):
    """A list of str as a pyarrow string array, built from its UTF-8 bytes and offsets (see :func:`arrow_of`)."""
    import numpy as np
    import pyarrow as pa

    encoded = [x.encode("utf-8") for x in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    large = offsets[-1] >= 1 << 31
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
                                  pa.py_buffer(b"".join(encoded))])


def table_of(columns: dict):
    """{name: numpy array or pyarrow array} as a pyarrow table (see :func:`arrow_of`)."""
    import pyarrow as pa

    arrays = [c if isinstance(c, (pa.Array, pa.ChunkedArray)) else arrow_of(c) for c in columns.values()]
    return pa.Table.from_arrays(arrays, names=list(columns))


def numpy_of(column):
    """A pyarrow column of numbers or booleans (an array or a chunked array) as one numpy array, read from its data
    buffers (pyarrow's own ``to_numpy`` imports pandas: a fifth of a second); a null's slot holds whatever value
    the buffer holds there, for the caller to mask."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    boolean = column.type == pa.bool_()
    if boolean:
        column = pc.cast(column, pa.int8())
    dtype = np.dtype(column.type.to_pandas_dtype())
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    parts = [np.frombuffer(c.buffers()[1], dtype=dtype, count=len(c), offset=c.offset * dtype.itemsize)
             for c in chunks if len(c)]
    out = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, dtype=dtype)
    return out.astype(bool) if boolean else out


def suffix_is_binary(path) -> bool:
    return str(Path(path).name).endswith(SUFFIX)

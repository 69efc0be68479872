"""The binary run format (``<model>.run.npz``): a run as arrays, for full-depth runs (CliniQ's 16,550 chunks for
each of 1,246 queries are 20.6 M entries: about 8 bytes an entry here, 41 as TREC text).

A NumPy ``.npz`` archive (a zip of ``.npy`` arrays, stored without compression, read with ``numpy.load`` and
``allow_pickle=False``) holding:

* ``meta``: UTF-8 JSON, {"format": "r2med-eval run 1", "qids": the query ids, "order", "tag", "ids_count",
  "ids_bytes", "ids_sha256", "identity"}: ``order`` is ``trec_eval`` (each query's entries by score descending, then
  document id descending: trec_eval's order, so an entry's place is the rank trec_eval scores) or ``given`` (a
  ranking made elsewhere whose scores do not increase, e.g. CliniQ's eval.py order of a dense run; ties stay in that
  order); ``tag`` the run's name (a TREC file's last column); the id table's count, length and sha256 (its text);
  ``identity`` what made the run (``scoring.identity``: run name, benchmark, task, corpus fingerprint);
* ``ids``: the document id table, UTF-8, one per line, zlib-compressed;
* ``offsets`` (int64, one more than the queries): query ``i`` holds entries ``offsets[i]`` to ``offsets[i+1]``;
* ``docs`` (int32): each entry's index into ``ids``, each query's entries in rank order;
* ``scores``: each entry's score as the retriever computed it, float32 where every score is a float32 value (a
  dense model's cosine, Lucene's BM25), float64 otherwise (nothing is rounded).

The zip entries carry a fixed date, so the same run gives the same bytes. Reading is bounded (``read``): every size
the file declares is checked against the file (and the corpus, where the caller knows it) before anything is
allocated, the id table inflates to at most its recorded size, the metadata nests no deeper than the format.
"""

from __future__ import annotations

import contextlib
import json
import zipfile
import zlib
from pathlib import Path

from ..errors import InputError
from ..io import atomic_path

FORMAT = "r2med-eval run 1"
SUFFIX = ".run.npz"
ORDERS = ("trec_eval", "given")
MEMBERS = ("meta", "ids", "offsets", "docs", "scores")
_DTYPES = {"meta": ("|u1",), "ids": ("|u1",), "offsets": ("<i8",), "docs": ("<i4",), "scores": ("<f4", "<f8")}
# the metadata's keys and their types (None: any scalar); an unknown key may hold a scalar only
_META = {"format": str, "order": str, "tag": str, "qids": list, "identity": dict, "ids_count": int, "ids_bytes": int,
         "ids_sha256": str}
MAX_META = 64 << 20  # bytes: the query ids of a million queries
MAX_RATIO = 32  # an id table's text against its zlib bytes (real id tables: 3 to 6)
_FIX = "write it again with the pipeline (delete it and rerun the rule that made it) or r2med_eval.write_run."
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def is_binary(path) -> bool:
    """Whether ``path`` is a zip archive (the binary format), told by its first bytes, not its name."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def write(target, qids, offsets, docs, ids, scores, tag: str, order: str = "trec_eval", identity=None) -> int:
    """Write a run given as arrays (see the module's docstring) atomically; returns the number of entries.
    ``identity``: what made the run (``scoring.identity``: run name, benchmark, task, corpus fingerprint), kept in
    the metadata."""
    import hashlib

    import numpy as np

    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}")
    scores = np.asarray(scores, dtype=np.float64)
    narrow = scores.astype(np.float32)
    if np.array_equal(narrow.astype(np.float64), scores):
        scores = narrow
    table = "\n".join(ids).encode("utf-8")
    meta = {"format": FORMAT, "order": order, "tag": tag, "qids": list(qids), "ids_count": len(ids),
            "ids_bytes": len(table), "ids_sha256": hashlib.sha256(table).hexdigest()}
    if identity is not None:
        meta["identity"] = dict(identity)
    members = {
        "meta": np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
        "ids": np.frombuffer(zlib.compress(table, 6), dtype=np.uint8),
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
    float64), ``order``, ``tag``, ``identity`` (what made it, or None for a run written without)."""

    def __init__(self, qids, offsets, docs, ids, scores, order: str, tag: str, identity=None):
        self.qids, self.offsets, self.docs, self.ids = qids, offsets, docs, ids
        self.scores, self.order, self.tag, self.identity = scores, order, tag, identity

    def __len__(self) -> int:
        return len(self.docs)


class Archive:
    """A binary run's zip, its members checked before anything of them is read (``members``): the five arrays, each
    stored without compression (as ``write`` stores them), within the file; ``array(name)`` reads one after its
    ``.npy`` header's type and shape are checked against the member's size, so that no declared size is allocated
    before the file is known to hold it. Every problem is one InputError naming the file."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.size = self.path.stat().st_size
            self.zip = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
            raise self.bad(f"not a readable zip archive ({type(exc).__name__})") from None
        infos = self.zip.infolist()
        self.infos = {i.filename: i for i in infos}
        missing = [n for n in MEMBERS if n + ".npy" not in self.infos]
        if missing:
            raise self.bad(f"no {', '.join(missing)} in the archive")
        if len(infos) != len(self.infos) or len(infos) > 2 * len(MEMBERS):
            raise self.bad("members repeated, or more members than the format's")
        for name in MEMBERS:
            info = self.infos[name + ".npy"]
            if info.compress_type != zipfile.ZIP_STORED:
                raise self.bad(f"its {name} member is compressed (the format stores its arrays as they are: a "
                               "compressed member could inflate to any size)")
            if info.file_size != info.compress_size or info.header_offset + info.file_size > self.size:
                raise self.bad(f"its {name} member claims more bytes than the file holds")

    def bad(self, problem: str) -> InputError:
        return InputError(f"not a readable r2med-eval binary run: {problem}.", path=self.path, fix=_FIX)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.zip.close()

    def header(self, name: str):
        """(open member positioned at its data, element count, dtype, data bytes) after the checks above."""
        import numpy as np

        info = self.infos[name + ".npy"]
        try:
            handle = self.zip.open(info)
            version = np.lib.format.read_magic(handle)
            if version not in ((1, 0), (2, 0)):
                raise ValueError("npy version")
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = reader(handle, max_header_size=4096)
            start = handle.tell()
        except (OSError, ValueError, EOFError, SyntaxError, zipfile.BadZipFile) as exc:
            raise self.bad(f"the {name} member has no readable .npy header ({type(exc).__name__})") from None
        if dtype.str not in _DTYPES[name] or len(shape) != 1:
            raise self.bad(f"the {name} member holds {dtype.str} of {len(shape)} dimensions, not one of "
                           f"{'/'.join(_DTYPES[name])} of one")
        data = info.file_size - start
        if shape[0] * dtype.itemsize != data:
            raise self.bad(f"the {name} member declares {shape[0]:,} values of {dtype.itemsize} bytes, but holds "
                           f"{data:,} bytes")
        return handle, shape[0], dtype, data

    def array(self, name: str):
        """The member as a numpy array, read in blocks into an array of its checked size."""
        import numpy as np

        handle, count, dtype, data = self.header(name)
        out = np.empty(count, dtype=dtype)
        view = memoryview(out).cast("B")
        try:
            with handle:
                at = 0
                while at < data:
                    got = handle.readinto(view[at:at + (16 << 20)])
                    if not got:
                        raise EOFError
                    at += got
        except (OSError, EOFError, zipfile.BadZipFile) as exc:
            raise self.bad(f"the {name} member is truncated or damaged ({type(exc).__name__})") from None
        return out


def read_meta(path, archive: Archive | None = None) -> dict:
    """A binary run's metadata, checked: at most ``MAX_META`` bytes, UTF-8 JSON, a mapping of the format's keys with
    values of their types, nothing nested deeper than the format nests (``identity``: a mapping of strings)."""
    with contextlib.ExitStack() as stack:
        archive = archive or stack.enter_context(Archive(path))
        if archive.header("meta")[3] > MAX_META:
            raise archive.bad(f"metadata of more than {MAX_META:,} bytes")
        raw = bytes(archive.array("meta"))
        try:
            meta = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise archive.bad("metadata nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise archive.bad(f"metadata that is not UTF-8 JSON ({type(exc).__name__})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise archive.bad(f"the metadata names no format {FORMAT!r}")
        for key, value in meta.items():
            kind = _META.get(key)
            if kind is list:
                ok = isinstance(value, list) and all(isinstance(q, str) for q in value)
            elif kind is dict:
                ok = isinstance(value, dict) and all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                     for v in value.values())
            else:
                ok = isinstance(value, kind or (str, int, float, bool, type(None))) and not (
                    kind is int and isinstance(value, bool))
            if not ok:
                raise archive.bad(f"the metadata's {str(key)[:40]!r} is not "
                                  f"{'a scalar' if kind is None else 'of the type the format gives it'}")
        for key in ("qids", "order", "tag"):
            if key not in meta:
                raise archive.bad(f"no {key} in the metadata")
        if meta["order"] not in ORDERS:
            raise archive.bad("an order the format does not know")
        return meta


def read(path, max_ids: int | None = None) -> BinaryRun:
    """A binary run, checked: every member present, stored, and of the size its header declares (``Archive``); the
    metadata (``read_meta``); the id table inflated to at most the size its metadata records (at most ``MAX_RATIO``
    times its compressed size; an older run without that record: the ratio alone) and equal to its recorded sha256;
    at most ``max_ids`` ids (the corpus's, where the caller knows it); offsets that cover the entries in order, no
    more entries than queries times ids; document indices within the id table, finite scores that do not increase
    within a query, no document twice for a query. Anything else stops with one InputError naming the file."""
    import hashlib

    import numpy as np

    with Archive(path) as archive:
        bad = archive.bad
        meta = read_meta(path, archive)
        qids, order, tag = meta["qids"], meta["order"], meta["tag"]
        declared = meta.get("ids_count")
        if max_ids is not None and declared is not None and declared > max_ids:
            raise bad(f"its id table holds {declared:,} ids, more than the corpus's {max_ids:,}")
        compressed = bytes(archive.array("ids"))
        cap = MAX_RATIO * len(compressed) + 4096
        limit = meta.get("ids_bytes", cap)
        if limit < 0 or limit > cap:
            raise bad(f"its id table claims {limit:,} bytes from {len(compressed):,} compressed, more than "
                      f"{MAX_RATIO} times as many (a real id table compresses 3 to 6 times)")
        inflate = zlib.decompressobj()
        try:
            table = inflate.decompress(compressed, limit + 1)
        except zlib.error:
            raise bad("its id table is not a zlib stream") from None
        if len(table) > limit or inflate.unconsumed_tail:
            raise bad(f"its id table inflates beyond {limit:,} bytes"
                      + ("" if "ids_bytes" in meta else f", {MAX_RATIO} times its compressed size"))
        if not inflate.eof or ("ids_bytes" in meta and len(table) != limit):
            raise bad("its id table is truncated")
        if "ids_sha256" in meta and hashlib.sha256(table).hexdigest() != meta["ids_sha256"]:
            raise bad("its id table differs from the one it was written with (its sha256 does not match the "
                      "metadata's: the table was replaced or reordered)")
        try:
            ids = table.decode("utf-8")
        except UnicodeDecodeError:
            raise bad("an id table that is not UTF-8") from None
        del table
        ids = ids.split("\n") if ids else []
        if (declared is not None and len(ids) != declared) or (max_ids is not None and len(ids) > max_ids):
            raise bad(f"an id table of {len(ids):,} ids where {declared if declared is not None else max_ids:,} "
                      "were expected")
        if len(set(ids)) != len(ids):
            raise bad("an id table naming a document twice")
        n_offsets, n = archive.header("offsets")[1], archive.header("docs")[1]
        if n_offsets != len(qids) + 1 or archive.header("scores")[1] != n:
            raise bad("offsets, entries and scores do not agree")
        if n > len(qids) * len(ids):
            raise bad("more entries than queries times documents")
        offsets = archive.array("offsets")
        if offsets[0] != 0 or offsets[-1] != n or bool((np.diff(offsets) < 0).any()):
            raise bad("offsets, entries and scores do not agree")
        docs, scores = archive.array("docs"), archive.array("scores")
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
    return BinaryRun(qids, offsets, docs, ids, scores, order, tag, meta.get("identity"))


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
    if cells <= 4 * n + (1 << 24):  # a flag per pair only where the pairs are about as many as the entries
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

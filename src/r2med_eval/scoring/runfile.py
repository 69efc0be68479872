"""The one reader of run files, for the pipeline, the command line and the API.

A run file is TREC text (``qid Q0 docid rank score tag``) or the binary format of ``binrun`` (``.run.npz``), told
apart by the file's first bytes. Text is read as trec_eval 10.0 reads it, with the pipeline's rules on top:

* fields are split at ASCII white space (C's ``isspace``); blank lines and lines whose first field starts with
  ``#`` (comments) are skipped; fields after the sixth are ignored (trec_eval's "reserved for future
  expansion"); the rank and the ``Q0`` fields are not read (trec_eval ranks by score);
* the file is a regular file (not a folder, a device such as ``/dev/zero`` or a pipe), UTF-8 without NUL bytes,
  every line at most ``MAX_LINE`` bytes, at least 6 fields to a line;
* a score is a finite decimal number as trec_eval's ``atof`` reads it whole (``score``): ``1_000``, ``１０``,
  ``nan``, ``inf``, ``1e400`` and ``0x1p3`` stop, where trec_eval would read something else than was written;
* no document twice for one query.

The first problem stops with one ``InputError`` naming the file, the line and the fix, and quoting nothing of the
file (any file may be given as a run, a note-bearing one too: the line number points at the field). A well-formed
file (fields separated by single spaces or single tabs, six to a line, no comment lines) is read by pyarrow in a
fraction of a second per million lines; any other is read line by line, which also names the line of a problem.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import stat
from pathlib import Path

from ..errors import InputError
from . import binrun
from .binrun import numpy_of

log = logging.getLogger(__name__)
MAX_LINE = 1 << 16  # bytes; trec_eval's own buffer for a run on standard input is 10,000
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark: kept, as trec_eval keeps it, in the first line's first field
_NAMES = ["qid", "q0", "doc", "rank", "score", "tag"]
RUN_FIX = "write one line per retrieved document: `qid Q0 docid rank score tag`."

# A score as trec_eval reads it: C's atof, which reads the longest prefix that is a number and ignores the rest
# ("1_000" is 1, "0.5x" is 0.5, "high" is 0). Accepted are the fields atof reads whole and Python's float reads to
# the same value (both round correctly): an optional sign, digits with an optional decimal point (or a point and
# digits), an optional exponent. Refused, though one or the other reads them: Python-only syntax (underscores,
# non-ASCII digits), C-only syntax (hexadecimal floats, 0x1p-3), anything after the number, and non-finite values
# (nan, inf, or an exponent beyond a double's range).
_SCORE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
SCORE_FIX = ("write the retriever's score as a decimal number in the fifth column (e.g. 12, -0.25, 1.5e-3: no "
             "underscores, no hexadecimal, no nan or inf).")


def score(text: str, path=None, lineno: int | None = None) -> float:
    """The score field of a run line as a finite float, in the grammar above; anything else stops with an InputError
    saying what is wrong with it and what trec_eval would do. The field itself is never quoted: a file given as a
    run may be any file, a note-bearing one too (``what_is_wrong``)."""
    import math

    if _SCORE.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
        raise InputError("the score (5th field) is beyond a double's range (trec_eval reads it as infinite).",
                         path=path, line=lineno, fix=SCORE_FIX)
    raise InputError(f"the score (5th field, {len(text):,} characters) {what_is_wrong(text)}.", path=path,
                     line=lineno, fix=SCORE_FIX)


_SPECIAL = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


def what_is_wrong(text: str) -> str:
    """Why a score field is refused, in words that quote none of it (``is NaN or infinite``, ``holds an
    underscore``...), with what trec_eval (C's ``atof``) would read where that is no number of the field."""
    if _SPECIAL.fullmatch(text):
        return "is NaN or infinite"
    if text.lstrip("+-").lower().startswith("0x"):
        return "is a hexadecimal float, which Python's float does not read"
    if "_" in text and _SCORE.fullmatch(text.replace("_", "")):
        return ("holds an underscore between digits, which Python's float skips and trec_eval's atof stops at "
                "(it would read only the digits before it)")
    if any(ch.isdigit() and not ch.isascii() for ch in text):
        return "holds digits other than ASCII 0-9 (trec_eval's atof does not read them)"
    if _SCORE.match(text):
        return ("has other characters after its number (trec_eval, with C's atof, would read only the number and "
                "ignore the rest)")
    return "is not a number (trec_eval, with C's atof, would read it as 0)"


def regular_file(path, what: str = "run file", fix: str = "check the path.") -> Path:
    """``path`` as a Path once it names a readable regular file; a missing file, a folder, a device (``/dev/zero``),
    a pipe or an unreadable file stops with one InputError."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what} not found.", path=path, fix=fix) from None
    except OSError as exc:
        raise InputError(f"{what} cannot be read ({exc.strerror}).", path=path, fix=fix) from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"the {what} is a folder.", path=path, fix="name a file in it.")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"the {what} is not a regular file (a device, pipe or socket).", path=path,
                         fix="save its content to a file first and name that file.")
    if not os.access(path, os.R_OK):
        raise InputError(f"{what} cannot be read (permission denied).", path=path, fix=fix)
    return path


class RunTable:
    """A run's entries as columns: ``qids`` the distinct query ids and ``q`` each entry's index into them (int32),
    ``score`` each entry's score (float64; a binary run's as stored, float32 or float64), and the documents either
    as text (``doc_text``, a pyarrow string
    array, an entry each: a TREC file) or as ``doc_ids`` and ``d`` (int32 indices: a binary run). ``order``:
    ``file`` (a TREC file's line order), ``trec_eval`` or ``given`` (a binary run's rank order, each query's
    entries together). :meth:`codes` gives ``(doc_ids, d)`` for either."""

    def __init__(self, qids, q, score, *, doc_text=None, doc_ids=None, d=None, order: str = "file", tag=None,
                 path=None, unchecked: bool = False):
        self.qids, self.q, self.score, self.order, self.tag = qids, q, score, order, tag
        self.doc_text, self.doc_ids, self.d = doc_text, doc_ids, d
        self.path, self.unchecked = path, unchecked

    def check_duplicates(self, order=None) -> None:
        """Stop (naming the line) where a document appears twice for one query. ``order``: the entries' permutation
        by (query, document) where the caller has one (the scorer sorts so anyway); otherwise sorted here."""
        if not self.unchecked:
            return
        import pyarrow.compute as pc

        if len(self) > 1:
            if order is None:
                order = pc.sort_indices(binrun.table_of({"q": self.q, "d": self.doc_text}),
                                        sort_keys=[("q", "ascending"), ("d", "ascending")])
            qs, ds = pc.take(binrun.arrow_of(self.q), order), pc.take(self.doc_text, order)
            if pc.any(pc.and_(pc.equal(qs[1:], qs[:-1]), pc.equal(ds[1:], ds[:-1]))).as_py():
                _exact(self.path)  # names the line
                raise InputError("a document appears twice for one query.", path=self.path, fix=RUN_FIX)
        self.unchecked = False

    def __len__(self) -> int:
        return len(self.score)

    def codes(self):
        """(distinct document ids, each entry's index into them)."""
        if self.d is None:
            import pyarrow.compute as pc

            encoded = pc.dictionary_encode(self.doc_text)
            encoded = encoded.combine_chunks() if hasattr(encoded, "combine_chunks") else encoded
            self.doc_ids = encoded.dictionary.to_pylist()
            self.d = numpy_of(encoded.indices).astype("int32", copy=False)
        return self.doc_ids, self.d


def read(path, what: str = "run file", duplicates: bool = True) -> RunTable:
    """A run file (TREC text or binary), checked as the module's docstring says. ``duplicates=False`` leaves the
    check for a document twice to the caller (:meth:`RunTable.check_duplicates`; the scorer does it in its sort)."""
    path = regular_file(path, what)
    if binrun.is_binary(path):
        b = binrun.read(path)
        import numpy as np

        q = np.repeat(np.arange(len(b.qids), dtype=np.int32), np.diff(b.offsets))
        return RunTable(b.qids, q, b.scores, doc_ids=b.ids, d=b.docs, order=b.order, tag=b.tag, path=path)
    table = _fast(path)
    if table is None:
        return _exact(path)
    if duplicates:
        table.check_duplicates()
    return table


def _delimiter(path) -> bytes | None:
    """The one separator of the file (a space or a tab), or None where pyarrow's reader would split a line otherwise
    than trec_eval: other white space (carriage return, vertical tab, form feed), a NUL, or both spaces and tabs; and
    None where a line is longer than ``MAX_LINE`` (the line-by-line reader names it).
    (Two separators in a row, or one at a line's end, make an empty field, which :func:`_fast` refuses.)"""
    if os.path.getsize(path) == 0:
        return b" "
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:3] == BOM:  # pyarrow drops it; trec_eval reads it as part of the first query id
            return None
        if any(data.find(c) >= 0 for c in (b"\r", b"\x0b", b"\x0c", b"\x00")) or _longest_line(data) > MAX_LINE:
            return None
        tab, space = data.find(b"\t") >= 0, data.find(b" ") >= 0
    if tab and space:
        return None
    return b"\t" if tab else b" "


def _longest_line(data) -> int:
    """The most bytes of a line of ``data`` (a file's bytes, mapped), its line break included: every field counts,
    the rank and tag too. Read in blocks of 16 MiB."""
    import numpy as np

    longest, start, block = 0, 0, 1 << 24
    for lo in range(0, len(data), block):
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8, count=min(block, len(data) - lo), offset=lo) == 10)
        if len(ends):
            ends += lo
            longest = max(longest, int(ends[0]) + 1 - start, int(np.diff(ends).max()) if len(ends) > 1 else 0)
            start = int(ends[-1]) + 1
    return max(longest, len(data) - start)


def _fast(path) -> RunTable | None:
    """The file read by pyarrow where it splits every line as trec_eval does; None where it does not (the caller
    then reads it line by line): a line without exactly 6 fields, an empty field, a score pyarrow does not read or
    that is not finite, a comment line, a line over ``MAX_LINE``. A document twice for a query is left to
    :meth:`RunTable.check_duplicates`."""
    sep = _delimiter(path)
    if sep is None:
        return None
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    text = {n: pa.string() for n in _NAMES if n != "score"}
    try:
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(column_names=_NAMES, block_size=16 << 20),
            parse_options=pacsv.ParseOptions(delimiter=sep.decode(), quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=False, column_types={**text,
                                                                                          "score": pa.float64()}))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):  # a line without 6 fields, a score pyarrow does not read
        return None
    if not table.num_rows:
        return RunTable([], np.zeros(0, dtype=np.int32), np.zeros(0), doc_text=binrun.text_array([]),
                        path=path)
    score_column = table.column("score")
    if score_column.null_count:  # an empty score
        return None
    value = numpy_of(score_column)
    if not np.isfinite(value).all():  # nan, inf (pyarrow reads them)
        return None
    for name in text:  # every line at most MAX_LINE bytes: checked on the file's bytes (_delimiter)
        if pc.min(pc.binary_length(table.column(name))).as_py() == 0:  # two separators in a row, or one at a line's end
            return None
    qid = table.column("qid")
    if pc.any(pc.starts_with(qid, "#")).as_py():  # a comment line of 6 fields
        return None
    encoded = pc.dictionary_encode(qid).combine_chunks()
    q = numpy_of(encoded.indices).astype(np.int32, copy=False)
    return RunTable(encoded.dictionary.to_pylist(), q, value, doc_text=table.column("doc"), path=path,
                    unchecked=True, tag=table.column("tag")[-1].as_py())


def lines(path, fix: str = RUN_FIX):
    """(line number, fields) of each line of a TREC run as trec_eval reads it: fields split at ASCII white space
    (C's ``isspace``), blank lines and lines whose first field starts with ``#`` skipped, fields after the sixth
    dropped. Stops with an InputError naming the file and line at a line over ``MAX_LINE`` bytes, a NUL byte, bytes
    that are not UTF-8, and a line of fewer than 6 fields."""
    with open(regular_file(path), "rb") as handle:
        lineno = 0
        while True:
            raw = handle.readline(MAX_LINE + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                raise InputError(f"a line longer than {MAX_LINE:,} bytes (a binary file, or no line breaks?).",
                                 path=path, line=lineno, fix="write one run line per retrieved document.")
            nul = raw.find(b"\0")
            if nul >= 0:
                raise InputError(f"a NUL byte at column {nul + 1} (a binary or UTF-16 file?).", path=path,
                                 line=lineno, fix="write the run as UTF-8 text, one line per document.")
            parts = raw.split()  # bytes.split: exactly C's isspace in the C locale
            if lineno == 1 and raw.startswith(BOM):
                log.warning("%s starts with a byte-order mark: read, as trec_eval reads it, as part of the first "
                            "query id", path)
            if not parts or parts[0].startswith(b"#"):
                continue
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"bytes that are not UTF-8 at column {exc.start + 1} (a binary or compressed "
                                 "file, or another encoding?).", path=path, line=lineno,
                                 fix="write the run as UTF-8 text (decompress it, or re-encode it, e.g. iconv -f "
                                     "latin1 -t utf-8).") from None
            if len(parts) < 6:  # fields after the sixth: trec_eval's "reserved for future expansion"
                raise InputError(f"expected 6 columns (qid Q0 docid rank score tag), found {len(parts)}.",
                                 path=path, line=lineno, fix=fix)
            yield lineno, [p.decode() for p in parts[:6]]


def _exact(path) -> RunTable:
    """The file read line by line (:func:`lines`), every rule checked where it fails."""
    import numpy as np

    index: dict[str, int] = {}
    seen: dict[str, dict[str, int]] = {}
    qids, q, docs, values = [], [], [], []
    tag = None
    for lineno, parts in lines(path):
        qid, did, tag = parts[0], parts[2], parts[5]
        value = score(parts[4], path, lineno)
        first = seen.setdefault(qid, {}).setdefault(did, lineno)
        if first != lineno:
            raise InputError(f"the document of this line appears twice for its query (first on line {first}).",
                             path=path, line=lineno, fix="keep one line per (query, document): the retriever's "
                                                         "score for it.")
        if qid not in index:
            index[qid] = len(qids)
            qids.append(qid)
        q.append(index[qid])
        docs.append(did)
        values.append(value)
    return RunTable(qids, np.asarray(q, dtype=np.int32), np.asarray(values, dtype=np.float64),
                    doc_text=binrun.text_array(docs), path=path, tag=tag)


def query_blocks(q, n_queries: int):
    """(query index, its entries) for each query with entries: slices where each query's entries lie together (a
    file written query by query, in any query order; a binary run), else index arrays (a stable sort)."""
    import numpy as np

    if not len(q):
        return
    counts = np.bincount(q, minlength=n_queries)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if len(starts) == np.count_nonzero(counts):
        for i, lo, hi in zip(q[starts].tolist(), starts.tolist(), np.r_[starts[1:], len(q)].tolist()):
            yield i, slice(lo, hi)
        return
    entries = np.argsort(q, kind="stable")
    ends = np.cumsum(counts)
    for i in np.flatnonzero(counts).tolist():
        yield i, entries[ends[i] - counts[i]:ends[i]]

"""The label files a user writes about CliniQ's queries and chunks, read strictly: an expert's labels
(``cliniq_completion.human_labels``, one file per expert) and new judgments (``benchmarks.<name>.new_judgments``).
Both are ``query_id<TAB>chunk_id<TAB>label`` per line (a match type or ``irrelevant``), with an optional header
``query_id chunk_id label``.

Such a file is typed beside the notes, so any field may hold note text (a sentence pasted into the wrong column).
Every message about one names the file, the line and the fix, and shows a value whole only when it is an id (a
query id ``{type}-{_id}``, a chunk id ``{HADM_ID}_{i}``): any other value is cut to its first characters and its
length (``errors.as_id``). A file that is not UTF-8, a label that is no label, a query the completion did not
judge, a chunk the corpus does not hold, two different labels for one pair and a file without any label each stop
with one such line.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError, as_id, did_you_mean
from .corpus import CHUNK_ID, IRRELEVANT, MATCH_TYPES, QUERY_ID

HEADER = ("query_id", "chunk_id", "label")
LABELS = MATCH_TYPES + (IRRELEVANT,)


def text_lines(path, fix: str) -> list[tuple[int, str]]:
    """(line number, text) of every non-blank line of a UTF-8 text file (a byte-order mark and CR line ends
    allowed); bytes that are not UTF-8 stop naming the line and column, never quoting them."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror}).", path=path, fix=fix) from None
    out = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"bytes that are not UTF-8 at column {exc.start + 1}.", path=path, line=lineno,
                             fix="save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8).") from None
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        text = text.rstrip("\r")
        if text.strip():
            out.append((lineno, text))
    return out


def _label(value: str, path, lineno: int) -> str:
    label = value.strip().lower()
    if label not in LABELS:
        hint = did_you_mean(label, LABELS)
        raise InputError(f"the label {as_id(value)} is not a match type or {IRRELEVANT}"
                         + (f" ({hint})" if hint else "") + ".", path=path, line=lineno,
                         fix=f"use one of {', '.join(LABELS)}.")
    return label


def _rows(path, what: str, extra_columns: bool = False):
    """(line number, query id, chunk id, label text) of every line but the header: three tab-separated columns
    (``extra_columns``: at least three, the rest ignored)."""
    fix = f"write {what} as query_id<TAB>chunk_id<TAB>label, one per line."
    for lineno, line in text_lines(path, fix):
        parts = line.split("\t")
        if lineno == 1 and [p.strip() for p in parts[:3]] == list(HEADER):
            continue
        if len(parts) < 3 or (len(parts) > 3 and not extra_columns):
            raise InputError(f"expected 3 tab-separated columns (query_id, chunk_id, label), found {len(parts)}.",
                             path=path, line=lineno, fix=fix)
        yield lineno, parts[0].strip(), parts[1].strip(), parts[2]


def _check_ids(q: str, c: str, queries, chunk_ids, path, lineno: int, queries_are: str, fix_query: str) -> None:
    if q not in queries:
        raise InputError(f"the query id {as_id(q, shape=QUERY_ID)} is not {queries_are}.", path=path, line=lineno,
                         fix=fix_query)
    if chunk_ids is not None and c not in chunk_ids:
        raise InputError(f"the chunk id {as_id(c, shape=CHUNK_ID)} is not a chunk of the benchmark's corpus.",
                         path=path, line=lineno,
                         fix="use the chunk ids of the corpus ({HADM_ID}_{i}, as in labels.tsv and pool.tsv).")


def read_expert_labels(path, completed_queries, chunk_ids) -> dict[tuple[str, str], str]:
    """An expert's labels: (query id, chunk id) -> label. Every query must be one of the completed queries, every
    chunk one of the corpus (``chunk_ids``), a pair labelled twice must agree, and the file must hold a label."""
    out: dict[tuple[str, str], str] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, q, c, value in _rows(path, "an expert's labels"):
        label = _label(value, path, lineno)
        _check_ids(q, c, completed_queries, chunk_ids, path, lineno, "one of the completed queries (design.tsv)",
                   "label the completed queries' chunks (labels.tsv lists the judge's), or drop the line.")
        if out.get((q, c), label) != label:
            raise InputError(f"({q}, {c}) is labelled {out[(q, c)]} on line {first_line[(q, c)]} and {label} here.",
                             path=path, line=lineno, fix="keep one label per (query, chunk).")
        out[(q, c)] = label
        first_line.setdefault((q, c), lineno)
    if not out:
        raise InputError("the expert's file holds no label.", path=path,
                         fix="write the expert's labels (query_id<TAB>chunk_id<TAB>label), or remove the file from "
                             "cliniq_completion.human_labels.")
    return out


def read_new_judgments(path, queries, chunk_ids=None) -> list[tuple[str, str, str]]:
    """New judgments in file order: (query id, chunk id, label), ids as in pool.tsv; with ``chunk_ids``, every chunk
    must be one of the corpus."""
    path = Path(path)
    if not path.is_file():
        raise InputError("new-judgments file not found.", path=path, fix="check benchmarks.<name>.new_judgments.")
    rows = []
    for lineno, q, c, value in _rows(path, "new judgments", extra_columns=True):
        label = _label(value, path, lineno)
        _check_ids(q, c, queries, chunk_ids, path, lineno, "a query of the benchmark",
                   "use the query ids of pool.tsv (e.g. disease-0).")
        rows.append((q, c, label))
    return rows

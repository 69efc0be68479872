"""CliniQ inputs: the corpus rebuilt from the user's MIMIC-III NOTEEVENTS, and the official annotations.

The corpus is rebuilt as the official ``preprocess.py`` of github.com/zhao-zy15/CliniQ (commit
``PINNED_COMMIT``) builds it: rows whose CATEGORY is exactly ``Discharge summary``, the first such
row per HADM_ID in file order, only the HADM_IDs of ``benchmark/test_hadm_ids.txt``; the text
cleaned (every ``[...]`` span removed, non-greedy and within one line; newlines to spaces; runs of
spaces to one; stripped) and split as langchain's ``CharacterTextSplitter(separator=" ",
chunk_size=100, chunk_overlap=10, length_function=<number of words>)`` splits it; chunk ids
``{HADM_ID}_{i}``. The official script reads the CSV with pandas, so a field pandas reads as missing
(an empty field, ``NA``, ``null``...) becomes the string ``nan``; we do the same and count it.

MIMIC text is credentialed: the chunks are written only under ``resources/`` in files readable by
their owner alone (0600); logs and statistics carry ids and counts, never text.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import re
import sys
from collections import deque
from pathlib import Path

from ..bounds import shown
from ..errors import InputError, as_id
from ..io import atomic_path, iter_jsonl, private_folder, sha256_file
from ..progress import Progress

log = logging.getLogger(__name__)

PINNED_COMMIT = "8e7b8cfa129f49cd3589560212a37cf20cae0bd4"
GITHUB_RAW = "https://raw.githubusercontent.com/zhao-zy15/CliniQ"
QUERY_TYPES = ("disease", "procedure", "drug")
MATCH_TYPES = ("string", "synonym", "abbreviation", "hyponym", "implication")
IRRELEVANT = "irrelevant"  # label of a new judgment that finds a chunk not relevant
# the shapes of CliniQ's ids: a message about a user's file shows a value whole only when it has one (errors.as_id)
RAW_QUERY_ID = r"[0-9]{1,12}"  # a query's _id in CliniQ's files
QUERY_ID = r"(?:disease|procedure|drug)-[0-9]{1,12}"  # {type}-{_id}
CHUNK_ID = r"[0-9]{1,12}_[0-9]{1,6}"  # {HADM_ID}_{i}
ANNOTATION_FILES = ("test_hadm_ids.txt",) + tuple(f"queries_{t}.jsonl" for t in QUERY_TYPES) + tuple(
    f"qrels_{t}.tsv" for t in QUERY_TYPES)
EXPECTED_CHUNKS = 16550
NOTE_HEADER = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY",
               "DESCRIPTION", "CGID", "ISERROR", "TEXT")
NEEDED_COLUMNS = ("HADM_ID", "CATEGORY", "TEXT")
DISCHARGE = "Discharge summary"
# pandas.read_csv's default missing-value strings: the official script's pandas reads these as NaN,
# and ``.astype(str)`` turns NaN into "nan".
PANDAS_NA = frozenset(['', '#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN', '-NaN', '-nan', '1.#IND', '1.#QNAN',
                       '<NA>', 'N/A', 'NA', 'NULL', 'NaN', 'None', 'n/a', 'nan', 'null'])
MIMIC_ACCESS = ("CliniQ's corpus is rebuilt from MIMIC-III v1.4, which needs credentialed access: create a "
                "PhysioNet account, complete the required training, sign the data use agreement at "
                "https://physionet.org/content/mimiciii/1.4/ and download NOTEEVENTS.csv.gz; then set "
                "benchmarks.<name>.noteevents in your config (e.g. config/cliniq.yaml) to its path "
                "(.csv or .csv.gz).")

PLACEHOLDER = "/path/to/"  # config/cliniq.yaml's noteevents until the user sets theirs
NOTE_FILES = ("NOTEEVENTS.csv.gz", "NOTEEVENTS.csv")


def noteevents_problem(path, base: Path | None = None) -> tuple[str, str] | None:
    """Why ``path`` (relative to ``base``) is not a NOTEEVENTS file: (problem, fix), or None when it is a file.
    Each case has its own message: not set or still the placeholder (then how to get MIMIC-III), a folder (the
    file in it, if it holds one), a missing file (the closest name in its folder, or the missing folder)."""
    from ..errors import close_names

    if not path or str(path).startswith(PLACEHOLDER):
        what = "is not set" if not path else f"is still the placeholder {shown(str(path))}"
        return f"the MIMIC-III NOTEEVENTS file {what}.", MIMIC_ACCESS
    given = Path(path).expanduser()
    full = given if given.is_absolute() or base is None else Path(base) / given
    if full.is_dir():
        inside = [full / n for n in NOTE_FILES if (full / n).is_file()]
        fix = (f"set it to the file in that folder, {shown(str(given / inside[0].name))}." if inside else
               "set it to the NOTEEVENTS.csv.gz (or .csv) file itself; this folder holds neither.")
        return f"{shown(str(path))} is a folder, not the NOTEEVENTS file.", fix
    if full.is_file():
        return None
    parent = full.parent
    if not parent.is_dir():
        return (f"{shown(str(path))} does not exist, nor does its folder {shown(str(parent))}.",
                "check the path (a relative path is relative to the working directory).")
    close = close_names(full.name, [p.name for p in parent.iterdir() if p.is_file()], n=1)
    fix = (f"set it to {shown(str(given.parent / close[0]))}, the closest name in that folder." if close else
           f"check the file name; its folder {shown(str(parent))} holds no file of a similar name.")
    return f"{shown(str(path))} does not exist.", fix


_BRACKETS = re.compile(r"\[.*?\]")
_NEWLINE = re.compile(r"\n")
_SPACES = re.compile(r" +")


def clean_text(text: str) -> str:
    """The official clean-up: drop ``[...]`` spans (within a line), newlines to spaces, squeeze spaces."""
    text = _BRACKETS.sub("", text)
    text = _NEWLINE.sub(" ", text)
    text = _SPACES.sub(" ", text)
    return text.strip()


def word_count(text: str) -> int:
    return len(text.split())


def split_text(text: str, chunk_size: int = 100, chunk_overlap: int = 10, separator: str = " ",
               stats: dict | None = None) -> list[str]:
    """Split as ``CharacterTextSplitter(separator, chunk_size, chunk_overlap, length_function=word_count)``.

    The text is cut at every occurrence of ``separator`` (empty pieces dropped); pieces are merged
    greedily while their summed word count stays within ``chunk_size`` (the separator's own length,
    also measured in words, is 0 for a space); on overflow the chunk is emitted (joined by the
    separator, stripped, dropped if empty) and pieces are removed from its front until at most
    ``chunk_overlap`` words remain and the next piece fits. A single piece longer than ``chunk_size``
    becomes an oversize chunk (langchain logs a warning; we count them in ``stats``).
    """
    if chunk_size <= 0 or chunk_overlap < 0 or chunk_overlap > chunk_size:
        raise ValueError(f"invalid chunk_size {chunk_size} / chunk_overlap {chunk_overlap}")
    pieces = [p for p in (text.split(separator) if separator else list(text)) if p]
    sep_len = word_count(separator)
    chunks: list[str] = []
    current: deque = deque()  # (piece, its length)
    total = 0
    oversize = 0
    for piece in pieces:
        n = word_count(piece)
        if total + n + (sep_len if current else 0) > chunk_size:
            if total > chunk_size:
                oversize += 1
            if current:
                joined = separator.join(p for p, _ in current).strip()
                if joined:
                    chunks.append(joined)
                while total > chunk_overlap or (total + n + (sep_len if current else 0) > chunk_size and total > 0):
                    _, first = current.popleft()
                    total -= first + (sep_len if len(current) > 0 else 0)
        current.append((piece, n))
        total += n + (sep_len if len(current) > 1 else 0)
    joined = separator.join(p for p, _ in current).strip()
    if joined:
        chunks.append(joined)
    if stats is not None:
        stats["oversize_chunks"] = stats.get("oversize_chunks", 0) + oversize
    return chunks


# ---------------------------------------------------------------- annotations

def read_hadm_ids(path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise InputError("CliniQ's test_hadm_ids.txt is missing.", path=path,
                         fix="point the benchmark's task path at the folder of CliniQ's benchmark/ files, or let "
                             "the pipeline download them (annotations: {download: true}).")
    ids, seen = [], set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        value = line.strip()
        if not value:
            continue
        if value in seen:
            raise InputError(f"HADM_ID {value} is listed twice.", path=path, line=lineno,
                             fix="use CliniQ's test_hadm_ids.txt unchanged.")
        seen.add(value)
        ids.append(value)
    if not ids:
        raise InputError("no HADM_ID listed.", path=path, fix="use CliniQ's test_hadm_ids.txt.")
    return ids


def _open_text(path):
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_discharge_notes(path, hadm_ids) -> tuple[dict[str, str], dict]:
    """HADM_ID -> TEXT of the first ``Discharge summary`` row of each listed HADM_ID, in file order."""
    problem = noteevents_problem(path)
    if problem:
        raise InputError(problem[0], fix=problem[1])
    path = Path(path)
    wanted = set(hadm_ids)
    notes: dict[str, str] = {}
    stats = {"rows": 0, "discharge_rows": 0, "discharge_duplicate_rows_skipped": 0,
             "discharge_rows_not_listed": 0, "missing_text_as_nan": []}
    csv.field_size_limit(sys.maxsize)
    seen_discharge: set = set()
    try:
        with _open_text(path) as handle:
            reader = csv.reader(handle, strict=True)
            header = next(reader, None)
            if header is None:
                raise InputError("the file is empty.", path=path, fix=MIMIC_ACCESS)
            if header and header[0].startswith("\ufeff"):
                header[0] = header[0][1:]
            missing = [c for c in NEEDED_COLUMNS if c not in header]
            if missing:
                # the first line may be a note (a file without its header line): name no field of it
                raise InputError(f"the first line is not NOTEEVENTS' header: it lacks the column(s) "
                                 f"{', '.join(missing)} ({len(header)} fields; the file may have lost its header "
                                 "line).", path=path, line=1,
                                 fix=f"point noteevents at MIMIC-III's NOTEEVENTS.csv(.gz), whose first line is the "
                                     f"header {','.join(NOTE_HEADER)}.")
            if tuple(header) != NOTE_HEADER:
                log.warning("%s: header differs from MIMIC-III v1.4's (%s); reading columns by name", path,
                            ",".join(NOTE_HEADER))
            i_hadm, i_cat, i_text = (header.index(c) for c in NEEDED_COLUMNS)
            width = len(header)
            progress = Progress("reading NOTEEVENTS", None, "rows", log)
            for row in reader:
                if not row:
                    continue
                if stats["rows"] - progress.done >= 10_000:
                    progress.update(stats["rows"] - progress.done)
                if len(row) != width:
                    raise InputError(
                        f"a row with {len(row)} fields where the header has {width}: the file is truncated or "
                        "not NOTEEVENTS.", path=path, line=reader.line_num,
                        fix="download NOTEEVENTS.csv.gz again from PhysioNet and check its SHA256SUMS.")
                stats["rows"] += 1
                if row[i_cat] != DISCHARGE:
                    continue
                stats["discharge_rows"] += 1
                hadm = "nan" if row[i_hadm] in PANDAS_NA else row[i_hadm]
                if hadm in seen_discharge:
                    stats["discharge_duplicate_rows_skipped"] += 1
                    continue
                seen_discharge.add(hadm)
                if hadm not in wanted:
                    stats["discharge_rows_not_listed"] += 1
                    continue
                text = row[i_text]
                if text in PANDAS_NA:
                    stats["missing_text_as_nan"].append(hadm)
                    text = "nan"
                notes[hadm] = text
            progress.update(stats["rows"] - progress.done)
            progress.finish()
    except csv.Error as exc:
        raise InputError(f"the CSV ends or breaks inside a quoted field ({exc}): the file is truncated or corrupt.",
                         path=path, line=getattr(reader, "line_num", None),
                         fix="download NOTEEVENTS.csv.gz again from PhysioNet and check its SHA256SUMS.") from None
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise InputError(f"the compressed file cannot be read to its end ({exc}): it is truncated or corrupt.",
                         path=path, fix="download NOTEEVENTS.csv.gz again from PhysioNet.") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"bytes that are not UTF-8 ({exc.reason}).", path=path,
                         fix="use the NOTEEVENTS file as PhysioNet distributes it.") from None
    return notes, stats


def build_chunks(notes: dict[str, str], chunk_size: int = 100,
                 chunk_overlap: int = 10) -> tuple[list[tuple[str, str]], dict]:
    """(chunk id, text) for every note in order; and counts (ids and numbers only)."""
    chunks: list[tuple[str, str]] = []
    stats: dict = {"oversize_chunks": 0, "notes_without_chunks": []}
    for hadm, text in notes.items():
        parts = split_text(clean_text(text), chunk_size, chunk_overlap, stats=stats)
        if not parts:
            stats["notes_without_chunks"].append(hadm)
        chunks.extend((f"{hadm}_{i}", part) for i, part in enumerate(parts))
    return chunks, stats


def write_private_jsonl(target, rows) -> int:
    """JSONL readable by its owner only (0600), in an owner-only folder, written atomically."""
    target = Path(target)
    private_folder(target.parent)
    count = 0
    with atomic_path(target, private=True) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return count


def chunk_corpus(noteevents, hadm_ids_file, corpus_out, *, expected: int | None = EXPECTED_CHUNKS,
                 allow_missing_notes: bool = False) -> dict:
    """Rebuild the chunk corpus; returns statistics (ids and numbers only)."""
    hadm_ids = read_hadm_ids(hadm_ids_file)
    notes, stats = read_discharge_notes(noteevents, hadm_ids)
    absent = [h for h in hadm_ids if h not in notes]
    stats.update({"listed_hadm_ids": len(hadm_ids), "notes_found": len(notes), "hadm_ids_absent": len(absent),
                  "hadm_ids_absent_list": absent})
    if absent:
        msg = (f"{len(absent)} of the {len(hadm_ids)} listed HADM_IDs have no 'Discharge summary' row in the file: "
               f"{', '.join(absent)}.")
        if not allow_missing_notes:
            raise InputError(msg, path=noteevents,
                             fix="use the complete MIMIC-III v1.4 NOTEEVENTS file (a partial or truncated copy "
                                 "cannot rebuild CliniQ), or set allow_missing_notes: true to continue without them.")
        log.warning("%s (continuing: allow_missing_notes)", msg)
    chunks, chunk_stats = build_chunks(notes)
    stats.update(chunk_stats)
    stats["chunks"] = write_private_jsonl(corpus_out, ({"id": cid, "title": "", "text": text} for cid, text in chunks))
    stats["chunk_ids"] = [cid for cid, _ in chunks]
    stats["expected_chunks"] = expected
    if expected is not None and stats["chunks"] != expected:
        log.warning("rebuilt %d chunks where CliniQ has %d (difference %+d): the corpus does not match the "
                    "benchmark's; check the NOTEEVENTS file and the annotations' commit", stats["chunks"],
                    expected, stats["chunks"] - expected)
    return stats


# ---------------------------------------------------------------- queries and judgments

def read_queries(folder) -> tuple[dict[str, str], dict[str, str]]:
    """Query id ``{type}-{_id}`` -> text, and -> query type, from ``queries_{type}.jsonl``."""
    texts: dict[str, str] = {}
    types: dict[str, str] = {}
    for qtype in QUERY_TYPES:
        path = Path(folder) / f"queries_{qtype}.jsonl"
        seen_text: dict[str, str] = {}
        for lineno, obj in iter_jsonl(path):
            raw = obj.get("_id", obj.get("id"))
            text = obj.get("text")
            if raw is None or not isinstance(text, str) or not text.strip():
                raise InputError("a query without '_id' or 'text'.", path=path, line=lineno,
                                 fix="use CliniQ's queries files ({_id, text}).")
            qid = f"{qtype}-{raw}"
            if qid in texts or any(ch.isspace() for ch in qid):
                raise InputError(f"query id {as_id(raw, shape=RAW_QUERY_ID)} is repeated or holds white space.",
                                 path=path, line=lineno,
                                 fix="give every query a unique id without spaces.")
            if text in seen_text:
                log.warning("%s line %d: query %s has the same text as %s (the official eval.py merges their "
                            "judgments; we keep them apart)", path, lineno, qid, seen_text[text])
            seen_text[text] = qid
            texts[qid], types[qid] = text, qtype
    return texts, types


def read_qrels(folder, queries: dict[str, str]) -> tuple[list[tuple[str, str, str]], dict]:
    """Rows (query id, chunk id, match type) in file order, duplicates kept (eval.py keeps them)."""
    rows: list[tuple[str, str, str]] = []
    seen: dict = {}
    dups = 0
    for qtype in QUERY_TYPES:
        path = Path(folder) / f"qrels_{qtype}.tsv"
        if not path.is_file():
            raise InputError("CliniQ qrels file missing.", path=path, fix="use CliniQ's benchmark/ folder.")
        with open(path, encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                parts = line.split("\t")
                if len(parts) != 3:
                    raise InputError(f"expected 3 tab-separated columns (query id, chunk id, match type), found "
                                     f"{len(parts)}.", path=path, line=lineno,
                                     fix="use CliniQ's qrels files unchanged.")
                raw, chunk, match = (p.strip() for p in parts)
                if match not in MATCH_TYPES:
                    raise InputError(f"unknown match type {as_id(match)}.", path=path, line=lineno,
                                     fix=f"use one of {', '.join(MATCH_TYPES)}" + _close(match, MATCH_TYPES) + ".")
                qid = f"{qtype}-{raw}"
                if qid not in queries:
                    raise InputError(f"judgment names query {as_id(raw, shape=RAW_QUERY_ID)}, which is not in "
                                     f"queries_{qtype}.jsonl.",
                                     path=path, line=lineno, fix="use the queries and qrels of one CliniQ commit.")
                if (qid, chunk) in seen:
                    dups += 1
                seen[(qid, chunk)] = lineno
                rows.append((qid, chunk, match))
    return rows, {"judgments": len(rows), "judgments_repeating_a_chunk": dups}


def _close(value: str, choices) -> str:
    """``" (did you mean 'synonym'?)"`` for a value near one of ``choices``, else ""."""
    from ..errors import did_you_mean

    hint = did_you_mean(value, choices)
    return f" ({hint})" if hint else ""


def check_chunks(rows, chunk_ids: set, max_missing: float, path) -> dict:
    """Judgments naming chunks the rebuilt corpus lacks: counted; above ``max_missing`` (a fraction), stop."""
    # ids as they are, anything else cut (errors.as_id): the list reaches the log and stats.json
    missing = sorted({c if re.fullmatch(CHUNK_ID, c) else as_id(c) for _, c, _ in rows if c not in chunk_ids})
    missing_rows = sum(1 for _, c, _ in rows if c not in chunk_ids)
    fraction = missing_rows / len(rows) if rows else 0.0
    if fraction > max_missing:
        raise InputError(f"{missing_rows} of {len(rows)} judgments ({fraction:.2%}) name {len(missing)} chunks that "
                         f"the rebuilt corpus lacks (e.g. {', '.join(missing[:10])}): the corpus does not match the "
                         "benchmark.", path=path,
                         fix="rebuild from the complete MIMIC-III v1.4 NOTEEVENTS with the annotations' commit, or "
                             "raise missing_chunk_qrels_max.")
    if missing:
        log.warning("%d judgments name %d chunks absent from the rebuilt corpus (kept, as eval.py keeps them: they "
                    "count in recall denominators): %s", missing_rows, len(missing), ", ".join(missing[:50]))
    return {"judgments_on_absent_chunks": missing_rows, "absent_chunks": missing}


# ---------------------------------------------------------------- download

sha256_file = sha256_file  # one implementation, in io


def download_annotations(outdir, *, commit: str = PINNED_COMMIT, base_url: str = GITHUB_RAW,
                         sha256: dict | None = None, timeout: float = 60.0) -> dict:
    """Fetch CliniQ's benchmark/ files at ``commit`` and check them.

    A file with a checksum in ``sha256`` must match it. Checksums are also recorded in
    ``SHA256SUMS`` beside the files; a later download that differs from the recorded one stops.
    """
    import urllib.request

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    sha256 = dict(sha256 or {})
    sums_file = outdir / "SHA256SUMS"
    recorded = {}
    if sums_file.is_file():
        for line in sums_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                digest, name = line.split(None, 1)
                recorded[name.strip()] = digest
    result = {}
    for name in ANNOTATION_FILES:
        url = f"{base_url.rstrip('/')}/{commit}/benchmark/{name}"
        target = outdir / name
        with atomic_path(target) as tmp:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as handle:
                    while block := response.read(1 << 20):
                        handle.write(block)
            except OSError as exc:
                raise InputError(f"cannot download {url} ({exc}).", path=target,
                                 fix="check the network, or download CliniQ's benchmark/ folder yourself and point the "
                                     "task path at it with annotations: {download: false}.") from None
            digest = sha256_file(tmp)
            want = sha256.get(name) or recorded.get(name)
            if want and digest != want:
                raise InputError(f"{url} has SHA-256 {digest}, expected {want}.", path=target,
                                 fix="check annotations.commit and annotations.sha256 in the config.")
        result[name] = digest
        log.info("downloaded %s (sha256 %s)", url, digest)
    with atomic_path(sums_file) as tmp:
        tmp.write_text("".join(f"{result[n]}  {n}\n" for n in ANNOTATION_FILES), encoding="utf-8")
    return result

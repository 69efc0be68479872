"""Dataset loaders for the on-disk layouts we read, normalised into one internal layout.

Layouts
-------
``r2med``  R2MED's native layout (and its Hugging Face repos R2MED/<Task>):
           ``corpus.jsonl`` {id,text}, ``query.jsonl`` {id,text,...}, ``qrels.jsonl`` {q_id,p_id,score}.
``beir``   BEIR's layout: ``corpus.jsonl`` {_id,title,text}, ``queries.jsonl`` {_id,text},
           ``qrels/<split>.tsv`` with header ``query-id corpus-id score``.

Internal layout (written once per task by the ``prepare_task`` rule, read by every later rule)
---------------------------------------------------------------------------------------------
``corpus.jsonl`` {id,title,text}, ``queries.jsonl`` {id,text}, ``qrels.tsv`` in TREC qrels format
(``qid 0 docid grade``), and ``stats.json`` with the counts and what was filtered.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..io import atomic_path, iter_jsonl, read_json, sha256_file, write_json, write_jsonl

log = logging.getLogger(__name__)

LAYOUTS = ("r2med", "beir")
POLICIES = ("error", "drop", "keep")


@dataclass
class Dataset:
    corpus: dict[str, dict] = field(default_factory=dict)  # id -> {"title", "text"}, in file order
    queries: dict[str, str] = field(default_factory=dict)  # id -> text, in file order
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)  # qid -> {docid: grade}
    stats: dict = field(default_factory=dict)

    @property
    def judged_queries(self) -> list[str]:
        return [q for q in self.queries if q in self.qrels]

    @property
    def unjudged_queries(self) -> list[str]:
        return [q for q in self.queries if q not in self.qrels]


def _id(obj: dict, keys: tuple[str, ...], path, lineno: int, what: str) -> str:
    for key in keys:
        if key in obj:
            value = obj[key]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise InputError(
                    f"{what} id {value!r} is not a string.", path=path, line=lineno,
                    fix=f"write the {what} id as a JSON string.",
                )
            value = str(value)
            if not value or any(ch.isspace() for ch in value):
                raise InputError(
                    f"{what} id {value!r} is empty or contains white space, which TREC run files cannot hold.",
                    path=path, line=lineno, fix=f"give every {what} a non-empty id without spaces.",
                )
            return value
    raise InputError(
        f"{what} has no id field (expected one of {', '.join(keys)}).", path=path, line=lineno,
        fix=f"add the field {keys[0]!r} to every {what}.",
    )


def _text(obj: dict, key: str, path, lineno: int, what: str, required: bool = True) -> str:
    value = obj.get(key, "" if not required else None)
    if value is None:
        if not required:
            return ""
        raise InputError(f"{what} has no {key!r} field.", path=path, line=lineno,
                         fix=f"add the field {key!r} to every {what}.")
    if not isinstance(value, str):
        raise InputError(f"{what} field {key!r} is {type(value).__name__}, not a string.", path=path,
                         line=lineno, fix=f"write {key!r} as a JSON string.")
    return value


def _read_corpus(path, id_keys, with_title: bool, empty_text: str, stats: dict) -> tuple[dict[str, dict], set]:
    corpus: dict[str, dict] = {}
    first_line: dict[str, int] = {}
    dropped = []
    for lineno, obj in iter_jsonl(path):
        doc_id = _id(obj, id_keys, path, lineno, "document")
        title = _text(obj, "title", path, lineno, "document", required=False) if with_title else ""
        text = _text(obj, "text", path, lineno, "document")
        if doc_id in first_line:
            raise InputError(
                f"duplicate document id {doc_id!r} (first seen on line {first_line[doc_id]}).",
                path=path, line=lineno, fix="give every document a unique id.",
            )
        first_line[doc_id] = lineno
        if not (title.strip() or text.strip()) and empty_text == "keep":
            stats["empty_documents_kept"] = stats.get("empty_documents_kept", 0) + 1
        elif not (title.strip() or text.strip()):
            if empty_text == "error":
                raise InputError(
                    f"document {doc_id!r} has an empty text.", path=path, line=lineno,
                    fix="remove or fill the document, or set empty_text: drop for this benchmark in config.yaml.",
                )
            dropped.append(doc_id)
            continue
        corpus[doc_id] = {"title": title, "text": text}
    if not corpus:
        raise InputError("the corpus holds no documents.", path=path, fix="point the benchmark at a non-empty corpus.")
    stats["empty_documents_dropped"] = len(dropped)
    if stats.get("empty_documents_kept"):
        log.warning("%s: kept %d documents whose text is empty or white space (empty_text: keep, as R2MED's code)",
                    path, stats["empty_documents_kept"])
    if dropped:
        log.warning("%s: dropped %d documents with empty text (empty_text: drop): %s", path, len(dropped),
                    ", ".join(dropped[:20]) + (" ..." if len(dropped) > 20 else ""))
    return corpus, set(dropped)


def _read_queries(path, id_keys) -> dict[str, str]:
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        qid = _id(obj, id_keys, path, lineno, "query")
        text = _text(obj, "text", path, lineno, "query")
        if qid in first_line:
            raise InputError(f"duplicate query id {qid!r} (first seen on line {first_line[qid]}).",
                             path=path, line=lineno, fix="give every query a unique id.")
        if not text.strip():
            raise InputError(f"query {qid!r} has an empty text.", path=path, line=lineno,
                             fix="fill in the query text or remove the query and its judgments.")
        first_line[qid] = lineno
        queries[qid] = text
    if not queries:
        raise InputError("the query file holds no queries.", path=path, fix="point the benchmark at a query file.")
    return queries


GRADE_RANGE = (-(2 ** 31), 2 ** 31 - 1)  # trec_eval (pytrec_eval) reads a grade as a C int


def _grade(value, path, lineno) -> int:
    """A relevance grade: an integer (``2``, ``"2"``, ``2.0``) within a C int; anything else stops with the
    file and line (NaN, Infinity and 1e20 included; so are Python-only spellings, ``1_0`` and non-ASCII digits,
    which trec_eval's ``atol`` reads as another number)."""
    written = value
    if isinstance(value, str):
        if value.isascii() and value.isdigit() and len(value) < 10:  # the usual grade, 0 to 3: no float needed
            return int(value)
        if not value.isascii() or "_" in value:
            value = None  # refused below, with the value as written in the message
    try:
        as_float = float(value)
    except (TypeError, ValueError, OverflowError):
        as_float = None
    if as_float is None or isinstance(value, bool) or not math.isfinite(as_float) or as_float != int(as_float):
        raise InputError(f"relevance grade {written!r} is not an integer.", path=path, line=lineno,
                         fix="write relevance grades as integers (0 = not relevant).")
    grade = int(as_float) if not isinstance(value, int) else value
    if not GRADE_RANGE[0] <= grade <= GRADE_RANGE[1]:
        raise InputError(f"relevance grade {value!r} is outside the range trec_eval accepts "
                         f"({GRADE_RANGE[0]} to {GRADE_RANGE[1]}).", path=path, line=lineno,
                         fix="write relevance grades as small integers (0 = not relevant, e.g. 1-3 relevant).")
    return grade


DUPLICATE_POLICIES = ("error", "max", "first", "last")


DUPLICATE_FIX = ("keep one judgment per query-document pair, or set duplicate_qrels: max|first|last for this "
                 "benchmark in config.yaml.")


def _add_judgment(qrels, seen, qid, did, grade, path, lineno, duplicates: str, dup_counter: list,
                  fix: str = DUPLICATE_FIX):
    judged = qrels.setdefault(qid, {})
    if (qid, did) in seen:
        if duplicates == "error":
            raise InputError(
                f"duplicate judgment for query {qid!r} and document {did!r} (first on line {seen[(qid, did)]}).",
                path=path, line=lineno, fix=fix)
        dup_counter.append((qid, did, judged[did], grade))
        if duplicates == "max":
            grade = max(grade, judged[did])
        elif duplicates == "first":
            grade = judged[did]
    else:
        seen[(qid, did)] = lineno
    judged[did] = grade


def _read_qrels_r2med(path, duplicates: str, dups: list, fix: str = DUPLICATE_FIX) -> tuple[dict, dict]:
    qrels: dict[str, dict[str, int]] = {}
    seen: dict = {}
    for lineno, obj in iter_jsonl(path):
        qid = _id(obj, ("q_id",), path, lineno, "judgment's query")
        did = _id(obj, ("p_id",), path, lineno, "judgment's document")
        if "score" not in obj:
            raise InputError("judgment has no 'score' field.", path=path, line=lineno,
                             fix="add the relevance grade as 'score'.")
        _add_judgment(qrels, seen, qid, did, _grade(obj["score"], path, lineno), path, lineno,
                      duplicates, dups, fix)
    return qrels, seen


def _read_qrels_beir(path, duplicates: str, dups: list, fix: str = DUPLICATE_FIX) -> tuple[dict, dict]:
    path = Path(path)
    if not path.is_file():
        raise InputError("qrels file not found.", path=path, fix="check the benchmark's path and split in config.yaml.")
    qrels: dict[str, dict[str, int]] = {}
    seen: dict = {}
    for lineno, raw in _raw_lines(path):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise InputError("bytes that are not UTF-8.", path=path, line=lineno,
                             fix="re-encode the file as UTF-8.") from None
        if lineno == 1 and line.startswith("\ufeff"):  # a byte-order mark (Excel's "UTF-8 with BOM")
            line = line[1:]
        if not line.strip():
            continue
        parts = line.split("\t")
        if lineno == 1 and parts[0] in ("query-id", "query_id", "qid"):
            continue
        if len(parts) != 3:
            raise InputError(f"expected 3 tab-separated columns (query-id, corpus-id, score), found {len(parts)}.",
                             path=path, line=lineno,
                             fix="write one judgment per line as query-id<TAB>corpus-id<TAB>score.")
        qid, did, grade = (p.strip() for p in parts)
        for value, what in ((qid, "query"), (did, "document")):
            if not value or any(ch.isspace() for ch in value):
                raise InputError(f"{what} id {value!r} is empty or contains white space.", path=path,
                                 line=lineno, fix="use ids without spaces.")
        _add_judgment(qrels, seen, qid, did, _grade(grade, path, lineno), path, lineno, duplicates, dups, fix)
    return qrels, seen


def _check_qrels(qrels, seen, corpus, queries, path, unknown_qrels: str, stats: dict, dropped_docs: set):
    unknown_q, unknown_d = [], []
    for qid, judged in list(qrels.items()):
        for did in list(judged):
            if qid not in queries:
                unknown_q.append((qid, did))
            elif did not in corpus and did not in dropped_docs:
                unknown_d.append((qid, did))
    if (unknown_q or unknown_d) and unknown_qrels == "error":
        qid, did = (unknown_q or unknown_d)[0]
        what = f"query {qid!r}" if unknown_q else f"document {did!r}"
        raise InputError(
            f"judgment names {what}, which is not in the {'queries' if unknown_q else 'corpus'} "
            f"({len(unknown_q)} judgments name unknown queries, {len(unknown_d)} name unknown documents).",
            path=path, line=seen[(qid, did)],
            fix="use the qrels that belong to this corpus, or set unknown_qrels: drop for this benchmark in "
                "config.yaml.",
        )
    kept = unknown_d if unknown_qrels == "keep" else []
    if kept:  # as R2MED's code: a judged document missing from the corpus stays relevant, never retrieved
        unknown_d = []
        stats["qrels_unknown_document_kept"] = len(kept)
        log.warning("%s: kept %d judgments naming documents that are not in the corpus (unknown_qrels: keep; "
                    "they count as relevant documents no run can retrieve)", path, len(kept))
    for qid, did in unknown_q + unknown_d:
        del qrels[qid][did]
    # judgments on documents dropped for empty text go with them, counted
    dropped_judgments = 0
    for qid in qrels:
        for did in [d for d in qrels[qid] if d in dropped_docs]:
            del qrels[qid][did]
            dropped_judgments += 1
    for qid in [q for q, j in qrels.items() if not j]:
        del qrels[qid]
    stats["qrels_unknown_query_dropped"] = len(unknown_q)
    stats["qrels_unknown_document_dropped"] = len(unknown_d)
    stats["qrels_on_dropped_documents"] = dropped_judgments
    if unknown_q or unknown_d:
        log.warning("%s: dropped %d judgments naming unknown queries and %d naming unknown documents "
                    "(unknown_qrels: drop)", path, len(unknown_q), len(unknown_d))


def load(layout: str, path, *, split: str = "test", empty_text: str = "error",
         unknown_qrels: str = "error", duplicate_qrels: str = "error") -> Dataset:
    """Load one task from disk in the given layout, validating everything."""
    path = Path(path)
    if layout not in LAYOUTS:
        raise InputError(f"unknown layout {layout!r}.", fix=f"use one of {', '.join(LAYOUTS)}.")
    if not path.is_dir():
        raise InputError("dataset folder not found.", path=path, fix="check the path in config.yaml.")
    stats: dict = {"layout": layout, "source": str(path)}
    if layout == "r2med":
        files = {"corpus": path / "corpus.jsonl", "queries": path / "query.jsonl", "qrels": path / "qrels.jsonl"}
        id_keys_doc, id_keys_q, with_title = ("id",), ("id",), False
    else:
        files = {"corpus": path / "corpus.jsonl", "queries": path / "queries.jsonl",
                 "qrels": path / "qrels" / f"{split}.tsv"}
        id_keys_doc, id_keys_q, with_title = ("_id",), ("_id",), True
    # judgments on documents dropped for empty text go with them (counted), they are not "unknown"
    corpus, dropped_docs = _read_corpus(files["corpus"], id_keys_doc, with_title, empty_text, stats)
    queries = _read_queries(files["queries"], id_keys_q)
    reader = _read_qrels_r2med if layout == "r2med" else _read_qrels_beir
    dups: list = []
    qrels, seen = reader(files["qrels"], duplicate_qrels, dups)
    stats["qrels_duplicates_merged"] = len(dups)
    stats["qrels_duplicates_policy"] = duplicate_qrels
    if dups:
        conflicting = sum(1 for _, _, a, b in dups if a != b)
        log.warning("%s: %d duplicate judgments (%d with different grades) merged by duplicate_qrels: %s",
                    files["qrels"], len(dups), conflicting, duplicate_qrels)
    _check_qrels(qrels, seen, corpus, queries, files["qrels"], unknown_qrels, stats, dropped_docs)
    if not qrels:
        raise InputError(
            f"no query is judged: of {len(queries)} queries none has a judgment left"
            + (f" ({stats['qrels_unknown_query_dropped']} judgments named unknown queries and "
               f"{stats['qrels_unknown_document_dropped']} unknown documents, dropped)" if seen else
               " (the file holds no judgment)") + "; every metric would be undefined (NaN).",
            path=files["qrels"],
            fix="use the qrels that belong to this task's queries and corpus, or remove the task from config.yaml.")
    stats["files"] = {k: {"path": str(v), "sha256": sha256(v)} for k, v in files.items()}
    ds = Dataset(corpus=corpus, queries=queries, qrels=qrels, stats=stats)
    stats.update(count_stats(ds))
    return ds


def count_stats(ds: Dataset) -> dict:
    grades: dict[str, int] = {}
    for judged in ds.qrels.values():
        for g in judged.values():
            grades[str(g)] = grades.get(str(g), 0) + 1
    no_relevant = [q for q in ds.judged_queries if not any(g > 0 for g in ds.qrels[q].values())]
    return {
        "documents": len(ds.corpus),
        "queries": len(ds.queries),
        "judged_queries": len(ds.judged_queries),
        "unjudged_queries": len(ds.unjudged_queries),
        "unjudged_query_ids": ds.unjudged_queries,
        "judged_queries_without_relevant": len(no_relevant),
        "judgments": sum(len(j) for j in ds.qrels.values()),
        "judgments_by_grade": dict(sorted(grades.items())),
    }


sha256 = sha256_file  # one implementation, in io


# ---------------------------------------------------------------- internal layout

def write_internal(ds: Dataset, outdir) -> None:
    outdir = Path(outdir)
    write_jsonl(outdir / "corpus.jsonl",
                ({"id": d, "title": v["title"], "text": v["text"]} for d, v in ds.corpus.items()))
    write_jsonl(outdir / "queries.jsonl", ({"id": q, "text": t} for q, t in ds.queries.items()))
    write_qrels(ds.qrels, outdir / "qrels.tsv")
    write_json(outdir / "stats.json", ds.stats)


def write_qrels(qrels: dict[str, dict[str, int]], target) -> None:
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for qid in sorted(qrels):
                for did in sorted(qrels[qid]):
                    handle.write(f"{qid} 0 {did} {qrels[qid][did]}\n")


def read_qrels(path) -> dict[str, dict[str, int]]:
    """Read TREC qrels (``qid iter docid grade``)."""
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise InputError(f"expected 4 columns (qid iter docid grade), found {len(parts)}.",
                                 path=path, line=lineno, fix="write TREC qrels lines.")
            qrels.setdefault(parts[0], {})[parts[2]] = _grade(parts[3], path, lineno)
    return qrels


def _read_qrels_trec(path, duplicates: str, dups: list, fix: str = DUPLICATE_FIX) -> tuple[dict, dict]:
    qrels: dict[str, dict[str, int]] = {}
    seen: dict = {}
    for lineno, parts in _split_lines(path, comments=True, keep_bom=True):
        if len(parts) != 4:
            raise InputError(f"expected 4 columns (qid iter docid grade), found {len(parts)}.", path=path,
                             line=lineno, fix="write TREC qrels lines.")
        _add_judgment(qrels, seen, parts[0], parts[2], _grade(parts[3], path, lineno), path, lineno, duplicates,
                      dups, fix)
    return qrels, seen


MAX_QRELS_LINE = 1 << 16  # bytes


def _raw_lines(path):
    """(line number, bytes) of each line; a line over ``MAX_QRELS_LINE`` bytes stops (a binary file read whole
    as one line would take its size in memory)."""
    with open(path, "rb") as handle:
        lineno = 0
        while raw := handle.readline(MAX_QRELS_LINE + 1):
            lineno += 1
            if len(raw) > MAX_QRELS_LINE and not raw.endswith(b"\n"):
                raise InputError(f"a line longer than {MAX_QRELS_LINE:,} bytes (a binary file, or no line breaks?).",
                                 path=path, line=lineno, fix="write one judgment per line.")
            yield lineno, raw


def _split_lines(path, comments: bool = False, keep_bom: bool = False):
    """(line number, fields) of each line that is not blank; ``comments``: lines whose first field starts with ``#``
    skipped too (trec_eval 10.0's comment lines in TREC qrels); ``keep_bom``: a byte-order mark that starts the file
    stays part of the first field, as trec_eval reads TREC qrels (else it is dropped). A line over
    ``MAX_QRELS_LINE`` bytes stops."""
    for lineno, raw in _raw_lines(path):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("bytes that are not UTF-8.", path=path, line=lineno,
                             fix="re-encode the file as UTF-8.") from None
        parts = line.lstrip("\ufeff").split() if lineno == 1 and not keep_bom else line.split()
        if keep_bom and lineno == 1 and line.startswith("\ufeff"):
            log.warning("%s starts with a byte-order mark: read, as trec_eval reads it, as part of the first query "
                        "id", path)
        if parts and not (comments and parts[0].startswith("#")):
            yield lineno, parts


def read_any_qrels(path, split: str = "test", duplicates: str = "error",
                   duplicate_fix: str | None = None) -> dict[str, dict[str, int]]:
    """Judgments in any layout the pipeline reads, told apart by their content: R2MED's ``qrels.jsonl``
    ({q_id, p_id, score}), BEIR's ``qrels/<split>.tsv`` (``query-id<TAB>corpus-id<TAB>score``, header optional)
    and TREC qrels (``qid iter docid grade``, the pipeline's ``results/data/.../qrels.tsv``; lines whose first
    field starts with ``#`` are comments, as in trec_eval 10.0); a folder in R2MED's or BEIR's layout (or the
    pipeline's task folder) is read for its qrels file. Validated as ``prepare_task`` does (integer grades;
    duplicates by ``duplicates``: error, max, first or last; ``duplicate_fix``: the fix a duplicate's message
    names instead of the configuration's)."""
    from ..scoring.runfile import regular_file

    path = Path(path)
    if path.is_dir():
        found = [p for p in (path / "qrels.jsonl", path / "qrels" / f"{split}.tsv", path / "qrels.tsv") if p.is_file()]
        if not found:
            raise InputError(f"the folder holds no judgments (qrels.jsonl, qrels/{split}.tsv or qrels.tsv).",
                             path=path, fix="name the qrels file, or a task folder in R2MED's or BEIR's layout.")
        path = found[0]
    regular_file(path, "qrels file")
    if duplicates not in DUPLICATE_POLICIES:
        raise ValueError(f"duplicates must be one of {DUPLICATE_POLICIES}")
    dups: list = []
    first = next(_split_lines(path, comments=True), (None, []))[1]
    fix = duplicate_fix or DUPLICATE_FIX
    if path.suffix == ".jsonl" or (first and first[0].startswith("{")):
        qrels = _read_qrels_r2med(path, duplicates, dups, fix)[0]
    elif len(first) == 4:
        qrels = _read_qrels_trec(path, duplicates, dups, fix)[0]
    else:
        qrels = _read_qrels_beir(path, duplicates, dups, fix)[0]
    if dups:
        log.info("%s: %d duplicate judgments merged (%s)", path, len(dups), duplicates)
    return qrels


def read_corpus(path) -> dict[str, dict]:
    return {obj["id"]: {"title": obj.get("title", ""), "text": obj["text"]} for _, obj in iter_jsonl(path)}


def read_queries(path) -> dict[str, str]:
    return {obj["id"]: obj["text"] for _, obj in iter_jsonl(path)}


def read_internal(outdir) -> Dataset:
    outdir = Path(outdir)
    return Dataset(corpus=read_corpus(outdir / "corpus.jsonl"), queries=read_queries(outdir / "queries.jsonl"),
                   qrels=read_qrels(outdir / "qrels.tsv"), stats=read_json(outdir / "stats.json"))


def doc_contents(doc: dict) -> str:
    """The text a lexical or dense model sees for a document: title and text joined by a space."""
    title, text = doc.get("title", ""), doc["text"]
    return f"{title} {text}".strip() if title else text


def raw_files(layout: str, path, split: str = "test") -> list[str]:
    """The files a layout reads, for Snakemake's input lists."""
    path = Path(path)
    if layout == "r2med":
        return [str(path / "corpus.jsonl"), str(path / "query.jsonl"), str(path / "qrels.jsonl")]
    return [str(path / "corpus.jsonl"), str(path / "queries.jsonl"), str(path / "qrels" / f"{split}.tsv")]



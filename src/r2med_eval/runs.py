"""TREC run files: ``qid Q0 docid rank score tag``.

Order within a query is score descending, ties broken by document id ascending, so the same
scores always give the same bytes. Scores are written with a fixed number of decimals and the
ranking is made on the written (rounded) value, so that the order in the file is the order any
reader of the file sees. The one exception is a ranking made elsewhere and written as it is
(``keep_order``: a dense run on a CliniQ benchmark in the order of CliniQ's eval.py); its equal
scores are in that order, which CliniQ's scoring reads back (``cliniq`` tie order ``evalpy``).
"""

from __future__ import annotations

from .errors import InputError
from .io import atomic_path

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
    if any(ch.isspace() for ch in tag) or not tag:
        raise InputError(f"run tag {tag!r} is empty or holds white space.", fix="use a model name without spaces.")
    lines = 0
    order = list(query_order) if query_order is not None else sorted(run)
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for qid in order:
                docs = run.get(qid, {})
                items = _kept(qid, docs, decimals) if keep_order else ranked(docs, decimals)
                for rank, (did, score) in enumerate(items, start=1):
                    handle.write(f"{qid} Q0 {did} {rank} {score:.{decimals}f} {tag}\n")
                    lines += 1
    return lines


def run_lines(path, fix: str = "regenerate the run file."):
    """(line number, qid, docid, score text) of each non-empty line of a TREC run; a line that does not hold
    6 columns stops with an InputError naming the file and line."""
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise InputError(f"expected 6 columns (qid Q0 docid rank score tag), found {len(parts)}.",
                                 path=path, line=lineno, fix=fix)
            yield lineno, parts[0], parts[2], parts[4]


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
    import math

    docs, queries = set(doc_ids), list(query_ids)
    known_q = set(queries)
    run: Run = {}
    decimals = 0
    lines = 0
    for lineno, qid, did, score in run_lines(path, fix=_FIX + "."):
        try:
            value = float(score)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            raise InputError(f"score {score!r} is not a finite number.", path=path, line=lineno,
                             fix="write the retriever's score as a number in the fifth column.")
        if qid not in known_q:
            raise InputError(f"query id {qid!r} is not a query of this task.", path=path, line=lineno,
                             fix=f"{_FIX}; a run of another task or split does not fit (check the path "
                                 "pattern's {benchmark}/{task}).")
        if did not in docs:
            raise InputError(f"document id {did!r} (query {qid!r}) is not in the task's corpus.", path=path,
                             line=lineno, fix=f"{_FIX}; a run over another corpus or version does not fit.")
        entry = run.setdefault(qid, {})
        if did in entry:
            raise InputError(f"document {did!r} appears twice for query {qid!r}.", path=path, line=lineno,
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

"""TREC run files: ``qid Q0 docid rank score tag``.

Order within a query is score descending, ties broken by document id ascending, so the same
scores always give the same bytes. Scores are written with a fixed number of decimals and the
ranking is made on the written (rounded) value, so that the order in the file is the order any
reader of the file sees.
"""

from __future__ import annotations

from .errors import InputError
from .io import atomic_path

Run = dict  # qid -> {docid: score}


def ranked(docs: dict[str, float], decimals: int = 6) -> list[tuple[str, float]]:
    items = [(d, round(float(s), decimals)) for d, s in docs.items()]
    items.sort(key=lambda x: (-x[1], x[0]))
    return items


def top_k(docs: dict[str, float], k: int, decimals: int = 6) -> dict[str, float]:
    return dict(ranked(docs, decimals)[:k])


def write_run(run: Run, target, tag: str, decimals: int = 6, query_order=None) -> int:
    """Write ``run`` atomically; queries in ``query_order`` (default: sorted ids)."""
    if any(ch.isspace() for ch in tag) or not tag:
        raise InputError(f"run tag {tag!r} is empty or holds white space.", fix="use a model name without spaces.")
    lines = 0
    order = list(query_order) if query_order is not None else sorted(run)
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for qid in order:
                for rank, (did, score) in enumerate(ranked(run.get(qid, {}), decimals), start=1):
                    handle.write(f"{qid} Q0 {did} {rank} {score:.{decimals}f} {tag}\n")
                    lines += 1
    return lines


def read_run(path) -> Run:
    run: Run = {}
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise InputError(f"expected 6 columns (qid Q0 docid rank score tag), found {len(parts)}.",
                                 path=path, line=lineno, fix="regenerate the run file.")
            qid, _, did, _, score, _ = parts
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

"""CliniQ's per-query figures by match type (rule ``score_cliniq`` writes them; the CliniQ claims read them): one
row per judged query of one run with its multi-patient nDCG@10 (trec_eval's, binary gains) over all its relevant
chunks and per match type, its multi-patient Recall@100 (eval.py's: a chunk judged twice counts twice), and its
single-patient nDCG (eval.py's, over a note's chunks) averaged over the query's
scored notes, overall and per match type, with the number of notes. The figures are the scorer's own
(``metrics``: ``multi_by_match_type``, ``single_patient`` on the run ranked as ``read_ranked_run`` ranks it), so
the mean of a multi-patient column over its queries is ``score_cliniq``'s ``by_match_type`` figure and the
note-weighted mean of a single-patient column is its single-patient one (tests/test_claims.py). Ids and numbers
only."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..io import tsv_text
from .corpus import MATCH_TYPES
from .metrics import multi_by_match_type, ndcg_standard, note_of, recall_at_k, single_patient

GROUPS = ("all",) + MATCH_TYPES
HEADER = ("query_id", "query_type") + tuple(f"multi_{g}" for g in GROUPS) + tuple(
    f"single_{g}" for g in GROUPS) + tuple(f"single_{g}_notes" for g in GROUPS) + ("multi_recall_at_100",)


def per_query(ranked, rows, query_types: dict[str, str], chunk_ids: list[str]) -> list[dict]:
    """One dict per judged query (query id order): ``HEADER``'s fields, None where a group has nothing to score."""
    judged: dict[str, list] = defaultdict(list)
    for q, c, t in rows:
        judged[q].append((c, t))
    notes: dict[str, list[str]] = defaultdict(list)
    for c in chunk_ids:
        notes[note_of(c)].append(c)
    vocab = ranked.vocab
    index = {c: i for i, c in enumerate(vocab)}
    unranked = np.iinfo(np.int64).max
    pos = np.full(len(vocab), unranked, dtype=np.int64)
    out = []
    for q in sorted(judged):
        qrows = judged[q]
        r = ranked.ranking(q)
        pos[r] = np.arange(len(r))
        # nDCG@10 after removing the other types' relevant chunks reads at most 10 + (judgment rows) places
        prefix = [vocab[i] for i in r[:10 + len(qrows)].tolist()]
        relevant = [c for c, _ in qrows]
        row = {"query_id": q, "query_type": query_types[q], "multi_all": ndcg_standard(prefix, relevant, 10),
               "multi_recall_at_100": recall_at_k([vocab[i] for i in r[:100].tolist()], relevant, 100)}
        by_type = multi_by_match_type(prefix, qrows)
        for t in MATCH_TYPES:
            row[f"multi_{t}"] = by_type[t]["ndcg_at_10"] if t in by_type else None
        note_chunks = [c for n in sorted({note_of(c) for c, _ in qrows}) for c in notes.get(n, [])]
        rank_of = {}
        for c in note_chunks:
            i = index.get(c)
            if i is not None and pos[i] != unranked:
                rank_of[c] = int(pos[i])
        scored, per_type, _ = single_patient(rank_of, qrows, notes)
        for g, items in (("all", scored), *((t, per_type.get(t, [])) for t in MATCH_TYPES)):
            row[f"single_{g}"] = sum(x["ndcg"] for x in items) / len(items) if items else None
            row[f"single_{g}_notes"] = len(items)
        pos[r] = unranked
        out.append(row)
    return out


def to_tsv(rows: list[dict]) -> str:
    """A header and one row per query (io.tsv_text)."""
    return tsv_text(HEADER, rows)


def read_tsv(path) -> dict[str, dict]:
    """query id -> {column: float or None} of the figure columns (multi_*, single_*, without the note counts)."""
    from ..errors import InputError
    from ..io import finite_number

    with open(path, encoding="utf-8") as handle:
        header = tuple(handle.readline().rstrip("\n").split("\t"))
        if header != HEADER:
            raise InputError("not a CliniQ per-query file (its header differs).", path=path, line=1,
                             fix="rerun rule score_cliniq (delete the file).")
        out = {}
        for lineno, line in enumerate(handle, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != len(HEADER):
                raise InputError(f"expected {len(HEADER)} columns, found {len(parts)}.", path=path, line=lineno,
                                 fix="rerun rule score_cliniq (delete the file).")
            out[parts[0]] = {h: (finite_number(v, path=path, line=lineno, column=h,
                                               fix="rerun rule score_cliniq (delete the file).") if v else None)
                             for h, v in zip(HEADER[2:], parts[2:]) if not h.endswith("_notes")}
    return out

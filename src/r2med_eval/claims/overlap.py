"""Per-query lexical overlap between a query and its relevant documents, after the pipeline's Lucene analyzer (the
tokens rule ``analyse_bm25_paper`` stores: pyserini's analyzer, stop words removed, Porter stems), for
``r2med.lexical_overlap``. Ids and numbers only: no text is read, and the output holds no term.

For a query with analysed terms Q (distinct) and relevant documents (grade >= 1) found in the corpus:

* ``overlap``: the mean over its relevant documents of |Q & terms(d)| / |Q|;
* ``overlap_any``: |Q & (union of terms(d))| / |Q| (a term found in any relevant document).

Judged queries without analysed terms, or without a relevant document in the corpus, get no value (counted);
relevant judgments naming a document outside the corpus are counted and skipped.
"""

from __future__ import annotations

import numpy as np

from ..io import tsv_text

HEADER = ("query_id", "query_terms", "relevant_docs", "overlap", "overlap_any")


def _slices(lengths: np.ndarray):
    ends = np.cumsum(lengths)
    return ends - lengths, ends


def query_overlap(corpus, queries, qrels: dict[str, dict[str, int]]) -> tuple[list[dict], dict]:
    """Rows (one per judged query with a relevant judgment, in query id order) and counts, from an
    ``AnalysedCorpus``, ``AnalysedQueries`` and the task's qrels."""
    doc_row = {d: i for i, d in enumerate(corpus.doc_ids)}
    d_start, d_end = _slices(corpus.lengths)
    q_row = {q: i for i, q in enumerate(queries.doc_ids)}
    q_start, q_end = _slices(queries.lengths)
    counts = {"queries": 0, "no_terms": 0, "no_relevant_in_corpus": 0, "relevant_outside_corpus": 0,
              "not_analysed": 0}
    term_of_corpus = {t: i for i, t in enumerate(corpus.terms)}
    rows = []
    for qid in sorted(qrels):
        relevant = sorted(d for d, g in qrels[qid].items() if g >= 1)
        if not relevant:
            continue
        counts["queries"] += 1
        row = {"query_id": qid, "query_terms": 0, "relevant_docs": 0, "overlap": None, "overlap_any": None}
        rows.append(row)
        if qid not in q_row:
            counts["not_analysed"] += 1
            continue
        i = q_row[qid]
        words = {queries.terms[t] for t in queries.token_ids[q_start[i]:q_end[i]].tolist()}
        ours = {term_of_corpus[w] for w in words if w in term_of_corpus}  # a term the corpus lacks is in no document
        row["query_terms"] = len(words)
        found = [doc_row[d] for d in relevant if d in doc_row]
        counts["relevant_outside_corpus"] += len(relevant) - len(found)
        row["relevant_docs"] = len(found)
        if not words:
            counts["no_terms"] += 1
            continue
        if not found:
            counts["no_relevant_in_corpus"] += 1
            continue
        shares, union = [], set()
        for j in found:
            hit = ours.intersection(corpus.token_ids[d_start[j]:d_end[j]].tolist())
            shares.append(len(hit) / len(words))
            union |= hit
        row["overlap"] = sum(shares) / len(shares)
        row["overlap_any"] = len(union) / len(words)
    return rows, counts


def to_tsv(rows: list[dict]) -> str:
    return tsv_text(HEADER, rows)


def read_tsv(path) -> dict[str, float]:
    """query id -> overlap, for the queries where it is defined."""
    from ..errors import InputError
    from ..io import finite_number

    with open(path, encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if tuple(header) != HEADER:
            raise InputError(f"not a lexical-overlap file (header {header}).", path=path, line=1,
                             fix="rerun rule claims_overlap (delete the file).")
        out = {}
        for lineno, line in enumerate(handle, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != len(HEADER):
                raise InputError(f"expected {len(HEADER)} columns, found {len(parts)}.", path=path, line=lineno,
                                 fix="rerun rule claims_overlap (delete the file).")
            if parts[3]:
                out[parts[0]] = finite_number(parts[3], path=path, line=lineno, column=HEADER[3],
                                              fix="rerun rule claims_overlap (delete the file).")
    return out

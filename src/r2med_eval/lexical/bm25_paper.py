"""Paper-faithful BM25: R2MED's ``retrieval_bm25`` (src/eval_BM25.py at commit 62b7074), vectorised.

What the official code does, step by step, and how this module reproduces it:

1. Tokenise every document and query with pyserini's default Lucene analyzer,
   ``Analyzer(get_lucene_analyzer())`` (StandardTokenizer, English possessive filter, lower case,
   English stop words, Porter stemmer). Here: the same Java analyzer through the JVM that
   :mod:`r2med_eval.java` sets up, called on batches of texts joined by a marker line (a newline
   always ends a token, so the tokens are those of each text alone; checked per batch). The pipeline
   analyses a task's corpus and its own queries in one job (one JVM, :func:`analyse_task`) and stores
   both, so that searching those queries needs no JVM; a query variant's texts are analysed at search.
2. ``gensim.corpora.Dictionary(corpus)``: term ids in order of first appearance, new terms of one
   document numbered in string order. Here: the same numbering (it fixes the order in which the
   float32 products are summed, so the scores are bit-identical).
3. ``LuceneBM25Model(dictionary=..., k1=0.9, b=0.4)``: ``avgdl = tokens / documents``,
   ``idf(t) = log(N + 1) - log(df(t) + 0.5)`` and, for a bag of words with length ``dl`` (the sum
   of its term frequencies), ``w(t) = idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))``,
   in float64, then stored as float32 by ``SparseMatrixSimilarity``.
4. The query is turned into a bag of words with ``dictionary.doc2bow`` (terms not in the corpus are
   dropped; a repeated term has tf > 1) and weighted by the *same* model, with the query's own length
   as ``dl``: each query term carries a BM25 weight, not 1.
5. ``SparseMatrixSimilarity(..., normalize_queries=False, normalize_documents=False)``: the score is
   the float32 sparse dot product of the two weight vectors (scipy sums the float32 products per document
   in ascending term id). Here: the same float32 products added in the same order, per query over the
   postings of its terms (numpy alone, so the search job imports no scipy; :meth:`BM25Paper.scores`, the
   scipy product, is kept to check it).
6. ``sorted(..., reverse=True)[:100]`` over *every* document: ties keep corpus order, and when fewer
   than 100 documents share a term with the query the list is filled with score-0 documents in
   corpus order. Reproduced exactly (``fill_zero``). No document is dropped for having the query's id
   (the official BM25 path does not use BEIR's ``ignore_identical_ids``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections import Counter, defaultdict
from itertools import chain, count

import numpy as np

from ..progress import Progress

log = logging.getLogger(__name__)

MARKER = "qqrtwomedevalqq"  # a token no analyzer changes, used to join texts into one Java call


class LuceneAnalyzer:
    """pyserini's default Lucene analyzer (``Analyzer(get_lucene_analyzer())``), batched."""

    def __init__(self, batch_docs: int = 128, batch_chars: int = 200_000, jvm_options: tuple[str, ...] = ()):
        from .java import configure_java

        configure_java(jvm_options)  # options count only if this starts the process's JVM
        from jnius import autoclass, cast
        from pyserini.analysis import Analyzer, get_lucene_analyzer

        self._analyzer = Analyzer(get_lucene_analyzer())
        self._utils = autoclass("io.anserini.analysis.AnalyzerUtils")
        jstring = autoclass("java.lang.String")
        self._join = jstring.join
        self._newline = cast("java.lang.CharSequence", jstring("\n"))
        self._iterable = lambda obj: cast("java.lang.Iterable", obj)
        self.batch_docs, self.batch_chars = batch_docs, batch_chars
        marker = self.analyze_one(MARKER)
        if len(marker) != 1:
            raise RuntimeError(f"the batch marker {MARKER!r} analyses to {marker!r}, not one token")
        self._marker = marker[0]
        self.fallback_batches = 0

    def analyze_one(self, text: str) -> list[str]:
        """Exactly pyserini's ``Analyzer.analyze`` (one Java call per text)."""
        return self._analyzer.analyze(text)

    def _analyze_joined(self, texts: list[str]) -> list[str]:
        tokens = self._utils.analyze(self._analyzer.analyzer, ("\n" + MARKER + "\n").join(texts))
        joined = self._join(self._newline, self._iterable(tokens))
        return joined.split("\n") if joined else []

    def _analyze_batch(self, batch: list[str]) -> tuple[list[list[str]], bool]:
        parts: list[list[str]] = [[]]
        for tok in self._analyze_joined(batch):
            if tok == self._marker:
                parts.append([])
            else:
                parts[-1].append(tok)
        if len(parts) != len(batch):  # a text holds the marker itself: analyse this batch one by one
            return [self.analyze_one(t) for t in batch], True
        return parts, False

    def _batches(self, texts: list[str]) -> list[list[str]]:
        batches = []
        start = 0
        while start < len(texts):
            end, chars = start, 0
            while end < len(texts) and end - start < self.batch_docs and (chars < self.batch_chars or end == start):
                chars += len(texts[end])
                end += 1
            batches.append(texts[start:end])
            start = end
        return batches

    def _map(self, fn, batches: list[list[str]], threads: int) -> list:
        out = []
        with Progress("Lucene analysis", sum(map(len, batches)), "texts", log) as progress:
            if threads > 1 and len(batches) > 1:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(threads) as pool:
                    for batch, result in zip(batches, pool.map(fn, batches)):
                        out.append(result)
                        progress.update(len(batch))
            else:
                for batch in batches:
                    out.append(fn(batch))
                    progress.update(len(batch))
        return out

    def analyze(self, texts, threads: int = 1) -> list[list[str]]:
        """Tokens of every text, equal to ``[analyze_one(t) for t in texts]``. With ``threads`` > 1 the batches
        are analysed by that many Java threads at once (Lucene's analyzers keep their state per thread; jnius
        releases the GIL while Java runs); the result is the same, in the same order."""
        out: list[list[str]] = []
        for parts, fell_back in self._map(self._analyze_batch, self._batches(list(texts)), threads):
            self.fallback_batches += fell_back
            out.extend(parts)
        return out

    def _analyze_batch_marked(self, batch: list[str]) -> tuple[list[str] | None, bool]:
        """The batch's tokens with the marker token between two texts (``len(batch) - 1`` markers; ``None``
        if a text's own tokens hold the marker token), and whether it was analysed text by text."""
        tokens = self._analyze_joined(batch)
        if tokens.count(self._marker) == len(batch) - 1:  # no text yields the marker token itself
            return tokens, False
        marked: list[str] = []
        for i, text in enumerate(batch):
            own = self.analyze_one(text)
            if self._marker in own:
                return None, True
            if i:
                marked.append(self._marker)
            marked.extend(own)
        return marked, True

    def analyze_marked(self, texts, threads: int = 1) -> list[list[str]] | None:
        """The tokens of every text, as :meth:`analyze` finds them, as one list per batch with the marker token
        between two texts of the batch (no per-text lists: :func:`encode_marked` reads them in one pass);
        ``None`` when a text's own tokens hold the marker token (then use :meth:`analyze`)."""
        out = []
        for tokens, fell_back in self._map(self._analyze_batch_marked, self._batches(list(texts)), threads):
            self.fallback_batches += fell_back
            if tokens is None:
                return None
            out.append(tokens)
        return out


def _join_lines(items: list[str], what: str) -> np.ndarray:
    """Strings as one UTF-8 byte array, newline-separated (none may hold a newline)."""
    text = "\n".join(items)
    if text.count("\n") != max(0, len(items) - 1):
        raise ValueError(f"a {what} holds a newline; it cannot be stored line by line")
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def _split_lines(blob: np.ndarray, count: int) -> list[str]:
    items = blob.tobytes().decode("utf-8").split("\n") if count else []
    if len(items) != count:
        raise ValueError(f"expected {count} lines, found {len(items)}")
    return items


def _save_npz(path, arrays: dict) -> None:
    from ..io import atomic_path

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)


class AnalysedCorpus:
    """A corpus after the Lucene analyzer: its terms in order of first appearance, each token as the index of
    its term, and each document's length. Stored by rule ``analyse_bm25_paper`` and shared by every
    (k1, b) fitted on the task."""

    FORMAT = 1

    def __init__(self, doc_ids: list[str], terms: list[str], token_ids: np.ndarray, lengths: np.ndarray,
                 fallback_batches: int = 0):
        self.doc_ids, self.terms, self.token_ids, self.lengths = doc_ids, terms, token_ids, lengths
        self.fallback_batches = fallback_batches

    def _arrays(self, what: str) -> dict:
        """The stored arrays but ``format`` (ids of ``what``: a document or query id)."""
        return {"doc_ids": _join_lines(self.doc_ids, what), "n_docs": np.array(len(self.doc_ids)),
                "terms": _join_lines(self.terms, "term"), "n_terms": np.array(len(self.terms)),
                "token_ids": self.token_ids, "lengths": self.lengths,
                "fallback_batches": np.array(self.fallback_batches)}

    def save(self, path) -> None:
        _save_npz(path, {"format": np.array(self.FORMAT), **self._arrays("document id")})

    @classmethod
    def load(cls, path) -> AnalysedCorpus:
        with np.load(path, allow_pickle=False) as z:
            if int(z["format"]) != cls.FORMAT:
                raise ValueError(f"{path}: analysed corpus format {int(z['format'])}, expected {cls.FORMAT}")
            return cls(_split_lines(z["doc_ids"], int(z["n_docs"])), _split_lines(z["terms"], int(z["n_terms"])),
                       z["token_ids"], z["lengths"], int(z["fallback_batches"]))

    def tokens(self) -> list[list[str]]:
        """The token list of every text, back from the term indices."""
        terms, ends = self.terms, np.cumsum(self.lengths).tolist()
        ids = self.token_ids.tolist()
        return [[terms[t] for t in ids[lo:hi]] for lo, hi in zip([0] + ends[:-1], ends)]


def texts_sha256(ids: list[str], texts: list[str]) -> str:
    """sha256 of (id, text) pairs in order: what a file of analysed queries was made from."""
    digest = hashlib.sha256()
    for i, t in zip(ids, texts, strict=True):
        digest.update(json.dumps([i, t], ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


class AnalysedQueries(AnalysedCorpus):
    """The task's queries after the same analyzer, in the same JVM as its corpus (rule ``analyse_bm25_paper``):
    ``doc_ids`` holds the query ids, ``texts_sha256`` the :func:`texts_sha256` of the queries analysed, so a
    search can check that the tokens are those of the queries it runs."""

    FORMAT = 1

    def __init__(self, *args, texts_sha256: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.texts_sha256 = texts_sha256

    def save(self, path) -> None:
        _save_npz(path, {"format": np.array(self.FORMAT), "kind": np.array("queries"),
                         "texts_sha256": np.array(self.texts_sha256), **self._arrays("query id")})

    @classmethod
    def load(cls, path) -> AnalysedQueries:
        with np.load(path, allow_pickle=False) as z:
            if "kind" not in z.files or str(z["kind"]) != "queries":
                raise ValueError("not a file of analysed queries")
            if int(z["format"]) != cls.FORMAT:
                raise ValueError(f"analysed queries format {int(z['format'])}, expected {cls.FORMAT}")
            out = cls(_split_lines(z["doc_ids"], int(z["n_docs"])), _split_lines(z["terms"], int(z["n_terms"])),
                      z["token_ids"], z["lengths"], int(z["fallback_batches"]), texts_sha256=str(z["texts_sha256"]))
        if len(out.lengths) != len(out.doc_ids) or int(out.lengths.sum()) != len(out.token_ids) or (
                len(out.token_ids) and not 0 <= int(out.token_ids.min()) <= int(out.token_ids.max()) < len(out.terms)):
            raise ValueError("its token counts or term indices do not fit together")
        return out


def encode_tokens(doc_tokens: list[list[str]], doc_ids: list[str] | None = None,
                  fallback_batches: int = 0, cls=AnalysedCorpus, **extra) -> AnalysedCorpus:
    """Token lists as an :class:`AnalysedCorpus` (terms numbered in order of first appearance), or as ``cls``
    (:class:`AnalysedQueries`, with ``extra``)."""
    n_docs = len(doc_tokens)
    lengths = np.array(list(map(len, doc_tokens)), dtype=np.int64)
    index = defaultdict(count().__next__)  # a new term gets the next number; dict keys keep insertion order
    token_ids = np.array(list(map(index.__getitem__, chain.from_iterable(doc_tokens))), dtype=np.int64)
    ids = list(doc_ids) if doc_ids is not None else [str(i) for i in range(n_docs)]
    return cls(ids, list(index), token_ids, lengths, fallback_batches, **extra)


def encode_marked(batches: list[list[str]], marker: str, doc_ids: list[str], fallback_batches: int = 0,
                  cls=AnalysedCorpus, **extra) -> AnalysedCorpus:
    """:func:`encode_tokens` of the texts that :meth:`LuceneAnalyzer.analyze_marked` returned (one list per
    batch, ``marker`` between two texts), in one pass over the tokens."""
    index = defaultdict(count().__next__)
    index[marker] = -1  # inserted first: not a term
    end = [marker]  # one more marker after each batch: then each text is followed by exactly one
    ids = np.array(list(map(index.__getitem__, chain.from_iterable(chain.from_iterable((b, end) for b in batches)))),
                   dtype=np.int64)
    ends = np.flatnonzero(ids < 0)
    if len(ends) != len(doc_ids):
        raise RuntimeError(f"{len(ends)} texts analysed, {len(doc_ids)} expected")
    lengths = np.diff(ends, prepend=-1) - 1
    terms = list(index)[1:]
    return cls(list(doc_ids), terms, ids[ids >= 0], lengths.astype(np.int64), fallback_batches, **extra)


# Corpora up to this many characters are analysed by a JVM started with ``java.SHORT_JOB_OPTIONS``:
# MedQuAD/LiveQA-Med (24 M characters) is analysed in about 35% less time (3.2 vs 4.7 s, paired runs on
# the 2-core machine); larger corpora keep the JVM's default compilers, whose code is faster once warm.
QUICK_JVM_MAX_CHARS = 100_000_000


def _analyzer_for(texts: list[str]) -> LuceneAnalyzer:
    from .java import SHORT_JOB_OPTIONS

    short = sum(map(len, texts)) <= QUICK_JVM_MAX_CHARS
    return LuceneAnalyzer(jvm_options=SHORT_JOB_OPTIONS if short else ())


def analyse_corpus(doc_ids: list[str], doc_texts: list[str], analyzer: LuceneAnalyzer | None = None,
                   threads: int = 1, cls=AnalysedCorpus, **extra) -> AnalysedCorpus:
    analyzer = analyzer or _analyzer_for(doc_texts)
    before = analyzer.fallback_batches
    marked = analyzer.analyze_marked(doc_texts, threads=threads)
    if marked is None:  # a text yields the marker token itself: per-text token lists
        analyzer.fallback_batches = before
        tokens = analyzer.analyze(doc_texts, threads=threads)
        return encode_tokens(tokens, doc_ids, analyzer.fallback_batches - before, cls=cls, **extra)
    return encode_marked(marked, analyzer._marker, doc_ids, analyzer.fallback_batches - before, cls=cls, **extra)


def analyse_task(doc_ids: list[str], doc_texts: list[str], query_ids: list[str], query_texts: list[str],
                 threads: int = 1) -> tuple[AnalysedCorpus, AnalysedQueries]:
    """A task's corpus and its queries through one analyzer (one JVM): what rule ``analyse_bm25_paper`` stores,
    so that searching the task's own queries needs no JVM."""
    analyzer = _analyzer_for(doc_texts)
    corpus = analyse_corpus(doc_ids, doc_texts, analyzer, threads=threads)
    queries = analyse_corpus(query_ids, query_texts, analyzer, threads=threads, cls=AnalysedQueries,
                             texts_sha256=texts_sha256(query_ids, query_texts))
    return corpus, queries


class BM25Paper:
    """gensim's ``LuceneBM25Model`` over a corpus, as R2MED uses it, with sparse matrix products."""

    def __init__(self, k1: float = 0.9, b: float = 0.4):
        self.k1, self.b = float(k1), float(b)

    # ------------------------------------------------------------------ index
    def fit(self, doc_tokens: list[list[str]]) -> BM25Paper:
        return self.fit_encoded(encode_tokens(doc_tokens))

    def fit_encoded(self, corpus: AnalysedCorpus) -> BM25Paper:
        """Fit on an analysed corpus (:func:`encode_tokens`, or its cached file), with numpy alone (the fit job
        imports no scipy)."""
        terms_by_temp, temp_ids, lengths = corpus.terms, corpus.token_ids, corpus.lengths
        n_docs, n_terms = len(lengths), len(terms_by_temp)
        if n_docs == 0:
            raise ValueError("the corpus holds no documents")
        rows = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        # gensim's Dictionary numbers the new terms of each document in string order: temporary ids appear
        # first in increasing order, so each document's new terms are one contiguous range of them
        remap = np.arange(n_terms, dtype=np.int64)
        if len(temp_ids):
            first_pos = np.flatnonzero(np.r_[True, temp_ids[1:] > np.maximum.accumulate(temp_ids)[:-1]])
            first_doc = rows[first_pos]
            bounds = np.flatnonzero(np.r_[True, first_doc[1:] != first_doc[:-1], True])
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                if hi - lo > 1:
                    order = sorted(range(lo, hi), key=terms_by_temp.__getitem__)
                    remap[order] = np.arange(lo, hi)
        self.terms: list = [None] * n_terms
        for temp, final in enumerate(remap.tolist()):
            self.terms[final] = terms_by_temp[temp]
        self.term_ids = {t: i for i, t in enumerate(self.terms)}
        # the index's entries, terms x documents: the distinct (term, document) pairs in ascending order (one
        # sort of a combined key) and each pair's count, the term frequency
        kind = np.uint32 if n_terms * n_docs < 2**32 else np.uint64
        key = remap[temp_ids].astype(kind) * kind(n_docs) + rows.astype(kind)
        key.sort()
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        tf = np.diff(np.r_[first, len(key)]).astype(np.float64)
        pairs = key[first]
        term, doc = (pairs // kind(n_docs)).astype(np.int64), (pairs % kind(n_docs)).astype(np.int64)
        self.n_docs = n_docs
        self.n_tokens = int(lengths.sum())
        self.avgdl = self.n_tokens / n_docs  # sum(dictionary.cfs.values()) / dictionary.num_docs
        self.df = np.bincount(term, minlength=n_terms)
        self.idf = np.array([math.log(n_docs + 1.0) - math.log(f + 0.5) for f in self.df.tolist()],
                            dtype=np.float64)
        k1, b, avgdl = self.k1, self.b, self.avgdl
        denom = k1 * (1 - b + b * lengths.astype(np.float64) / avgdl)  # per document
        weights = self.idf[term] * (tf / (tf + denom[doc]))
        # SparseMatrixSimilarity stores the index as float32; we keep it transposed (terms x documents)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(self.df, out=indptr[1:])
        self._set_postings(weights.astype(np.float32), doc.astype(np.int32 if n_docs < 2**31 else np.int64), indptr)
        self.lengths = lengths
        return self

    def _set_postings(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> None:
        """The index, terms x documents in CSR arrays: each term's documents ascending, float32 weights."""
        self.t_data, self.t_indices, self.t_indptr = data, indices, indptr

    @property
    def doc_matrix_t(self):
        """The index as a scipy CSR matrix (terms x documents); the search itself does not need scipy."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.t_data, self.t_indices, self.t_indptr), shape=(len(self.terms), self.n_docs))

    # ------------------------------------------------------------------ queries
    def query_weights(self, tokens: list[str]) -> tuple[list[int], np.ndarray]:
        """``model[dictionary.doc2bow(tokens)]``: term ids ascending, float64 weights."""
        counts = Counter(t for t in tokens if t in self.term_ids)
        if not counts:
            return [], np.zeros(0)
        ids = sorted(self.term_ids[t] for t in counts)
        qtf = np.array([counts[self.terms[i]] for i in ids], dtype=np.int64)
        qlen = int(qtf.sum())
        idfs = self.idf[ids]
        weights = idfs * (qtf / (qtf + self.k1 * (1 - self.b + self.b * qlen / self.avgdl)))
        return ids, weights

    def query_matrix(self, query_tokens: list[list[str]]):
        import scipy.sparse as sp

        indptr, indices, data = [0], [], []
        for toks in query_tokens:
            ids, w = self.query_weights(toks)
            indices.extend(ids)
            data.append(w)
            indptr.append(len(indices))
        values = np.concatenate(data).astype(np.float32) if indices else np.zeros(0, dtype=np.float32)
        return sp.csr_matrix((values, np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
                             shape=(len(query_tokens), len(self.terms)))

    def scores(self, query_tokens: list[list[str]]):
        """float32 scores, queries x documents (sparse: documents sharing no term are absent, i.e. 0)."""
        return self.query_matrix(query_tokens) @ self.doc_matrix_t

    def score_query(self, tokens: list[str], acc: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(document indices ascending, float32 scores) of the documents sharing a term with the query: the
        row of :meth:`scores`, summed as scipy's sparse product sums it (float32 products of the float32
        weights, added per document in ascending term id), with numpy alone. ``acc``: a float32 zero vector
        of the corpus's size, reused (left zero)."""
        ids, weights = self.query_weights(tokens)
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        acc = np.zeros(self.n_docs, dtype=np.float32) if acc is None else acc
        w32 = weights.astype(np.float32)
        data, indices, indptr = self.t_data, self.t_indices, self.t_indptr
        touched = []
        for i, t in enumerate(ids):
            lo, hi = int(indptr[t]), int(indptr[t + 1])
            docs = indices[lo:hi]
            acc[docs] += w32[i] * data[lo:hi]  # a term's documents are distinct: one addition each
            touched.append(docs)
        touched = np.concatenate(touched)
        if len(touched) * 16 >= self.n_docs:  # many postings: a scan of the scores is cheaper than a sort
            idx = np.flatnonzero(acc)  # every weight is > 0: the documents touched
        else:
            touched.sort()
            idx = touched[np.r_[True, touched[1:] != touched[:-1]]].astype(np.int64)
        val = acc[idx]
        acc[idx] = 0
        return idx, val

    def search(self, query_tokens: list[list[str]], k: int = 100,
               fill_zero: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: (document indices, float32 scores) of the official top k: score descending,
        ties in corpus order, filled with score-0 documents in corpus order if ``fill_zero``."""
        out = []
        k = min(k, self.n_docs)
        acc = np.zeros(self.n_docs, dtype=np.float32)
        progress = Progress("BM25 search", len(query_tokens), "queries", log)
        for toks in query_tokens:
            idx, val = self.score_query(toks, acc)
            keep = val != 0
            idx, val = idx[keep], val[keep]
            if len(val) > k:  # candidates: every score >= the k-th largest (ties at the cut kept)
                kth = np.partition(val, len(val) - k)[len(val) - k]
                cand = val >= kth
                idx, val = idx[cand], val[cand]
            order = np.lexsort((idx, -val))[:k]
            idx, val = idx[order], val[order]
            if fill_zero and len(idx) < k:
                free = np.ones(self.n_docs, dtype=bool)
                free[idx] = False
                zeros = np.flatnonzero(free)[:k - len(idx)]
                idx = np.concatenate([idx, zeros])
                val = np.concatenate([val, np.zeros(len(zeros), dtype=np.float32)])
            out.append((idx, val))
            progress.update()
        progress.finish()
        return out

    # ------------------------------------------------------------------ cache
    FORMAT = 1

    def save(self, path, doc_ids: list[str], fallback_batches: int = 0) -> None:
        """The fitted model (what :meth:`search` needs) and the corpus's document ids, in one .npz file."""
        _save_npz(path, {"format": np.array(self.FORMAT), "k1": np.array(self.k1), "b": np.array(self.b),
                         "n_docs": np.array(self.n_docs), "n_tokens": np.array(self.n_tokens),
                         "avgdl": np.array(self.avgdl), "idf": self.idf, "df": self.df, "lengths": self.lengths,
                         "terms": _join_lines(self.terms, "term"), "n_terms": np.array(len(self.terms)),
                         "doc_ids": _join_lines(doc_ids, "document id"), "data": self.t_data,
                         "indices": self.t_indices, "indptr": self.t_indptr,
                         "fallback_batches": np.array(fallback_batches)})

    @classmethod
    def load(cls, path) -> tuple[BM25Paper, list[str], int]:
        """(model, document ids, tokenizer fallback batches of the corpus) of a file :meth:`save` wrote (numpy
        only: the search job imports no scipy)."""
        with np.load(path, allow_pickle=False) as z:
            if int(z["format"]) != cls.FORMAT:
                raise ValueError(f"{path}: fitted BM25 format {int(z['format'])}, expected {cls.FORMAT}")
            model = cls(float(z["k1"]), float(z["b"]))
            model.n_docs, model.n_tokens, model.avgdl = int(z["n_docs"]), int(z["n_tokens"]), float(z["avgdl"])
            model.idf, model.df, model.lengths = z["idf"], z["df"], z["lengths"]
            model.terms = _split_lines(z["terms"], int(z["n_terms"]))
            model.term_ids = {t: i for i, t in enumerate(model.terms)}
            model._set_postings(z["data"], z["indices"], z["indptr"])
            doc_ids = _split_lines(z["doc_ids"], model.n_docs)
            fallback = int(z["fallback_batches"])
        return model, doc_ids, fallback

    def info(self) -> dict:
        return {"documents": self.n_docs, "terms": len(self.terms), "tokens": self.n_tokens,
                "avgdl": self.avgdl, "k1": self.k1, "b": self.b}


def retrieve(doc_ids: list[str], doc_texts: list[str], query_ids: list[str], query_texts: list[str], *,
             k1: float = 0.9, b: float = 0.4, top_k: int = 100, fill_zero: bool = True,
             analyzer: LuceneAnalyzer | None = None) -> tuple[dict[str, dict[str, float]], dict]:
    """The official BM25 run: {query id: {doc id: score}} with the top ``top_k`` per query."""
    start = time.perf_counter()
    analyzer = analyzer or _analyzer_for(doc_texts)
    corpus = analyse_corpus(doc_ids, doc_texts, analyzer)
    tokenize_s = time.perf_counter() - start
    start = time.perf_counter()
    model = BM25Paper(k1, b).fit_encoded(corpus)
    index_s = time.perf_counter() - start
    return search_run(model, doc_ids, query_ids, query_texts, top_k=top_k, fill_zero=fill_zero, analyzer=analyzer,
                      timings={"tokenize_s": tokenize_s, "index_s": index_s},
                      corpus_fallback_batches=corpus.fallback_batches)


def search_run(model: BM25Paper, doc_ids: list[str], query_ids: list[str], query_texts: list[str] | None = None,
               *, query_tokens: AnalysedQueries | None = None, top_k: int = 100, fill_zero: bool = True,
               analyzer: LuceneAnalyzer | None = None, timings: dict | None = None,
               corpus_fallback_batches: int = 0) -> tuple[dict, dict]:
    """The official BM25 run of the queries over a fitted model (fitted here or loaded from its cache). The
    queries are ``query_texts``, analysed here, or ``query_tokens``, analysed before (no JVM is started)."""
    timings = dict(timings or {})
    start = time.perf_counter()
    if query_tokens is not None:
        if query_tokens.doc_ids != list(query_ids):
            raise ValueError("the analysed queries are not the queries to search")
        query_fallback = query_tokens.fallback_batches
        query_tokens = query_tokens.tokens()
    else:
        analyzer = analyzer or _analyzer_for(query_texts)
        before = analyzer.fallback_batches
        query_tokens = analyzer.analyze(query_texts)
        query_fallback = analyzer.fallback_batches - before
    timings["tokenize_s"] = timings.get("tokenize_s", 0.0) + time.perf_counter() - start
    start = time.perf_counter()
    hits = model.search(query_tokens, k=top_k, fill_zero=fill_zero)
    timings["search_s"] = time.perf_counter() - start
    run = {}
    no_match = []
    for qid, toks, (idx, val) in zip(query_ids, query_tokens, hits):
        run[qid] = {doc_ids[i]: float(v) for i, v in zip(idx.tolist(), val.tolist())}
        if not any(t in model.term_ids for t in toks):
            no_match.append(qid)
    info = {**model.info(), **{k: round(v, 3) for k, v in timings.items()}, "queries": len(query_ids),
            "top_k": top_k, "fill_zero": fill_zero, "queries_without_known_terms": no_match,
            "tokenizer_fallback_batches": corpus_fallback_batches + query_fallback}
    return run, info

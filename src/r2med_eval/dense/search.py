"""Dense search: top-k by inner product over stored embeddings, exact (BLAS, equal to FAISS's ``IndexFlatIP``) or
through a FAISS IVF/HNSW index."""

from __future__ import annotations

import logging
import time

import numpy as np

from ..errors import InputError
from ..progress import phase

log = logging.getLogger(__name__)


def _faiss():
    """faiss, with OpenMP's idle threads sleeping rather than spinning (set before the OpenMP runtime starts,
    if nothing loaded it yet): spinning threads of faiss and of BLAS slow each other down on a busy machine."""
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import faiss

    return faiss


def _max_row_norm(emb: np.ndarray, block: int = 65536) -> float:
    top = 0.0
    for lo in range(0, len(emb), block):
        part = np.asarray(emb[lo:lo + block], dtype=np.float32)
        top = max(top, float(np.sqrt(np.einsum("ij,ij->i", part, part).max(initial=0.0))))
    return top


def exact_knn(corpus_emb: np.ndarray, query_emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` by inner product, equal to ``IndexFlatIP.search`` on the same vectors (scores bit for
    bit, the same documents), on the caller's array (a memory map is not copied into an index), through BLAS.

    faiss 1.15 takes BLAS only when queries x dimensions reaches ``distance_compute_blas_threshold``
    (128,000: 334 queries of 384 dimensions); below it a sequential loop, several times slower, whose sums
    round differently. So that the results stay those of the flat index: at or above the threshold this is
    the flat index's own routine (``faiss.knn``); below it, BLAS picks twice ``k`` candidates, their scores
    are recomputed with the sequential loop's own kernel (``fvec_inner_products_by_idx``), and the top ``k``
    is taken by (score, row) as the sequential heap keeps it. A query is safe when its ``k``-th recomputed
    score exceeds the best score BLAS left out by more than twice the float32 error bound of a
    ``d``-term dot product (``2 d 2^-24 |q| max|x|``); any other query is searched by the sequential loop.
    """
    faiss = _faiss()
    xq = np.ascontiguousarray(query_emb, dtype=np.float32)
    xb = corpus_emb if corpus_emb.dtype == np.float32 and corpus_emb.flags.c_contiguous else \
        np.ascontiguousarray(corpus_emb, dtype=np.float32)
    nq, d = xq.shape
    n, k = len(xb), int(min(k, len(xb)))
    threshold = faiss.cvar.distance_compute_blas_threshold
    if nq * d >= threshold or nq == 0 or k == 0:
        return faiss.knn(xq, xb, k, faiss.METRIC_INNER_PRODUCT)
    kc = min(n, 2 * k + 16)
    faiss.cvar.distance_compute_blas_threshold = 0
    try:
        blas_scores, cand = faiss.knn(xq, xb, kc, faiss.METRIC_INNER_PRODUCT)
    finally:
        faiss.cvar.distance_compute_blas_threshold = threshold
    cand = np.ascontiguousarray(cand, dtype=np.int64)
    exact = np.empty(cand.shape, dtype=np.float32)
    faiss.fvec_inner_products_by_idx(faiss.swig_ptr(exact), faiss.swig_ptr(xq), faiss.swig_ptr(xb),
                                     faiss.swig_ptr(cand), d, nq, kc)
    order = np.stack([np.lexsort((cand[i], -exact[i])) for i in range(nq)])
    ranked = np.take_along_axis(exact, order, axis=1)
    scores, labels = ranked[:, :k].copy(), np.take_along_axis(cand, order[:, :k], axis=1)
    # a tie across the k-th place: which of the tied rows the sequential heap keeps is its own business
    unsafe = ranked[:, k - 1] == ranked[:, k] if kc > k else np.zeros(nq, dtype=bool)
    if kc < n:
        bound = 2.0 * d * 2.0 ** -24 * np.linalg.norm(xq, axis=1) * _max_row_norm(xb)
        unsafe |= ~(scores[:, k - 1] > blas_scores[:, kc - 1] + 2 * bound)
    unsafe = np.flatnonzero(unsafe)
    if len(unsafe):
        log.info("exact search: %d of %d queries near the candidate cut, searched by the sequential loop",
                 len(unsafe), nq)
        s2, l2 = faiss.knn(xq[unsafe], xb, k, faiss.METRIC_INNER_PRODUCT)  # below the threshold: sequential
        scores[unsafe], labels[unsafe] = s2, l2
    return scores, labels


def build_faiss(emb: np.ndarray, index_spec: dict):
    faiss = _faiss()

    kind = index_spec["kind"]
    dim = emb.shape[1]
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "ivf":
        nlist = int(index_spec.get("nlist") or max(1, int(4 * np.sqrt(len(emb)))))
        nlist = min(nlist, len(emb))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(int(index_spec["seed"]))
        n_train = min(256 * nlist, int(index_spec.get("max_train") or 256 * nlist))
        if n_train < 39 * nlist:
            log.warning("IVF: training on %d vectors for %d lists (faiss asks for at least 39 per list); raise "
                        "max_train or lower nlist", min(n_train, len(emb)), nlist)
        sample = emb if len(emb) <= n_train else emb[rng.choice(len(emb), n_train, replace=False)]
        log.info("IVF: %d lists trained on %d of %d vectors", nlist, len(sample), len(emb))
        index.cp.seed = int(index_spec["seed"])
        index.train(sample)
        index.nprobe = int(index_spec["nprobe"])
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(index_spec["m"]), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(index_spec["ef_construction"])
        index.hnsw.efSearch = int(index_spec["ef_search"])
    else:
        raise InputError(f"unknown FAISS index kind {kind!r}.", fix="use flat, ivf or hnsw.")
    index.add(emb)
    return index


def search(corpus_emb: np.ndarray, doc_ids: list[str], query_emb: np.ndarray, query_ids: list[str], k: int,
           index_spec: dict | None = None, threads: int = 1, drop_identical_ids: bool = False) -> tuple[dict, dict]:
    """Top-``k`` by inner product for all queries in one batch. Returns (run, info). Exact search (``flat``)
    runs :func:`exact_knn` on ``corpus_emb`` itself; the approximate indexes copy it into the index.
    ``drop_identical_ids``: a document whose id is the query's is skipped and the top ``k`` of the others kept, as
    BEIR's exact search does (R2MED's protocol); ``info["identical_ids_dropped"]`` counts them."""
    faiss = _faiss()
    faiss.omp_set_num_threads(max(1, threads))
    index_spec = index_spec or {"kind": "flat"}
    k_eff = min(len(doc_ids), k + max(10, k // 10))
    phase(f"searching {len(query_ids)} queries over {len(doc_ids)} documents ({index_spec['kind']})")
    start = time.perf_counter()
    if index_spec["kind"] == "flat":
        built = time.perf_counter()
        scores, idx = exact_knn(corpus_emb, query_emb, k_eff)
    else:
        index = build_faiss(corpus_emb, index_spec)
        built = time.perf_counter()
        scores, idx = index.search(np.ascontiguousarray(query_emb, dtype=np.float32), k_eff)
    searched = time.perf_counter()
    info = {"kind": index_spec["kind"], "build_seconds": round(built - start, 4),
            "search_seconds": round(searched - built, 4), "queries": len(query_ids), "documents": len(doc_ids)}
    if index_spec["kind"] != "flat":
        _, exact_idx = exact_knn(corpus_emb, query_emb, min(k, len(doc_ids)))
        overlap = [len(set(a[a >= 0][:k]) & set(b[b >= 0])) / max(1, len(b[b >= 0]))
                   for a, b in zip(idx, exact_idx)]
        info["recall_vs_exact_at_k"] = round(float(np.mean(overlap)), 5)
        log.info("%s search recall@%d against exact search: %.4f", info["kind"], k, info["recall_vs_exact_at_k"])
    run: dict[str, dict[str, float]] = {}
    dropped = 0
    for qi, qid in enumerate(query_ids):
        pairs = [(doc_ids[j], round(float(s), 6)) for s, j in zip(scores[qi], idx[qi]) if j >= 0]
        if drop_identical_ids:
            kept = [p for p in pairs if p[0] != qid]
            dropped += len(pairs) - len(kept)
            pairs = kept
        pairs.sort(key=lambda x: (-x[1], x[0]))  # which equal scores make the cut at k: the smaller ids (the run file
        run[qid] = dict(pairs[:k])               # then lists the chosen ones in trec_eval's order)
    if drop_identical_ids:
        info["identical_ids_dropped"] = dropped
    log.info("searched %d queries over %d documents: %s", len(query_ids), len(doc_ids), info)
    return run, info


# ------------------------------------------------------------------ CliniQ's eval.py ranking

def sklearn_normalize(x: np.ndarray) -> np.ndarray:
    """``sklearn.preprocessing.normalize(x)`` (L2, rows) as ``cosine_similarity`` calls it on a dense array: a copy,
    row norms by ``einsum`` and ``sqrt``, norms below 10 machine epsilons replaced by 1, division in place."""
    x = np.array(x, copy=True)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0
    x /= norms[:, None]
    return x


def numpy_sort_info() -> dict:
    """What decides ``np.argsort``'s order of equal values: numpy's version and the SIMD extensions its sorting
    dispatches on (x86-simd-sort / Highway on AVX2 and AVX-512 machines)."""
    info = {"numpy": np.__version__}
    try:
        from numpy._core import _multiarray_umath as umath

        info["simd"] = list(umath.__cpu_baseline__) + [k for k in umath.__cpu_dispatch__
                                                      if umath.__cpu_features__.get(k)]
    except (ImportError, AttributeError):  # a numpy without these introspection names
        info["simd"] = None
    return info


def evalpy_rank(corpus_emb: np.ndarray, doc_ids: list[str], query_emb: np.ndarray, query_ids: list[str],
                k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Each query's top ``k`` as CliniQ's ``eval.py`` ranks the corpus: ``similarities =
    cosine_similarity([q_emb], corpus_embeds)[0]`` (scikit-learn: both sides L2-normalised as ``sklearn_normalize``
    does, then ``X @ Y.T``; float32 when both are float32, else float64), ranked by ``np.argsort(-similarities)``
    with numpy's default sort kind, which does not keep equal values in corpus order. Returns (offsets, each
    entry's row in ``doc_ids``, its similarity, info) with each query's entries in that order: a full-depth run as
    arrays (``runs.write_arrays(..., keep_order=True)`` writes it as it is), never as a dict per query."""
    start = time.perf_counter()
    dtype = np.float32 if corpus_emb.dtype == np.float32 and query_emb.dtype == np.float32 else np.float64
    corpus = sklearn_normalize(np.asarray(corpus_emb, dtype=dtype))
    queries = np.asarray(query_emb, dtype=dtype)
    k = min(int(k), len(doc_ids))
    docs = np.empty(len(query_ids) * k, dtype=np.int32)
    scores = np.empty(len(query_ids) * k, dtype=dtype)
    for qi in range(len(query_ids)):
        sims = (sklearn_normalize(queries[qi:qi + 1]) @ corpus.T)[0]
        order = np.argsort(-sims)[:k]
        docs[qi * k:(qi + 1) * k], scores[qi * k:(qi + 1) * k] = order, sims[order]
    offsets = np.arange(len(query_ids) + 1, dtype=np.int64) * k
    info = {"kind": "evalpy", "search_seconds": round(time.perf_counter() - start, 4), "queries": len(query_ids),
            "documents": len(doc_ids), "dtype": np.dtype(dtype).name, **numpy_sort_info()}
    log.info("ranked %d queries over %d documents as CliniQ's eval.py does (cosine, np.argsort): %s",
             len(query_ids), len(doc_ids), info)
    return offsets, docs, scores, info

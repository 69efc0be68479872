"""Benchmark: the exact dense search job at scale, this checkout against an anchor commit, paired.

    python bench/faiss_exact.py [--passages 1000000] [--queries 100] [--anchor db73a08] [--repeats 3]

Generates (seeded, in a temporary folder) a corpus of --passages 64-word passages in the pipeline's internal
JSONL (as bench/scale.py does), 384-d unit vectors for them written as the gathered ``corpus.npy`` with
``corpus_ids.txt`` and the gather info (``corpus.json``, the id-list hash), and --queries unit query vectors.
Then, for each repeat, two child processes in turn, each timed whole with its peak RSS, each doing what
``retrieve_dense`` does for an exact (``flat``) index with top 100 on 2 threads:

* ``job``: this checkout: the embeddings memory-mapped, the id order checked against the stored hash (the
  corpus is not read), ``faiss.knn`` through BLAS on the memory map;
* ``job@<anchor>``: the anchor's ``src/`` (``git archive``): the id order checked by reading the whole
  corpus JSONL, the vectors copied into an ``IndexFlatIP``, whose search takes faiss's sequential path below
  queries x dims = 128,000.

Prints medians, the median of the paired speed-ups, each side's search seconds (from the search info), and
how many lines of the two run files differ (below the BLAS threshold the float32 sums can differ in their
last bit; 0 expected above it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paired import REPO, anchor_src, env_with, median, summary, timed  # noqa: E402

sys.path.insert(0, str(REPO / "src"))

JOB = r"""
import inspect, json, sys
import numpy as np
from r2med_eval import runs
try:  # the layout of subpackages (dense/search.py, dense/embeddings.py)
    from r2med_eval.dense.embeddings import load_corpus_embeddings
    from r2med_eval.dense.search import search
except ImportError:
    try:  # an anchor after dense.py was split into dense_models, dense_encode, embeddings and dense_search
        from r2med_eval.dense_search import search
        from r2med_eval.embeddings import load_corpus_embeddings
    except ImportError:  # an anchor before the split
        from r2med_eval.dense import load_corpus_embeddings, search
side, work, out = sys.argv[1], sys.argv[2], sys.argv[3]
q = np.load(f"{work}/queries.npy")
qids = [f"q{i}" for i in range(len(q))]
if "info_path" in inspect.signature(load_corpus_embeddings).parameters:
    emb, ids = load_corpus_embeddings(f"{work}/corpus.npy", f"{work}/corpus_ids.txt", dim=q.shape[1],
                                      info_path=f"{work}/corpus.json")
else:
    emb, ids = load_corpus_embeddings(f"{work}/corpus.npy", f"{work}/corpus_ids.txt", f"{work}/corpus.jsonl",
                                      dim=q.shape[1])
run, info = search(emb, ids, q, qids, 100, {"kind": "flat"}, threads=2)
runs.write_run(run, out, tag="dense", query_order=sorted(run))
print(json.dumps(info))
"""


def generate(work: Path, n: int, n_queries: int) -> None:
    import numpy as np
    from scale import DIM, generate_corpus, random_vectors

    from r2med_eval.dense import embeddings

    generate_corpus(work, n, 64, 1)
    ids = [f"p{i}" for i in range(n)]
    np.save(work / "corpus.npy", random_vectors(n, seed=1))
    (work / "corpus_ids.txt").write_text("\n".join(ids) + "\n")
    (work / "corpus.json").write_text(json.dumps({"documents": n, "dim": DIM, "dtype": "float32",
                                                  "ids_sha256": embeddings.ids_digest(ids)}))
    np.save(work / "queries.npy", random_vectors(n_queries, seed=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--anchor", default="db73a08")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-faiss-") as tmp:
        tmp = Path(tmp)
        generate(tmp, args.passages, args.queries)
        anchor = anchor_src(args.anchor, tmp / "anchor")
        sides = {"job": (env_with(REPO / "src"), tmp / "job.trec"),
                 f"job@{args.anchor}": (env_with(anchor), tmp / "anchor.trec")}
        walls = {s: [] for s in sides}
        rss = {s: [] for s in sides}
        search_s = {s: [] for s in sides}
        for rep in range(args.repeats):
            for side, (env, out) in sides.items():
                wall, peak, text = timed([sys.executable, "-c", JOB, side, str(tmp), str(out)], env=env)
                info = json.loads(text.strip().splitlines()[-1])
                walls[side].append(wall)
                rss[side].append(peak)
                search_s[side].append(info["build_seconds"] + info["search_seconds"])
                print(f"repeat {rep + 1}: {side:<14} {wall:7.2f} s {peak:7.0f} MB, index+search "
                      f"{search_s[side][-1]:.2f} s", flush=True)
        a = (tmp / "job.trec").read_text().splitlines()
        b = (tmp / "anchor.trec").read_text().splitlines()
        differ = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
        print(f"{args.passages} passages x 384 dims, {args.queries} queries, top 100, 2 threads")
        for line in summary("exact dense search job", walls, rss, f"job@{args.anchor}", ["job"]):
            print(line)
        ratios = [x / y for x, y in zip(search_s[f"job@{args.anchor}"], search_s["job"])]
        print(f"index+search seconds: job {median(search_s['job']):.2f}, job@{args.anchor} "
              f"{median(search_s[f'job@{args.anchor}']):.2f} ({median(ratios):.1f}x, median of pairs)")
        print(f"run file lines that differ from job@{args.anchor}: {differ} of {len(b)}")


if __name__ == "__main__":
    main()

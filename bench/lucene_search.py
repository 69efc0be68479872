"""Benchmark: the Lucene BM25 retrieve job against pyserini's search CLI and against the anchor's job.

    python bench/lucene_search.py [--data ../shared/data/medquad-liveqa] [--anchor db73a08] [--repeats 5]

Builds one Lucene index of the task (``r2med_eval.lexical.lucene.build_index``, untimed), then, for each repeat, runs
three child processes in turn on the same index and queries, each timed whole (Python start, imports, JVM
start, index open, search, run file written) with its peak RSS:

* ``job``: this checkout's retrieve job, ``lucene.search`` + ``runs.write_run`` (BM25 k1 0.9, b 0.4,
  top 1000, 2 threads), which opens Anserini's ``SimpleSearcher`` through jnius alone;
* ``job@<anchor>``: the same two calls with the anchor commit's ``src/`` (``git archive``) on PYTHONPATH,
  which imported ``pyserini.search.lucene`` (and with it torch, transformers, scikit-learn);
* ``pyserini-cli``: ``python -m pyserini.search.lucene --bm25 --k1 0.9 --b 0.4 --hits 1000 --threads 2
  --batch-size 64`` on a topics TSV of the same queries.

Prints the medians and the median of the paired ratios to the CLI (target: the job at most 0.5x the CLI's
wall) and checks that the job's run file is byte-identical to the anchor's (exit 1 if not).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paired import REPO, anchor_src, env_with, summary, timed  # noqa: E402

sys.path.insert(0, str(REPO / "src"))

JOB = r"""
import sys
from r2med_eval import lucene, runs
run = lucene.search(sys.argv[1], sys.argv[2], k1=0.9, b=0.4, k=1000, threads=2)
runs.write_run(run, sys.argv[3], tag="bm25")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "medquad-liveqa"),
                        help="a BEIR-layout task (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--layout", default="beir")
    parser.add_argument("--anchor", default="db73a08", help="the commit whose job is measured beside this one")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from r2med_eval.benchmarks import datasets
    from r2med_eval.lexical import lucene

    with tempfile.TemporaryDirectory(prefix="bench-lucene-") as tmp:
        tmp = Path(tmp)
        ds = datasets.load(args.layout, args.data, duplicate_qrels="max", unknown_qrels="keep")
        datasets.write_internal(ds, tmp / "task")
        with open(tmp / "topics.tsv", "w", encoding="utf-8") as handle:
            for qid, text in ds.queries.items():
                handle.write(qid + "\t" + " ".join(text.split()) + "\n")
        lucene.build_index(tmp / "task" / "corpus.jsonl", tmp / "index", threads=2)
        anchor = anchor_src(args.anchor, tmp / "anchor")
        from r2med_eval.lexical.java import java_env

        queries = tmp / "task" / "queries.jsonl"
        sides = {
            "job": ([sys.executable, "-c", JOB, tmp / "index", queries, tmp / "job.trec"], env_with(REPO / "src")),
            f"job@{args.anchor}": ([sys.executable, "-c", JOB, tmp / "index", queries, tmp / "anchor.trec"],
                                   env_with(anchor)),
            "pyserini-cli": ([sys.executable, "-m", "pyserini.search.lucene", "--index", tmp / "index", "--topics",
                              tmp / "topics.tsv", "--output", tmp / "cli.trec", "--bm25", "--k1", "0.9", "--b",
                              "0.4", "--hits", "1000", "--threads", "2", "--batch-size", "64"], java_env()),
        }
        walls = {s: [] for s in sides}
        rss = {s: [] for s in sides}
        for rep in range(args.repeats):
            for side, (cmd, env) in sides.items():
                wall, peak, _ = timed([str(c) for c in cmd], env=env, cwd=tmp)
                walls[side].append(wall)
                rss[side].append(peak)
                print(f"repeat {rep + 1}: {side:<22} {wall:6.2f} s {peak:6.0f} MB", flush=True)
        identical = (tmp / "job.trec").read_bytes() == (tmp / "anchor.trec").read_bytes()
        print(f"data: {args.data} ({len(ds.corpus)} documents, {len(ds.queries)} queries)")
        for line in summary("Lucene BM25 search job", walls, rss, "pyserini-cli", ["job", f"job@{args.anchor}"]):
            print(line)
        ratios = [a / j for a, j in zip(walls[f"job@{args.anchor}"], walls["job"])]
        print(f"job speed-up over job@{args.anchor}: {sorted(ratios)[len(ratios) // 2]:.2f}x (median of pairs)")
        print(f"run file byte-identical to job@{args.anchor}: {identical}")
        if not identical:
            raise SystemExit(1)


if __name__ == "__main__":
    main()

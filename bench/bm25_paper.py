"""Benchmark: the paper-faithful BM25 jobs against R2MED's official code and against the anchor's job.

    python bench/bm25_paper.py [--data ../shared/data/medquad-liveqa] [--layout beir] [--anchor db73a08] [--repeats 3]

Every side runs as child processes, timed whole by this script (Python start, imports, JVM start, reading
the data, writing the run), one after the other in each repeat; medians and the median of the paired
ratios are printed:

* ``official``: R2MED's retrieval_bm25 (src/eval_BM25.py @ 62b7074) as written: one pyserini
  ``Analyzer.analyze`` call per text, gensim ``Dictionary`` / ``LuceneBM25Model`` /
  ``SparseMatrixSimilarity``, then a loop over the queries that scores every document, builds a dict of
  all of them and sorts it to keep the top 100.
* ``first run``: the pipeline's three jobs in turn, as Snakemake runs them for a new task: ``analyse_bm25_paper``
  (the corpus and the task's queries through the Lucene analyzer in one JVM, batched, stored),
  ``fit_bm25_paper`` (the BM25 weights for k1 0.9, b 0.4, stored) and ``retrieve_bm25_paper`` (the stored
  query tokens searched by one sparse product; no JVM).
* ``cached run``: ``retrieve_bm25_paper`` alone, as for a second run of the task's queries on the same task
  and (k1, b) (another top_k, a second model entry): the analysed corpus and queries and the fit are rule
  outputs. (A query-variant run analyses its texts in the job, so it starts a JVM: not measured here.)
* ``job@<anchor>``: the anchor's single retrieve job (its ``src/`` from ``git archive``): analysis, fit and
  search in one process, every run.

The per-phase seconds inside the official and first-run processes are printed too. Exits 1 unless every
side's run file is byte-identical to the official one (same documents, order and float32 scores).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RULE_THREADS = 2  # rules/index.smk: analyse_bm25_paper's threads (tests/test_bm25_paper.py checks they agree)
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))


def load(data: str, layout: str):
    from r2med_eval.benchmarks import datasets

    ds = datasets.load(layout, data, duplicate_qrels="max", unknown_qrels="keep")
    ids = list(ds.corpus)
    return ids, [datasets.doc_contents(ds.corpus[d]) for d in ids], list(ds.queries), list(ds.queries.values())


def run_official(ids, docs, qids, queries) -> tuple[dict, dict]:
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    from r2med_eval.lexical.bm25_paper import LuceneAnalyzer

    t = {}
    start = time.perf_counter()
    analyzer = LuceneAnalyzer()
    corpus = [analyzer.analyze_one(x) for x in docs]
    t["tokenize_docs_s"] = time.perf_counter() - start
    start = time.perf_counter()
    dictionary = Dictionary(corpus)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    bm25_corpus = model[list(map(dictionary.doc2bow, corpus))]
    index = SparseMatrixSimilarity(bm25_corpus, num_docs=len(corpus), num_terms=len(dictionary),
                                   normalize_queries=False, normalize_documents=False)
    t["index_s"] = time.perf_counter() - start
    start = time.perf_counter()
    results = {}
    for qid, query in zip(qids, queries):
        bm25_query = model[dictionary.doc2bow(analyzer.analyze_one(query))]
        similarities = index[bm25_query].tolist()
        scores = dict(zip(ids, similarities))
        results[qid] = dict(sorted(scores.items(), key=lambda x: x[1], reverse=True)[:100])
    t["queries_s"] = time.perf_counter() - start
    return results, t


def run_ours(ids, docs, qids, queries) -> tuple[dict, dict]:
    from r2med_eval.lexical.bm25_paper import BM25Paper, LuceneAnalyzer

    t = {}
    start = time.perf_counter()
    analyzer = LuceneAnalyzer()
    doc_tokens = analyzer.analyze(docs)
    t["tokenize_docs_s"] = time.perf_counter() - start
    start = time.perf_counter()
    model = BM25Paper(0.9, 0.4).fit(doc_tokens)
    t["index_s"] = time.perf_counter() - start
    start = time.perf_counter()
    hits = model.search(analyzer.analyze(queries), k=100)
    results = {q: {ids[i]: float(v) for i, v in zip(idx.tolist(), val.tolist())} for q, (idx, val) in zip(qids, hits)}
    t["queries_s"] = time.perf_counter() - start
    return results, t


JOB = r"""
import json, sys, time
from pathlib import Path
from types import SimpleNamespace
from r2med_eval import bm25_paper, datasets, io, runs

class Named(dict):
    __getattr__ = dict.__getitem__
    def __iter__(self):
        return iter(self.values())

def job(inputs, outputs, spec):
    return SimpleNamespace(input=Named(inputs), output=Named(outputs), params=SimpleNamespace(spec=spec),
                           wildcards=SimpleNamespace(benchmark="b", task="t", model="bm25-paper"), threads=threads)

side, work, threads = sys.argv[1], Path(sys.argv[2]), int(sys.argv[4])
spec = {"k1": 0.9, "b": 0.4, "top_k": 100, "fill_zero": True, "private": False}
if side == "analyse":
    from r2med_eval.stages import index
    index.analyse_bm25_paper(job({"corpus": work / "corpus.jsonl", "queries": work / "queries.jsonl"},
                                 {"tokens": work / "tokens.npz", "query_tokens": work / "query_tokens.npz"}, spec))
elif side == "fit":
    from r2med_eval.stages import index
    index.fit_bm25_paper(job({"tokens": work / "tokens.npz"}, {"model": work / "fit.npz"}, spec))
elif side == "search":
    from r2med_eval.stages import retrieve
    retrieve.retrieve_bm25_paper(job({"model": work / "fit.npz", "queries": work / "queries.jsonl",
                                      "query_tokens": work / "query_tokens.npz"},
                                     {"run": work / sys.argv[3], "info": work / (sys.argv[3] + ".json")}, spec))
else:  # the anchor's retrieve_bm25_paper stage, written out (its rule read the corpus and did everything)
    corpus = datasets.read_corpus(work / "corpus.jsonl")
    queries = datasets.read_queries(work / "queries.jsonl")
    ids = list(corpus)
    run, info = bm25_paper.retrieve(ids, [datasets.doc_contents(corpus[d]) for d in ids], list(queries),
                                    list(queries.values()), k1=0.9, b=0.4, top_k=100, fill_zero=True)
    runs.write_run(run, work / "anchor.trec", tag="bm25-paper", decimals=8)
    io.write_json(work / "anchor.trec.json", info)
"""


def child(side: str, data: str, layout: str, out: str) -> None:
    ids, docs, qids, queries = load(data, layout)
    start = time.perf_counter()
    results, t = (run_official if side == "official" else run_ours)(ids, docs, qids, queries)
    t["total_s"] = time.perf_counter() - start
    t["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out).write_text(json.dumps({"timings": t, "run": {q: list(r.items()) for q, r in results.items()},
                                     "documents": len(ids), "queries": len(qids)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "medquad-liveqa"))
    parser.add_argument("--layout", default="beir")
    parser.add_argument("--anchor", default="db73a08", help="the commit whose retrieve job is measured alongside")
    parser.add_argument("--repeats", "--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=RULE_THREADS,
                        help=f"the jobs' threads (default {RULE_THREADS}: analyse_bm25_paper's threads in "
                             "rules/index.smk; the analyzer runs that many Java threads)")
    parser.add_argument("--child", choices=["official", "ours"])
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.layout, args.out)
        return
    from _paired import anchor_src, env_with, median, summary, timed

    from r2med_eval.benchmarks import datasets
    from r2med_eval.scoring import runs

    with tempfile.TemporaryDirectory(prefix="bench-bm25-paper-") as tmp:
        tmp = Path(tmp)
        ds = datasets.load(args.layout, args.data, duplicate_qrels="max", unknown_qrels="keep")
        datasets.write_internal(ds, tmp)
        anchor = anchor_src(args.anchor, tmp / "anchor")
        ours = env_with(REPO / "src")
        walls = {s: [] for s in ("official", "first run", "cached run", f"job@{args.anchor}")}
        rss = {s: [] for s in walls}
        phases = {"official": [], "ours": []}
        for rep in range(args.repeats):
            for f in ("tokens.npz", "query_tokens.npz", "fit.npz"):
                (tmp / f).unlink(missing_ok=True)
            wall, peak, _ = timed([sys.executable, __file__, "--child", "official", "--data", args.data, "--layout",
                                   args.layout, "--out", str(tmp / "official.json")], env=ours)
            walls["official"].append(wall)
            rss["official"].append(peak)
            first = [timed([sys.executable, "-c", JOB, step, str(tmp), "first.trec", str(args.threads)], env=ours)
                     for step in ("analyse", "fit", "search")]
            walls["first run"].append(sum(w for w, _, _ in first))
            rss["first run"].append(max(p for _, p, _ in first))
            wall, peak, _ = timed([sys.executable, "-c", JOB, "search", str(tmp), "cached.trec", str(args.threads)],
                                  env=ours)
            walls["cached run"].append(wall)
            rss["cached run"].append(peak)
            wall, peak, _ = timed([sys.executable, "-c", JOB, "anchor", str(tmp), "anchor.trec", str(args.threads)],
                                  env=env_with(anchor))
            walls[f"job@{args.anchor}"].append(wall)
            rss[f"job@{args.anchor}"].append(peak)
            print(f"repeat {rep + 1}: " + ", ".join(f"{s} {w[-1]:.2f} s" for s, w in walls.items()), flush=True)
            res = json.loads((tmp / "official.json").read_text())
            phases["official"].append(res["timings"])
        official = {q: dict(r) for q, r in res["run"].items()}
        runs.write_run(official, tmp / "official.trec", tag="bm25-paper", decimals=8)
        reference = (tmp / "official.trec").read_bytes()
        same = {name: (tmp / name).read_bytes() == reference for name in ("first.trec", "cached.trec", "anchor.trec")}
        print(f"data: {args.data} ({res['documents']} documents, {res['queries']} queries); the pipeline's jobs "
              f"with threads={args.threads}, the official code as written (one Python thread)")
        print("official phases (median s): " + ", ".join(
            f"{k} {median([p[k] for p in phases['official']]):.2f}"
            for k in ("tokenize_docs_s", "index_s", "queries_s")))
        for line in summary("bm25-paper end to end", walls, rss, "official",
                            ["first run", "cached run", f"job@{args.anchor}"]):
            print(line)
        for base in (f"job@{args.anchor}",):
            for side in ("first run", "cached run"):
                ratios = [b / s for b, s in zip(walls[base], walls[side])]
                print(f"{side} speed-up over {base}: {median(ratios):.2f}x (median of pairs)")
        print(f"run files byte-identical to the official code's: {same}")
        if not all(same.values()):
            raise SystemExit(1)


if __name__ == "__main__":
    main()

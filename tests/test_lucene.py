"""Lucene BM25 search through Anserini's SimpleSearcher, opened with jnius alone, against the pyserini
``LuceneSearcher`` path it replaces (the code at db73a08): byte-identical run files, ours from a JVM
started with ``java.SHORT_JOB_OPTIONS``, the reference from one with the JVM's defaults."""
import subprocess
import sys

import pytest
from conftest import REPO, shared_dataset

# The search as db73a08 ran it: pyserini's LuceneSearcher, set_bm25, batch_search with a margin, re-ranked
# by (score rounded to 6 decimals, doc id). Run in a fresh process so that pyserini sets up nothing of ours.
REFERENCE = r"""
import sys
from r2med_eval.benchmarks import datasets
from r2med_eval.lexical.java import configure_java
from r2med_eval.scoring import runs
configure_java()
from pyserini.search.lucene import LuceneSearcher
index, queries_path, k, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
queries = datasets.read_queries(queries_path)
qids = list(queries)
searcher = LuceneSearcher(index)
searcher.set_bm25(0.9, 0.4)
margin = max(50, k // 10)
hits = searcher.batch_search([queries[q] for q in qids], qids, k=k + margin, threads=2)
run = {}
for qid in qids:
    scored = [(h.docid, round(float(h.score), 6)) for h in hits.get(qid, [])]
    scored.sort(key=lambda x: (-x[1], x[0]))
    run[qid] = dict(scored[:k])
runs.write_run(run, out, tag="bm25")
"""

OURS = r"""
import sys
from r2med_eval.lexical import lucene
from r2med_eval.scoring import runs
index, queries_path, k, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
run = lucene.search(index, queries_path, k1=0.9, b=0.4, k=k, threads=2)
runs.write_run(run, out, tag="bm25")
print("pyserini.search imported:", any(m.startswith("pyserini.search") for m in sys.modules))
print("torch imported:", "torch" in sys.modules)
from jnius import autoclass
print("jvm options:", list(autoclass("java.lang.management.ManagementFactory").getRuntimeMXBean().getInputArguments()))
"""


def _python(code: str, *args) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def _compare(tmp_path, layout: str, data, k: int) -> None:
    from r2med_eval.benchmarks import datasets
    from r2med_eval.lexical import lucene

    ds = datasets.load(layout, data, duplicate_qrels="max", unknown_qrels="keep")
    datasets.write_internal(ds, tmp_path / "task")
    lucene.build_index(tmp_path / "task" / "corpus.jsonl", tmp_path / "index", threads=2)
    args = (tmp_path / "index", tmp_path / "task" / "queries.jsonl", k)
    out = _python(OURS, *args, tmp_path / "ours.trec")
    _python(REFERENCE, *args, tmp_path / "reference.trec")
    ours, reference = (tmp_path / "ours.trec").read_bytes(), (tmp_path / "reference.trec").read_bytes()
    assert ours.count(b"\n") > len(ds.queries)  # the runs hold hits, not only empty files
    assert ours == reference
    assert "pyserini.search imported: False" in out and "torch imported: False" in out, out
    # ours ran on a JVM with the short-job options (serial GC, C1 only), the reference on the JVM's defaults
    assert "-XX:TieredStopAtLevel=1" in out and "-XX:+UseSerialGC" in out, out


def test_search_without_pyserini_equals_pyserini_searcher_on_demo(tmp_path, demo_path):
    _compare(tmp_path, "r2med", demo_path, k=100)


@pytest.mark.slow
def test_search_without_pyserini_equals_pyserini_searcher_on_medquad(tmp_path):
    _compare(tmp_path, "beir", shared_dataset("medquad-liveqa"), k=1000)

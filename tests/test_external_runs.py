"""Bring your own run (model type ``run``): a TREC run produced outside the pipeline is validated, copied into
results/runs/ in our order, and scored, fused and reported like any run, on the R2MED demo and CliniQ's demo."""
import csv
import json
import re
from collections import Counter

import pytest
import yaml
from conftest import DEMOS_BENCHMARKS, REPO, snakemake, workflow_dir
from test_workflow import planned_jobs

from r2med_eval.errors import ConfigError, InputError
from r2med_eval.scoring import runs
from r2med_eval.workflow import config as r2config
from r2med_eval.workflow.control import Workflow

DOCS = ["d1", "d2", "d3"]
QUERIES = ["q1", "q2"]


# ---------------------------------------------------------------- validation, one message naming file and line


@pytest.mark.parametrize("text, line, words", [
    ("q1 Q0 d1 1 0.9 x\nq1 Q0 d9 2 0.5 x\nq2 Q0 d1 1 0.3 x\n", 2,
     "the document id of this line (its 3rd field) is not in"),
    ("q1 Q0 d1 1 0.9 x\nq1 Q0 d1 2 0.5 x\nq2 Q0 d1 1 0.3 x\n", 2,
     "the document of this line appears twice for its query (first on line 1)"),
    ("q1 Q0 d1 1 0.9 x\nq2 Q0 d2 1 high x\n", 2,
     "the score (5th field, 4 characters) is not a number (trec_eval, with C's atof, would read it as 0)"),
    ("q1 Q0 d1 1 nan x\n", 1, "the score (5th field, 3 characters) is NaN or infinite"),
    ("q1 Q0 d1 1 -Infinity x\n", 1, "the score (5th field, 9 characters) is NaN or infinite"),
    # Python's float reads these, trec_eval (C's atof) reads another number
    ("q1 Q0 d1 1 1_000 x\n", 1, "holds an underscore between digits, which Python's float skips and trec_eval's "
                                "atof stops at"),
    ("q1 Q0 d1 1 \uff11\uff12 x\n", 1, "holds digits other than ASCII 0-9"),
    ("q1 Q0 d1 1 0.5abc x\n", 1, "has other characters after its number (trec_eval, with C's "
                                 "atof, would read only the number"),
    ("q1 Q0 d1 1 0x1p-3 x\n", 1, "the score (5th field, 6 characters) is a hexadecimal float, which Python's float "
                                 "does not read"),
    ("q1 Q0 d1 1 1e999 x\n", 1, "the score (5th field) is beyond a double's range"),
    ("q1 Q0 d1 1 0.9 x\nq7 Q0 d2 1 0.8 x\n", 2,
     "the query id of this line (its 1st field) is not a query of this task"),
    ("q1 Q0 d1 1 0.9\n", 1, "expected 6 columns"),
    # not UTF-8 text
    (b"q1 Q0 d1 1 0.9 x\nq1 Q0 d\xe9 2 0.5 x\n", 2, "bytes that are not UTF-8 at column 8 (a binary or compressed "
                                                    "file, or another encoding?). Fix: write the run as UTF-8 text"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03 q1 Q0\n", 1, "a NUL byte at column 4 (a binary"),  # gzip
    (b"\xff\xfeq\x001\x00", 1, "a NUL byte at column 4"),  # UTF-16 with its byte order mark
    (b"q1 Q0 d1 1 0.9 x\n\x89PNG\r\n", 2, "bytes that are not UTF-8 at column 1"),
    ("q1 Q0 d1 1 0.9 x\n".encode("utf-16"), 1, "a NUL byte at column 4 (a binary or UTF-16 file?). Fix: write the "
                                               "run as UTF-8 text"),
])
def test_malformed_run_stops_with_one_message_naming_file_and_line(tmp_path, text, line, words):
    path = tmp_path / "mine.trec"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError) as err:
        runs.validate_external_run(path, DOCS, QUERIES)
    message = str(err.value)
    assert message.startswith(f"{path}, line {line}: ") and words in message and " Fix: " in message
    assert "\n" not in message


def test_scores_trec_eval_reads_whole_are_accepted_and_comments_skipped(tmp_path):
    """The accepted grammar: [+-] digits [. digits] [e [+-] digits] (or . digits), read whole by C's atof and by
    Python's float alike; lines starting with # are comments, as in trec_eval; fields split at ASCII white space."""
    path = tmp_path / "mine.trec"
    path.write_text("# produced by my system\nq1 Q0 d1 1 1. x\nq1 Q0 d2 2 .5 x\n  # indented comment\n"
                    "q1\tQ0\td3\t3\t+1E-3\tx\r\nq2 Q0 d1 1 -0 x\nq2 Q0 d2 2 007 x\n")
    run, info = runs.validate_external_run(path, DOCS, QUERIES)
    assert run == {"q1": {"d1": 1.0, "d2": 0.5, "d3": 0.001}, "q2": {"d1": 0.0, "d2": 7.0}} and info["lines"] == 5
    nbsp = tmp_path / "nbsp.trec"  # U+00A0 is no separator for trec_eval: the id holds it
    nbsp.write_text("q1 Q0 d1\u00a0x 1 0.5 x\nq2 Q0 d1 1 0.5 x\n")
    with pytest.raises(InputError, match=r"line 1: the document id of this line"):
        runs.validate_external_run(nbsp, DOCS, QUERIES)


def test_a_bad_run_file_leaves_nothing_half_written(tmp_path, monkeypatch):
    """Stage import_run: the file is checked whole before anything is written."""
    from types import SimpleNamespace

    from r2med_eval.stages import retrieve

    monkeypatch.chdir(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"id": "q1", "text": "a"}\n{"id": "q2", "text": "b"}\n')
    (tmp_path / "ids.txt").write_text("d1\nd2\nd3\n")
    source = tmp_path / "mine.trec"
    out = tmp_path / "results" / "runs" / "b" / "t"
    sm = SimpleNamespace(input=SimpleNamespace(queries="queries.jsonl", ids="ids.txt", source=str(source),
                                               keys=lambda: ["queries", "ids", "source"]),
                         output=SimpleNamespace(run=str(out / "mine.trec"), info=str(out / "mine.import.json")),
                         params=SimpleNamespace(spec={"missing_queries": "error"}),
                         wildcards=SimpleNamespace(benchmark="b", task="t", model="mine"))
    for data in (b"q1 Q0 d1 1 0.9 x\nq2 Q0 d2 1 1_000 x\n", b"q1 Q0 d1 1 0.9 x\nq2 Q0 d\xff 1 0.5 x\n"):
        source.write_bytes(data)
        with pytest.raises(InputError, match=f"{source}, line 2: "):
            retrieve.import_run(sm)
        assert not out.exists() or not list(out.iterdir())


def test_missing_query_names_the_run_and_the_querys_line(tmp_path):
    path = tmp_path / "mine.trec"
    path.write_text("q1 Q0 d1 1 0.9 x\n")
    with pytest.raises(InputError) as err:
        runs.validate_external_run(path, DOCS, QUERIES, queries_file="queries.jsonl")
    message = str(err.value)
    assert message.startswith(f"{path}: query 'q2' (line 2 of queries.jsonl) has no line in the run.")
    assert "missing_queries: empty" in message
    run, info = runs.validate_external_run(path, DOCS, QUERIES, missing="empty")
    assert run == {"q1": {"d1": 0.9}} and info["queries_missing"] == 1 and info["missing_query_ids"] == ["q2"]


def test_copy_is_sorted_in_trec_eval_order_at_the_sources_precision(tmp_path):
    """Ranks and line order of the source are ignored: score descending, ties by document id descending (trec_eval's
    order), the scores with the decimals they were written with (so no tie is made by rounding)."""
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    a.write_text("q2 Q0 d3 1 0.5 mine\nq1 Q0 d2 9 0.12345678 mine\nq1 Q0 d3 1 0.12345678 mine\n"
                 "q1 Q0 d1 2 0.123456781 mine\n")
    b.write_text("\n".join(reversed(a.read_text().splitlines())) + "\n")
    outs = []
    for src in (a, b):
        run, info = runs.validate_external_run(src, DOCS, QUERIES)
        out = tmp_path / f"{src.stem}.out"
        runs.write_run(run, out, tag="m", decimals=info["decimals"])
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].decode().splitlines() == ["q1 Q0 d1 1 0.123456781 m", "q1 Q0 d3 2 0.123456780 m",
                                             "q1 Q0 d2 3 0.123456780 m", "q2 Q0 d3 1 0.500000000 m"]


# ---------------------------------------------------------------- configuration

def _config(path_pattern: str, extra: str = "") -> dict:
    return yaml.safe_load(f"""
benchmarks:
  demo: {{layout: r2med, tasks: {{demo: {{path: {REPO / 'data' / 'demo'}}}, """
                          f"""other: {{path: {REPO / 'data' / 'demo'}}}}}}}
models:
  mine: {{type: run, path: "{path_pattern}"{extra}}}
""")


def test_config_checks_of_a_run_model(tmp_path):
    with pytest.raises(ConfigError, match=r"placeholder \{model\}"):
        r2config.validate(_config("runs/{model}/{task}.trec"))
    with pytest.raises(ConfigError, match="gives the same file 'runs/demo.trec' for demo/demo and demo/other"):
        r2config.validate(_config("runs/{benchmark}.trec"))
    cfg = r2config.validate(_config("runs/{benchmark}/{task}.trec"))
    assert cfg["models"]["mine"]["missing_queries"] == "error"
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "demo.trec").write_text("")
    with pytest.raises(ConfigError, match=r"the run file 'runs/demo/other.trec' of task demo/other does not exist"):
        r2config.check_paths(cfg, base=tmp_path)
    (tmp_path / "runs" / "demo" / "other.trec").write_text("")
    r2config.check_paths(cfg, base=tmp_path)
    with pytest.raises(ConfigError, match="can run a query variant"):
        r2config.validate({**_config("runs/{benchmark}/{task}.trec"),
                           "query_variants": [{"benchmark": "demo", "method": "hyde", "llm": "x", "models": ["mine"]}]})


def test_a_run_models_file_is_an_input_and_nothing_else_is(tmp_path):
    cfg = r2config.validate(_config("runs/{benchmark}/{task}.trec", ", description: mine"))
    w = Workflow(cfg)
    wc = type("W", (), {"benchmark": "demo", "task": "other", "model": "mine"})()
    assert w.inputs.import_run(wc) == {"source": "runs/demo/other.trec",
                                       "queries": "results/data/demo/other/queries.jsonl",
                                       "corpus": "results/data/demo/other/corpus.jsonl"}
    spec = w.params.of("import_run")(wc)
    assert set(spec) == {"missing_queries", "code"}
    assert re.fullmatch("mine", w.constraint("run"))


# ---------------------------------------------------------------- end to end: demo and CliniQ's demo


def overlap_run(data_dir, tag="overlap") -> str:
    """A retriever outside the pipeline: query-term overlap, written with its own ranks, tag and line order
    (worst first), at most 50 documents per query."""
    def terms(text):
        return set(re.findall(r"[a-z0-9]+", text.lower()))

    docs = {}
    for line in open(data_dir / "corpus.jsonl", encoding="utf-8"):
        obj = json.loads(line)
        docs[obj["id"]] = terms(obj.get("title", "") + " " + obj["text"])
    lines = []
    for line in open(data_dir / "queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        qt = terms(q["text"])
        scored = sorted(((len(qt & d) / (1 + len(d)) ** 0.5, i) for i, d in docs.items()), reverse=True)[:50]
        lines += [f"{q['id']} Q0 {i} {r} {s:.9f} {tag}" for r, (s, i) in enumerate(scored, start=1)][::-1]
    return "\n".join(lines) + "\n"


CONFIG = DEMOS_BENCHMARKS + """models:
  bm25: {type: bm25_lucene, k1: 0.9, b: 0.4}
report:
  baseline: bm25
"""
RUN_MODEL = """  overlap: {type: run, path: "external/{benchmark}/{task}.trec", description: term overlap}
fusion:
  rrf-bm25-overlap: {method: rrf, runs: [bm25, overlap], k: 60}
"""


@pytest.fixture(scope="module")
def external_run(tmp_path_factory):
    """bm25 on both demos; then a run written outside the pipeline (from the prepared tasks), added as a model."""
    work = workflow_dir(tmp_path_factory.mktemp("external"), CONFIG)
    snakemake(work, "--cores", "2", "all")
    for bench, task in (("demo", "demo"), ("cliniq-demo", "cliniq")):
        data = work / "results" / "data" / bench / task
        if bench == "cliniq-demo":  # the chunk texts live in resources/, owner-only (results/ links there)
            data = work / "resources" / "cliniq" / bench / task
            (data / "queries.jsonl").write_text((work / "results/data" / bench / task / "queries.jsonl").read_text())
        out = work / "external" / bench / f"{task}.trec"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(overlap_run(data))
    config = work / "config.yaml"
    config.write_text(config.read_text().replace("report:\n", RUN_MODEL + "report:\n"))
    planned = planned_jobs(snakemake(work, "-n", "--cores", "2", "all").stdout)
    snakemake(work, "--cores", "2", "all")
    return work, planned


@pytest.mark.slow
def test_adding_a_run_model_runs_only_its_branch(external_run):
    _, planned = external_run
    # imported on both tasks, scored (and CliniQ-scored), fused with bm25; nothing of bm25 reruns
    assert planned["import_run"] == 2 and planned["fuse_runs"] == 2 and planned["score_run"] == 4
    assert planned["score_cliniq"] == 2 and planned["report_cliniq"] == 1
    assert not {"prepare_task", "lucene_index", "retrieve_bm25_lucene", "chunk_cliniq"} & set(planned), planned


@pytest.mark.slow
def test_run_model_is_on_the_leaderboard_significance_cliniq_tables_and_provenance(external_run):
    work, _ = external_run
    results = work / "results"
    board = {row["model"]: row for row in csv.DictReader(open(results / "leaderboard.csv"))}
    for name in ("overlap", "rrf-bm25-overlap"):
        assert 0.0 < float(board[name]["demo/demo"]) <= 1.0 and 0.0 < float(board[name]["cliniq-demo/cliniq"]) <= 1.0
    sig = list(csv.DictReader(open(results / "significance.csv")))
    assert {(r["benchmark"], r["task"]) for r in sig if r["model"] == "overlap"} == {("demo", "demo"),
                                                                                    ("cliniq-demo", "cliniq")}
    for grouping in ("match_type", "query_type"):
        rows = list(csv.DictReader(open(results / "cliniq" / "cliniq-demo" / f"by_{grouping}.csv")))
        assert {"overlap", "rrf-bm25-overlap", "bm25"} == {r["model"] for r in rows}
        assert "| overlap |" in (results / "cliniq" / "cliniq-demo" / f"by_{grouping}.md").read_text()
    # the copy: ours, sorted, tagged with the model name, scores as written
    src = (work / "external" / "demo" / "demo.trec").read_text().splitlines()
    copy = (results / "runs" / "demo" / "demo" / "overlap.trec").read_text().splitlines()
    assert len(copy) == len(src) and all(line.endswith(" overlap") for line in copy)
    assert sorted(line.split()[4] for line in copy) == sorted(line.split()[4] for line in src)
    for q in {line.split()[0] for line in copy}:
        mine = [line.split() for line in copy if line.split()[0] == q]
        assert [int(p[3]) for p in mine] == list(range(1, len(mine) + 1))
        # trec_eval's order: score descending, equal scores by document id descending
        assert all((float(a[4]), a[2]) > (float(b[4]), b[2]) for a, b in zip(mine, mine[1:]))
    prov = json.loads((results / "provenance.json").read_text())
    entry = next(r for r in prov["runs"] if r["run"] == "overlap" and r["task"] == "demo")
    from r2med_eval.io import sha256_file

    imported = entry["imported_runs"]["overlap"]
    assert imported["source"] == "external/demo/demo.trec"
    assert imported["source_sha256"] == sha256_file(work / "external" / "demo" / "demo.trec")
    assert imported["run_sha256"] == entry["run_file"]["sha256"]
    assert entry["models"]["overlap"]["kind"] == "run"
    fused = next(r for r in prov["runs"] if r["run"] == "rrf-bm25-overlap" and r["task"] == "cliniq")
    assert set(fused["imported_runs"]) == {"overlap"}
    assert Counter(j["rule"] for j in entry["jobs"])["import_run"] == 1


@pytest.mark.slow
def test_editing_the_run_file_reruns_only_its_branch(external_run):
    work, _ = external_run
    assert "Nothing to be done" in snakemake(work, "-n", "--cores", "2", "all").stdout
    path = work / "external" / "demo" / "demo.trec"
    original = path.read_text()
    try:
        path.write_text(original.replace(" overlap\n", " overlap-v2\n"))
        jobs = planned_jobs(snakemake(work, "-n", "--cores", "2", "all").stdout)
        assert jobs["import_run"] == 1 and jobs["fuse_runs"] == 1 and jobs["score_run"] == 2, jobs
        assert not {"score_cliniq", "report_cliniq", "retrieve_bm25_lucene", "lucene_index"} & set(jobs), jobs
    finally:
        path.write_text(original)


@pytest.mark.slow
def test_malformed_external_run_stops_the_workflow_with_one_line(external_run):
    work, _ = external_run
    path = work / "external" / "demo" / "demo.trec"
    original = path.read_text()
    try:
        lines = original.splitlines()
        lines[3] = lines[3].rsplit(" ", 2)[0] + " high overlap"
        path.write_text("\n".join(lines) + "\n")
        proc = snakemake(work, "--cores", "2", "all", check=False)
        assert proc.returncode != 0
        shown = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
        assert shown == ["r2med-eval: external/demo/demo.trec, line 4: the score (5th field, 4 characters) is "
                         "not a number (trec_eval, with C's atof, would read it as 0). Fix: write the "
                         "retriever's score as a decimal number in the fifth column (e.g. 12, -0.25, 1.5e-3: no "
                         "underscores, no hexadecimal, no nan or inf)."], proc.stdout[-3000:]
    finally:
        path.write_text(original)

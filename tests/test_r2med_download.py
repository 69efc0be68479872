"""R2MED tasks from the Hugging Face Hub: offline cache, local override, checksums, atomic placement, bad input."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_r2med, shared_dataset, snakemake, workflow_dir

from r2med_eval.errors import ConfigError, InputError
from r2med_eval.hub import datasets as hfdata
from r2med_eval.workflow import config as r2config

BIOLOGY_REV = hfdata.R2MED_REVISIONS["Biology"]


def hf_cache(root: Path, data: Path, repo="R2MED/Biology", revision=BIOLOGY_REV, files=hfdata.CORE_FILES) -> Path:
    """A Hugging Face cache folder holding ``files`` of ``data`` as the Hub's LFS blobs (named by sha256)."""
    owner, name = repo.split("/")
    store = root / f"datasets--{owner}--{name}"
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    (store / "refs").mkdir(exist_ok=True)
    (store / "refs" / "main").write_text(revision)
    snap = store / "snapshots" / revision
    for rel in files:
        content = (data / rel).read_bytes()
        blob = store / "blobs" / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        link = snap / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return root


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    cache = hf_cache(tmp_path / "hub", REPO / "data" / "demo",
                     files=hfdata.CORE_FILES + ("hyde/handwritten/query_with_hydoc.jsonl",))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def source(task="Biology"):
    return {"hf": f"R2MED/{task}", "revision": hfdata.R2MED_REVISIONS[task]}


def leftovers(folder: Path):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_offline_cache_download_is_checksummed(offline_cache, tmp_path):
    target = tmp_path / "resources" / "r2med" / "Biology"
    manifest = hfdata.fetch_task(target, task="Biology", source=source())
    demo = REPO / "data" / "demo"
    for name in hfdata.CORE_FILES:
        assert (target / name).read_bytes() == (demo / name).read_bytes()
        assert not (target / name).is_symlink()
        digest = hashlib.sha256((demo / name).read_bytes()).hexdigest()
        assert manifest["files"][name]["sha256"] == digest == manifest["files"][name]["hub_sha256"]
    assert manifest["revision"] == BIOLOGY_REV and manifest["origin"]["kind"] == "huggingface_hub"
    assert json.loads((target / "manifest.json").read_text()) == manifest
    assert leftovers(target.parent) == []
    # reuse: files checked against the manifest
    hfdata.verify_manifest(target / "manifest.json", {n: target / n for n in hfdata.CORE_FILES})
    with open(target / "qrels.jsonl", "a") as handle:
        handle.write('{"q_id": "demo-q01", "p_id": "demo-d001", "score": 1}\n')
    with pytest.raises(InputError, match="checksum mismatch: qrels.jsonl changed since it was downloaded"):
        hfdata.verify_manifest(target / "manifest.json", {n: target / n for n in hfdata.CORE_FILES})
    # an expansion file through the same cache
    info = hfdata.fetch_variant(target / "hyde" / "handwritten" / "query_with_hydoc.jsonl", task="Biology",
                                source=source(), relpath="hyde/handwritten/query_with_hydoc.jsonl")
    assert info["hub_sha256"] == info["sha256"]


def test_damaged_cache_blob_is_a_checksum_mismatch_and_leaves_nothing(offline_cache, tmp_path):
    blob = next(p for p in (offline_cache / "datasets--R2MED--Biology" / "blobs").iterdir()
                if p.read_bytes() == (REPO / "data" / "demo" / "query.jsonl").read_bytes())
    blob.write_bytes(blob.read_bytes()[:-40] + b"\n")
    target = tmp_path / "resources" / "r2med" / "Biology"
    with pytest.raises(InputError) as err:
        hfdata.fetch_task(target, task="Biology", source=source())
    msg = str(err.value)
    assert "task Biology: query.jsonl" in msg and "checksum mismatch: the Hub recorded sha256" in msg
    assert "delete it from the Hugging Face cache" in msg
    assert not target.exists() and leftovers(target.parent) == []


def test_revision_missing_from_offline_cache(offline_cache, tmp_path):
    other = {"hf": "R2MED/Biology", "revision": "0" * 40}
    with pytest.raises(InputError) as err:
        hfdata.fetch_task(tmp_path / "Biology", task="Biology", source=other)
    msg = str(err.value)
    assert "HF_HUB_OFFLINE is set" in msg and "does not hold this revision" in msg
    assert "tasks.Biology.local" in msg and "HF_HUB_CACHE" in msg
    assert not (tmp_path / "Biology").exists()


def test_no_network_names_the_task_and_the_override(tmp_path):
    """The Hub cannot be reached (a closed local port) and the cache is empty."""
    code = ("import sys; sys.path.insert(0, 'src'); from r2med_eval.hub import datasets as hfdata\n"
            "from r2med_eval.errors import InputError\n"
            f"try:\n    hfdata.fetch_task({str(tmp_path / 'Bio')!r}, task='Biology', source={source()!r})\n"
            "except InputError as e:\n    print('INPUTERROR', e)\n")
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path / "empty"),
           "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
    env.pop("HF_HUB_OFFLINE", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert "INPUTERROR" in out, out[-3000:]
    assert "task Biology (R2MED/Biology at revision " + BIOLOGY_REV in out
    assert "cannot be reached" in out and "tasks.Biology.local" in out and "HF_HUB_OFFLINE=1" in out
    assert not (tmp_path / "Bio").exists()


def test_hub_errors_become_input_errors(monkeypatch, tmp_path):
    import httpx
    import huggingface_hub
    from huggingface_hub import errors

    response = httpx.Response(404, request=httpx.Request("GET", "https://huggingface.co/api/datasets/x"))
    for exc, expected in ((errors.RevisionNotFoundError("no such revision", response=response),
                           "the revision does not exist"),
                          (errors.RepositoryNotFoundError("no such repo", response=response),
                           "the dataset repo does not exist")):
        def fake(*args, _exc=exc, **kwargs):
            raise _exc
        monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
        with pytest.raises(InputError, match=expected) as err:
            hfdata.fetch_task(tmp_path / "t", task="Biology", source=source())
        assert "task Biology (R2MED/Biology" in str(err.value)


def test_task_names_must_be_r2meds():
    with pytest.raises(InputError, match="'Biolgy' is not one of R2MED's eight tasks"):
        hfdata.r2med_task_of("R2MED/Biolgy")
    assert hfdata.r2med_task_of("R2MED/pmc-treatment") == "PMC-Treatment"
    assert hfdata.r2med_task_of("someone/else") is None
    cfg = {"benchmarks": {"r": {"layout": "r2med", "tasks": {"B": {"source": {"hf": "R2MED/Biolgy"}}}}},
           "models": {"m": {"type": "bm25_paper"}}}
    with pytest.raises(ConfigError) as err:
        r2config.validate(cfg)
    assert "benchmarks.r.tasks.B" in str(err.value) and "Medical-Sciences" in str(err.value)
    cfg["benchmarks"]["r"]["tasks"]["B"]["source"] = {"hf": "R2MED/Biology"}
    filled = r2config.validate(cfg)
    assert filled["benchmarks"]["r"]["tasks"]["B"]["source"]["revision"] == BIOLOGY_REV  # MTEB's pin
    cfg["benchmarks"]["r"]["tasks"]["B"]["source"] = {"hf": "someone/data"}
    with pytest.raises(ConfigError, match="has no revision"):
        r2config.validate(cfg)
    cfg["benchmarks"]["r"]["tasks"]["B"] = {"path": "x", "source": {"hf": "R2MED/Biology"}}
    with pytest.raises(ConfigError):
        r2config.validate(cfg)


def test_corrupt_local_file_stops_and_leaves_nothing(tmp_path):
    local = make_r2med(tmp_path / "local")
    with open(local / "corpus.jsonl", "a") as handle:
        handle.write('{"id": "d9", "text": "truncated\n')
    target = tmp_path / "resources" / "r" / "Biology"
    with pytest.raises(InputError) as err:
        hfdata.fetch_task(target, task="Biology", source=source(), local=str(local))
    assert "task Biology: corpus.jsonl" in str(err.value) and "corrupt file: malformed JSON" in str(err.value)
    assert "line 4" in str(err.value)
    assert not target.exists() and leftovers(target.parent) == []


def test_local_override_and_sha256_pins(tmp_path):
    local = make_r2med(tmp_path / "local")
    digest = hashlib.sha256((local / "corpus.jsonl").read_bytes()).hexdigest()
    target = tmp_path / "Biology"
    manifest = hfdata.fetch_task(target, task="Biology", source=source(), local=str(local),
                                 sha256_pins={"corpus.jsonl": digest})
    assert manifest["origin"] == {"kind": "local", "path": str(local)}
    with pytest.raises(InputError, match="config pins sha256 " + "0" * 64):
        hfdata.fetch_task(target, task="Biology", source=source(), local=str(local),
                          sha256_pins={"corpus.jsonl": "0" * 64})
    assert (target / "manifest.json").is_file()  # the earlier good download is untouched


R2MED_DEMO_CONFIG = """
benchmarks:
  r2med:
    layout: r2med
    unknown_qrels: keep
    tasks:
      Biology: {{source: {{hf: R2MED/Biology, revision: {rev}}}{local}}}
models:
  bm25-paper: {{type: bm25_paper, paper_name: bm25}}
"""


@pytest.mark.slow
def test_workflow_on_the_r2med_biology_demo_as_local_override(tmp_path):
    data = shared_dataset("r2med-biology-demo")
    work = workflow_dir(tmp_path, R2MED_DEMO_CONFIG.format(rev=BIOLOGY_REV, local=f", local: {data}"))
    snakemake(work, "--cores", "2", "all")
    manifest = json.loads((work / "resources" / "r2med" / "Biology" / "manifest.json").read_text())
    assert manifest["origin"]["kind"] == "local"
    stats = json.loads((work / "results" / "data" / "r2med" / "Biology" / "stats.json").read_text())
    # the demo's judgments name documents its 2-document corpus lacks: kept (as R2MED's code), counted
    assert stats["qrels_unknown_document_kept"] == 2 and stats["judged_queries"] == 1
    assert stats["paper_check"]["match"] is False and stats["paper_check"]["paper_documents"] == 57359
    log = (work / "logs" / "prepare_task" / "r2med" / "Biology.log").read_text()
    assert "kept 2 judgments naming documents that are not in the corpus" in log
    assert stats["queries"] == 2 and "loaded 2 queries / 2 documents, the paper reports 103 / 57359" in log
    report = (work / "results" / "r2med_vs_paper.md").read_text()
    assert "| r2med/Biology | Biology | bm25-paper | - | 0.00 | 19.19 | r2med | r2med | -19.19 | **> 0.5** |" in report
    assert "WARNING: differs from the paper" in report
    metrics = json.loads((work / "results" / "metrics" / "r2med" / "Biology" / "bm25-paper.json").read_text())
    assert "identical_ids_dropped" not in metrics["counts"]  # the official BM25 path keeps them


@pytest.mark.slow
def test_workflow_offline_from_hf_cache_and_checks_on_reuse(tmp_path, monkeypatch):
    cache = hf_cache(tmp_path / "hub", REPO / "data" / "demo")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    work = workflow_dir(tmp_path, R2MED_DEMO_CONFIG.format(rev=BIOLOGY_REV, local=""))
    snakemake(work, "--cores", "2", "all")
    log = (work / "logs" / "download_task" / "r2med" / "Biology.log").read_text()
    assert "(matches the Hub's checksum)" in log
    corpus = work / "resources" / "r2med" / "Biology" / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("demo-d0001", "demo-dXXXX", 1))
    proc = snakemake(work, "--cores", "2", "all", check=False)
    assert proc.returncode != 0
    assert "checksum mismatch: corpus.jsonl changed since it was downloaded" in proc.stdout
    # a revision the cache does not hold: one message naming the task and what to do
    (tmp_path / "w2").mkdir()
    work2 = workflow_dir(tmp_path / "w2", R2MED_DEMO_CONFIG.format(rev="ab" * 20, local=""))
    proc = snakemake(work2, "--cores", "2", "all", check=False)
    assert proc.returncode != 0 and "does not hold this revision" in proc.stdout
    assert not list((work2 / "resources" / "r2med").glob("Biology/*.jsonl"))

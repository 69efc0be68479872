"""Issue 14.9: `snakemake prefetch` fetches every model snapshot and dataset a configuration needs on a machine
with network (here: a local mirror of the Hugging Face Hub on 127.0.0.1), so the GPU jobs download nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urlparse

import pytest
from conftest import demo_config, snakemake, workflow_dir

from r2med_eval.errors import InputError
from r2med_eval.hub import models as hfmodels
from r2med_eval.workflow.config import validate
from r2med_eval.workflow.control import Workflow
from r2med_eval.workflow.inputs import prefetch_targets

REPO_ID = "mirror/tiny-encoder"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {"config.json": b'{"model_type": "bert", "hidden_size": 4}\n',
         "tokenizer.json": b'{"version": "1.0"}\n',
         "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}\n'}


def _oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub(BaseHTTPRequestHandler):
    """The endpoints huggingface_hub's snapshot_download uses: the revision info, the tree, each file."""

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, obj):
        self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json"})

    def _missing(self, code: str, head: bool = False):
        self._send(404, b'{"error": "not found"}', {"X-Error-Code": code, "Content-Type": "application/json"},
                   head=head)

    def _route(self, head: bool):
        path = unquote(urlparse(self.path).path)
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/(.+)", path)
        if m:
            if m.group(1) != REPO_ID:
                return self._missing("RepoNotFound")
            if m.group(2) not in ("main", COMMIT):
                return self._missing("RevisionNotFound")
            return self._json({"id": REPO_ID, "sha": COMMIT, "siblings": [{"rfilename": f} for f in FILES]})
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path)
        if m:
            if m.group(1) != REPO_ID or m.group(2) != COMMIT:
                return self._missing("RevisionNotFound")
            return self._json([{"type": "file", "path": f, "size": len(d), "oid": _oid(d)} for f, d in FILES.items()])
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            if m.group(1) != REPO_ID or m.group(2) not in ("main", COMMIT) or m.group(3) not in FILES:
                return self._missing("EntryNotFound", head=head)
            data = FILES[m.group(3)]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{_oid(data)}"', "Content-Type": "application/octet-stream"}
            return self._send(200, data, headers, head=head)
        return self._missing("RepoNotFound", head=head)

    def do_GET(self):
        self._route(head=False)

    def do_HEAD(self):
        self._route(head=True)


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A Hub mirror on a free loopback port; HF_ENDPOINT points at it and HF_HOME is a temporary folder."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_ETAG_TIMEOUT": "5",
           "HF_HUB_DOWNLOAD_TIMEOUT": "5", "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    _set_hub_env(monkeypatch, env)
    yield SimpleNamespace(endpoint=endpoint, env=env, server=server)
    server.shutdown()
    server.server_close()


def _set_hub_env(monkeypatch, env: dict):
    """huggingface_hub reads HF_ENDPOINT and HF_HOME into constants at import: set both, the environment and
    the constants, so the library calls of this process see the mirror."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    hub_cache = str(Path(env["HF_HOME"]) / "hub")
    monkeypatch.setattr(constants, "ENDPOINT", env["HF_ENDPOINT"])
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        env["HF_ENDPOINT"] + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", hub_cache)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 5)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 5)


def _snapshot_dir(env: dict) -> Path:
    return Path(env["HF_HOME"]) / "hub" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT


# ---------------------------------------------------------------- the library


def test_prefetch_downloads_the_snapshot_and_writes_its_manifest(mirror, tmp_path):
    out = tmp_path / "resources" / "models" / "enc.json"
    manifest = hfmodels.prefetch("enc", {"source": {"hf": REPO_ID, "revision": "main"}}, out)
    assert json.loads(out.read_text()) == manifest
    snap = manifest["snapshots"]["source"]
    assert snap["repo"] == REPO_ID and snap["revision"] == "main" and snap["commit"] == COMMIT
    assert snap["files"] == sorted(({"path": f, "size": len(d)} for f, d in FILES.items()), key=lambda f: f["path"])
    for name, data in FILES.items():
        assert (_snapshot_dir(mirror.env) / name).read_bytes() == data
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_tokenizer_side_fetches_the_tokenizer_files_only(mirror, tmp_path, monkeypatch):
    """An LLM reranker's ``tokenizer`` (ReasonRank's modes) reads the served model's tokenizer, never its weights."""
    monkeypatch.setitem(FILES, "model-00001-of-00002.safetensors", b"\0" * 64)
    out = tmp_path / "resources" / "models" / "rr.json"
    manifest = hfmodels.prefetch("rr", {"tokenizer": {"hf": REPO_ID, "revision": "main"}}, out)
    assert [f["path"] for f in manifest["snapshots"]["tokenizer"]["files"]] == ["1_Pooling/config.json", "config.json",
                                                                                "tokenizer.json"]
    assert not (_snapshot_dir(mirror.env) / "model-00001-of-00002.safetensors").exists()
    assert hfmodels.hub_sources({"type": "llm_listwise", "tokenizer": {"hf": REPO_ID, "revision": "main"}}) == {
        "tokenizer": {"hf": REPO_ID, "revision": "main"}}
    assert hfmodels.hub_sources({"type": "llm_listwise", "tokenizer": {"path": "/local/copy"}}) == {}


@pytest.mark.parametrize("case", ["unknown revision", "unknown repo", "server down", "offline, nothing cached"])
def test_prefetch_failures_are_one_clear_message(mirror, tmp_path, monkeypatch, case):
    repo, revision = REPO_ID, "main"
    if case == "unknown revision":
        revision = "no-such-branch"
    elif case == "unknown repo":
        repo = "mirror/absent"
    elif case == "server down":
        mirror.server.shutdown()
        mirror.server.server_close()
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    out = tmp_path / "enc.json"
    with pytest.raises(InputError) as err:
        hfmodels.prefetch("enc", {"source": {"hf": repo, "revision": revision}}, out)
    message = str(err.value)
    assert "\n" not in message
    assert f"model 'enc': cannot download {repo} at revision {revision}" in message
    assert "snakemake --cores 1 prefetch" in message and "models.enc.source.path" in message
    assert not out.exists()


# ---------------------------------------------------------------- the workflow


def hub_config(endpoint_repo: str = REPO_ID) -> str:
    """The demo config (BM25, MiniLM from its package) plus a dense model whose weights come from the Hub."""
    return demo_config(device="cpu") + f"""
  enc:
    type: dense
    source: {{hf: {endpoint_repo}, revision: main}}
    device: cpu
"""


def test_prefetch_targets_and_encoding_inputs_follow_the_registry():
    import yaml

    w = Workflow(validate(yaml.safe_load(hub_config())))
    assert w.registry.hub_models() == ["enc"]
    assert prefetch_targets(w.registry) == ["resources/models/enc.json"]
    assert "enc" in w.constraint("hub_model") and "minilm" not in w.constraint("hub_model")
    wc = SimpleNamespace(benchmark="demo", task="demo", model="enc", shard="1", nshards="1")
    assert w.inputs.encode_corpus_shard(wc)["weights"] == "resources/models/enc.json"
    assert w.inputs.encode_queries(wc)["weights"] == "resources/models/enc.json"
    assert "weights" not in w.inputs.encode_queries(SimpleNamespace(benchmark="demo", task="demo", model="minilm"))
    assert w.params.of("prefetch_model")(SimpleNamespace(model="enc"))["source"] == {"hf": REPO_ID,
                                                                                     "revision": "main"}


def test_a_later_config_files_source_path_is_a_local_copy_of_the_hub_entry(tmp_path):
    """A fragment ``source: {path}`` given after a registered Hub entry (Snakemake merges config files key by key, so
    the entry's source becomes {hf, revision, path}) reads the local folder: nothing to prefetch, no manifest input,
    the Hub id kept in the provenance as what the folder is a copy of."""
    import yaml
    from snakemake.utils import update_config

    from r2med_eval.report import provenance

    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    cfg = yaml.safe_load(hub_config())
    update_config(cfg, {"models": {"enc": {"source": {"path": str(folder)}}}})
    w = Workflow(validate(cfg))
    spec = w.registry.models["enc"]
    assert spec["source"] == {"hf": REPO_ID, "revision": "main", "path": str(folder)}
    assert w.registry.hub_models() == [] and prefetch_targets(w.registry) == []
    wc = SimpleNamespace(benchmark="demo", task="demo", model="enc", shard="1", nshards="1")
    assert "weights" not in w.inputs.encode_corpus_shard(wc)
    info = provenance.model_source(spec, "enc")["source"]
    assert info["copy_of"] == {"hf": REPO_ID, "revision": "main"} and "warning" not in info
    assert list(info["weights_sha256"]) == ["model.safetensors"]
    from r2med_eval.dense.models import resolve_source

    assert resolve_source(spec["source"], "enc") == (str(folder.resolve()), None)


def test_snakemake_prefetch_fetches_from_the_mirror(mirror, tmp_path):
    work = workflow_dir(tmp_path, hub_config())
    env = {**os.environ, **mirror.env}
    dry = snakemake(work, "-n", "--cores", "1", "prefetch", env=env, timeout=300)
    assert re.search(r"prefetch_model\s+1\b", dry.stdout), dry.stdout
    assert "encode_" not in dry.stdout and "download_task" not in dry.stdout
    snakemake(work, "--cores", "1", "prefetch", env=env, timeout=300)
    manifest = json.loads((work / "resources" / "models" / "enc.json").read_text())
    assert manifest["snapshots"]["source"]["commit"] == COMMIT
    assert (_snapshot_dir(mirror.env) / "config.json").read_bytes() == FILES["config.json"]
    # the encoders of the Hub model wait for it; the packaged model needs no prefetch
    plan = snakemake(work, "-n", "--cores", "1", "results/embeddings/demo/demo/enc/queries.npy", env=env, timeout=300)
    assert "prefetch_model" not in plan.stdout and "encode_queries" in plan.stdout
    (work / "resources" / "models" / "enc.json").unlink()
    plan = snakemake(work, "-n", "--cores", "1", "results/embeddings/demo/demo/enc/queries.npy", env=env, timeout=300)
    assert "prefetch_model" in plan.stdout


def test_snakemake_prefetch_offline_is_one_clear_error(mirror, tmp_path):
    work = workflow_dir(tmp_path, hub_config("mirror/absent"))
    env = {**os.environ, **mirror.env}
    proc = snakemake(work, "--cores", "1", "prefetch", env=env, check=False, timeout=300)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("r2med-eval: ")]
    assert len(lines) == 1 and "cannot download mirror/absent" in lines[0], proc.stdout
    assert "Traceback" not in proc.stdout

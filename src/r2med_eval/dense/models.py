"""Dense model adapters: where a dense entry's weights come from and how they load, as a SentenceTransformer
(or the checkpoint's own ``encode``, or a ``python``/``mteb`` adapter from ``r2med_eval.encoders``) that reads
texts as the entry says: pooling, prompts left out of the pooling, EOS appended after truncation, documents as
text pairs, bidirectional attention, ONNX/OpenVINO backends.

Encoding with a loaded model is ``dense_encode``; searching the stored vectors is ``dense_search``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..progress import phase

log = logging.getLogger(__name__)

TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
POOLING = {"cls": "cls", "mean": "mean", "lasttoken": "lasttoken", "max": "max"}


# ------------------------------------------------------------------ sources

def resolve_source(source: dict, model_name: str) -> tuple[str, str | None]:
    """(name or path, revision) for a source entry: {hf, revision} | {path} | {package}."""
    if "path" in source:
        path = Path(source["path"]).expanduser()
        if not path.exists():
            raise InputError(f"model {model_name!r}: local model path {str(path)!r} does not exist.",
                             fix=f"set models.{model_name}.source.path to a folder holding the weights.")
        return str(path.resolve()), None
    if "package" in source:
        try:
            module = importlib.import_module(source["package"])
        except ImportError:
            raise InputError(f"model {model_name!r}: Python package {source['package']!r} is not installed.",
                             fix="install it (pip install ...) or use a source.path / source.hf entry.") from None
        if hasattr(module, "get_model_path"):
            path = Path(module.get_model_path())
        else:
            path = Path(module.__file__).resolve().parent / source.get("subdir", "model")
        if not path.exists():
            raise InputError(f"model {model_name!r}: package {source['package']!r} holds no weights at {path}.",
                             fix="reinstall the package.")
        return str(path), None
    return source["hf"], source.get("revision")


def source_fingerprint(source: dict, model_name: str) -> dict:
    """What identifies the weights, for provenance (package version or local weight checksum)."""
    name, revision = resolve_source(source, model_name)
    info = {"source": source, "resolved": name, "revision": revision}
    if "package" in source:
        from importlib.metadata import PackageNotFoundError, version

        try:
            info["package_version"] = version(source["package"].replace("_", "-"))
        except PackageNotFoundError:
            info["package_version"] = None
    return info


def check_model_folder(path: str, model_name: str) -> None:
    """A local model folder must hold a Hugging Face checkpoint (``config.json``, readable JSON)."""
    folder = Path(path)
    if not folder.is_dir():
        return  # a Hub name
    config = folder / "config.json"
    fix = (f"point models.{model_name}.source.path at a folder holding a complete checkpoint (config.json, the "
           "weights, the tokenizer), e.g. one saved by save_pretrained or downloaded with `hf download`.")
    if not config.is_file():
        contents = sorted(p.name for p in folder.iterdir())[:10]
        raise InputError(f"model {model_name!r}: the model folder holds no config.json "
                         f"({'empty' if not contents else 'found: ' + ', '.join(contents)}).", path=folder, fix=fix)
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"model {model_name!r}: config.json is not readable JSON ({exc}).", path=config,
                         fix=fix) from None


def load_model(factory, name: str, model_name: str, revision=None):
    """``factory()`` (a SentenceTransformer, Transformer or CrossEncoder), its failure as one InputError:
    offline downloads with what to do, a broken checkpoint with its first error line."""
    check_model_folder(name, model_name)
    try:
        return factory()
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers raises OSError, ValueError, KeyError, ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        where = f"{name}" + (f" at revision {revision}" if revision else "")
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or any(
            s in str(exc) for s in ("connect", "offline", "Connection", "resolve", "Max retries"))
        if offline and not Path(name).is_dir():
            raise InputError(
                f"model {model_name!r}: cannot download {where} (no network here, or HF_HUB_OFFLINE=1): "
                f"{type(exc).__name__}: {first}",
                fix="download the weights where the network is reachable (on a cluster, the login node) before "
                    f"the run, e.g. `hf download {name}` (docs/models.md); jobs then read them from the Hugging "
                    f"Face cache (HF_HOME). Or set models.{model_name}.source.path to a local copy.") from None
        raise InputError(f"model {model_name!r}: cannot load {where}: {type(exc).__name__}: {first}",
                         path=name if Path(name).is_dir() else None,
                         fix=f"check models.{model_name}.source (a complete checkpoint, the right revision; "
                             "trust_remote_code for custom code).") from None


def pooling_used(model) -> str:
    """The pooling mode of a loaded SentenceTransformer ('cls', 'mean', ...), or 'none'."""
    for module in model:
        mode = getattr(module, "pooling_mode", None)
        if isinstance(mode, str):
            return mode
        if callable(getattr(module, "get_pooling_mode_str", None)):
            return module.get_pooling_mode_str()
    return "none"


def needs_remote_code(path: str) -> bool:
    """True when a local checkpoint's config maps its classes to custom code (``auto_map``)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        return bool(json.loads(config.read_text()).get("auto_map"))
    except (OSError, json.JSONDecodeError):
        return False


# ------------------------------------------------------------------ encoder

def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device: cuda was asked for, but no CUDA device is visible.",
                         fix="set device: auto or cpu for this model, or run on a GPU node.")
    return device


BACKEND_DTYPES = {"torch": ("fp32", "fp16", "bf16"), "onnx": ("fp32",), "openvino": ("fp32", "bf16")}
BACKEND_PACKAGES = {"onnx": ("onnx", "onnxruntime"), "openvino": ("onnx", "openvino")}
OPENVINO_PRECISION = {"fp32": "f32", "bf16": "bf16"}


def backend_problem(spec: dict) -> tuple[str, str] | None:
    """Why a dense entry's ``backend`` (or ``pool_prompt: model``) cannot run with its other keys, and the fix (None
    when it can). The onnx and openvino backends run the checkpoint's transformer exported to ONNX on the CPU;
    pooling, prompts, truncation and normalisation stay sentence-transformers' own. ``pool_prompt: model`` leaves the
    checkpoint's own Pooling module as it is, so it needs ``pooling: model``."""
    backend = spec.get("backend", "torch")
    if backend != "torch" and spec["dtype"] not in BACKEND_DTYPES[backend]:
        return (f"backend: {backend} runs dtype {' or '.join(BACKEND_DTYPES[backend])}, not {spec['dtype']}",
                f"set dtype: {BACKEND_DTYPES[backend][0]} or backend: torch")
    if backend != "torch" and spec.get("device") == "cuda":
        return f"backend: {backend} runs on the CPU, not device: cuda", "set device: cpu (or auto) or backend: torch"
    if spec.get("pool_prompt") == "model" and spec.get("pooling") != "model":
        return ("pool_prompt: model keeps the checkpoint's own Pooling config, but pooling is "
                f"{spec.get('pooling')}", "set pooling: model, or pool_prompt: true or false")
    if backend == "torch":
        return None
    for key in ("bidirectional", "append_eos", "doc_as_pair"):
        if spec.get(key):
            return f"backend: {backend} does not combine with {key}: true", f"set backend: torch or {key}: false"
    if spec.get("encode_with", "sentence_transformers") != "sentence_transformers":
        return (f"backend: {backend} runs sentence-transformers' encode, not encode_with: {spec['encode_with']}",
                "set backend: torch")
    return None


class ExportedTransformer:
    """The checkpoint's transformer exported once to ONNX (``torch.onnx.export``, fixed example batch, dynamic
    batch and sequence axes) into a temporary folder, then run by ONNX Runtime or OpenVINO on the CPU. Stands in
    for ``Transformer.model``: called with the tokenizer's features, it returns ``last_hidden_state`` as a float32
    torch tensor, so sentence-transformers' pooling and normalisation run unchanged."""

    def __init__(self, auto_model, feature_names: list[str], backend: str, dtype: str, threads: int):
        import tempfile

        import torch

        self.config = auto_model.config
        self.backend = backend
        self.feature_names = list(feature_names)
        model = auto_model.float().eval()

        class _Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = model

            def forward(self, *args):
                out = self.inner(**dict(zip(feature_names, args)), return_dict=True)
                return out.last_hidden_state

        example = [torch.full((2, 8), 5, dtype=torch.long) for _ in feature_names]
        if "attention_mask" in feature_names:  # a padded row, so the traced graph keeps the padding mask
            example[feature_names.index("attention_mask")][1, 5:] = 0
        if "token_type_ids" in feature_names:
            example[feature_names.index("token_type_ids")].zero_()
        example = tuple(example)
        axes = {name: {0: "batch", 1: "sequence"} for name in [*feature_names, "last_hidden_state"]}
        with tempfile.TemporaryDirectory(prefix="r2med-export-") as tmp:
            path = os.path.join(tmp, "model.onnx")
            with torch.no_grad():
                torch.onnx.export(_Wrap(), example, path, dynamo=False, input_names=feature_names,
                                  output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                                  do_constant_folding=True)
            if backend == "onnx":
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = max(1, int(threads))
                options.inter_op_num_threads = 1
                self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                self.inputs = {i.name for i in self.session.get_inputs()}
            else:
                import openvino as ov

                core = ov.Core()
                self.compiled = core.compile_model(core.read_model(path), "CPU", {
                    "INFERENCE_PRECISION_HINT": OPENVINO_PRECISION[dtype],
                    "INFERENCE_NUM_THREADS": max(1, int(threads))})
                self.inputs = {i.get_any_name() for i in self.compiled.inputs}

    def __call__(self, **features):
        import torch

        feed = {k: features[k].cpu().numpy().astype(np.int64) for k in self.feature_names if k in self.inputs}
        if self.backend == "onnx":
            out = self.session.run(["last_hidden_state"], feed)[0]
        else:
            out = self.compiled(feed)[self.compiled.output(0)]
        return {"last_hidden_state": torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32))}

    def eval(self):
        return self


def check_backend_installed(backend: str, model_name: str) -> None:
    import importlib.util

    missing = [m for m in BACKEND_PACKAGES.get(backend, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"model {model_name!r}: backend: {backend} needs the Python package(s) "
                         f"{', '.join(missing)}, which are not installed.",
                         fix="install the pinned requirements (requirements.lock / envs/dense.yaml) or set "
                             f"models.{model_name}.backend: torch.")


def use_backend(model, spec: dict, model_name: str) -> None:
    """``backend: onnx | openvino``: replace the loaded SentenceTransformer's transformer by its ONNX export
    (``ExportedTransformer``); ``backend: torch`` leaves it as is."""
    backend = spec.get("backend", "torch")
    if backend == "torch":
        return
    import torch

    transformer = model[0]
    features = transformer.tokenize(["a b"])
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features]
    exported = ExportedTransformer(transformer.model, names, backend, spec["dtype"], torch.get_num_threads())

    class ExportedModel(torch.nn.Module):  # a Module, so it can take Transformer.model's place
        def __init__(self):
            super().__init__()
            self.config = exported.config
            self.register_buffer("anchor", torch.zeros(1), persistent=False)  # keeps model.device answering cpu

        def forward(self, **features):
            return exported(**features)

    transformer.model_forward_params = None
    transformer._declared_forward_params = set(names)
    transformer.model = ExportedModel()
    log.info("model %s: backend %s (%s), the transformer exported to ONNX", model_name, backend, spec["dtype"])


class CheckpointEncoder:
    """``encode_with: checkpoint``: the checkpoint's own ``encode(texts, instruction=..., max_length=...)``
    from its remote code (NV-Embed), loaded with ``AutoModel.from_pretrained(trust_remote_code=True)`` as
    R2MED's NVEmbedModel does; the embeddings are L2-normalised when ``normalize`` is set, as R2MED does."""

    def __init__(self, model, max_length: int):
        self.model = model
        self.max_seq_length = int(max_length)
        self.tokenizer = getattr(model, "tokenizer", None)

    def eval(self):
        self.model.eval()
        return self

    def encode(self, texts, *, batch_size=None, convert_to_numpy=True, normalize_embeddings=False,
               show_progress_bar=False, prompt=None):
        import torch

        emb = self.model.encode(list(texts), instruction=prompt or "", max_length=self.max_seq_length)
        emb = torch.as_tensor(emb).float()
        if normalize_embeddings:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb.cpu().numpy()


def load_encoder(spec: dict, model_name: str, side: str = "doc", task: str | None = None, weights: bool = True):
    """A SentenceTransformer for one side ("query" or "doc") of a model entry (a ``CheckpointEncoder`` for
    ``encode_with: checkpoint``); for a ``python`` or ``mteb`` entry the adapter of ``r2med_eval.encoders``
    (same ``encode`` call), which may use the task; for an entry with ``server`` the served encoder
    (``dense.served``). ``weights=False``: the same model on PyTorch's meta device, nothing loaded into memory, for
    its tokenization alone (``preprocess``: what a served twin sends)."""
    if spec.get("server") and weights:
        from . import served

        return served.load(spec, model_name, side, task,
                           tokenizer=lambda: load_encoder(spec, model_name, side, task, weights=False))
    phase(f"loading the {side} encoder of {model_name}")
    if spec.get("type") in ("python", "mteb"):
        from . import encoders

        return encoders.load(spec, model_name, side, task, device=pick_device(spec["device"]))
    from sentence_transformers import SentenceTransformer

    source = spec.get("query_source") if side == "query" and spec.get("query_source") else spec["source"]
    name, revision = resolve_source(source, model_name)
    trust = bool(spec["trust_remote_code"])
    if not trust and needs_remote_code(name):
        raise InputError(f"model {model_name!r} needs remote code (its config.json has auto_map), and "
                         "trust_remote_code is off.",
                         fix=f"review the model's code, then set models.{model_name}.trust_remote_code: true.")
    problem = backend_problem(spec)
    if problem:
        raise InputError(f"model {model_name!r}: {problem[0]}.", fix=f"{problem[1]} in models.{model_name}.")
    backend = spec.get("backend", "torch")
    check_backend_installed(backend, model_name)
    device = pick_device(spec["device"]) if backend == "torch" and weights else "cpu" if weights else "meta"
    model_kwargs = {"dtype": TORCH_DTYPES[spec["dtype"] if backend == "torch" else "fp32"]}
    if not weights:
        model_kwargs["device_map"] = "meta"
    length = spec.get("query_max_length") if side == "query" and spec.get("query_max_length") else spec["max_length"]
    if spec.get("encode_with", "sentence_transformers") == "checkpoint":
        if not trust:
            raise InputError(f"model {model_name!r}: encode_with: checkpoint runs the checkpoint's own code, and "
                             "trust_remote_code is off.",
                             fix=f"review the model's code, then set models.{model_name}.trust_remote_code: true.")
        from transformers import AutoModel

        model = load_model(lambda: AutoModel.from_pretrained(name, trust_remote_code=True, revision=revision,
                                                             token=os.environ.get("HF_TOKEN") or None,
                                                             **model_kwargs), name, model_name, revision)
        if not callable(getattr(model, "encode", None)):
            raise InputError(f"model {model_name!r}: encode_with: checkpoint, but the checkpoint's model class "
                             f"{type(model).__name__} has no encode method.",
                             fix=f"set models.{model_name}.encode_with: sentence_transformers.")
        log.info("model %s (%s side): the checkpoint's own encode()", model_name, side)
        return CheckpointEncoder(model.to(device), length).eval()
    common = dict(trust_remote_code=trust, revision=revision, device=device, model_kwargs=model_kwargs,
                  token=os.environ.get("HF_TOKEN") or None)
    pooling = spec["pooling"]
    if pooling == "model":
        model = load_model(lambda: SentenceTransformer(name, **common), name, model_name, revision)
        if spec["pool_prompt"] != "model":  # model: the checkpoint's own Pooling config decides
            model.set_pooling_include_prompt(bool(spec["pool_prompt"]))
        used = pooling_used(model)
        if Path(name).is_dir() and not (Path(name) / "modules.json").is_file():
            log.warning("model %s: pooling: model, but %s is a plain Hugging Face checkpoint without "
                        "sentence-transformers' modules.json: sentence-transformers chose %s pooling itself. "
                        "Set models.%s.pooling (cls, mean, lasttoken or max) to the pooling the model was trained "
                        "with", model_name, name, used.upper(), model_name)
        log.info("model %s (%s side): %s pooling", model_name, side, used)
    else:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

        config_kwargs = {"trust_remote_code": trust, "revision": revision}
        transformer = load_model(lambda: Transformer(
            name, model_kwargs={**model_kwargs, "trust_remote_code": trust, "revision": revision},
            processor_kwargs={"trust_remote_code": trust, "revision": revision}, config_kwargs=config_kwargs),
            name, model_name, revision)
        dim = transformer.get_embedding_dimension() if hasattr(transformer, "get_embedding_dimension") \
            else transformer.get_word_embedding_dimension()
        modules = [transformer, Pooling(dim, pooling_mode=POOLING[pooling], include_prompt=spec["pool_prompt"])]
        if spec["normalize"]:
            modules.append(Normalize())
        model = SentenceTransformer(modules=modules, device=device)
        log.info("model %s (%s side): %s pooling (set by pooling:)", model_name, side, pooling)
    model.max_seq_length = int(length)
    if spec.get("bidirectional"):
        make_bidirectional(model[0], model_name)
    install_tokenization(model[0], eos=bool(spec["append_eos"]),
                         pair=side == "doc" and bool(spec.get("doc_as_pair")), model_name=model_name)
    use_backend(model, spec, model_name)
    model.eval()
    return model


def make_bidirectional(transformer, model_name: str) -> None:
    """``bidirectional: true`` (GritLM's embedding mode, ``is_causal=False``): every token attends to every
    non-padding token. transformers builds a padding-only mask when the config says ``is_causal: false``, and
    SDPA must not fall back to its causal flag, so each attention module is told too. Right padding, pad = EOS
    when the tokenizer has no pad token, as GritLM sets its tokenizer."""
    model = transformer.auto_model
    layers = [m for m in model.modules() if hasattr(m, "is_causal")]
    if not layers:
        raise InputError(f"model {model_name!r}: bidirectional is set, but {type(model).__name__} has no "
                         "attention module with an is_causal switch.",
                         fix=f"set models.{model_name}.bidirectional: false.")
    model.config.is_causal = False
    for module in layers:
        module.is_causal = False
    tokenizer = transformer.tokenizer
    if tokenizer is not None:
        tokenizer.padding_side = "right"
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token


def tokenizer_adds_eos(tokenizer) -> bool:
    """True when the tokenizer itself ends every encoded text with its EOS token."""
    ids = tokenizer("a")["input_ids"]
    return bool(ids) and tokenizer.eos_token_id is not None and ids[-1] == tokenizer.eos_token_id


def install_tokenization(transformer, *, eos: bool, pair: bool, model_name: str) -> None:
    """Replace the text tokenization of a sentence-transformers ``Transformer`` module where R2MED's wrappers
    tokenize differently from sentence-transformers' single-segment ``tokenizer(texts, truncation=True)``:

    * ``eos`` (``append_eos``; R2MED's BMRetriever path, and e5/SFR whose tokenizer appended EOS under R2MED's
      transformers): each text (prompt + text) is tokenized without padding, truncated to max_length - 1
      tokens, the EOS id appended, then padded (``tokenizer.pad``), so the last real token is always EOS, also
      for texts longer than max_length. A tokenizer that already ends its output with EOS is truncated to
      max_length and nothing is appended. A tokenizer without a pad token pads with EOS on the left, as
      R2MED's FlagDRESModel/HighScaleModel set it.
    * ``pair`` (``doc_as_pair``; MedCPT's article encoder as R2MED calls it): documents are the text pair
      ("", prompt + text), truncation "longest_first" to max_length.

    The prompt stays separate (``encode(prompt=...)``), so ``prompt_length`` still reaches the pooling and
    ``pool_prompt: false`` keeps the prompt's tokens out of it.
    """
    if not (eos or pair):
        return
    tokenizer = transformer.tokenizer
    if tokenizer is None:
        raise InputError(f"model {model_name!r}: append_eos / doc_as_pair need a text tokenizer.",
                         fix=f"set append_eos: false and doc_as_pair: false for models.{model_name}.")
    if eos and tokenizer.eos_token_id is None:
        raise InputError(f"model {model_name!r}: append_eos is set, but the model's tokenizer has no EOS token.",
                         fix=f"set models.{model_name}.append_eos: false.")
    if eos and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
    adds_eos = eos and tokenizer_adds_eos(tokenizer)
    original = transformer.preprocess

    def preprocess(inputs, prompt=None, processing_kwargs=None, **kwargs):
        if not inputs or not all(isinstance(t, str) for t in inputs):
            return original(inputs, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
        texts = [prompt + t for t in inputs] if prompt else list(inputs)
        length = int(transformer.max_seq_length)
        if eos:
            ids = tokenizer(texts, max_length=length if adds_eos else length - 1, truncation=True, padding=False,
                            return_attention_mask=False, return_token_type_ids=False)["input_ids"]
            if not adds_eos:
                ids = [row + [tokenizer.eos_token_id] for row in ids]
            features = dict(tokenizer.pad({"input_ids": ids}, padding=True, return_attention_mask=True,
                                          return_tensors="pt"))
        else:
            features = dict(tokenizer([""] * len(texts), texts, padding=True, truncation="longest_first",
                                      max_length=length, return_tensors="pt"))
        features["modality"] = "text"
        if prompt and not pair:
            features["prompt_length"] = transformer._get_prompt_length(prompt, **kwargs)
        return features

    transformer.preprocess = preprocess

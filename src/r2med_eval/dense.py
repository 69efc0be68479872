"""Dense retrieval with sentence-transformers bi-encoders and FAISS.

Corpus embeddings are computed once per (task, model), optionally in shards, and stored as ``.npy``
beside the document-id order. The batch plan is global: the corpus is sorted by text length once,
cut into batches of ``batch_size``, and shards are contiguous runs of whole batches. Every shard
therefore encodes exactly the batches the unsharded run would, and the gathered embeddings are
identical to the unsharded ones.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from .datasets import doc_contents, read_corpus, read_queries
from .errors import InputError
from .progress import phase

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
    """Why a dense entry's ``backend`` cannot run with its other keys, and the fix (None when it can). The onnx and openvino
    backends run the checkpoint's transformer exported to ONNX on the CPU; pooling, prompts, truncation and
    normalisation stay sentence-transformers' own."""
    backend = spec.get("backend", "torch")
    if backend == "torch":
        return None
    if spec["dtype"] not in BACKEND_DTYPES[backend]:
        return (f"backend: {backend} runs dtype {' or '.join(BACKEND_DTYPES[backend])}, not {spec['dtype']}",
                f"set dtype: {BACKEND_DTYPES[backend][0]} or backend: torch")
    if spec.get("device") == "cuda":
        return f"backend: {backend} runs on the CPU, not device: cuda", "set device: cpu (or auto) or backend: torch"
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


def load_encoder(spec: dict, model_name: str, side: str = "doc", task: str | None = None):
    """A SentenceTransformer for one side ("query" or "doc") of a model entry (a ``CheckpointEncoder`` for
    ``encode_with: checkpoint``); for a ``python`` or ``mteb`` entry the adapter of ``r2med_eval.encoders``
    (same ``encode`` call), which may use the task."""
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
    device = pick_device(spec["device"]) if backend == "torch" else "cpu"
    model_kwargs = {"dtype": TORCH_DTYPES[spec["dtype"] if backend == "torch" else "fp32"]}
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


def prompt_for(spec: dict, task: str, side: str) -> str:
    per_task = (spec.get("task_prompts") or {}).get(task, {})
    key = "query" if side == "query" else "doc"
    if key in per_task:
        return per_task[key]
    return spec.get("query_prompt" if side == "query" else "doc_prompt", "")


def batch_plan(texts: list[str], batch_size: int) -> list[list[int]]:
    """Indices of ``texts`` sorted by length (longest first, stable), cut into batches."""
    order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def shard_batches(plan: list[list[int]], shard: int, nshards: int) -> list[list[int]]:
    """Contiguous whole batches for shard ``shard`` (0-based) of ``nshards``."""
    if not 0 <= shard < nshards:
        raise ValueError(f"shard {shard} out of range for {nshards} shards")
    bounds = np.linspace(0, len(plan), nshards + 1).round().astype(int)
    return plan[bounds[shard]:bounds[shard + 1]]


def encode_batches(model, texts: list[str], batches: list[list[int]], *, normalize: bool,
                   label: str = "", prompt: str = "") -> np.ndarray:
    """Encode ``texts`` batch by batch in the given plan; rows come back in plan order. The prompt goes through
    sentence-transformers' prompt mechanism (``encode(prompt=...)``): prepended to each text, and left out of
    the pooling when the model's Pooling module has ``include_prompt=False`` (``pool_prompt: false``).
    Progress (count, rate, ETA) goes to the log every R2MED_EVAL_PROGRESS_SECONDS."""
    import torch

    from .progress import Progress

    out = []
    progress = Progress(f"{label} encoding".strip(), sum(len(b) for b in batches), "texts", log)
    with torch.inference_mode():
        for batch in batches:
            emb = model.encode([texts[i] for i in batch], batch_size=len(batch), convert_to_numpy=True,
                               normalize_embeddings=normalize, show_progress_bar=False, prompt=prompt or None)
            out.append(np.asarray(emb, dtype=np.float32))
            progress.update(len(batch))
    progress.finish()
    if not out:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(out, axis=0)


def corpus_texts(corpus_path, spec: dict, task: str) -> tuple[list[str], list[str]]:
    """Document ids and texts in corpus order (the prompt is passed separately, see ``encode_batches``)."""
    corpus = read_corpus(corpus_path)
    if not corpus:
        raise InputError("the corpus holds no documents.", path=corpus_path, fix="check the dataset.")
    ids = list(corpus)
    return ids, [doc_contents(corpus[d]) for d in ids]


def _encode_shard(corpus_path, spec: dict, model_name: str, task: str, shard: int, nshards: int,
                  threads: int) -> tuple[list[str], np.ndarray, np.ndarray, dict]:
    """(the corpus's ids, the shard's corpus rows, their embeddings, counts) of one shard of the corpus."""
    _set_threads(threads)
    ids, texts = corpus_texts(corpus_path, spec, task)  # checks the corpus before loading any weights
    model = load_encoder(spec, model_name, "doc", task)
    plan = batch_plan(texts, int(spec["batch_size"]))
    batches = shard_batches(plan, shard, nshards)
    start = time.perf_counter()
    emb = encode_batches(model, texts, batches, normalize=bool(spec["normalize"]),
                         label=f"shard {shard + 1}/{nshards}:", prompt=prompt_for(spec, task, "doc"))
    elapsed = time.perf_counter() - start
    rows = np.array([i for b in batches for i in b], dtype=np.int64)
    info = {"shard": shard, "nshards": nshards, "texts": int(len(rows)), "seconds": round(elapsed, 3),
            "texts_per_second": round(len(rows) / elapsed, 1) if elapsed > 0 and len(rows) else None}
    log.info("shard done: %s", info)
    return ids, rows, emb, info


def encode_corpus_shard(corpus_path, out_npy, spec: dict, model_name: str, task: str, shard: int,
                        nshards: int, threads: int = 1) -> dict:
    _, rows, emb, info = _encode_shard(corpus_path, spec, model_name, task, shard, nshards, threads)
    from .io import atomic_path

    with atomic_path(out_npy, suffix=".npz") as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, rows=rows, emb=emb)
    return info


def encode_corpus(corpus_path, out_npy, out_ids, out_info, spec: dict, model_name: str, task: str,
                  storage: str = "float32", threads: int = 1) -> dict:
    """The whole corpus in one job (``shards: 1``): what :func:`encode_corpus_shard` for shard 1 of 1 and then
    :func:`gather` write, without the shard file in between (the same arrays, so the same bytes)."""
    ids, rows, emb, _ = _encode_shard(corpus_path, spec, model_name, task, 0, 1, threads)
    return _write_gathered(ids, [{"rows": rows, "emb": emb}], out_npy, out_ids, storage, out_info)


def ids_digest(ids: list[str]) -> str:
    """sha256 of the document id list as the ids file holds it (one id a line)."""
    import hashlib

    return hashlib.sha256(("\n".join(ids) + "\n").encode("utf-8")).hexdigest()


def gather(shard_files, corpus_path, out_npy, out_ids, storage: str = "float32", out_info=None) -> dict:
    """Join shard outputs into corpus order; check every document is encoded exactly once. ``out_info`` gets
    the counts and the sha256 of the corpus's id list, which the search checks instead of re-reading the
    corpus."""
    return _write_gathered(list(read_corpus(corpus_path)), [np.load(f) for f in shard_files], out_npy, out_ids,
                           storage, out_info)


def _write_gathered(ids: list[str], parts, out_npy, out_ids, storage: str, out_info) -> dict:
    from .io import atomic_path, write_text

    phase(f"gathering {len(parts)} shards of {len(ids)} documents")
    rows = np.concatenate([p["rows"] for p in parts])
    dims = {p["emb"].shape[1] for p in parts if p["emb"].size}
    if len(dims) != 1:
        raise InputError(f"shards disagree on the embedding dimension ({sorted(dims)}).",
                         fix="delete the shard files of this model and rerun (a type: python or mteb encoder must "
                             "return the same width for every text).")
    dim = dims.pop()
    if len(rows) != len(ids) or len(np.unique(rows)) != len(ids):
        raise InputError(f"shards cover {len(np.unique(rows))} distinct of {len(ids)} documents.",
                         fix="delete the shard files of this model and rerun.")
    emb = np.zeros((len(ids), dim), dtype=np.float32)
    for p in parts:
        if p["emb"].size:
            emb[p["rows"]] = p["emb"]
    emb = emb.astype(np.float16 if storage == "float16" else np.float32)
    with atomic_path(out_npy, suffix=".npy") as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, emb)
    write_text(out_ids, "\n".join(ids) + "\n")
    info = {"documents": len(ids), "dim": int(dim), "dtype": str(emb.dtype), "ids_sha256": ids_digest(ids)}
    if out_info is not None:
        from .io import write_json

        write_json(out_info, info)
    return info


def load_corpus_embeddings(npy, ids_file, corpus_path=None, dim: int | None = None, info_path=None):
    """The corpus embeddings, memory-mapped (float32 storage; float16 is converted to a float32 copy), and
    their document ids. The id order is checked against ``info_path`` (the sha256 of the corpus's id list
    that ``gather`` stored; the corpus is not read) or, without it, against the corpus file itself."""
    emb = np.load(npy, mmap_mode="r")
    from .io import read_json, read_lines, sha256_file

    ids = read_lines(ids_file)
    if emb.shape[0] != len(ids):
        raise InputError(f"cached embeddings have {emb.shape[0]} rows for {len(ids)} document ids.", path=npy,
                         fix="delete the cached embeddings of this model and rerun.")
    if info_path is not None:
        info = read_json(info_path)
        if info.get("ids_sha256") != sha256_file(ids_file) or info.get("documents") != len(ids):
            raise InputError("the document ids of the cached embeddings are not those their gather job stored "
                             "(a different corpus or order).", path=ids_file,
                             fix="delete the cached embeddings of this model and rerun.")
    elif corpus_path is not None and ids != list(read_corpus(corpus_path)):
        raise InputError("cached embeddings are in a different document order than the corpus.", path=ids_file,
                         fix="delete the cached embeddings of this model and rerun.")
    if dim is not None and emb.shape[1] != dim:
        raise InputError(f"cached embeddings have dimension {emb.shape[1]}, the query encoder gives {dim}.",
                         path=npy, fix="delete the cached embeddings of this model and rerun (a type: python "
                                       "encoder's encode_queries and encode_corpus must return the same width).")
    return np.ascontiguousarray(emb, dtype=np.float32), ids  # float32: a view of the memory map, no copy


def encode_queries(queries_path, out_npy, out_ids, spec: dict, model_name: str, task: str, threads: int = 1):
    from .io import atomic_path, write_text

    _set_threads(threads)
    queries = read_queries(queries_path)
    ids = list(queries)
    prompt = prompt_for(spec, task, "query")
    model = load_encoder(spec, model_name, "query", task)
    result = _encode_in_order(model, [queries[q] for q in ids], spec, "queries:", prompt)
    with atomic_path(out_npy, suffix=".npy") as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, result.astype(np.float32))
    write_text(out_ids, "\n".join(ids) + "\n")


def _encode_in_order(model, texts: list[str], spec: dict, label: str, prompt: str = "") -> np.ndarray:
    plan = batch_plan(texts, int(spec["batch_size"]))
    emb = encode_batches(model, texts, plan, normalize=bool(spec["normalize"]), label=label, prompt=prompt)
    result = np.zeros_like(emb)
    result[np.array([i for b in plan for i in b], dtype=np.int64)] = emb
    return result


def encode_query_variant(variant_path, out_npy, out_ids, spec: dict, model_name: str, task: str, method: str,
                         threads: int = 1, reasoning: str = "none") -> None:
    """Query embeddings for a generation-augmented variant, combined as R2MED's dense code does
    (``gar.dense_inputs``; the hypothetical document takes the query prompt when ``hydoc_prompt: query``)."""
    from . import gar
    from .io import atomic_path, iter_jsonl, write_text

    _set_threads(threads)
    rows = [obj for _, obj in iter_jsonl(variant_path)]
    ids = [r["id"] for r in rows]
    model = load_encoder(spec, model_name, "query", task)
    prompt = prompt_for(spec, task, "query")
    doc_prompt = prompt if spec.get("hydoc_prompt") == "query" else ""  # mteb entries: MTEB's prompts
    pairs = [gar.dense_inputs(method, r["text"], r["hy_doc"], reasoning) for r in rows]
    if all(h is None for _, h in pairs):
        emb = _encode_in_order(model, [q for q, _ in pairs], spec, f"{method}:", prompt)
    else:
        base = _encode_in_order(model, [q for q, _ in pairs], spec, "queries:", prompt)
        hyp = _encode_in_order(model, [h for _, h in pairs], spec, f"{method} documents:", doc_prompt)
        emb = (base + hyp) / 2
        if spec["normalize"]:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = emb / np.where(norms > 0, norms, 1.0)
    with atomic_path(out_npy, suffix=".npy") as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, emb.astype(np.float32))
    write_text(out_ids, "\n".join(ids) + "\n")


# ------------------------------------------------------------------ search

def _faiss():
    """faiss, with OpenMP's idle threads sleeping rather than spinning (set before the OpenMP runtime starts,
    if nothing loaded it yet): spinning threads of faiss and of BLAS slow each other down on a busy machine."""
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import faiss

    return faiss


def _max_row_norm(emb: np.ndarray, block: int = 65536) -> float:
    top = 0.0
    for lo in range(0, len(emb), block):
        part = np.asarray(emb[lo:lo + block], dtype=np.float32)
        top = max(top, float(np.sqrt(np.einsum("ij,ij->i", part, part).max(initial=0.0))))
    return top


def exact_knn(corpus_emb: np.ndarray, query_emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` by inner product, equal to ``IndexFlatIP.search`` on the same vectors (scores bit for
    bit, the same documents), on the caller's array (a memory map is not copied into an index), through BLAS.

    faiss 1.15 takes BLAS only when queries x dimensions reaches ``distance_compute_blas_threshold``
    (128,000: 334 queries of 384 dimensions); below it a sequential loop, several times slower, whose sums
    round differently. So that the results stay those of the flat index: at or above the threshold this is
    the flat index's own routine (``faiss.knn``); below it, BLAS picks twice ``k`` candidates, their scores
    are recomputed with the sequential loop's own kernel (``fvec_inner_products_by_idx``), and the top ``k``
    is taken by (score, row) as the sequential heap keeps it. A query is safe when its ``k``-th recomputed
    score exceeds the best score BLAS left out by more than twice the float32 error bound of a
    ``d``-term dot product (``2 d 2^-24 |q| max|x|``); any other query is searched by the sequential loop.
    """
    faiss = _faiss()
    xq = np.ascontiguousarray(query_emb, dtype=np.float32)
    xb = corpus_emb if corpus_emb.dtype == np.float32 and corpus_emb.flags.c_contiguous else \
        np.ascontiguousarray(corpus_emb, dtype=np.float32)
    nq, d = xq.shape
    n, k = len(xb), int(min(k, len(xb)))
    threshold = faiss.cvar.distance_compute_blas_threshold
    if nq * d >= threshold or nq == 0 or k == 0:
        return faiss.knn(xq, xb, k, faiss.METRIC_INNER_PRODUCT)
    kc = min(n, 2 * k + 16)
    faiss.cvar.distance_compute_blas_threshold = 0
    try:
        blas_scores, cand = faiss.knn(xq, xb, kc, faiss.METRIC_INNER_PRODUCT)
    finally:
        faiss.cvar.distance_compute_blas_threshold = threshold
    cand = np.ascontiguousarray(cand, dtype=np.int64)
    exact = np.empty(cand.shape, dtype=np.float32)
    faiss.fvec_inner_products_by_idx(faiss.swig_ptr(exact), faiss.swig_ptr(xq), faiss.swig_ptr(xb),
                                     faiss.swig_ptr(cand), d, nq, kc)
    order = np.stack([np.lexsort((cand[i], -exact[i])) for i in range(nq)])
    ranked = np.take_along_axis(exact, order, axis=1)
    scores, labels = ranked[:, :k].copy(), np.take_along_axis(cand, order[:, :k], axis=1)
    # a tie across the k-th place: which of the tied rows the sequential heap keeps is its own business
    unsafe = ranked[:, k - 1] == ranked[:, k] if kc > k else np.zeros(nq, dtype=bool)
    if kc < n:
        bound = 2.0 * d * 2.0 ** -24 * np.linalg.norm(xq, axis=1) * _max_row_norm(xb)
        unsafe |= ~(scores[:, k - 1] > blas_scores[:, kc - 1] + 2 * bound)
    unsafe = np.flatnonzero(unsafe)
    if len(unsafe):
        log.info("exact search: %d of %d queries near the candidate cut, searched by the sequential loop",
                 len(unsafe), nq)
        s2, l2 = faiss.knn(xq[unsafe], xb, k, faiss.METRIC_INNER_PRODUCT)  # below the threshold: sequential
        scores[unsafe], labels[unsafe] = s2, l2
    return scores, labels


def build_faiss(emb: np.ndarray, index_spec: dict):
    faiss = _faiss()

    kind = index_spec["kind"]
    dim = emb.shape[1]
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "ivf":
        nlist = int(index_spec.get("nlist") or max(1, int(4 * np.sqrt(len(emb)))))
        nlist = min(nlist, len(emb))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(int(index_spec["seed"]))
        n_train = min(256 * nlist, int(index_spec.get("max_train") or 256 * nlist))
        if n_train < 39 * nlist:
            log.warning("IVF: training on %d vectors for %d lists (faiss asks for at least 39 per list); raise "
                        "max_train or lower nlist", min(n_train, len(emb)), nlist)
        sample = emb if len(emb) <= n_train else emb[rng.choice(len(emb), n_train, replace=False)]
        log.info("IVF: %d lists trained on %d of %d vectors", nlist, len(sample), len(emb))
        index.cp.seed = int(index_spec["seed"])
        index.train(sample)
        index.nprobe = int(index_spec["nprobe"])
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(index_spec["m"]), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(index_spec["ef_construction"])
        index.hnsw.efSearch = int(index_spec["ef_search"])
    else:
        raise InputError(f"unknown FAISS index kind {kind!r}.", fix="use flat, ivf or hnsw.")
    index.add(emb)
    return index


def search(corpus_emb: np.ndarray, doc_ids: list[str], query_emb: np.ndarray, query_ids: list[str], k: int,
           index_spec: dict | None = None, threads: int = 1) -> tuple[dict, dict]:
    """Top-``k`` by inner product for all queries in one batch. Returns (run, info). Exact search (``flat``)
    runs :func:`exact_knn` on ``corpus_emb`` itself; the approximate indexes copy it into the index."""
    faiss = _faiss()
    faiss.omp_set_num_threads(max(1, threads))
    index_spec = index_spec or {"kind": "flat"}
    k_eff = min(len(doc_ids), k + max(10, k // 10))
    phase(f"searching {len(query_ids)} queries over {len(doc_ids)} documents ({index_spec['kind']})")
    start = time.perf_counter()
    if index_spec["kind"] == "flat":
        built = time.perf_counter()
        scores, idx = exact_knn(corpus_emb, query_emb, k_eff)
    else:
        index = build_faiss(corpus_emb, index_spec)
        built = time.perf_counter()
        scores, idx = index.search(np.ascontiguousarray(query_emb, dtype=np.float32), k_eff)
    searched = time.perf_counter()
    info = {"kind": index_spec["kind"], "build_seconds": round(built - start, 4),
            "search_seconds": round(searched - built, 4), "queries": len(query_ids), "documents": len(doc_ids)}
    if index_spec["kind"] != "flat":
        _, exact_idx = exact_knn(corpus_emb, query_emb, min(k, len(doc_ids)))
        overlap = [len(set(a[a >= 0][:k]) & set(b[b >= 0])) / max(1, len(b[b >= 0]))
                   for a, b in zip(idx, exact_idx)]
        info["recall_vs_exact_at_k"] = round(float(np.mean(overlap)), 5)
        log.info("%s search recall@%d against exact search: %.4f", info["kind"], k, info["recall_vs_exact_at_k"])
    run: dict[str, dict[str, float]] = {}
    for qi, qid in enumerate(query_ids):
        pairs = [(doc_ids[j], round(float(s), 6)) for s, j in zip(scores[qi], idx[qi]) if j >= 0]
        pairs.sort(key=lambda x: (-x[1], x[0]))
        run[qid] = dict(pairs[:k])
    log.info("searched %d queries over %d documents: %s", len(query_ids), len(doc_ids), info)
    return run, info


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, int(threads)))

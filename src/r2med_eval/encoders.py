"""Encoders that are not sentence-transformers checkpoints, behind the interface ``dense`` encodes with.

* ``type: python``: ``factory: module:callable`` (plus ``kwargs``) returns any object with
  ``encode_queries(texts, **kw)`` / ``encode_corpus(texts, **kw)``, or MTEB's ``encode(sentences, task_name=...,
  prompt_type=...)``; the module may live outside this package (``python_path``: a folder put first on
  ``sys.path``).
* ``type: mteb``: a model built by ``mteb.get_model(name, revision)``, encoding through MTEB's own encoder
  protocol (a DataLoader of texts, the MTEB task's metadata, ``PromptType.query`` or ``document``), so that MTEB's
  prompts per task apply.

Both are wrapped in ``Adapter``, which ``dense.encode_batches`` calls as it calls a SentenceTransformer
(``encode(texts, batch_size=..., normalize_embeddings=...)``): the batch plan, shards, caching and the FAISS
search are those of ``dense``. ``factories.module_file`` finds the factory's source file without importing anything
(the control layer hashes it into the encoding jobs' params).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
from pathlib import Path

import numpy as np

from .errors import InputError
from .factories import module_file, mteb_task_name, split_factory  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

SIDES = {"query": "encode_queries", "doc": "encode_corpus"}
MTEB_SIDES = {"query": "query", "doc": "document"}


class Adapter:
    """``encode(texts, batch_size=, normalize_embeddings=, ...)`` over one side (query or doc) of an encoder."""

    def __init__(self, call, model_name: str, side: str):
        self._call = call
        self.model_name = model_name
        self.side = side
        self.max_seq_length = None
        self.tokenizer = None

    def encode(self, texts, batch_size: int = 32, normalize_embeddings: bool = False, prompt: str | None = None,
               **_ignored) -> np.ndarray:
        """``prompt`` (the entry's doc_prompt/query_prompt): prepended to each text, as the encoder sees only
        text."""
        texts = [prompt + t for t in texts] if prompt else list(texts)
        out = self._call(texts, batch_size)
        emb = _as_array(out, len(texts), self.model_name)
        if normalize_embeddings:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = emb / np.where(norms > 0, norms, 1.0)
        return emb

    def eval(self):
        return self


def _as_array(out, n: int, model_name: str) -> np.ndarray:
    if hasattr(out, "detach"):  # a torch tensor
        out = out.detach().float().cpu().numpy()
    emb = np.asarray(out, dtype=np.float32)
    if emb.ndim != 2 or emb.shape[0] != n:
        raise InputError(f"model {model_name!r}: the encoder returned an array of shape {emb.shape} for {n} texts.",
                         fix="return one embedding per text: a 2-D array (texts x dimensions).")
    if not np.isfinite(emb).all():
        raise InputError(f"model {model_name!r}: the encoder returned NaN or infinite values.",
                         fix="check the encoder (dtype, inputs).")
    return emb


# ------------------------------------------------------------------ type: python

def load_factory(spec: dict, model_name: str):
    """The factory callable of a ``python`` model (its module imported, ``python_path`` first on sys.path)."""
    module, attr = split_factory(spec["factory"])
    if spec.get("python_path"):
        folder = str(Path(spec["python_path"]).expanduser().resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(f"model {model_name!r}: cannot import {module!r}: {exc}.",
                         fix=f"set models.{model_name}.python_path to the folder holding {module.split('.')[0]}, or "
                             "install the package into this environment.") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"model {model_name!r}: module {module!r} has no {attr!r}.",
                             path=getattr(mod, "__file__", None), fix=f"fix models.{model_name}.factory.")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"model {model_name!r}: {spec['factory']!r} is not callable.",
                         fix="name a class or a function that returns the encoder.")
    return obj


def load_python(spec: dict, model_name: str, side: str, task: str, device: str | None = None) -> Adapter:
    factory = load_factory(spec, model_name)
    kwargs = dict(spec.get("kwargs") or {})
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if device is not None and "device" in params and "device" not in kwargs:
        kwargs["device"] = device
    try:
        obj = factory(**kwargs)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
        raise InputError(f"model {model_name!r}: {spec['factory']}(**kwargs) failed: {type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0][:300]}",
                         fix=f"check models.{model_name}.kwargs and the factory.") from None
    method = SIDES[side]
    if callable(getattr(obj, method, None)):
        fn = getattr(obj, method)
        log.info("model %s (%s side): %s.%s", model_name, side, spec["factory"], method)
        return Adapter(lambda texts, bs: fn(texts, batch_size=bs), model_name, side)
    if callable(getattr(obj, "encode", None)):
        fn = obj.encode
        prompt_type = MTEB_SIDES[side]
        log.info("model %s (%s side): %s.encode(..., task_name=%r, prompt_type=%r)", model_name, side,
                 spec["factory"], task, prompt_type)
        return Adapter(lambda texts, bs: fn(texts, task_name=task, prompt_type=prompt_type, batch_size=bs),
                       model_name, side)
    raise InputError(f"model {model_name!r}: the object {spec['factory']}(**kwargs) returned has neither "
                     f"{method}() nor encode().", fix="give it encode_queries(texts, **kw) and encode_corpus(texts, "
                                                      "**kw), or MTEB's encode(sentences, task_name=, prompt_type=).")


# ------------------------------------------------------------------ type: mteb

def load_mteb(spec: dict, model_name: str, side: str, task: str, device: str | None = None) -> Adapter:
    """A model from ``mteb.get_model(name, revision)``, encoding through MTEB's protocol with the metadata of
    ``spec["mteb_task"]`` (the MTEB task this task stands for), so that MTEB's prompts for it apply."""
    try:
        import mteb
    except ImportError:
        raise InputError(f"model {model_name!r}: type mteb needs the mteb package.",
                         fix="install the pinned mteb (requirements.txt), or use envs/dense.yaml.") from None
    from datasets import Dataset
    from torch.utils.data import DataLoader

    name = spec["mteb_task"]
    try:
        metadata = mteb.get_task(name).metadata
    except Exception as exc:  # noqa: BLE001 - mteb raises KeyError/ValueError for unknown tasks
        raise InputError(f"model {model_name!r}: MTEB has no task {name!r} ({type(exc).__name__}).",
                         fix=f"set models.{model_name}.mteb_tasks.{task} to an MTEB retrieval task name.") from None
    try:
        model = mteb.get_model(spec["name"], spec.get("revision"), device=device)
    except Exception as exc:  # noqa: BLE001 - the model's loader may raise anything
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise InputError(f"model {model_name!r}: mteb.get_model({spec['name']!r}, {spec.get('revision')!r}) failed: "
                         f"{type(exc).__name__}: {first}",
                         fix="check the name and revision (mteb.get_model_meta), and that the weights are reachable: "
                             "downloaded beforehand into the Hugging Face cache (HF_HOME) where jobs run "
                             "offline.") from None
    prompt_type = mteb.types.PromptType(MTEB_SIDES[side])
    log.info("model %s (%s side): mteb.get_model(%r, %r), task metadata of %s, prompt type %s", model_name, side,
             spec["name"], spec.get("revision"), name, prompt_type.value)

    def call(texts, batch_size):
        loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=batch_size)
        return model.encode(loader, task_metadata=metadata, hf_split="test", hf_subset="default",
                            prompt_type=prompt_type, batch_size=batch_size, show_progress_bar=False)

    return Adapter(call, model_name, side)


def load(spec: dict, model_name: str, side: str, task: str, device: str | None = None) -> Adapter:
    """The encoder of a ``python`` or ``mteb`` model entry (its params projection) for one side."""
    if spec["type"] == "python":
        return load_python(spec, model_name, side, task, device)
    return load_mteb(spec, model_name, side, task, device)

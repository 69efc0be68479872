"""Encoders that are not sentence-transformers checkpoints, behind the interface ``dense`` encodes with.

* ``type: python``: ``factory: module:callable`` (plus ``kwargs``) returns any object with
  ``encode_queries(texts, **kw)`` / ``encode_corpus(texts, **kw)``, or MTEB's ``encode(sentences, task_name=...,
  prompt_type=...)``; the module may live outside this package (``python_path``: a folder put first on
  ``sys.path``).
* ``type: mteb``: a model built by ``mteb.get_model(name, revision)``, encoding through MTEB's own encoder
  protocol (a DataLoader of texts, the MTEB task's metadata, ``PromptType.query`` or ``document``), so that MTEB's
  prompts per task apply.

Both are wrapped in ``Adapter``, which ``dense_encode.encode_batches`` calls as it calls a SentenceTransformer
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

from ..confidential import ExternalError
from ..errors import InputError
from .factories import module_file, mteb_task_name, split_factory  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

SIDES = {"query": "encode_queries", "doc": "encode_corpus"}
MTEB_SIDES = {"query": "query", "doc": "document"}


class Adapter:
    """``encode(texts, batch_size=, normalize_embeddings=, ...)`` over one side (query or doc) of an encoder.

    ``origin`` says where the model comes from (``factory my_project.enc:make``, ``mteb.get_model(...)``) and
    ``call_name`` what is called (``encode_corpus()``): both go into the one message of a failure. Every exception of
    the call is an ``ExternalError`` (its text may quote the texts: ``smk.run`` keeps it out of the logs of a
    MIMIC-derived job), every output that is not a finite real 2-D array with one row per text an ``InputError``."""

    def __init__(self, call, model_name: str, side: str, origin: str = "", call_name: str = "encode()"):
        self._call = call
        self.model_name = model_name
        self.side = side
        self.origin = origin
        self.call_name = call_name
        self.width: int | None = None  # the embedding width of the first batch: every batch must have it
        self.max_seq_length = None
        self.tokenizer = None

    def label(self) -> str:
        return f"model {self.model_name!r}" + (f" ({self.origin})" if self.origin else "")

    def encode(self, texts, batch_size: int = 32, normalize_embeddings: bool = False, prompt: str | None = None,
               **_ignored) -> np.ndarray:
        """``prompt`` (the entry's doc_prompt/query_prompt): prepended to each text, as the encoder sees only
        text."""
        texts = [prompt + t for t in texts] if prompt else list(texts)
        try:
            out = self._call(texts, batch_size)
        except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
            raise ExternalError(f"{self.label()}: {self.call_name} on {len(texts)} texts", exc,
                                fix=f"fix the encoder (models.{self.model_name}) so that it encodes every text it is "
                                    "given.") from None
        emb = embeddings(out, len(texts), self.label(), self.call_name, self.width)
        self.width = emb.shape[1]
        if normalize_embeddings:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = emb / np.where(norms > 0, norms, 1.0)
        return emb

    def eval(self):
        return self


RETURN_FIX = ("return one embedding per text: a 2-D array or tensor of real numbers (texts x dimensions), the same "
              "width for every batch, without NaN or infinity (e.g. np.asarray(vectors, dtype=np.float32)).")


def embeddings(out, n: int, label: str, call_name: str = "the encoder", width: int | None = None) -> np.ndarray:
    """The encoder's output for ``n`` texts as a float32 array (texts x dimensions); anything else stops with one
    InputError naming the model, the call and what came back (its type and shape, never its values)."""

    def refuse(what: str):
        raise InputError(f"{label}: {call_name} returned {what} for {n} texts; it must return a finite real 2-D "
                         "array with one row per text.", fix=RETURN_FIX)

    if hasattr(out, "detach") and callable(getattr(out, "is_complex", None)):  # a torch tensor
        if out.is_complex():
            refuse(f"a complex tensor of shape {tuple(out.shape)}")
        try:
            out = out.detach().float().cpu().numpy()
        except Exception as exc:  # noqa: BLE001 - sparse, meta or quantised tensors
            refuse(f"a tensor NumPy cannot read ({type(exc).__name__})")
    if isinstance(out, (str, bytes)):
        refuse("a string")
    if isinstance(out, dict):
        refuse("a dict (name the entry that holds the embeddings in the encoder)")
    if out is None:
        refuse("None")
    try:
        arr = np.asarray(out)
    except Exception as exc:  # noqa: BLE001 - ragged lists, objects whose __array__ fails
        ragged = "inhomogeneous" in str(exc)
        refuse("rows of different lengths (a ragged list)" if ragged else
               f"a {type(out).__name__} that NumPy cannot turn into an array ({type(exc).__name__})")
    kind = arr.dtype.kind
    if kind == "c":
        refuse(f"complex values (shape {arr.shape})")
    if kind in "USa":
        refuse(f"strings (shape {arr.shape})")
    if kind == "O":
        refuse(f"Python objects (shape {arr.shape}: a ragged list, or values that are not numbers)")
    if kind not in "biuf":
        refuse(f"values of dtype {arr.dtype}")
    if arr.ndim != 2:
        refuse(f"an array of shape {arr.shape}")
    if arr.shape[0] != n:
        refuse(f"{arr.shape[0]} rows")
    if arr.shape[1] == 0:
        refuse("rows of no dimension")
    if width is not None and arr.shape[1] != width:
        refuse(f"rows of {arr.shape[1]} dimensions, after {width} in the batches before")
    with np.errstate(over="ignore", invalid="ignore"):
        emb = arr.astype(np.float32)
    if not np.isfinite(emb).all():
        beyond = kind == "f" and bool(np.isfinite(arr).all())
        refuse("values beyond float32's range" if beyond else "NaN or infinite values")
    return emb


# ------------------------------------------------------------------ type: python

def load_factory(spec: dict, model_name: str):
    """The factory callable of a ``python`` model (its module imported, ``python_path`` first on sys.path)."""
    module, attr = split_factory(spec["factory"])
    if spec.get("python_path"):
        folder = str(Path(spec["python_path"]).expanduser().resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    label = f"model {model_name!r} (factory {spec['factory']})"
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(f"model {model_name!r}: cannot import {module!r}: {exc}.",
                         fix=f"set models.{model_name}.python_path to the folder holding {module.split('.')[0]}, or "
                             "install the package into this environment.") from None
    except Exception as exc:  # noqa: BLE001 - the module's own code runs on import
        raise ExternalError(f"{label}: importing {module}", exc, fix=f"fix the module {module}.") from None
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
    label = f"model {model_name!r} (factory {spec['factory']})"
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if device is not None and "device" in params and "device" not in kwargs:
        kwargs["device"] = device
    try:
        obj = factory(**kwargs)
        method = SIDES[side]
        fn = getattr(obj, method, None)
        fn = fn if callable(fn) else None
        classic = None if fn is not None else getattr(obj, "encode", None)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
        raise ExternalError(f"{label}: {spec['factory']}(**kwargs)", exc,
                            fix=f"check models.{model_name}.kwargs and the factory.") from None
    origin = f"factory {spec['factory']}"
    if fn is not None:
        log.info("model %s (%s side): %s.%s", model_name, side, spec["factory"], method)
        return Adapter(lambda texts, bs: fn(texts, batch_size=bs), model_name, side, origin, f"{method}()")
    if callable(classic):
        prompt_type = MTEB_SIDES[side]
        log.info("model %s (%s side): %s.encode(..., task_name=%r, prompt_type=%r)", model_name, side,
                 spec["factory"], task, prompt_type)
        return Adapter(lambda texts, bs: classic(texts, task_name=task, prompt_type=prompt_type, batch_size=bs),
                       model_name, side, origin, f"encode(prompt_type={prompt_type!r})")
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
    origin = f"mteb.get_model({spec['name']!r}, {spec.get('revision')!r})"
    try:
        model = mteb.get_model(spec["name"], spec.get("revision"), device=device)
    except Exception as exc:  # noqa: BLE001 - the model's loader may raise anything
        raise ExternalError(f"model {model_name!r}: {origin}", exc,
                            fix="check the name and revision (mteb.get_model_meta), and that the weights are "
                                "reachable: downloaded beforehand into the Hugging Face cache (HF_HOME) where jobs "
                                "run offline.") from None
    prompt_type = mteb.types.PromptType(MTEB_SIDES[side])
    log.info("model %s (%s side): mteb.get_model(%r, %r), task metadata of %s, prompt type %s", model_name, side,
             spec["name"], spec.get("revision"), name, prompt_type.value)

    def call(texts, batch_size):
        loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=batch_size)
        return model.encode(loader, task_metadata=metadata, hf_split="test", hf_subset="default",
                            prompt_type=prompt_type, batch_size=batch_size, show_progress_bar=False)

    return Adapter(call, model_name, side, origin, f"encode(prompt_type={prompt_type.value!r})")


def load(spec: dict, model_name: str, side: str, task: str, device: str | None = None) -> Adapter:
    """The encoder of a ``python`` or ``mteb`` model entry (its params projection) for one side."""
    if spec["type"] == "python":
        return load_python(spec, model_name, side, task, device)
    return load_mteb(spec, model_name, side, task, device)

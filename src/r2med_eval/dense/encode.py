"""Dense encoding: the corpus, the queries and the query variants of a task through a model of ``dense_models``.

The batch plan is global: the texts are sorted by length once (longest first, stable), cut into batches of
``batch_size``, and shards are contiguous runs of whole batches. Every shard therefore encodes exactly the
batches the unsharded run would, and the gathered embeddings are identical to the unsharded ones (stored by
``embeddings``).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..benchmarks.datasets import doc_contents, read_corpus, read_queries
from ..errors import InputError
from .embeddings import write_gathered
from .models import load_encoder

log = logging.getLogger(__name__)


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
    if callable(getattr(model, "encode_plan", None)):  # a served entry (dense.served): the job's batches at once
        return model.encode_plan(texts, batches, normalize=normalize, label=label, prompt=prompt)
    import torch

    from ..progress import Progress

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
    """Document ids and texts in corpus order (the prompt is passed separately, see ``encode_batches``): title and
    text, or the text alone with ``doc_text: text`` (set by the entry's protocol, ``benchmarks.protocols``)."""
    corpus = read_corpus(corpus_path)
    if not corpus:
        raise InputError("the corpus holds no documents.", path=corpus_path, fix="check the dataset.")
    ids = list(corpus)
    if spec.get("doc_text") == "text":
        titled = sum(1 for d in ids if corpus[d].get("title"))
        if titled:
            log.info("documents' text alone, without their titles (%d of %d documents have one)", titled, len(ids))
        return ids, [corpus[d]["text"] for d in ids]
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
    from ..io import atomic_path

    with atomic_path(out_npy, suffix=".npz") as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, rows=rows, emb=emb)
    return info


def encode_corpus(corpus_path, out_npy, out_ids, out_info, spec: dict, model_name: str, task: str,
                  storage: str = "float32", threads: int = 1) -> dict:
    """The whole corpus in one job (``shards: 1``): what :func:`encode_corpus_shard` for shard 1 of 1 and then
    :func:`gather` write, without the shard file in between (the same arrays, so the same bytes)."""
    ids, rows, emb, _ = _encode_shard(corpus_path, spec, model_name, task, 0, 1, threads)
    return write_gathered(ids, [{"rows": rows, "emb": emb}], out_npy, out_ids, storage, out_info)


def encode_queries(queries_path, out_npy, out_ids, spec: dict, model_name: str, task: str, threads: int = 1):
    from ..io import atomic_path, write_text

    _set_threads(threads)
    queries = read_queries(queries_path)
    ids = list(queries)
    prompt = prompt_for(spec, task, "query")
    model = load_encoder(spec, model_name, "query", task)
    result = _encode_in_order(model, [queries[q] for q in ids], spec, bool(spec["normalize"]), "queries:", prompt)
    with atomic_path(out_npy, suffix=".npy") as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, result.astype(np.float32))
    write_text(out_ids, "\n".join(ids) + "\n")


def _encode_in_order(model, texts: list[str], spec: dict, normalize: bool, label: str,
                     prompt: str = "") -> np.ndarray:
    plan = batch_plan(texts, int(spec["batch_size"]))
    emb = encode_batches(model, texts, plan, normalize=normalize, label=label, prompt=prompt)
    result = np.zeros_like(emb)
    result[np.array([i for b in plan for i in b], dtype=np.int64)] = emb
    return result


def encode_query_variant(variant_path, out_npy, out_ids, spec: dict, model_name: str, task: str, method: str,
                         threads: int = 1, reasoning: str = "none") -> None:
    """Query embeddings for a generation-augmented variant, combined as R2MED's dense code does
    (``gar.dense_inputs``; the hypothetical document takes the query prompt when ``hydoc_prompt: query``).

    Two texts per query (HyDE, LameR, any method with a reasoning LLM) are averaged as ``hydoc_average`` says:
    ``normalized``, each vector L2-normalised first (R2MED's wrappers that normalise: bge, e5, SFR, INSTRUCTOR,
    GritLM, NV-Embed); ``raw``, the vectors as the encoder returns them before the entry's normalisation
    (R2MED's contriever, BMRetriever and MedCPT wrappers). The average is L2-normalised when ``normalize`` is set
    (R2MED's cosine scoring does the same to the query vector)."""
    from ..expansion import gar
    from ..io import atomic_path, iter_jsonl, write_text

    _set_threads(threads)
    rows = [obj for _, obj in iter_jsonl(variant_path)]
    ids = [r["id"] for r in rows]
    prompt = prompt_for(spec, task, "query")
    doc_prompt = prompt if spec.get("hydoc_prompt") == "query" else ""  # mteb entries: MTEB's prompts
    pairs = [gar.dense_inputs(method, r["text"], r["hy_doc"], reasoning) for r in rows]
    if all(h is None for _, h in pairs):
        model = load_encoder(spec, model_name, "query", task)
        emb = _encode_in_order(model, [q for q, _ in pairs], spec, bool(spec["normalize"]), f"{method}:", prompt)
    else:
        each = spec.get("hydoc_average", "normalized") == "normalized"
        model = load_encoder({**spec, "normalize": each}, model_name, "query", task)
        log.info("query variant %s: the query's and the hypothetical document's vectors averaged %s", method,
                 "each L2-normalised" if each else "as the encoder returns them (raw)")
        base = _encode_in_order(model, [q for q, _ in pairs], spec, each, "queries:", prompt)
        hyp = _encode_in_order(model, [h for _, h in pairs], spec, each, f"{method} documents:", doc_prompt)
        empty = sum(1 for _, h in pairs if h == "")
        zero = int(np.count_nonzero(~hyp.any(axis=1)))
        if zero:
            log.warning("%d of %d hypothetical documents encode to a zero vector (%d are empty: with the prompt "
                        "left out of the pooling nothing is left), so those queries keep their own vector. R2MED's "
                        "GritLM wrapper gives NaN there, and BEIR then scores every document -1 (docs/models.md)",
                        zero, len(pairs), empty)
        elif empty:
            log.info("%d of %d hypothetical documents are empty, encoded as the empty text", empty, len(pairs))
        emb = (base + hyp) / 2
        if spec["normalize"]:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = emb / np.where(norms > 0, norms, 1.0)
    with atomic_path(out_npy, suffix=".npy") as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, emb.astype(np.float32))
    write_text(out_ids, "\n".join(ids) + "\n")


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, int(threads)))

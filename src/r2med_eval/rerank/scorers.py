"""Second stage: re-score the top k of a run with a cross-encoder, RankLLaMA or a bi-encoder.

Documents below k keep their original order under the re-scored ones, or are dropped (``truncate``: the
reranked run holds only the re-scored top k, as R2MED's eval_reranker.py writes it). Pairs are scored batch
by batch; no more than one batch of texts is held beyond the run and the corpus.

The cross-encoder and RankLLaMA scorers follow R2MED's ``RerankerModel.predict`` (src/utils.py at 62b7074):

* cross-encoder (R2MED's ``bge`` and ``mono`` modes): query and document tokenised as a pair, truncated
  ``longest_first`` to ``max_length``, padded to the longest pair of the batch;
  ``AutoModelForSequenceClassification``; the score is the single logit (``score: logit``: bge-reranker,
  and MedCPT's cross-encoder as its model card does), the second logit of a two-class head (``logit_1``:
  R2MED's monoBERT), or their difference (``logit_1_minus_logit_0``).
* RankLLaMA (``llama`` mode): the base causal LM loaded as a one-label sequence classifier, the PEFT
  LoRA adapter applied and merged (``merge_and_unload``); each pair tokenised alone as
  (``query: {query}``, ``document: {doc}``) with ``max_length`` (``longest_first`` truncation, which is
  what transformers does when only ``max_length`` is given), no padding; the score is ``logits[0][0]``
  (the head at the last token).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..benchmarks.datasets import doc_contents
from ..errors import InputError
from ..scoring.runs import ranked
from .merge import check_depth, merge  # noqa: F401 (rerank.check_depth, rerank.merge)

log = logging.getLogger(__name__)


def rerank_run(run: dict, k: int, score_pairs, queries: dict[str, str], corpus: dict[str, dict],
               batch_size: int = 32, truncate: bool = False) -> tuple[dict, dict, dict]:
    """``score_pairs(list of (query, doc text), qid, doc ids) -> scores``.

    Returns (merged run, raw new scores, info); with ``truncate`` the run holds only the re-scored top k."""
    from ..progress import Progress

    pairs_done, start = 0, time.perf_counter()
    merged, raw = {}, {}
    progress = Progress(f"re-scoring the top {k}", sum(min(k, len(docs)) for docs in run.values()), "pairs", log)
    for qid in sorted(run):
        top = [d for d, _ in ranked(run[qid])[:k]]
        scores: dict[str, float] = {}
        for i in range(0, len(top), batch_size):
            chunk = top[i:i + batch_size]
            values = score_pairs([(queries[qid], doc_contents(corpus[d])) for d in chunk], qid, chunk)
            for did, s in zip(chunk, np.asarray(values, dtype=np.float64).reshape(-1)):
                scores[did] = float(s)
            pairs_done += len(chunk)
            progress.update(len(chunk))
        raw[qid] = scores
        merged[qid] = merge(run[qid], scores, truncate)
    progress.finish()
    elapsed = time.perf_counter() - start
    info = {"pairs": pairs_done, "seconds": round(elapsed, 3),
            "pairs_per_second": round(pairs_done / elapsed, 1) if elapsed > 0 else None}
    log.info("re-scored %d pairs in %.2f s (%s pairs/s)", pairs_done, elapsed, info["pairs_per_second"])
    return merged, raw, info


DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
SCORES = ("logit", "logit_1", "logit_1_minus_logit_0")


def _head_scores(logits, score: str):
    """The score of each pair from a sequence-classification head's logits (batch x labels)."""
    logits = logits.float()
    if score == "logit":
        return logits.view(-1)
    if score == "logit_1":
        return logits[:, 1]
    return logits[:, 1] - logits[:, 0]


def _check_head(num_labels: int, score: str, name: str, source: str) -> None:
    wanted = 1 if score == "logit" else 2
    if num_labels != wanted:
        raise InputError(f"reranker {name!r}: score {score!r} needs a head with {wanted} output(s); {source} has "
                         f"{num_labels}.", fix=f"set models.{name}.score to " +
                         ("logit (a one-logit head)" if num_labels == 1 else "logit_1 or logit_1_minus_logit_0 "
                                                                             "(a two-class head)") + ".")


def cross_encoder_scorer(spec: dict, name: str):
    """R2MED's RerankerModel in its bge / mono modes (module docstring)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ..dense.models import load_model, pick_device, resolve_source

    source, revision = resolve_source(spec["source"], name)
    device = pick_device(spec["device"])
    trust = bool(spec["trust_remote_code"])
    tokenizer = load_model(lambda: AutoTokenizer.from_pretrained(source, revision=revision, trust_remote_code=trust),
                           source, name, revision)
    model = load_model(lambda: AutoModelForSequenceClassification.from_pretrained(
        source, revision=revision, trust_remote_code=trust, dtype=getattr(torch, DTYPES[spec["dtype"]])),
        source, name, revision)
    model.to(device).eval()
    _check_head(int(model.config.num_labels), spec["score"], name, source)
    max_length, how = int(spec["max_length"]), spec["score"]

    @torch.no_grad()
    def score(pairs, qid=None, doc_ids=None):
        queries, docs = zip(*pairs)
        inputs = tokenizer(list(queries), list(docs), padding="longest", truncation=True, max_length=max_length,
                           return_tensors="pt").to(device)
        return _head_scores(model(**inputs).logits, how).cpu().numpy().astype(np.float64)

    return score


def _load_adapter(factory, adapter: str, name: str, revision):
    """A PEFT adapter (a folder with adapter_config.json, or a Hub name); a failure as one InputError."""
    from pathlib import Path

    fix = (f"point models.{name}.source at the PEFT adapter (a folder with adapter_config.json and the adapter "
           f"weights, or its Hub name; run `snakemake --cores 1 prefetch` first where jobs have no network).")
    if Path(adapter).is_dir() and not (Path(adapter) / "adapter_config.json").is_file():
        raise InputError(f"reranker {name!r}: the adapter folder holds no adapter_config.json.", path=adapter, fix=fix)
    try:
        return factory()
    except Exception as exc:  # noqa: BLE001 - peft and the Hub raise many kinds
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        where = adapter + (f" at revision {revision}" if revision else "")
        raise InputError(f"reranker {name!r}: cannot load the adapter {where}: {type(exc).__name__}: {first}",
                         fix=fix) from None


def rankllama_scorer(spec: dict, name: str):
    """R2MED's RerankerModel in its llama mode (module docstring): RankLLaMA, a PEFT LoRA adapter
    (``source``) over a base causal LM (``base_source``, which also gives the tokenizer)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ..dense.models import load_model, pick_device, resolve_source

    adapter, adapter_rev = resolve_source(spec["source"], name)
    base, base_rev = resolve_source(spec["base_source"], name)
    device = pick_device(spec["device"])
    trust = bool(spec["trust_remote_code"])
    tokenizer = load_model(lambda: AutoTokenizer.from_pretrained(base, revision=base_rev, trust_remote_code=trust),
                           base, name, base_rev)
    base_model = load_model(lambda: AutoModelForSequenceClassification.from_pretrained(
        base, revision=base_rev, num_labels=1, trust_remote_code=trust, dtype=getattr(torch, DTYPES[spec["dtype"]]),
        device_map=device), base, name, base_rev)
    model = _load_adapter(lambda: PeftModel.from_pretrained(base_model, adapter, revision=adapter_rev),
                          adapter, name, adapter_rev).merge_and_unload()
    model.eval()
    max_length = int(spec["max_length"])
    query_template, doc_template = spec["query_template"], spec["doc_template"]

    @torch.no_grad()
    def score(pairs, qid=None, doc_ids=None):
        out = []
        for query, doc in pairs:  # one pair at a time, unpadded, as R2MED
            inputs = tokenizer(query_template.replace("{query}", query), doc_template.replace("{doc}", doc),
                               truncation=True, max_length=max_length, return_tensors="pt").to(device)
            out.append(model(**inputs).logits[0][0].float().item())
        return np.asarray(out, dtype=np.float64)

    return score


def cached_embedding_scorer(emb_path, ids_path, query_emb_path, query_ids_path, corpus_path):
    """Bi-encoder re-scoring from the model's cached corpus and query embeddings (no re-encoding):
    the score is the same inner product the dense retriever uses."""
    from ..dense.embeddings import load_corpus_embeddings
    from ..io import read_lines

    qemb = np.load(query_emb_path)
    emb, ids = load_corpus_embeddings(emb_path, ids_path, corpus_path, dim=qemb.shape[1])
    row = {d: i for i, d in enumerate(ids)}
    qrow = {q: i for i, q in enumerate(read_lines(query_ids_path))}

    def score(pairs, qid, doc_ids):
        return emb[[row[d] for d in doc_ids]] @ qemb[qrow[qid]]

    return score

"""Second stage: re-score the top k of a run with a cross-encoder or a bi-encoder.

Documents below k keep their original order under the re-scored ones. Pairs are scored batch by
batch; no more than one batch of texts is held beyond the run and the corpus.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .datasets import doc_contents
from .runs import ranked

log = logging.getLogger(__name__)


def check_depth(run: dict, k: int, name: str) -> str | None:
    """A note when ``k`` is deeper than the run (its longest ranking): then the whole run is re-scored, which
    is what the depth asks for on a shorter run."""
    depth = max((len(d) for d in run.values()), default=0)
    if k > depth:
        return (f"rerank depth {k} is larger than the depth {depth} of run {name!r}: the whole run is re-scored "
                f"(retrieve at least {k} documents with {name!r}, top_k, for a true top-{k} rerank).")
    return None


def merge(original: dict[str, float], rescored: dict[str, float]) -> dict[str, float]:
    """Re-scored documents first (by new score, ties by doc id), then the rest in their original order.

    The written score is ``n - rank + 1`` (n = run length), so any reader that sorts by score sees
    exactly this order; the re-scorer's own scores go to the rule's side file."""
    head = sorted(rescored.items(), key=lambda x: (-x[1], x[0]))
    tail = [d for d, _ in ranked(original) if d not in rescored]
    n = len(head) + len(tail)
    out = {}
    for i, (did, _) in enumerate(head):
        out[did] = float(n - i)
    for j, did in enumerate(tail):
        out[did] = float(n - len(head) - j)
    return out


def rerank_run(run: dict, k: int, score_pairs, queries: dict[str, str], corpus: dict[str, dict],
               batch_size: int = 32) -> tuple[dict, dict, dict]:
    """``score_pairs(list of (query, doc text), qid, doc ids) -> scores``.

    Returns (merged run, raw new scores, info)."""
    from .progress import Progress

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
        merged[qid] = merge(run[qid], scores)
    progress.finish()
    elapsed = time.perf_counter() - start
    info = {"pairs": pairs_done, "seconds": round(elapsed, 3),
            "pairs_per_second": round(pairs_done / elapsed, 1) if elapsed > 0 else None}
    log.info("re-scored %d pairs in %.2f s (%s pairs/s)", pairs_done, elapsed, info["pairs_per_second"])
    return merged, raw, info


def cross_encoder_scorer(spec: dict, name: str):
    from sentence_transformers import CrossEncoder

    from .dense import load_model, pick_device, resolve_source

    source, revision = resolve_source(spec["source"], name)
    device = pick_device(spec["device"])
    model = load_model(lambda: CrossEncoder(source, max_length=int(spec["max_length"]), device=device,
                                            trust_remote_code=bool(spec["trust_remote_code"]), revision=revision),
                       source, name, revision)
    batch = int(spec["batch_size"])

    def score(pairs, qid=None, doc_ids=None):
        out = np.asarray(model.predict(pairs, batch_size=batch, show_progress_bar=False), dtype=np.float64)
        if out.ndim == 2 and out.shape[1] == 2:  # two-class heads (monoBERT): relevant minus not relevant
            return out[:, 1] - out[:, 0]
        return out.reshape(-1)

    return score


def cached_embedding_scorer(emb_path, ids_path, query_emb_path, query_ids_path, corpus_path):
    """Bi-encoder re-scoring from the model's cached corpus and query embeddings (no re-encoding):
    the score is the same inner product the dense retriever uses."""
    from .dense import load_corpus_embeddings
    from .io import read_lines

    qemb = np.load(query_emb_path)
    emb, ids = load_corpus_embeddings(emb_path, ids_path, corpus_path, dim=qemb.shape[1])
    row = {d: i for i, d in enumerate(ids)}
    qrow = {q: i for i, q in enumerate(read_lines(query_ids_path))}

    def score(pairs, qid, doc_ids):
        return emb[[row[d] for d in doc_ids]] @ qemb[qrow[qid]]

    return score

"""Stage rerank (rules/rerank.smk): re-score the top k of a run with a cross-encoder, RankLLaMA or a bi-encoder."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def rerank_run(sm) -> None:
    from .. import datasets, io, rerank, runs

    job = sm.params.spec
    spec = job["reranker_spec"]
    run = runs.read_run(sm.input.run)
    note = rerank.check_depth(run, int(job["depth"]), job["run"])
    if note:
        log.warning("note: %s", note)
    if spec["type"] == "cross_encoder":
        scorer = rerank.cross_encoder_scorer(spec, job["reranker"])
        batch_size = int(spec["batch_size"])
    elif spec["type"] == "rankllama":
        scorer = rerank.rankllama_scorer(spec, job["reranker"])
        batch_size = 16  # pairs per call (each pair is scored alone, as R2MED): progress only
    else:
        scorer = rerank.cached_embedding_scorer(sm.input.emb, sm.input.ids, sm.input.query_emb,
                                                sm.input.query_ids, sm.input.corpus)
        batch_size = max(1, int(job["depth"]))  # cached embeddings: one product per query
    queries = datasets.read_queries(sm.input.queries)
    corpus = datasets.read_corpus(sm.input.corpus)
    truncate = bool(spec["truncate"]) if "truncate" in spec else False  # a dense reranker has no truncate key
    merged, raw, info = rerank.rerank_run(run, int(job["depth"]), scorer, queries, corpus, batch_size=batch_size,
                                          truncate=truncate)
    if truncate:
        log.info("truncate: the reranked run holds only the re-scored top %d (as R2MED's reranked runs)", job["depth"])
    runs.write_run(merged, sm.output.run, tag=sm.wildcards.model)
    lines = ["query_id\tdoc_id\tscore"] + [f"{q}\t{d}\t{s:.6f}" for q in sorted(raw) for d, s in
                                           sorted(raw[q].items(), key=lambda x: (-x[1], x[0]))]
    io.write_text(sm.output.scores, "\n".join(lines) + "\n")
    io.write_json(sm.output.info, {"kind": "rerank", "input_run": job["run"], "reranker": job["reranker"],
                                   "depth": int(job["depth"]), "reranker_type": spec["type"], "truncate": truncate,
                                   **info,
                                   **({"note": note} if note else {})})

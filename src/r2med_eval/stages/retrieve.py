"""Stage retrieve (rules/retrieve.smk): first-stage runs, one TREC run file per (benchmark, task, model)."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def _variant_queries(sm, queries: dict) -> dict:
    """A query-variant run's BM25 queries, combined with the hypothetical documents as R2MED's BM25 code does."""
    from .. import io
    from ..expansion import gar

    rows = {obj["id"]: obj for _, obj in io.iter_jsonl(sm.input.variant)}
    variant = sm.params.spec["variant"]
    log.info("query variant %s/%s (reasoning format %s), combined as the official BM25 code does: the line's "
             "text and hy_doc", variant["method"], variant["llm"], variant["reasoning"])
    return {q: gar.lexical_query(variant["method"], rows[q]["text"], rows[q]["hy_doc"], variant["reasoning"])
            for q in queries}


def retrieve_bm25_lucene(sm) -> None:
    from ..benchmarks import datasets
    from ..lexical import lucene
    from ..scoring import runs

    spec = sm.params.spec
    queries = _variant_queries(sm, datasets.read_queries(sm.input.queries)) if spec.get("variant") else None
    run = lucene.search(sm.input.index, sm.input.queries, k1=spec["k1"], b=spec["b"], k=spec["top_k"],  # None: all
                        threads=sm.threads, queries=queries)
    lines = runs.write_run(run, sm.output.run, tag=sm.wildcards.model, identity=_identity(sm))
    log.info("wrote %d lines for %d queries to %s", lines, len(run), sm.output.run)


def _identity(sm) -> dict:
    """What the job's run is (``scoring.identity``): its name, benchmark, task and corpus fingerprint."""
    from ..scoring import identity

    try:
        fingerprint = sm.input.fingerprint
    except (AttributeError, KeyError):  # the stage called outside its rule (a test): the run gets no identity
        fingerprint = None
    return identity.of_job(sm.wildcards, fingerprint)


def export_trec_run(sm) -> None:
    """On request: a binary run's top ``depth`` documents of each query as TREC text for other tools, in the run's
    order (trec_eval's, or the given order of a ranking made elsewhere), the scores to 9 decimals."""
    from ..scoring import identity, runfile, runs

    identity.verify_job_run(sm.input.run, sm.wildcards, sm.input.fingerprint)
    table = runfile.read(sm.input.run)
    depth = int(sm.wildcards.depth)
    docs, d = table.codes()

    def tops():
        for i, at in runfile.query_blocks(table.q, len(table.qids)):
            top = range(at.start, min(at.stop, at.start + depth)) if isinstance(at, slice) else at[:depth]
            yield table.qids[i], dict(zip([docs[x] for x in d[top].tolist()], table.score[top].tolist()))

    lines = runs.write_run_stream(tops(), sm.output.run, tag=table.tag or sm.wildcards.model, decimals=9,
                                  keep_order=table.order == "given")
    log.info("wrote the top %d of %s: %d lines for %d queries", depth, sm.input.run, lines, len(table.qids))


def retrieve_dense(sm) -> None:
    import numpy as np

    from .. import io
    from ..dense import embeddings
    from ..dense import search as dense_search
    from ..scoring import runs

    query_emb = np.load(sm.input.query_emb)
    query_ids = io.read_lines(sm.input.query_ids)
    corpus_emb, doc_ids = embeddings.load_corpus_embeddings(sm.input.emb, sm.input.ids, dim=query_emb.shape[1],
                                                            info_path=sm.input.emb_info)
    spec = sm.params.spec
    top_k = spec["top_k"] or len(doc_ids)  # None: the whole corpus
    if spec["top_k"] is None:
        log.info("ranking the whole corpus (%d documents) for every query", len(doc_ids))
    if spec.get("ranking") == "evalpy":  # a CliniQ benchmark: eval.py's cosine and np.argsort order, kept as it is
        offsets, docs, scores, info = dense_search.evalpy_rank(corpus_emb, doc_ids, query_emb, query_ids, top_k)
        order = sorted(range(len(query_ids)), key=query_ids.__getitem__)
        starts, ends = offsets[:-1][order], offsets[1:][order]
        rows = np.concatenate([np.arange(a, b) for a, b in zip(starts.tolist(), ends.tolist())]) if order \
            else np.zeros(0, dtype=np.int64)
        lines = runs.write_arrays(sm.output.run, [query_ids[i] for i in order],
                                  np.r_[0, np.cumsum(ends - starts)], docs[rows], doc_ids, scores[rows],
                                  tag=sm.wildcards.model, keep_order=True, identity=_identity(sm))
        log.info("wrote %d entries for %d queries to %s", lines, len(query_ids), sm.output.run)
    else:
        run, info = dense_search.search(corpus_emb, doc_ids, query_emb, query_ids, top_k, spec["index"],
                                        threads=sm.threads, drop_identical_ids=bool(spec.get("drop_identical_ids")))
        if "identical_ids_dropped" in info:
            log.info("dropped %d retrieved documents whose id equals the query's id (the protocol's search)",
                     info["identical_ids_dropped"])
        runs.write_run(run, sm.output.run, tag=sm.wildcards.model, query_order=sorted(run), identity=_identity(sm))
    if spec.get("protocol"):  # the evaluation protocol that made the run (benchmarks.protocols)
        info["protocol"] = spec["protocol"]
    io.write_json(sm.output.info, info)


def _bm25_paper_query_tokens(sm, queries: dict):
    """The task's queries as rule analyse_bm25_paper analysed them, checked against the queries file."""
    import pickle
    import zipfile

    from ..errors import InputError
    from ..lexical import bm25_paper

    path = sm.input.query_tokens
    fix = (f"delete {path} and rerun the pipeline: rule analyse_bm25_paper writes it again from "
           f"{sm.input.queries} (with the corpus's tokens, in one JVM).")
    try:
        stored = bm25_paper.AnalysedQueries.load(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        raise InputError(f"not a readable file of analysed queries ({exc}).", path=path, fix=fix) from None
    ids = list(queries)
    if stored.doc_ids != ids:
        extra, missing = sorted(set(stored.doc_ids) - set(ids)), sorted(set(ids) - set(stored.doc_ids))
        what = (f"{len(extra)} ids not in the queries file (e.g. {', '.join(extra[:3])})" if extra else "") + \
            (", " if extra and missing else "") + \
            (f"{len(missing)} of its ids missing (e.g. {', '.join(missing[:3])})" if missing else "")
        raise InputError(f"holds the tokens of {len(stored.doc_ids)} queries that are not those of "
                         f"{sm.input.queries} ({len(ids)} queries): {what or 'another order'}.", path=path, fix=fix)
    if stored.texts_sha256 != bm25_paper.texts_sha256(ids, list(queries.values())):
        raise InputError(f"holds the tokens of other query texts than those now in {sm.input.queries}.",
                         path=path, fix=fix)
    return stored


def retrieve_bm25_paper(sm) -> None:
    """The task's queries searched on the fit. Plain queries come analysed (rule analyse_bm25_paper): no JVM
    is started; a query variant's texts are analysed here."""
    from .. import io
    from ..benchmarks import datasets
    from ..lexical import bm25_paper
    from ..scoring import runs

    spec = sm.params.spec
    queries = datasets.read_queries(sm.input.queries)
    query_tokens = None
    if spec.get("variant"):
        queries = _variant_queries(sm, queries)
    else:
        query_tokens = _bm25_paper_query_tokens(sm, queries)
    model, doc_ids, fallback = bm25_paper.BM25Paper.load(sm.input.model)
    if (model.k1, model.b) != (float(spec["k1"]), float(spec["b"])):
        raise ValueError(f"{sm.input.model} was fitted with k1={model.k1} b={model.b}, the model asks for "
                         f"k1={spec['k1']} b={spec['b']}")
    top_k = spec["top_k"] or len(doc_ids)  # None: the whole corpus
    texts = None if query_tokens is not None else list(queries.values())
    run, info = bm25_paper.search_run(model, doc_ids, list(queries), texts, query_tokens=query_tokens, top_k=top_k,
                                      fill_zero=spec["fill_zero"], corpus_fallback_batches=fallback)
    lines = runs.write_run(run, sm.output.run, tag=sm.wildcards.model, decimals=8, identity=_identity(sm))
    io.write_json(sm.output.info, info)
    log.info("paper-faithful BM25: %s", {k: v for k, v in info.items() if k != "queries_without_known_terms"})
    if info["queries_without_known_terms"]:
        log.warning("%d queries share no term with the corpus (their top %d is the first documents, score 0): %s",
                    len(info["queries_without_known_terms"]), top_k,
                    ", ".join(info["queries_without_known_terms"][:20]))
    log.info("wrote %d lines for %d queries to %s", lines, len(run), sm.output.run)


def import_run(sm) -> None:
    """A run produced outside the pipeline (model type ``run``): validated against the task's queries and
    corpus ids, then written in our order (score descending, ties by document id) at the source's precision;
    its sha256 goes into the info file, and from there into the provenance."""
    from .. import io
    from ..benchmarks import datasets
    from ..scoring import runs

    queries = datasets.read_queries(sm.input.queries)
    if "ids" in sm.input.keys():
        doc_ids = io.read_lines(sm.input.ids)
    else:
        doc_ids = list(datasets.read_corpus(sm.input.corpus))
    source = sm.input.source
    run, info = runs.validate_external_run(source, doc_ids, queries, missing=sm.params.spec["missing_queries"],
                                           queries_file=sm.input.queries)
    if info["queries_missing"]:
        log.warning("%d queries have no line in %s and retrieve nothing (missing_queries: empty): %s",
                    info["queries_missing"], source, ", ".join(info["missing_query_ids"][:20]))
    lines = runs.write_run(run, sm.output.run, tag=sm.wildcards.model, decimals=info["decimals"],
                           query_order=sorted(run), identity=_identity(sm))
    io.write_json(sm.output.info, {"source": str(source), "source_sha256": io.sha256_file(source),
                                   "run_sha256": io.sha256_file(sm.output.run), **info})
    log.info("imported %s: %d lines for %d queries (scores kept to %d decimals)", source, lines, len(run),
             info["decimals"])

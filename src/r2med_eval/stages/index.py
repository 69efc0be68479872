"""Stage index (rules/index.smk): one Lucene index per task, shared by every BM25 configuration; the
bm25-paper analysed corpus and queries per task and its fitted BM25 per (k1, b); dense
corpus embeddings per (task, model), sharded, and query embeddings (the dense "index")."""

from __future__ import annotations

import contextlib
import logging

log = logging.getLogger("r2med_eval")


@contextlib.contextmanager
def _served(sm, rule: str, part: str):
    """A served entry's job (``dense.served.job``: its vectors' cache, the server policy on a MIMIC-derived benchmark,
    a started vLLM server, its figures beside the benchmark file); nothing for an in-process entry."""
    spec = sm.params.spec
    if not spec.get("server"):
        yield
        return
    from ..dense import served
    from ..workflow import paths

    w = {k: getattr(sm.wildcards, k) for k in ("benchmark", "task", "model", "shard", "nshards", "method", "llm")
         if hasattr(sm.wildcards, k)}
    private = bool(spec["private"])
    stem = paths.fill(paths.PRIVATE_EMBED_CACHE if private else paths.EMBED_CACHE, **w, part=part)
    server_log = paths.fill(paths.private_log_file(rule, "server"), **w) if private else None
    figures = paths.fill(paths.figures_file(rule), **w)
    with served.job(spec, w["model"], stem, private=private, config=getattr(sm, "config", None),
                    what=f"the texts encoded for benchmark {w['benchmark']}", figures=figures, server_log=server_log):
        yield


def _protect(sm, root: str) -> None:
    """MIMIC-derived outputs (params.spec.private): the benchmark's index or embeddings folder is owner-only
    before the job writes (a rebuilt ``results/index`` too)."""
    if sm.params.spec["private"]:
        from ..io import private_folder
        from ..workflow import paths

        private_folder(paths.fill(root, benchmark=sm.wildcards.benchmark))


def _protect_outputs(sm, root: str) -> None:
    """MIMIC-derived outputs: every file and folder the job wrote, and the folders between them and the
    benchmark's root folder, owner-only."""
    if sm.params.spec["private"]:

        from ..io import protect_up_to
        from ..workflow import paths

        top = paths.fill(root, benchmark=sm.wildcards.benchmark)
        for out in sm.output:
            protect_up_to(out, top)


def lucene_index(sm) -> None:
    from .. import io
    from ..lexical import lucene
    from ..workflow import paths

    _protect(sm, paths.INDEX_ROOT)
    info = lucene.build_index(sm.input.corpus, sm.output.index, threads=sm.threads,
                              private=sm.params.spec["private"])
    io.write_json(sm.output.info, info)
    _protect_outputs(sm, paths.INDEX_ROOT)


def analyse_bm25_paper(sm) -> None:
    """The task's corpus (every bm25-paper fit reads it) and its queries (every bm25-paper run of the plain
    queries reads them, and so starts no JVM) through the Lucene analyzer, in one JVM, once per task."""
    from ..benchmarks import datasets
    from ..lexical import bm25_paper
    from ..workflow import paths

    _protect(sm, paths.INDEX_ROOT)
    corpus = datasets.read_corpus(sm.input.corpus)
    queries = datasets.read_queries(sm.input.queries)
    doc_ids = list(corpus)
    analysed, analysed_queries = bm25_paper.analyse_task(
        doc_ids, [datasets.doc_contents(corpus[d]) for d in doc_ids], list(queries), list(queries.values()),
        threads=sm.threads)
    analysed.save(sm.output.tokens)
    analysed_queries.save(sm.output.query_tokens)
    log.info("analysed %d documents: %d tokens, %d terms, %d tokenizer fallback batches", len(doc_ids),
             len(analysed.token_ids), len(analysed.terms), analysed.fallback_batches)
    log.info("analysed %d queries: %d tokens, %d tokenizer fallback batches", len(queries),
             len(analysed_queries.token_ids), analysed_queries.fallback_batches)
    _protect_outputs(sm, paths.INDEX_ROOT)


def fit_bm25_paper(sm) -> None:
    """gensim's LuceneBM25Model fitted on the analysed corpus for one (k1, b), as R2MED's code fits it."""
    from ..lexical import bm25_paper
    from ..workflow import paths

    _protect(sm, paths.INDEX_ROOT)
    spec = sm.params.spec
    analysed = bm25_paper.AnalysedCorpus.load(sm.input.tokens)
    model = bm25_paper.BM25Paper(spec["k1"], spec["b"]).fit_encoded(analysed)
    model.save(sm.output.model, analysed.doc_ids, analysed.fallback_batches)
    log.info("fitted: %s", model.info())
    _protect_outputs(sm, paths.INDEX_ROOT)


def encode_corpus_shard(sm) -> None:
    from ..dense import encode as dense_encode
    from ..workflow import paths

    shard, nshards = int(sm.wildcards.shard), int(sm.wildcards.nshards)
    if not 1 <= shard <= nshards:
        raise ValueError(f"shard {shard} of {nshards} is out of range")
    _protect(sm, paths.EMB_ROOT)
    with _served(sm, "encode_corpus_shard", f"corpus-{shard}-of-{nshards}"):
        dense_encode.encode_corpus_shard(sm.input.corpus, sm.output.shard, sm.params.spec, sm.wildcards.model,
                                         sm.wildcards.task, shard - 1, nshards, threads=sm.threads)
    _protect_outputs(sm, paths.EMB_ROOT)


def encode_corpus(sm) -> None:
    """A model with ``shards: 1``: the corpus encoded and stored as gather_embeddings stores it, in one job."""
    from ..dense import encode as dense_encode
    from ..workflow import paths

    _protect(sm, paths.EMB_ROOT)
    with _served(sm, "encode_corpus", "corpus"):
        info = dense_encode.encode_corpus(sm.input.corpus, sm.output.emb, sm.output.ids, sm.output.info,
                                          sm.params.spec, sm.wildcards.model, sm.wildcards.task,
                                          storage=sm.params.spec["storage"], threads=sm.threads)
    log.info("encoded the corpus: %s", info)
    _protect_outputs(sm, paths.EMB_ROOT)


def gather_embeddings(sm) -> None:
    from ..dense import embeddings
    from ..workflow import paths

    _protect(sm, paths.EMB_ROOT)
    info = embeddings.gather(list(sm.input.shards), sm.input.corpus, sm.output.emb, sm.output.ids,
                             storage=sm.params.spec["storage"], out_info=sm.output.info)
    log.info("gathered %d shards: %s", len(sm.input.shards), info)
    _protect_outputs(sm, paths.EMB_ROOT)


def encode_queries(sm) -> None:
    from ..dense import encode as dense_encode
    from ..workflow import paths

    _protect(sm, paths.EMB_ROOT)
    with _served(sm, "encode_queries", "queries"):
        dense_encode.encode_queries(sm.input.queries, sm.output.emb, sm.output.ids, sm.params.spec,
                                    sm.wildcards.model, sm.wildcards.task, threads=sm.threads)
    _protect_outputs(sm, paths.EMB_ROOT)


def encode_query_variant(sm) -> None:
    from ..dense import encode as dense_encode
    from ..workflow import paths

    _protect(sm, paths.EMB_ROOT)
    with _served(sm, "encode_query_variant", f"variants/{sm.wildcards.method}--{sm.wildcards.llm}"):
        dense_encode.encode_query_variant(sm.input.variant, sm.output.emb, sm.output.ids, sm.params.spec,
                                          sm.wildcards.model, sm.wildcards.task, sm.wildcards.method,
                                          threads=sm.threads, reasoning=sm.params.spec["reasoning"])
    _protect_outputs(sm, paths.EMB_ROOT)

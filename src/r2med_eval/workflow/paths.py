"""Every path the workflow writes, built and parsed here only.

Patterns are Snakemake patterns relative to the working directory; rules name them (``paths.RUN``) and
``fill``/``parse``/``partial`` turn them into concrete paths and back. This module imports nothing of the
package, so a stage that parses a path depends on this file alone (``workflow.code``). The rules' input
functions and the targets of ``rule all`` are in ``workflow.inputs``.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------- patterns

DATA = "results/data/{benchmark}/{task}"
CORPUS = DATA + "/corpus.jsonl"
QUERIES = DATA + "/queries.jsonl"
QRELS = DATA + "/qrels.tsv"
STATS = DATA + "/stats.json"
VARIANT = DATA + "/variants/{method}--{llm}.jsonl"
CHUNK_IDS = DATA + "/chunk_ids.txt"
CHUNK_STATS = DATA + "/chunk_stats.json"
CLINIQ_QRELS = DATA + "/cliniq_qrels.tsv"
QUERY_TYPES = DATA + "/query_types.tsv"
CORPUS_IDS = DATA + "/corpus_ids.json"  # the corpus's id fingerprint (scoring.identity), which every run records

DOWNLOAD = "resources/{benchmark}/{task}"
DOWNLOAD_FILES = {"corpus": DOWNLOAD + "/corpus.jsonl", "queries": DOWNLOAD + "/query.jsonl",
                  "qrels": DOWNLOAD + "/qrels.jsonl", "manifest": DOWNLOAD + "/manifest.json"}
DOWNLOAD_VARIANT = DOWNLOAD + "/{method}/{llm}/query_with_hydoc.jsonl"
# expansion files written by rule generate_query_variant, and its cache of the LLM's answers
GENERATED = "results/generated/{benchmark}/{task}/{method}/{llm}/query_with_hydoc.jsonl"
GENERATED_INFO = "results/generated/{benchmark}/{task}/{method}/{llm}/generation.json"
GENERATE_CACHE = "resources/llm_cache/{benchmark}/{task}/{method}--{llm}.jsonl"
RERANK_CACHE = "resources/llm_cache/{benchmark}/{task}/rerank/{model}.jsonl"  # an LLM reranker's answers
MODEL_MANIFEST = "resources/models/{model}.json"  # a Hub model's snapshot, fetched by rule prefetch_model
# a served dense entry's vectors as its server answered them, per encoding job ({part}: corpus, queries, ...)
EMBED_CACHE = "resources/embedding_cache/{benchmark}/{task}/{model}/{part}"
# MIMIC-derived benchmarks (CliniQ): the note text, and everything of an LLM job that may quote it (the expansion
# and variant files, the answers' cache), live here, owner-only (files 0600, folders 0700), never in results/
PRIVATE = "resources/cliniq/{benchmark}/{task}"
CLINIQ_CHUNKS = PRIVATE + "/corpus.jsonl"
PRIVATE_VARIANT = PRIVATE + "/variants/{method}--{llm}.jsonl"
PRIVATE_GENERATED = PRIVATE + "/generated/{method}/{llm}/query_with_hydoc.jsonl"
PRIVATE_GENERATE_CACHE = PRIVATE + "/llm_cache/{method}--{llm}.jsonl"
PRIVATE_RERANK_CACHE = PRIVATE + "/llm_cache/rerank/{model}.jsonl"
PRIVATE_EMBED_CACHE = PRIVATE + "/embedding_cache/{model}/{part}"

INDEX_ROOT = "results/index/{benchmark}"  # owner-only for MIMIC-derived benchmarks
INDEX = INDEX_ROOT + "/{task}/lucene"
INDEX_INFO = INDEX + ".json"
# bm25-paper: the task's corpus and queries after the Lucene analyzer, and BM25 fitted on the corpus per
# (k1, b) (wildcards are the floats as Python prints them: 0.9, 1.2)
BM25_PAPER_TOKENS = INDEX_ROOT + "/{task}/bm25_paper/tokens.npz"
BM25_PAPER_QUERY_TOKENS = INDEX_ROOT + "/{task}/bm25_paper/query_tokens.npz"
BM25_PAPER_FIT = INDEX_ROOT + "/{task}/bm25_paper/k1-{k1}_b-{b}.npz"

EMB_ROOT = "results/embeddings/{benchmark}"  # owner-only for MIMIC-derived benchmarks
EMB = EMB_ROOT + "/{task}/{model}"
EMB_SHARD = EMB + "/shards/{shard}-of-{nshards}.npz"
EMB_CORPUS = EMB + "/corpus.npy"
EMB_CORPUS_IDS = EMB + "/corpus_ids.txt"
EMB_CORPUS_INFO = EMB + "/corpus.json"  # counts and the sha256 of the id list
EMB_QUERIES = EMB + "/queries.npy"
EMB_QUERY_IDS = EMB + "/queries_ids.txt"
EMB_VARIANT = EMB + "/variants/{method}--{llm}.npy"
EMB_VARIANT_IDS = EMB + "/variants/{method}--{llm}_ids.txt"

RUN = "results/runs/{benchmark}/{task}/{model}.trec"
# a CliniQ benchmark's runs (full depth: 20.6 M entries) in the binary format of scoring.binrun, and on request the
# TREC file of such a run's top {depth} for other tools (rule export_trec_run)
RUN_BINARY = "results/runs/{benchmark}/{task}/{model}.run.npz"
RUN_TREC_TOP = "results/runs/{benchmark}/{task}/{model}.top{depth}.trec"
RUN_IDENTITY = RUN + ".json"  # what made a TREC run (scoring.identity; a binary run holds it in its metadata)
RUN_SEARCH_INFO = "results/runs/{benchmark}/{task}/{model}.search.json"
RUN_BM25_PAPER_INFO = "results/runs/{benchmark}/{task}/{model}.bm25_paper.json"
RUN_IMPORT_INFO = "results/runs/{benchmark}/{task}/{model}.import.json"  # a type: run model's source and checksums
RUN_LINEAGE = "results/runs/{benchmark}/{task}/{model}.lineage.json"
RUN_RESCORED = "results/runs/{benchmark}/{task}/{model}.rescored.tsv"

METRICS = "results/metrics/{benchmark}/{task}/{model}.json"
METRICS_TABLE = "results/metrics/{benchmark}.jsonl"  # a benchmark's metric JSONs in one file (r2med_eval.metric_table)
METRICS_SELECTION = "results/metrics/{benchmark}.selection.json"  # which runs that scoring selected, complete or not
PER_QUERY = "results/per_query/{benchmark}/{task}/{model}.tsv"
CLINIQ_METRICS = "results/cliniq/{benchmark}/{task}/{model}.json"
CLINIQ_PER_QUERY = "results/cliniq/{benchmark}/{task}/{model}.by_match_type.tsv"  # per query, cliniq.per_query
CLINIQ_TABLE = "results/cliniq/{benchmark}/by_{grouping}.{ext}"
CLINIQ_POOL = "results/cliniq/{benchmark}/pool.tsv"
# CliniQ's judgment completion (cliniq_completion): the design, the judge's labels and counts, the tables (ids and
# numbers only); what quotes the notes (the judge's rationale, its answers' cache) under PRIVATE_COMPLETION_ROOT
COMPLETION = "results/cliniq/{benchmark}/completion"
COMPLETION_SAMPLE = COMPLETION + "/sample.tsv"
COMPLETION_DESIGN = COMPLETION + "/design.tsv"
COMPLETION_LABELS = COMPLETION + "/labels.tsv"
COMPLETION_JUDGING = COMPLETION + "/judging.json"
COMPLETION_FILE = COMPLETION + "/{name}.{ext}"  # estimates, per_query, agreement, rescored, ranking, verdict
PRIVATE_COMPLETION_ROOT = "resources/cliniq/{benchmark}"
PRIVATE_JUDGMENTS = PRIVATE_COMPLETION_ROOT + "/completion/judgments.tsv"
PRIVATE_JUDGE_CACHE = PRIVATE_COMPLETION_ROOT + "/completion/llm_cache/{llm}.jsonl"

LEADERBOARD = "results/leaderboard.{ext}"
BENCHMARK_LEADERBOARD = "results/leaderboards/{benchmark}.{ext}"
SIGNIFICANCE = "results/significance.{ext}"
PROVENANCE = "results/provenance.json"
R2MED_VS_PAPER = "results/r2med_vs_paper.md"
PLOT = "results/plots/{benchmark}/{name}.{ext}"
PALETTE = "results/plots/{benchmark}/palette.tsv"  # each run's colour, marker and hatch (r2med_eval.palette)
# LaTeX: leaderboard, leaderboard-{benchmark}, cliniq-{benchmark}-by_{grouping}, r2med_vs_paper, claims
TABLE = "results/tables/{name}.tex"
INDEX_PAGE = "results/index.html"
# the papers' claims tested on the runs (docs/report.md#claims): per-query lexical overlap of an R2MED-layout task and
# CliniQ's per-query figures by match type of a run (ids and numbers only), then the verdicts (CLAIMS: json, md)
CLAIMS_OVERLAP = "results/claims/{benchmark}/{task}/overlap.tsv"
CLAIMS = "results/claims.{ext}"
MTEB_EXPORT = "results/mteb"  # MTEB's results layout (results/<model>/<revision>/<task>.json) of the R2MED tasks

# Wildcards of each rule's log and benchmark files (logs/<rule>/<key>.log, benchmarks/<rule>/<key>.tsv).
JOB_KEYS = {
    "prepare_task": "{benchmark}/{task}",
    "fingerprint_corpus": "{benchmark}/{task}",
    "prepare_query_variant": "{benchmark}/{task}/{method}--{llm}",
    "download_task": "{benchmark}/{task}",
    "download_query_variant": "{benchmark}/{task}/{method}--{llm}",
    "generate_query_variant": "{benchmark}/{task}/{method}--{llm}",
    "prepare_private_query_variant": "{benchmark}/{task}/{method}--{llm}",
    "generate_private_query_variant": "{benchmark}/{task}/{method}--{llm}",
    "prefetch_model": "{model}",
    "link_cliniq_corpus": "{benchmark}/{task}",
    "prepare_cliniq_queries": "{benchmark}/{task}",
    "prepare_cliniq": "{benchmark}/{task}",
    "download_cliniq_annotations": "{anndir}",
    "chunk_cliniq": "{benchmark}/{task}",
    "lucene_index": "{benchmark}/{task}",
    "analyse_bm25_paper": "{benchmark}/{task}",
    "fit_bm25_paper": "{benchmark}/{task}/k1-{k1}_b-{b}",
    "encode_corpus_shard": "{benchmark}/{task}/{model}/{shard}-of-{nshards}",
    "encode_corpus": "{benchmark}/{task}/{model}",
    "gather_embeddings": "{benchmark}/{task}/{model}",
    "encode_queries": "{benchmark}/{task}/{model}",
    "encode_query_variant": "{benchmark}/{task}/{model}/{method}--{llm}",
    "retrieve_bm25_lucene": "{benchmark}/{task}/{model}",
    "retrieve_dense": "{benchmark}/{task}/{model}",
    "retrieve_bm25_paper": "{benchmark}/{task}/{model}",
    "import_run": "{benchmark}/{task}/{model}",
    "export_trec_run": "{benchmark}/{task}/{model}.top{depth}",
    "rerank_run": "{benchmark}/{task}/{model}",
    "llm_rerank_run": "{benchmark}/{task}/{model}",
    "fuse_runs": "{benchmark}/{task}/{model}",
    "score_run": "{benchmark}/{task}/{model}",
    "score_cliniq": "{benchmark}/{task}/{model}",
    "collect_metrics": "{benchmark}",
    "significance": "significance",
    "leaderboard": "leaderboard",
    "leaderboard_benchmark": "{benchmark}",
    "plot_palette": "{benchmark}",
    "plot_leaderboard": "{benchmark}",
    "plot_rerank_depth": "{benchmark}",
    "plot_scatter": "{benchmark}",
    "plot_cliniq": "{benchmark}",
    "provenance": "provenance",
    "r2med_vs_paper": "r2med_vs_paper",
    "report_cliniq": "{benchmark}",
    "cliniq_completion_sample": "{benchmark}",
    "cliniq_completion_judge": "{benchmark}",
    "cliniq_completion_estimate": "{benchmark}",
    "cliniq_completion_rescore": "{benchmark}",
    "plot_cliniq_completion": "{benchmark}",
    "claims_overlap": "{benchmark}/{task}",
    "claims": "claims",
    "report_index": "index",
    "mteb_export": "mteb_export",
}


def bm25_float(value) -> str:
    """A k1 or b value as it appears in BM25_PAPER_FIT."""
    return repr(float(value))


def log_file(rule: str) -> str:
    return f"logs/{rule}/{JOB_KEYS[rule]}.log"


def benchmark_file(rule: str) -> str:
    return f"benchmarks/{rule}/{JOB_KEYS[rule]}.tsv"


def figures_file(rule: str) -> str:
    """Figures a job adds beside its Snakemake benchmark file (which Snakemake writes itself, after the job):
    ``benchmarks/<rule>/<key>.server.json`` for a served encoder's requests, texts, tokens and seconds."""
    return f"benchmarks/{rule}/{JOB_KEYS[rule]}.server.json"


def private_log_file(rule: str, name: str) -> str:
    """A log of a job on a MIMIC-derived benchmark that may carry note text (e.g. ``server``: the output of an LLM
    server started in the job): ``resources/logs/<rule>/<key>.<name>.log``, owner-only; the job's log names it."""
    return f"resources/logs/{rule}/{JOB_KEYS[rule]}.{name}.log"


def benchmark_side_file(rule: str, name: str) -> str:
    """What a job measures itself, beside Snakemake's benchmark file (whose columns are Snakemake's own):
    ``benchmarks/<rule>/<key>.<name>.tsv`` (``tokens``: a ReasonRank reranker's tokens per window); the provenance
    reads it with the benchmark file."""
    return f"benchmarks/{rule}/{JOB_KEYS[rule]}.{name}.tsv"


def fill(pattern: str, **wildcards) -> str:
    return pattern.format(**wildcards)


def partial(pattern: str, **known) -> str:
    """``pattern`` with the given wildcards filled and the others left as Snakemake wildcards."""
    return re.sub(r"\{(\w+)\}", lambda m: str(known.get(m.group(1), m.group(0))), pattern)


def _regex(pattern: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", pattern)
    out = []
    for i, part in enumerate(parts):
        out.append(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/.]+)" if part == "ext" else f"(?P<{part}>[^/]+)")
    return re.compile("(?:^|/)" + "".join(out) + "$")


def parse(pattern: str, path) -> dict:
    """The wildcards of ``path`` (absolute or relative, forward slashes) under ``pattern``; ValueError if it
    does not match."""
    text = str(path).replace("\\", "/")
    m = _regex(pattern).search(text)
    if not m:
        raise ValueError(f"{path} does not match {pattern}")
    return m.groupdict()


def alternatives(names) -> str:
    """A wildcard constraint matching exactly these names (none: a regex that matches nothing)."""
    return "|".join(re.escape(n) for n in sorted(set(names))) or "(?!)"

"""Cluster resources derived from the data: memory (MB) and run time (minutes) per job, from the corpus
size, the model's weight size and the retry attempt (each retry doubles both, so a job killed for
memory or time is resubmitted with more).

The constants are calibrated on this machine's measurements (bench/scale.py, Snakemake benchmark files)
with a margin: all-MiniLM-L6-v2 (87 MB of weights) encodes about 1 MB of passage text per minute on
two shared CPU threads (30 passages/s on the demo); a GPU is taken as 50 times faster; Anserini indexed
455 MB (1M passages) in 115 s on two threads, about 120 MB per minute per thread; we assume 40.
``Resources`` gives the rules their resource functions of (wildcards, input, threads, attempt); every value is
a whole number, as SLURM wants. Input sizes are read when a job is scheduled, once its inputs exist.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

BASE_MEM_MB = 1024
ENCODER_BASE_MEM_MB = 2048
BASE_MINUTES = 10
CPU_TEXT_MB_PER_MIN_AT_1MB_WEIGHTS = 1.0 * 87  # text MB/min x weight MB, on two CPU threads
GPU_SPEEDUP = 50.0
LUCENE_TEXT_MB_PER_MIN_PER_THREAD = 40.0
DEFAULT_WEIGHTS_MB = 1400.0  # a 335M-parameter encoder in fp32 (bge-large, e5-large) when the size is unknown
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx")
BYTES_PER_PARAM = {"fp32": 4, "fp16": 2, "bf16": 2}


def size_mb(path) -> float:
    """Size of a file, or of all files below a folder, in MB; 0 when it does not exist (yet)."""
    path = Path(str(path))
    if path.is_file():
        return path.stat().st_size / 2**20
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20
    return 0.0


def count_lines(path) -> int:
    path = Path(str(path))
    if not path.is_file():
        return 0
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def _weights_in(folder: Path) -> float:
    if not folder.is_dir():
        return 0.0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES) / 2**20


def _params_from_name(name: str) -> float | None:
    """Parameter count (in millions) written in a model name: 7B, 1.5b, 410M, 22m."""
    match = re.search(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*([bBmM])(?![A-Za-z])", name.replace("_", "-"))
    if not match:
        return None
    value = float(match.group(1))
    return value * 1000 if match.group(2) in "bB" else value


def weights_mb(spec: dict) -> float:
    """Size of a model's weights in MB: on disk for a local path or an installed package; for a Hub
    name, from the parameter count in its name (7B, 410M) at the entry's dtype; else a large-BERT default.
    An adapter over a base model (RankLLaMA's ``base_source``) counts both."""
    if "base_source" in spec:
        return _source_mb(spec["source"], spec) + _source_mb(spec["base_source"], spec)
    return _source_mb(spec.get("source", {}), spec)


def _source_mb(source: dict, spec: dict) -> float:
    if "path" in source:
        found = _weights_in(Path(source["path"]).expanduser())
        if found:
            return found
    if "package" in source:
        try:
            found_spec = importlib.util.find_spec(source["package"])
        except (ImportError, ValueError):
            found_spec = None
        if found_spec is not None and found_spec.submodule_search_locations:
            found = sum(_weights_in(Path(p)) for p in found_spec.submodule_search_locations)
            if found:
                return found
    params = _params_from_name(str(source.get("hf") or source.get("path") or ""))
    if params:
        return params * 1e6 * BYTES_PER_PARAM.get(spec.get("dtype", "fp32"), 4) / 2**20
    return DEFAULT_WEIGHTS_MB


def _retry(value: float, attempt: int) -> int:
    return int(round(value * 2 ** (max(1, int(attempt)) - 1)))


def encode_mem_mb(corpus_mb: float, model_mb: float, attempt: int = 1) -> int:
    """An encoding job reads the whole corpus (4x its size in Python strings), loads the weights
    (1.5x their size while loading) and holds its shard's embeddings."""
    return _retry(ENCODER_BASE_MEM_MB + 1.5 * model_mb + 4 * corpus_mb, attempt)


def encode_minutes(text_mb: float, model_mb: float, gpu: bool, attempt: int = 1) -> int:
    """Minutes to encode ``text_mb`` MB of text: linear in text size and in weight size."""
    rate = CPU_TEXT_MB_PER_MIN_AT_1MB_WEIGHTS / max(model_mb, 1.0) * (GPU_SPEEDUP if gpu else 1.0)
    return _retry(BASE_MINUTES + 2 * text_mb / rate, attempt)


def shard_minutes(corpus_mb: float, model_mb: float, shards: int, gpu: bool, attempt: int = 1) -> int:
    """A shard encodes 1/shards of the corpus."""
    return encode_minutes(corpus_mb / max(1, shards), model_mb, gpu, attempt)


def rerank_minutes(pairs: int, doc_mb_per_pair: float, model_mb: float, gpu: bool, attempt: int = 1) -> int:
    """A cross-encoder or bi-encoder re-scores ``pairs`` (query, passage) pairs."""
    return encode_minutes(pairs * doc_mb_per_pair, model_mb, gpu, attempt)


def lucene_index_minutes(corpus_mb: float, threads: int, attempt: int = 1) -> int:
    return _retry(BASE_MINUTES + 2 * corpus_mb / (LUCENE_TEXT_MB_PER_MIN_PER_THREAD * max(1, threads)), attempt)


def lucene_index_mem_mb(corpus_mb: float, attempt: int = 1) -> int:
    """The corpus in Python while its JSON collection is written, then the Anserini JVM: 1.5 GB plus the
    corpus size (measured peak: 1.05 GB for a 455 MB corpus of 1M passages)."""
    return _retry(1.5 * BASE_MEM_MB + corpus_mb, attempt)


def search_minutes(input_mb: float, attempt: int = 1) -> int:
    """BM25 over an index or exact search over embeddings: 10 minutes plus 1 per 100 MB."""
    return _retry(BASE_MINUTES + input_mb / 100, attempt)


def search_mem_mb(emb_mb: float, attempt: int = 1) -> int:
    """Embeddings (float32 copy) plus a FAISS index of the same size."""
    return _retry(BASE_MEM_MB + 2 * emb_mb, attempt)


def bm25_search_mem_mb(index_mb: float, attempt: int = 1) -> int:
    """The Anserini JVM and the index's memory-mapped files: 1 GB plus a quarter of the index."""
    return _retry(BASE_MEM_MB + 0.25 * index_mb, attempt)


def bm25_paper_mem_mb(corpus_mb: float, attempt: int = 1) -> int:
    """Analysing the corpus: JVM and token lists: 1 GB plus 20x the corpus size."""
    return _retry(BASE_MEM_MB + 20 * corpus_mb, attempt)


def bm25_paper_fit_mem_mb(tokens_mb: float, attempt: int = 1) -> int:
    """Fitting: the token ids (8 bytes a token) and a few sparse matrices of one entry per token: 1 GB plus 8x."""
    return _retry(BASE_MEM_MB + 8 * tokens_mb, attempt)


def bm25_paper_search_mem_mb(model_mb: float, attempt: int = 1) -> int:
    """Searching a fitted model: the JVM for the queries, the model and one block of scores: 1 GB plus 3x."""
    return _retry(BASE_MEM_MB + 3 * model_mb, attempt)


# Rules that run on the submitting host (``localrule: True``), never as their own SLURM job: scoring,
# fusion, the reports and the CliniQ symlink read small files and take seconds, far less than a job's
# wait in the queue. The largest inputs are CliniQ's full-depth runs (20.6 M lines, 1 GB): read as columns,
# one query or one run at a time, they take up to about 2 min and 2 GB (a fusion of three; docs/scale.md). The downloads
# are local too (they need the network). The claims' overlap job (claims_overlap) is not: it loads a whole task's
# analysed corpus. tests/test_workflow_resources.py checks the rules files against these tuples.
LOCAL_LIGHT_RULES = ("score_run", "score_cliniq", "collect_metrics", "fuse_runs", "significance", "leaderboard",
                     "leaderboard_benchmark", "plot_palette", "plot_leaderboard", "plot_rerank_depth", "plot_scatter",
                     "plot_cliniq", "provenance", "r2med_vs_paper", "report_cliniq", "report_index",
                     "link_cliniq_corpus", "import_run", "mteb_export", "cliniq_completion_sample",
                     "cliniq_completion_estimate", "cliniq_completion_rescore", "plot_cliniq_completion",
                     "claims", "export_trec_run", "fingerprint_corpus")
LOCAL_DOWNLOAD_RULES = ("download_task", "download_query_variant", "download_cliniq_annotations", "prefetch_model")


def generate_minutes(queries: int, startup_seconds: float, attempt: int = 1) -> int:
    """LLM generation: a minute a query at worst (long reasoning outputs), plus a vLLM server's start."""
    return _retry(BASE_MINUTES + queries + startup_seconds / 60.0, attempt)


# An LLM reranker's request: a plain answer (a permutation, a yes/no) takes seconds; a reasoning LLM's up to a minute.
LLM_MINUTES_PER_REQUEST = 0.25
LLM_REASONING_MINUTES_PER_REQUEST = 1.0


def llm_rerank_minutes(requests: int, concurrency: int, reasoning: bool, startup_seconds: float,
                       attempt: int = 1) -> int:
    """LLM reranking: ``requests`` answers, ``concurrency`` at a time, plus a vLLM server's start."""
    per = LLM_REASONING_MINUTES_PER_REQUEST if reasoning else LLM_MINUTES_PER_REQUEST
    return _retry(BASE_MINUTES + requests * per / max(1, concurrency) + startup_seconds / 60.0, attempt)


def light_minutes(input_mb: float, attempt: int = 1) -> int:
    """Parsing, scoring, fusion, gathering: 10 minutes plus 1 per 200 MB read."""
    return _retry(BASE_MINUTES + input_mb / 200, attempt)


def light_mem_mb(input_mb: float, attempt: int = 1) -> int:
    return _retry(BASE_MEM_MB + 3 * input_mb, attempt)


def _total_mb(files) -> float:
    return sum(size_mb(f) for f in files)


def _sized(formula, key: str):
    """A resource function of (wildcards, input, attempt): ``formula`` of the size of input ``key``."""

    def resource(wildcards, input, attempt) -> int:
        return formula(size_mb(getattr(input, key)), attempt)

    resource.__name__ = f"{formula.__name__}_of_{key}"
    return resource


class Resources:
    """The rules' resource functions (Snakemake passes wildcards, input, threads and attempt by name)."""

    def __init__(self, reg):
        self.reg = reg
        self.models = reg.cfg["models"]

    def _weights(self, model: str) -> float:
        return weights_mb(self.models[model])

    def gpu(self, model: str) -> int:
        server = self.models[model].get("server")
        if server:  # a served entry: the GPUs of the vLLM server its jobs start, else none
            return int(server["vllm"]["gpus"]) if server["vllm"]["enabled"] else 0
        return 0 if self.models[model].get("device") == "cpu" else 1

    # encoders: {model} is a dense model
    def encoder_gpu(self, wildcards) -> int:
        return self.gpu(wildcards.model)

    def encoder_mem_mb(self, wildcards, input, attempt) -> int:
        return encode_mem_mb(size_mb(input[0]), self._weights(wildcards.model), attempt)

    def encode_shard_runtime(self, wildcards, input, attempt) -> int:
        return shard_minutes(size_mb(input.corpus), self._weights(wildcards.model), int(wildcards.nshards),
                             self.gpu(wildcards.model) > 0, attempt)

    def encode_corpus_runtime(self, wildcards, input, attempt) -> int:
        return shard_minutes(size_mb(input.corpus), self._weights(wildcards.model), 1, self.gpu(wildcards.model) > 0,
                             attempt)

    def encode_queries_runtime(self, wildcards, input, attempt) -> int:
        return encode_minutes(_total_mb(input), self._weights(wildcards.model), self.gpu(wildcards.model) > 0,
                              attempt)

    # generation: {llm} names an llms entry with generate
    def _vllm(self, llm: str) -> dict:
        from .schema import with_defaults

        gen = with_defaults("llm", self.reg.cfg["llms"].get(llm, {})).get("generate")
        return gen["vllm"] if gen and gen["vllm"]["enabled"] else {}

    def generate_gpu(self, wildcards) -> int:
        return int(self._vllm(wildcards.llm).get("gpus", 0))

    def generate_runtime(self, wildcards, input, attempt) -> int:
        return generate_minutes(count_lines(input.queries), self._vllm(wildcards.llm).get("startup_seconds", 0),
                                attempt)

    # the judge of CliniQ's judgment completion ({benchmark} is its benchmark): generation's formula, counting 20
    # judgments of one chunk each as one query's generation
    def judge_gpu(self, wildcards) -> int:
        return int(self._vllm(self.reg.completion["llm"]).get("gpus", 0))

    def judge_runtime(self, wildcards, input, attempt) -> int:
        return generate_minutes(count_lines(input.sample) // 20, self._vllm(self.reg.completion["llm"]).get(
            "startup_seconds", 0), attempt)

    # index and search
    def lucene_index_mem_mb(self, wildcards, input, attempt) -> int:
        return lucene_index_mem_mb(size_mb(input.corpus), attempt)

    def lucene_index_runtime(self, wildcards, input, threads, attempt) -> int:
        return lucene_index_minutes(size_mb(input.corpus), threads, attempt)

    bm25_search_mem_mb = staticmethod(_sized(bm25_search_mem_mb, "index"))
    bm25_search_runtime = staticmethod(_sized(search_minutes, "index"))
    bm25_paper_mem_mb = staticmethod(_sized(bm25_paper_mem_mb, "corpus"))
    bm25_paper_runtime = staticmethod(_sized(search_minutes, "corpus"))
    bm25_paper_fit_mem_mb = staticmethod(_sized(bm25_paper_fit_mem_mb, "tokens"))
    bm25_paper_fit_runtime = staticmethod(_sized(search_minutes, "tokens"))
    bm25_paper_search_mem_mb = staticmethod(_sized(bm25_paper_search_mem_mb, "model"))
    bm25_paper_search_runtime = staticmethod(_sized(search_minutes, "model"))
    dense_search_mem_mb = staticmethod(_sized(search_mem_mb, "emb"))
    dense_search_runtime = staticmethod(_sized(search_minutes, "emb"))

    # rerank: {model} is a rerank run
    def _reranker(self, wildcards) -> str:
        return self.reg.derived[wildcards.model]["reranker"]

    def rerank_gpu(self, wildcards) -> int:
        return self.gpu(self._reranker(wildcards))

    def rerank_mem_mb(self, wildcards, input, attempt) -> int:
        return encode_mem_mb(size_mb(input.corpus), self._weights(self._reranker(wildcards)), attempt)

    def rerank_runtime(self, wildcards, input, attempt) -> int:
        docs = max(1, count_lines(input.corpus))
        pairs = int(self.reg.derived[wildcards.model]["depth"]) * count_lines(input.queries)
        reranker = self._reranker(wildcards)
        return rerank_minutes(pairs, size_mb(input.corpus) / docs, self._weights(reranker), self.gpu(reranker) > 0,
                              attempt)

    # LLM rerankers: {model} is a rerank run whose reranker asks an LLM server
    def _rerank_llm(self, wildcards) -> str:
        return self.models[self._reranker(wildcards)]["llm"]

    def llm_rerank_gpu(self, wildcards) -> int:
        return int(self._vllm(self._rerank_llm(wildcards)).get("gpus", 0))

    def llm_rerank_runtime(self, wildcards, input, attempt) -> int:
        from ..rerank.listwise import windows_for

        job = self.reg.derived[wildcards.model]
        spec = self.models[job["reranker"]]
        depth = int(job["depth"])
        per_query = depth if spec["type"] == "llm_pointwise" else len(windows_for(spec, depth))
        llm = self._rerank_llm(wildcards)
        reasoning = self.reg.reasoning(llm) != "none" or spec.get("prompt_mode", "rankgpt") != "rankgpt"
        return llm_rerank_minutes(per_query * count_lines(input.queries), self.reg.llm(llm)["generate"]["concurrency"],
                                  reasoning, self._vllm(llm).get("startup_seconds", 0), attempt)

    # parsing, gathering, scoring, fusion
    def light_mem_mb(self, wildcards, input, attempt) -> int:
        return light_mem_mb(_total_mb(input), attempt)

    def light_runtime(self, wildcards, input, attempt) -> int:
        return light_minutes(_total_mb(input), attempt)

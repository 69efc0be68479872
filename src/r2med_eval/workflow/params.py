"""Per-rule parameters: each rule gets exactly what changes its output.

Snakemake reruns a job when its params change, so a rule's params hold the configuration keys that shape
its output and nothing else (a model's ``description``, ``enabled``, ``paper_name`` or another task's prompt
change no embedding), plus ``code``: the hash of the package code the rule runs (``workflow.code``). Paths of
the checkout never appear here, so moving it reruns nothing.

Every rule has one params entry, ``spec``: ``Params.of(rule)`` is its function of the wildcards.
``MODEL_KEYS`` says, for every key a model entry can have, which rules read it; a test checks that it covers
the schema, so a new key cannot be forgotten.
"""

from __future__ import annotations

from .code import CodeIndex
from .paths import DOWNLOAD, fill
from .registry import Registry

ENCODER_COMMON = ("source", "pooling", "pool_prompt", "normalize", "max_length", "batch_size", "dtype", "device",
                  "trust_remote_code", "append_eos")
DOC_SIDE = ENCODER_COMMON + ("doc_prompt",)
QUERY_SIDE = ENCODER_COMMON + ("query_source", "query_max_length", "query_prompt")

# model type -> key -> the rules whose output it shapes ("-": documentation or selection only)
MODEL_KEYS = {
    "bm25_lucene": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                    "k1": "retrieve_bm25_lucene", "b": "retrieve_bm25_lucene", "top_k": "retrieve_bm25_lucene"},
    "bm25_paper": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                   "k1": "fit_bm25_paper retrieve_bm25_paper", "b": "fit_bm25_paper retrieve_bm25_paper",
                   "top_k": "retrieve_bm25_paper",
                   "fill_zero": "retrieve_bm25_paper"},
    "dense": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
              **{k: "encode_corpus_shard encode_queries encode_query_variant" for k in ENCODER_COMMON},
              "source": "prefetch_model encode_corpus_shard encode_queries encode_query_variant",
              "doc_prompt": "encode_corpus_shard", "task_prompts": "encode_corpus_shard encode_queries "
              "encode_query_variant", "query_source": "prefetch_model encode_queries encode_query_variant",
              "query_max_length": "encode_queries encode_query_variant",
              "query_prompt": "encode_queries encode_query_variant", "embedding_dtype": "gather_embeddings",
              "shards": "gather_embeddings (the shard files)", "top_k": "retrieve_dense", "index": "retrieve_dense"},
    "cross_encoder": {"type": "rerank_run", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                      "source": "prefetch_model rerank_run", "max_length": "rerank_run", "batch_size": "rerank_run",
                      "device": "rerank_run", "trust_remote_code": "rerank_run"},
}
INDEX_KEYS = {"flat": ("kind",), "ivf": ("kind", "nlist", "nprobe", "max_train", "seed"),
              "hnsw": ("kind", "m", "ef_construction", "ef_search", "seed")}
TASK_KEYS = ("layout", "split", "empty_text", "unknown_qrels", "duplicate_qrels")


def _pick(spec: dict, keys) -> dict:
    return {k: spec[k] for k in keys if k in spec}


class Params:
    def __init__(self, reg: Registry, code: CodeIndex | None = None):
        self.reg = reg
        self.cfg = reg.cfg
        self.code = code or CodeIndex()
        self.made: list = []  # every params function handed out (rules/common.smk tells Snakemake their arguments)

    def of(self, rule: str):
        """The params function of a rule: its projection of the configuration and its code hash."""
        project = getattr(self, rule, None)
        code = self.code.hash(rule)

        def spec(wildcards):
            return {**(project(wildcards) if project else {}), "code": code}

        spec.__name__ = f"{rule}_params"
        self.made.append(spec)
        return spec

    # ------------------------------------------------------------ data and chunk

    def task(self, benchmark: str, task: str) -> dict:
        """How a task is read: its layout options, where its files lie, its download source, its R2MED task."""
        from ..r2med import paper_task

        bench = self.cfg["benchmarks"][benchmark]
        spec = {**_pick(bench, TASK_KEYS), "path": bench["tasks"][task].get("path")}
        tcfg = bench["tasks"][task]
        if "source" in tcfg:
            spec.update(path=fill(DOWNLOAD, benchmark=benchmark, task=task), source=tcfg["source"])
        ptask = paper_task(tcfg)
        if ptask:
            spec["paper_task"] = ptask
        return spec

    def prepare_task(self, wildcards) -> dict:
        return self.task(wildcards.benchmark, wildcards.task)

    def _fetch(self, wildcards) -> dict:
        t = self.cfg["benchmarks"][wildcards.benchmark]["tasks"][wildcards.task]
        return {"source": t["source"], "local": t.get("local"), "sha256": t.get("sha256", {})}

    def download_task(self, wildcards) -> dict:
        return self._fetch(wildcards)

    def download_query_variant(self, wildcards) -> dict:
        return self._fetch(wildcards)

    def prefetch_model(self, wildcards) -> dict:
        """The model's Hub sources (a source.path or source.package needs no prefetch)."""
        from ..hfmodels import hub_sources

        return hub_sources(self.cfg["models"][wildcards.model])

    def _cliniq(self, benchmark: str) -> dict:
        return self.cfg["benchmarks"][benchmark]

    def download_cliniq_annotations(self, wildcards) -> dict:
        from .inputs import Inputs

        bench = Inputs(self.reg).cliniq_download_dirs()[wildcards.anndir]
        return _pick(self._cliniq(bench)["annotations"], ("commit", "base_url", "sha256"))

    def chunk_cliniq(self, wildcards) -> dict:
        """Only what shapes the corpus (new judgments or the pool depth do not re-chunk)."""
        return _pick(self._cliniq(wildcards.benchmark), ("expected_chunks", "allow_missing_notes"))

    def prepare_cliniq(self, wildcards) -> dict:
        return _pick(self._cliniq(wildcards.benchmark), ("new_judgments", "missing_chunk_qrels_max"))

    # ------------------------------------------------------------ index

    def private(self, benchmark: str) -> bool:
        """MIMIC-derived outputs (CliniQ's index and embeddings) are owner-only."""
        return self.reg.is_cliniq(benchmark)

    def lucene_index(self, wildcards) -> dict:
        return {"private": self.private(wildcards.benchmark)}

    def analyse_bm25_paper(self, wildcards) -> dict:
        return {"private": self.private(wildcards.benchmark)}

    def fit_bm25_paper(self, wildcards) -> dict:
        """k1 and b come from the file name (one fit per task and (k1, b), shared by the models that use it)."""
        return {"k1": float(wildcards.k1), "b": float(wildcards.b), "private": self.private(wildcards.benchmark)}

    def _encoder(self, wildcards, keys, side: str) -> dict:
        spec = self.cfg["models"][wildcards.model]
        out = {**_pick(spec, keys), "private": self.private(wildcards.benchmark)}
        prompts = spec["task_prompts"].get(wildcards.task, {}) if "task_prompts" in spec else {}
        key = f"{side}_prompt"
        out[key] = prompts.get(side, spec[key])
        return out

    def encode_corpus_shard(self, wildcards) -> dict:
        return self._encoder(wildcards, DOC_SIDE, "doc")

    def encode_queries(self, wildcards) -> dict:
        return self._encoder(wildcards, QUERY_SIDE, "query")

    def encode_query_variant(self, wildcards) -> dict:
        return self._encoder(wildcards, QUERY_SIDE, "query")

    def gather_embeddings(self, wildcards) -> dict:
        return {"storage": self.cfg["models"][wildcards.model]["embedding_dtype"],
                "private": self.private(wildcards.benchmark)}

    # ------------------------------------------------------------ retrieve

    def _variant(self, run: str) -> dict:
        v = self.reg.variants.get(run)
        return {"variant": {"method": v["method"], "llm": v["llm"]}} if v else {}

    def retrieve_bm25_lucene(self, wildcards) -> dict:
        spec = self.cfg["models"][self.reg.model_of(wildcards.model)]
        return {**_pick(spec, ("k1", "b", "top_k")), **self._variant(wildcards.model)}

    def retrieve_bm25_paper(self, wildcards) -> dict:
        spec = self.cfg["models"][self.reg.model_of(wildcards.model)]
        return {**_pick(spec, ("k1", "b", "top_k", "fill_zero")), **self._variant(wildcards.model)}

    def retrieve_dense(self, wildcards) -> dict:
        spec = self.cfg["models"][self.reg.model_of(wildcards.model)]
        index = spec["index"]
        return {"top_k": spec["top_k"], "index": _pick(index, INDEX_KEYS[index["kind"]])}

    # ------------------------------------------------------------ rerank, fuse, score

    def rerank_run(self, wildcards) -> dict:
        job = self.reg.derived[wildcards.model]
        spec = self.cfg["models"][job["reranker"]]
        keys = ("type",) if spec["type"] == "dense" else tuple(k for k, v in MODEL_KEYS["cross_encoder"].items()
                                                                if "rerank_run" in v.split())
        return {"run": job["run"], "reranker": job["reranker"], "depth": job["depth"],
                "reranker_spec": _pick(spec, keys)}

    def fuse_runs(self, wildcards) -> dict:
        job = self.reg.derived[wildcards.model]
        keys = ("method", "runs", "depth") + (("k",) if job["method"] == "rrf" else ("weights",))
        return _pick(job, keys)

    def score_run(self, wildcards) -> dict:
        """BEIR's ignore_identical_ids per benchmark; official: as R2MED's code, dense runs yes, BM25 no."""
        policy = self.cfg["benchmarks"][wildcards.benchmark]["ignore_identical_ids"]
        if policy == "official":
            return {"ignore_identical_ids": "dense" in self.reg.root_types(wildcards.model)}
        return {"ignore_identical_ids": policy == "always"}

    # ------------------------------------------------------------ report

    def _report(self) -> dict:
        rep = self.cfg["report"]
        return {"baseline": self.reg.report_baseline(), "metric": self.cfg["leaderboard"]["metric"],
                **_pick(rep, ("permutations", "bootstrap", "seed", "alpha"))}

    def significance(self, wildcards) -> dict:
        return self._report()

    def leaderboard(self, wildcards) -> dict:
        return _pick(self._report(), ("baseline", "metric", "alpha", "permutations"))

    def leaderboard_benchmark(self, wildcards) -> dict:
        return self.leaderboard(wildcards)

    def plot_leaderboard(self, wildcards) -> dict:
        notes = []
        if not self.reg.rerank_lineage(wildcards.benchmark):
            notes.append("reranking-depth plot skipped: no rerank runs on this benchmark")
        if not self.reg.scatter_runs(wildcards.benchmark):
            notes.append("per-query scatter skipped: report.scatter (or the first two runs) not all run here")
        return {"metric": self.cfg["leaderboard"]["metric"], "notes": notes}

    def plot_rerank_depth(self, wildcards) -> dict:
        return {"metric": self.cfg["leaderboard"]["metric"], "lineage": self.reg.rerank_lineage(wildcards.benchmark)}

    def plot_scatter(self, wildcards) -> dict:
        a, b = self.reg.scatter_runs(wildcards.benchmark)
        return {"a": a, "b": b, "metric": self.cfg["leaderboard"]["metric"]}

    def provenance(self, wildcards) -> dict:
        from .inputs import job_benchmark_files

        runs = []
        for b, t, r in self.reg.run_tasks():
            runs.append({"benchmark": b, "task": t, "model": r, "branch": self.reg.branch(b, t, r),
                         "jobs": job_benchmark_files(self.reg, b, t, r)})
        datasets = {f"{b}/{t}": {**self.task(b, t), "layout": self.cfg["benchmarks"][b]["layout"],
                                 **_pick(self.cfg["benchmarks"][b]["tasks"][t], ("local",))}
                    for b, t in self.reg.tasks}
        return {"runs": runs, "datasets": datasets}

    def r2med_vs_paper(self, wildcards) -> dict:
        from ..r2med import paper_task

        runs = sorted({r for b in self.reg.benchmarks for r in self.reg.runs_of(b)})
        tasks = {}
        for b, t in self.reg.tasks:
            p = paper_task(self.cfg["benchmarks"][b]["tasks"][t])
            if p:
                tasks[f"{b}/{t}"] = p
        return {"keys": {r: self.reg.paper_key(r) for r in runs}, "tasks": tasks}

    def report_cliniq(self, wildcards) -> dict:
        return {"models": self.reg.runs_of(wildcards.benchmark),
                "depth": self.cfg["benchmarks"][wildcards.benchmark]["pool_depth"]}

    def report_index(self, wildcards) -> dict:
        return {"benchmarks": list(self.reg.benchmarks), "cliniq": list(self.reg.cliniq_benchmarks)}

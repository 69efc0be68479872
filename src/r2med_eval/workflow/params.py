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
from .registry import ENCODER_TYPES, Registry

ENCODER_COMMON = ("source", "pooling", "pool_prompt", "normalize", "max_length", "batch_size", "dtype", "backend",
                  "device", "trust_remote_code", "append_eos", "encode_with", "bidirectional", "server")
DOC_SIDE = ENCODER_COMMON + ("doc_prompt", "doc_as_pair")
QUERY_SIDE = ENCODER_COMMON + ("query_source", "query_max_length", "query_prompt")

_SHARDS = "gather_embeddings (the shard files) encode_corpus (shards: 1, no shard files)"
# model type -> key -> the rules whose output it shapes ("-": documentation or selection only)
MODEL_KEYS = {
    "bm25_lucene": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                    "k1": "retrieve_bm25_lucene", "b": "retrieve_bm25_lucene", "top_k": "retrieve_bm25_lucene"},
    "bm25_paper": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                   "k1": "fit_bm25_paper retrieve_bm25_paper", "b": "fit_bm25_paper retrieve_bm25_paper",
                   "top_k": "retrieve_bm25_paper",
                   "fill_zero": "retrieve_bm25_paper"},
    "dense": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
              **{k: "encode_corpus_shard encode_corpus encode_queries encode_query_variant" for k in ENCODER_COMMON},
              "source": "prefetch_model encode_corpus_shard encode_corpus encode_queries encode_query_variant",
              "doc_prompt": "encode_corpus_shard encode_corpus", "doc_as_pair": "encode_corpus_shard encode_corpus",
              "task_prompts": "encode_corpus_shard encode_corpus encode_queries "
              "encode_query_variant", "query_source": "prefetch_model encode_queries encode_query_variant",
              "query_max_length": "encode_queries encode_query_variant",
              "query_prompt": "encode_queries encode_query_variant",
              "embedding_dtype": "gather_embeddings encode_corpus",
              "hydoc_prompt": "encode_query_variant r2med_vs_paper",
              "hydoc_average": "encode_query_variant r2med_vs_paper",
              "shards": _SHARDS, "top_k": "retrieve_dense", "index": "retrieve_dense",
              "protocol": "encode_corpus_shard encode_corpus (doc_text) retrieve_dense score_run r2med_vs_paper",
              "published_as": "r2med_vs_paper"},
    "run": {"type": "-", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
            "path": "- (the filled file is import_run's input: editing the file reruns its branch)",
            "missing_queries": "import_run"},
    "cross_encoder": {"type": "rerank_run", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                      "source": "prefetch_model rerank_run", "max_length": "rerank_run", "batch_size": "rerank_run",
                      "score": "rerank_run", "dtype": "rerank_run", "device": "rerank_run",
                      "trust_remote_code": "rerank_run", "truncate": "rerank_run"},
    "rankllama": {"type": "rerank_run", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
                  "source": "prefetch_model rerank_run", "base_source": "prefetch_model rerank_run",
                  "max_length": "rerank_run", "query_template": "rerank_run", "doc_template": "rerank_run",
                  "dtype": "rerank_run", "device": "rerank_run", "trust_remote_code": "rerank_run",
                  "truncate": "rerank_run"},
}
# The keys of a listwise entry in one of ReasonRank's prompt modes only, and those of the RankGPT mode only: the params
# of an entry hold its mode's keys alone (a RankGPT entry's params are what they were before ReasonRank's modes).
REASONRANK_KEYS = ("prompt_mode", "tokenizer", "passage_tokens", "reasoning_tokens", "reasks")
RANKGPT_KEYS = ("passage_words", "passage_format")
_LLM_RERANK = {"type": "llm_rerank_run", "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
               "llm": "llm_rerank_run (and its llms entry)",
               **{k: "llm_rerank_run" for k in ("passage_words", "passage_format", "temperature", "max_tokens",
                                                "truncate", "max_unusable")}}
MODEL_KEYS.update({
    "llm_listwise": {**_LLM_RERANK, "window": "llm_rerank_run", "step": "llm_rerank_run",
                     **{k: "llm_rerank_run" for k in REASONRANK_KEYS if k != "tokenizer"},
                     "tokenizer": "prefetch_model llm_rerank_run", "published_as": "r2med_vs_paper"},
    "llm_pointwise": {**_LLM_RERANK, "prompt": "llm_rerank_run (the template's sha256; the file is the rule's input)",
                      **{k: "llm_rerank_run" for k in ("answers", "system_prompt", "logprobs", "top_logprobs",
                                                       "reasks")}},
})
_SEARCH = {"embedding_dtype": "gather_embeddings encode_corpus", "shards": _SHARDS,
           "top_k": "retrieve_dense", "index": "retrieve_dense"}
_ENCODE = "encode_corpus_shard encode_corpus encode_queries encode_query_variant"
MODEL_KEYS.update({
    "python": {"type": _ENCODE, "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
               **{k: _ENCODE for k in ("factory", "kwargs", "python_path", "normalize", "batch_size", "device")},
               "doc_prompt": "encode_corpus_shard encode_corpus", "query_prompt": "encode_queries encode_query_variant",
               "hydoc_prompt": "encode_query_variant r2med_vs_paper",
               "hydoc_average": "encode_query_variant r2med_vs_paper", **_SEARCH},
    "mteb": {"type": _ENCODE, "enabled": "-", "description": "-", "paper_name": "r2med_vs_paper",
             **{k: _ENCODE for k in ("name", "revision", "mteb_tasks", "normalize", "batch_size", "device")},
             "hydoc_average": "encode_query_variant r2med_vs_paper", **_SEARCH},
})
for _keys in MODEL_KEYS.values():
    _keys["tags"] = "claims"  # what the claims know of a model (family, domain, size): no run reads them
PYTHON_KEYS = ("type", "factory", "kwargs", "python_path", "normalize", "batch_size", "device")
MTEB_KEYS = ("type", "name", "revision", "normalize", "batch_size", "device")
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
        self._code_files: dict[str, str | None] = {}  # python model -> sha256 of its factory's file
        self._file_sha256: dict[str, str] = {}  # prompt template file -> sha256 (LLM rerankers, the CliniQ judge)

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
        from ..benchmarks.r2med import paper_task

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

    def llm_settings(self, llm: str, lamer: bool = False) -> dict:
        """An LLM's sampling and client settings (``llms.<llm>.generate``); LameR's keys only for LameR. The
        server's address and key stay in the environment: only the names of the variables are here."""
        settings = dict(self.reg.llm(llm)["generate"])
        settings.pop("examples", None)  # an input file
        if not lamer:
            for k in ("lamer_retriever", "lamer_depth", "lamer_words"):
                settings.pop(k)
        return settings

    def generate_query_variant(self, wildcards) -> dict:
        """The prompt (method, R2MED task), the LLM's sampling and client settings."""
        return {"method": wildcards.method, "llm": wildcards.llm,
                "prompt_task": self.reg.prompt_task(wildcards.benchmark, wildcards.task, wildcards.method,
                                                    wildcards.llm),
                **self.llm_settings(wildcards.llm, lamer=wildcards.method == "lamer")}

    def generate_private_query_variant(self, wildcards) -> dict:
        """As generate_query_variant, on a MIMIC-derived benchmark (the rule writes owner-only under resources/).
        The declared servers (``phi_servers``) are not here: a declaration changes no output, so the job reads it
        from the workflow's configuration."""
        return self.generate_query_variant(wildcards)

    def prefetch_model(self, wildcards) -> dict:
        """The model's Hub sources (a source.path or source.package needs no prefetch)."""
        from ..hub.models import hub_sources

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
        """MIMIC-derived outputs (CliniQ's index and embeddings) are owner-only (``Registry.is_private``, which
        asks ``confidential.mimic_benchmark`` as ``smk.run`` does from a job's configuration)."""
        return self.reg.is_private(benchmark)

    def lucene_index(self, wildcards) -> dict:
        return {"private": self.private(wildcards.benchmark)}

    def code_sha256(self, model: str) -> str:
        """sha256 of a python model's factory module file (found without importing it): an edit of the file
        reruns the model's encoding, and so its branch, only."""
        if model not in self._code_files:
            from ..dense.factories import module_file
            from ..io import sha256_file

            spec = self.cfg["models"][model]
            path = module_file(spec["factory"], spec.get("python_path"))
            self._code_files[model] = sha256_file(path) if path else None
        return self._code_files[model]

    def analyse_bm25_paper(self, wildcards) -> dict:
        return {"private": self.private(wildcards.benchmark)}

    def fit_bm25_paper(self, wildcards) -> dict:
        """k1 and b come from the file name (one fit per task and (k1, b), shared by the models that use it)."""
        return {"k1": float(wildcards.k1), "b": float(wildcards.b), "private": self.private(wildcards.benchmark)}

    def _encoder(self, wildcards, keys, side: str) -> dict:
        spec = self.cfg["models"][wildcards.model]
        if spec["type"] == "python":
            return {**_pick(spec, PYTHON_KEYS), "code_sha256": self.code_sha256(wildcards.model),
                    f"{side}_prompt": spec[f"{side}_prompt"], "private": self.private(wildcards.benchmark)}
        if spec["type"] == "mteb":
            from ..benchmarks.r2med import paper_task
            from ..dense.factories import mteb_task_name

            tcfg = self.cfg["benchmarks"][wildcards.benchmark]["tasks"][wildcards.task]
            return {**_pick(spec, MTEB_KEYS), "mteb_task": mteb_task_name(spec, wildcards.task, paper_task(tcfg)),
                    "private": self.private(wildcards.benchmark)}
        out = {**_pick(spec, keys), "private": self.private(wildcards.benchmark)}
        prompts = spec["task_prompts"].get(wildcards.task, {}) if "task_prompts" in spec else {}
        key = f"{side}_prompt"
        out[key] = prompts.get(side, spec[key])
        protocol = self._protocol(wildcards.model)
        if side == "doc" and protocol and protocol.doc_text == "text":  # only then: other entries' params stay as is
            out["doc_text"] = "text"
        return out

    def _protocol(self, run: str):
        """The evaluation protocol a run was made under (``benchmarks.protocols``), or None."""
        from ..benchmarks import protocols

        return protocols.get(self.reg.protocol_of(run))

    def encode_corpus_shard(self, wildcards) -> dict:
        return self._encoder(wildcards, DOC_SIDE, "doc")

    def encode_queries(self, wildcards) -> dict:
        return self._encoder(wildcards, QUERY_SIDE, "query")

    def encode_query_variant(self, wildcards) -> dict:
        spec = self.cfg["models"][wildcards.model]
        # an mteb entry has no hydoc_prompt: MTEB's own prompts apply to both texts
        return {**self._encoder(wildcards, QUERY_SIDE, "query"), **_pick(spec, ("hydoc_prompt", "hydoc_average")),
                "reasoning": self.reg.reasoning(wildcards.llm)}

    def gather_embeddings(self, wildcards) -> dict:
        return {"storage": self.cfg["models"][wildcards.model]["embedding_dtype"],
                "private": self.private(wildcards.benchmark)}

    def encode_corpus(self, wildcards) -> dict:
        """``shards: 1``: encode_corpus_shard's and gather_embeddings' keys, done in one job."""
        return {**self.encode_corpus_shard(wildcards), **self.gather_embeddings(wildcards)}

    # ------------------------------------------------------------ retrieve

    def _variant(self, run: str) -> dict:
        v = self.reg.variants.get(run)
        return {"variant": {"method": v["method"], "llm": v["llm"], "reasoning": self.reg.reasoning(v["llm"])}} \
            if v else {}

    def _top_k(self, benchmark: str, spec: dict) -> dict:
        """The model's top_k; ``None`` (the whole corpus) on a CliniQ benchmark with ``depth: full``, as
        CliniQ's eval.py ranks every chunk."""
        bench = self.cfg["benchmarks"][benchmark]
        full = self.reg.is_cliniq(benchmark) and bench["depth"] == "full"
        return {"top_k": None if full else spec["top_k"]}

    def retrieve_bm25_lucene(self, wildcards) -> dict:
        spec = self.cfg["models"][self.reg.model_of(wildcards.model)]
        return {**_pick(spec, ("k1", "b")), **self._top_k(wildcards.benchmark, spec), **self._variant(wildcards.model)}

    def retrieve_bm25_paper(self, wildcards) -> dict:
        spec = self.cfg["models"][self.reg.model_of(wildcards.model)]
        return {**_pick(spec, ("k1", "b", "fill_zero")), **self._top_k(wildcards.benchmark, spec),
                **self._variant(wildcards.model)}

    def retrieve_dense(self, wildcards) -> dict:
        """The search; on a CliniQ benchmark with ``tie_order: evalpy``, ``ranking: evalpy`` (eval.py's cosine and
        np.argsort order, written as it is)."""
        spec = self.cfg["models"][self.reg.model_of(wildcards.model)]
        index = spec["index"]
        out = {**self._top_k(wildcards.benchmark, spec), "index": _pick(index, INDEX_KEYS[index["kind"]])}
        protocol = self._protocol(wildcards.model)
        if protocol:  # recorded in the run's info; R2MED's drops the query's own id in the search, as BEIR does
            out["protocol"] = protocol.name
            if protocol.drop_identical_ids:
                out["drop_identical_ids"] = True
        if self.reg.is_cliniq(wildcards.benchmark) and \
                self.reg.cliniq_tie_order(wildcards.benchmark, wildcards.model) == "evalpy":
            out["ranking"] = "evalpy"
        return out

    def import_run(self, wildcards) -> dict:
        """A type: run model: how absent queries are treated (the file itself is the rule's input)."""
        return {"missing_queries": self.cfg["models"][wildcards.model]["missing_queries"]}

    # ------------------------------------------------------------ rerank, fuse, score

    def rerank_run(self, wildcards) -> dict:
        job = self.reg.derived[wildcards.model]
        spec = self.cfg["models"][job["reranker"]]
        keys = ("type",) if spec["type"] in ENCODER_TYPES else tuple(k for k, v in MODEL_KEYS[spec["type"]].items()
                                                                if "rerank_run" in v.split())
        return {"run": job["run"], "reranker": job["reranker"], "depth": job["depth"],
                "reranker_spec": _pick(spec, keys)}

    def llm_rerank_run(self, wildcards) -> dict:
        """An LLM reranker's keys (a pointwise prompt as its template's sha256), its LLM's settings and reasoning
        format, and whether the benchmark is MIMIC-derived (the job's cache then lies owner-only under
        resources/). The declared servers (``phi_servers``) are not here: the job reads them from the configuration."""
        job = self.reg.derived[wildcards.model]
        spec = self.cfg["models"][job["reranker"]]
        rspec = _pick(spec, [k for k, v in MODEL_KEYS[spec["type"]].items() if "llm_rerank_run" in v.split()])
        if spec["type"] == "llm_pointwise":
            rspec.pop("prompt", None)
            rspec["prompt_sha256"] = self.prompt_sha256(job["reranker"])
        elif spec["type"] == "llm_listwise":
            drop = REASONRANK_KEYS if spec["prompt_mode"] == "rankgpt" else RANKGPT_KEYS
            rspec = {k: v for k, v in rspec.items() if k not in drop}
        return {"run": job["run"], "reranker": job["reranker"], "depth": job["depth"], "reranker_spec": rspec,
                "reasoning": self.reg.reasoning(spec["llm"]), "generate": self.llm_settings(spec["llm"]),
                "private": self.private(wildcards.benchmark)}

    def prompt_sha256(self, model: str) -> str:
        """sha256 of a pointwise LLM reranker's prompt template: an edit asks again."""
        from .inputs import prompt_file

        return self._sha256(prompt_file(self.cfg["models"][model]))

    def _sha256(self, path) -> str:
        """sha256 of a prompt file, read once per planning."""
        from ..io import sha256_file

        key = str(path)
        if key not in self._file_sha256:
            self._file_sha256[key] = sha256_file(path)
        return self._file_sha256[key]

    def fuse_runs(self, wildcards) -> dict:
        job = self.reg.derived[wildcards.model]
        keys = ("method", "runs", "depth") + (("k",) if job["method"] == "rrf" else ("weights", "convention")
                                              if job["method"] in ("minmax", "zscore") else
                                              ("norm", "params", "optimize"))
        return _pick(job, keys)

    def score_cliniq(self, wildcards) -> dict:
        return {"tie_order": self.reg.cliniq_tie_order(wildcards.benchmark, wildcards.model)}

    def score_run(self, wildcards) -> dict:
        """BEIR's ignore_identical_ids: as the run's protocol says where it has one (recorded in its metrics);
        otherwise per benchmark, official: as R2MED's code, dense runs yes, BM25 no."""
        protocol = self._protocol(wildcards.model)
        if protocol:
            return {"ignore_identical_ids": protocol.drop_identical_ids, "protocol": protocol.name}
        policy = self.cfg["benchmarks"][wildcards.benchmark]["ignore_identical_ids"]
        if policy == "official":
            return {"ignore_identical_ids": bool(set(ENCODER_TYPES) & self.reg.root_types(wildcards.model))}
        return {"ignore_identical_ids": policy == "always"}

    # ------------------------------------------------------------ report

    def collect_metrics(self, wildcards) -> dict:
        """What this scoring of the benchmark selects (complete or not), recorded beside its collected metrics."""
        return {"selection": self.reg.selection(wildcards.benchmark)}

    def _report(self) -> dict:
        rep = self.cfg["report"]
        return {"baseline": self.reg.report_baseline(), "metric": self.cfg["leaderboard"]["metric"],
                **_pick(rep, ("permutations", "bootstrap", "seed", "alpha", "holm"))}

    def significance(self, wildcards) -> dict:
        return self._report()

    def leaderboard(self, wildcards) -> dict:
        from . import earlier

        out = {**self._report_leaderboard(), "unselected": earlier.unselected_runs(self.reg),
               "kept": earlier.kept(self.reg),
               "synthetic": self.reg.synthetic(list(self.reg.benchmarks) + earlier.benchmarks(self.reg))}
        folder = self.cfg["leaderboard"].get("mteb_reference")
        if folder:
            out["mteb_reference"] = {"folder": folder,
                                     "tasks": {n: f"{b}/{t}" for (b, t), n in self.mteb_tasks().items()}}
        return out

    def mteb_tasks(self) -> dict[tuple[str, str], str]:
        """(benchmark, task) -> MTEB task name, for the selected R2MED tasks."""
        from ..benchmarks.r2med import paper_task
        from ..dense.factories import MTEB_R2MED

        out = {}
        for b, t in self.reg.tasks:
            p = paper_task(self.cfg["benchmarks"][b]["tasks"][t])
            if p:
                out[(b, t)] = MTEB_R2MED.format(p.replace("-", ""))
        return out

    def mteb_export(self, wildcards) -> dict:
        """One entry per run on an R2MED task: MTEB's model name and revision for a type: mteb retriever's own
        run, r2med-eval/<run> otherwise; the task's dataset revision."""
        entries = []
        tasks = self.mteb_tasks()
        for b, t, r in self.reg.run_tasks():
            if (b, t) not in tasks:
                continue
            spec = self.cfg["models"].get(r)
            mteb = spec is not None and spec["type"] == "mteb"
            source = self.cfg["benchmarks"][b]["tasks"][t].get("source") or {}
            entries.append({"benchmark": b, "task": t, "model": r, "task_name": tasks[(b, t)],
                            "name": spec["name"] if mteb else f"r2med-eval/{r}",
                            "revision": spec.get("revision") if mteb else None,
                            "dataset_revision": source.get("revision")})
        return {"entries": entries}

    def _report_leaderboard(self) -> dict:
        return {**_pick(self._report(), ("baseline", "metric", "alpha", "permutations", "holm")),
                "judged_below": self.cfg["leaderboard"]["judged_below"]}

    def leaderboard_benchmark(self, wildcards) -> dict:
        return {**self._report_leaderboard(), "synthetic": self.reg.synthetic([wildcards.benchmark])}

    def plot_palette(self, wildcards) -> dict:
        """The benchmark's runs in configuration order, each with its place among every benchmark's runs (the
        style it takes when new); adding or removing a run reruns the palette."""
        everyone = list(dict.fromkeys(r for b in self.reg.benchmarks for r in self.reg.runs_of(b)))
        return {"runs": [[r, everyone.index(r)] for r in self.reg.runs_of(wildcards.benchmark)]}

    def plot_leaderboard(self, wildcards) -> dict:
        notes = []
        if not self.reg.rerank_lineage(wildcards.benchmark):
            notes.append("reranking-depth plot skipped: no rerank runs on this benchmark")
        if not self.reg.scatter_runs(wildcards.benchmark):
            notes.append("per-query scatter skipped: report.scatter (or the first two runs) not all run here")
        return {"metric": self.cfg["leaderboard"]["metric"], "notes": notes}

    def plot_cliniq(self, wildcards) -> dict:
        return {"metric": self.cfg["leaderboard"]["metric"]}  # the leaderboard's order of the runs

    def plot_rerank_depth(self, wildcards) -> dict:
        return {"metric": self.cfg["leaderboard"]["metric"], "lineage": self.reg.rerank_lineage(wildcards.benchmark)}

    def plot_scatter(self, wildcards) -> dict:
        a, b = self.reg.scatter_runs(wildcards.benchmark)
        return {"a": a, "b": b, "metric": self.cfg["leaderboard"]["metric"]}

    def provenance(self, wildcards) -> dict:
        from .registry import job_benchmark_files

        runs = []
        for b, t, r in self.reg.run_tasks():
            runs.append({"benchmark": b, "task": t, "model": r, "branch": self.reg.branch(b, t, r),
                         "jobs": job_benchmark_files(self.reg, b, t, r)})
        datasets = {f"{b}/{t}": {**self.task(b, t), "layout": self.cfg["benchmarks"][b]["layout"],
                                 **_pick(self.cfg["benchmarks"][b]["tasks"][t], ("local",))}
                    for b, t in self.reg.tasks}
        return {"runs": runs, "datasets": datasets}

    def r2med_vs_paper(self, wildcards) -> dict:
        from ..benchmarks.r2med import paper_task

        runs = sorted({r for b in self.reg.benchmarks for r in self.reg.runs_of(b)})
        tasks = {}
        for b, t in self.reg.tasks:
            p = paper_task(self.cfg["benchmarks"][b]["tasks"][t])
            if p:
                tasks[f"{b}/{t}"] = p
        return {"keys": {r: self.reg.paper_key(r) for r in runs}, "tasks": tasks,
                "empty_hydoc": self.reg.empty_hydoc_runs()}

    def report_cliniq(self, wildcards) -> dict:
        models = self.reg.runs_of(wildcards.benchmark)
        return {"models": models, "depth": self.cfg["benchmarks"][wildcards.benchmark]["pool_depth"],
                "tie_orders": self._tie_orders(wildcards.benchmark, models),
                "synthetic": self.reg.synthetic([wildcards.benchmark])}

    def claims(self, wildcards) -> dict:
        """The decision rules, the resampling of the tests, and per benchmark the roles each claim gives its runs
        (from the registry's tags: family, domain, size, an LLM's kind, rerank depths, fusion inputs) and the figures
        a claim may point to. Adding, removing or re-tagging a run a claim compares reruns the claims; a run no claim
        reads does not."""
        from ..claims.catalogue import RULES
        from .inputs import plot_names

        out = {}
        for b, entry in self.reg.claims().items():
            figures = plot_names(self.reg, b) + (["cliniq_completion"] if b in self.reg.completion_benchmark() else [])
            out[b] = {**entry, "figures": figures, "synthetic": bool(self.reg.synthetic([b]))}
        return {"rules": RULES, "resampling": _pick(self.cfg["report"], ("permutations", "bootstrap", "seed")),
                "benchmarks": out}

    def report_index(self, wildcards) -> dict:
        """The selected benchmarks' sections; the earlier benchmarks' (shown as an earlier run left them) and the
        report files of earlier runs that nothing shows (listed), as found when the workflow is planned."""
        from . import earlier
        from .inputs import all_targets

        reported = earlier.reported(self.reg)
        return {"benchmarks": reported, "cliniq": [b for b in self.reg.cliniq_benchmarks if b in reported],
                "completion": self.reg.completion_benchmark(), "earlier": earlier.shown(self.reg),
                "kept": earlier.kept(self.reg), "stale": earlier.stale(self.reg, all_targets(self.reg)),
                "synthetic": self.reg.synthetic(list(self.reg.benchmarks) + earlier.benchmarks(self.reg))}

    # ------------------------------------------------------------ CliniQ's judgment completion

    def cliniq_completion_sample(self, wildcards) -> dict:
        """The design's settings; where coded admissions come from (``auto`` resolved); the pool's runs and their
        tie orders only with a pool (``pool_depth: 0`` reads no run, so adding a run redraws nothing)."""
        c = self.reg.completion
        coded_from = self.reg.completion_coded_from()
        runs = self.reg.completion_pool_runs()
        out = {**_pick(c, ("queries", "sample_per_query", "pool_depth", "seed")), "coded_from": coded_from,
               "coded_unit": c["coded_unit"]}
        if runs:
            out.update(runs=runs, tie_orders=self._tie_orders(wildcards.benchmark, runs))
        return out

    def _tie_orders(self, benchmark: str, runs) -> dict:
        """Each run's order of equal scores as score_cliniq ranks it (``Registry.cliniq_tie_order``)."""
        return {m: self.reg.cliniq_tie_order(benchmark, m) for m in runs}

    def cliniq_completion_judge(self, wildcards) -> dict:
        """The judge: its LLM's client settings at temperature 0 (top_p unset), its reasoning format, the prompt
        (the configured file, or None for the shipped one) and the sha256 of the prompt's text, so that an edit of
        the prompt reruns the judging and only it asks again (every other answer stays in the cache)."""
        from ..cliniq.judge import prompt_path

        c = self.reg.completion
        settings = dict(self.reg.llm(c["llm"])["generate"])
        for key in ("examples", "lamer_retriever", "lamer_depth", "lamer_words", "top_p"):
            settings.pop(key, None)
        settings["temperature"] = 0
        return {"llm": c["llm"], **settings, "reasoning": self.reg.reasoning(c["llm"]), "prompt": c["prompt"],
                "prompt_sha256": self._sha256(prompt_path(c["prompt"])), "malformed_retries": c["malformed_retries"]}

    def cliniq_completion_estimate(self, wildcards) -> dict:
        """What the tables say of the design (the design itself reaches the job as its input files)."""
        c = self.reg.completion
        return {**_pick(c, ("sample_per_query", "pool_depth", "seed")), "runs": len(self.reg.completion_pool_runs()),
                "synthetic": self.reg.synthetic([wildcards.benchmark])}

    def cliniq_completion_rescore(self, wildcards) -> dict:
        c = self.reg.completion
        return {"runs": self.reg.completion_runs(),
                "tie_orders": self._tie_orders(wildcards.benchmark, self.reg.completion_runs()),
                "families": self.reg.completion_families(),
                "experts": {k: [f.replace("\\", "/").rsplit("/", 1)[-1] for f in v]  # the files' names only
                            for k, v in zip(("present", "missing"), self.reg.completion_experts())},
                "move_threshold": c["move_threshold"], "bootstrap": self.cfg["report"]["bootstrap"], "seed": c["seed"],
                "synthetic": self.reg.synthetic([wildcards.benchmark])}

"""The rules' input functions and the targets of ``rule all``: which files exist follows from the registry,
where they lie from ``workflow.paths``."""

from __future__ import annotations

from . import earlier
from .paths import (
    BENCHMARK_LEADERBOARD,
    BM25_PAPER_FIT,
    BM25_PAPER_QUERY_TOKENS,
    BM25_PAPER_TOKENS,
    CHUNK_IDS,
    CLAIMS,
    CLAIMS_OVERLAP,
    CLINIQ_CHUNKS,
    CLINIQ_METRICS,
    CLINIQ_PER_QUERY,
    CLINIQ_POOL,
    CLINIQ_QRELS,
    CLINIQ_TABLE,
    COMPLETION_DESIGN,
    COMPLETION_FILE,
    COMPLETION_JUDGING,
    COMPLETION_LABELS,
    COMPLETION_SAMPLE,
    CORPUS,
    DOWNLOAD,
    DOWNLOAD_FILES,
    DOWNLOAD_VARIANT,
    EMB_CORPUS,
    EMB_CORPUS_IDS,
    EMB_CORPUS_INFO,
    EMB_QUERIES,
    EMB_QUERY_IDS,
    EMB_SHARD,
    EMB_VARIANT,
    EMB_VARIANT_IDS,
    GENERATED,
    GENERATED_INFO,
    INDEX,
    INDEX_PAGE,
    LEADERBOARD,
    METRICS,
    METRICS_SELECTION,
    METRICS_TABLE,
    MODEL_MANIFEST,
    MTEB_EXPORT,
    PALETTE,
    PER_QUERY,
    PLOT,
    PRIVATE_GENERATED,
    PRIVATE_VARIANT,
    PROVENANCE,
    QRELS,
    QUERIES,
    QUERY_TYPES,
    R2MED_VS_PAPER,
    RUN,
    RUN_BINARY,
    RUN_LINEAGE,
    SIGNIFICANCE,
    STATS,
    TABLE,
    VARIANT,
    bm25_float,
    fill,
)
from .registry import ENCODER_TYPES, Registry, job_inputs


class Inputs:
    """Input functions of the rules, each of the rule's ``wildcards``."""

    def __init__(self, reg: Registry):
        self.reg = reg
        self.cfg = reg.cfg

    # data
    def task_location(self, benchmark: str, task: str) -> dict:
        """A path task's folder; a source task's download folder resources/<benchmark>/<task> and its source."""
        spec = self.cfg["benchmarks"][benchmark]["tasks"][task]
        if "source" not in spec:
            return {"path": spec["path"]}
        return {"path": fill(DOWNLOAD, benchmark=benchmark, task=task), "source": spec["source"]}

    def prepare_task(self, wildcards) -> list[str]:
        from ..benchmarks.datasets import raw_files

        bench = self.cfg["benchmarks"][wildcards.benchmark]
        where = self.task_location(wildcards.benchmark, wildcards.task)
        files = raw_files(bench["layout"], where["path"], bench["split"])
        if "source" in where:
            files.append(fill(DOWNLOAD_FILES["manifest"], **wildcards))
        return files

    def variant_file(self, benchmark: str, task: str, method: str, llm: str) -> str:
        """A task's query-variant file (rule prepare_query_variant); under resources/ on a MIMIC-derived benchmark
        (rule prepare_private_query_variant)."""
        return fill(PRIVATE_VARIANT if self.reg.is_private(benchmark) else VARIANT, benchmark=benchmark, task=task,
                    method=method, llm=llm)

    def prepare_query_variant(self, wildcards) -> dict:
        if self.reg.generated(wildcards.llm):
            generated = PRIVATE_GENERATED if self.reg.is_private(wildcards.benchmark) else GENERATED
            return {"variant": fill(generated, **wildcards), "queries": fill(QUERIES, **wildcards)}
        folder = self.task_location(wildcards.benchmark, wildcards.task)["path"]
        return {"variant": f"{folder}/{wildcards.method}/{wildcards.llm}/query_with_hydoc.jsonl",
                "queries": fill(QUERIES, **wildcards)}

    def generate_query_variant(self, wildcards) -> dict:
        """The task's queries; LameR: the corpus and the first-stage run; query2doc: the examples file."""
        w = {"benchmark": wildcards.benchmark, "task": wildcards.task}
        settings = self.reg.llm(wildcards.llm)["generate"]
        out = {"queries": fill(QUERIES, **w)}
        if wildcards.method == "lamer":
            out.update(corpus=fill(CORPUS, **w), run=self._run(**w, model=settings["lamer_retriever"]))
        if wildcards.method == "query2doc" and settings.get("examples"):
            out["examples"] = settings["examples"]
        return out

    def cliniq_annotation_dir(self, wildcards) -> str:
        return self.cfg["benchmarks"][wildcards.benchmark]["tasks"][wildcards.task]["path"]

    def chunk_cliniq(self, wildcards) -> dict:
        return {"notes": self.cfg["benchmarks"][wildcards.benchmark]["noteevents"],
                "hadm_ids": f"{self.cliniq_annotation_dir(wildcards)}/test_hadm_ids.txt"}

    def prepare_cliniq_queries(self, wildcards) -> dict:
        from ..cliniq.corpus import QUERY_TYPES as TYPES

        folder = self.cliniq_annotation_dir(wildcards)
        return {"queries": [f"{folder}/queries_{t}.jsonl" for t in TYPES]}

    def prepare_cliniq(self, wildcards) -> dict:
        from ..cliniq.corpus import ANNOTATION_FILES

        folder = self.cliniq_annotation_dir(wildcards)
        inputs = {"ids": fill(CHUNK_IDS, **wildcards), "hadm_ids": f"{folder}/test_hadm_ids.txt",
                  "annotations": [f"{folder}/{name}" for name in ANNOTATION_FILES]}
        extra = self.cfg["benchmarks"][wildcards.benchmark]["new_judgments"]
        if extra:
            inputs["new_judgments"] = extra
        return inputs

    def cliniq_download_dirs(self) -> dict[str, str]:
        """Annotation folder -> benchmark, for CliniQ benchmarks whose annotations are downloaded."""
        return {self.cfg["benchmarks"][b]["tasks"][self.reg.cliniq_task(b)]["path"].rstrip("/"): b
                for b in self.reg.cliniq_benchmarks if self.cfg["benchmarks"][b]["annotations"]["download"]}

    # models: a Hub model's jobs wait for its snapshot (rule prefetch_model, a local rule)
    def weights(self, model: str) -> dict:
        """{"weights": the model's prefetch manifest} for a Hub model; nothing for a local or packaged one."""
        return {"weights": fill(MODEL_MANIFEST, model=model)} if self.reg.is_hub_model(model) else {}

    # index
    def encode_corpus_shard(self, wildcards) -> dict:
        return {"corpus": fill(CORPUS, benchmark=wildcards.benchmark, task=wildcards.task),
                **self.weights(wildcards.model)}

    def encode_queries(self, wildcards) -> dict:
        return {"queries": fill(QUERIES, benchmark=wildcards.benchmark, task=wildcards.task),
                **self.weights(wildcards.model)}

    def encode_query_variant(self, wildcards) -> dict:
        w = {"benchmark": wildcards.benchmark, "task": wildcards.task}
        return {"queries": fill(QUERIES, **w),
                "variant": self.variant_file(**w, method=wildcards.method, llm=wildcards.llm),
                **self.weights(wildcards.model)}

    def embedding_shards(self, wildcards) -> list[str]:
        n = self.cfg["models"][wildcards.model]["shards"]
        return [fill(EMB_SHARD, benchmark=wildcards.benchmark, task=wildcards.task, model=wildcards.model,
                     shard=i, nshards=n) for i in range(1, n + 1)]

    # retrieve
    def _queries(self, wildcards) -> dict:
        variant = self.reg.variants.get(wildcards.model)
        out = {"queries": fill(QUERIES, **wildcards)}
        if variant is not None:
            out["variant"] = self.variant_file(wildcards.benchmark, wildcards.task, variant["method"], variant["llm"])
        return out

    def retrieve_bm25_lucene(self, wildcards) -> dict:
        return {"index": fill(INDEX, **wildcards), **self._queries(wildcards)}

    def fit_bm25_paper(self, wildcards) -> dict:
        return {"tokens": fill(BM25_PAPER_TOKENS, benchmark=wildcards.benchmark, task=wildcards.task)}

    def bm25_paper_fit(self, benchmark: str, task: str, model: str) -> str:
        spec = self.cfg["models"][self.reg.model_of(model)]
        return fill(BM25_PAPER_FIT, benchmark=benchmark, task=task, k1=bm25_float(spec["k1"]), b=bm25_float(spec["b"]))

    def retrieve_bm25_paper(self, wildcards) -> dict:
        """The fit and the queries; the plain queries also come analysed (rule analyse_bm25_paper), a query
        variant's texts are analysed in the job."""
        out = {"model": self.bm25_paper_fit(wildcards.benchmark, wildcards.task, wildcards.model),
               **self._queries(wildcards)}
        if "variant" not in out:
            out["query_tokens"] = fill(BM25_PAPER_QUERY_TOKENS, benchmark=wildcards.benchmark, task=wildcards.task)
        return out

    def import_run(self, wildcards) -> dict:
        """A type: run model: the user's file of this task, the queries, and the document ids (CliniQ: the chunk
        ids, so that no note text is read)."""
        b, t = wildcards.benchmark, wildcards.task
        out = {"source": self.reg.run_file(wildcards.model, b, t), "queries": fill(QUERIES, benchmark=b, task=t)}
        if self.reg.is_cliniq(b):
            out["ids"] = fill(CHUNK_IDS, benchmark=b, task=t)
        else:
            out["corpus"] = fill(CORPUS, benchmark=b, task=t)
        return out

    def _embeddings(self, benchmark: str, task: str, model: str, variant: dict | None = None) -> dict:
        w = {"benchmark": benchmark, "task": task, "model": model}
        if variant is None:
            query, ids = fill(EMB_QUERIES, **w), fill(EMB_QUERY_IDS, **w)
        else:
            v = {"method": variant["method"], "llm": variant["llm"]}
            query, ids = fill(EMB_VARIANT, **w, **v), fill(EMB_VARIANT_IDS, **w, **v)
        return {"emb": fill(EMB_CORPUS, **w), "ids": fill(EMB_CORPUS_IDS, **w),
                "emb_info": fill(EMB_CORPUS_INFO, **w), "query_emb": query, "query_ids": ids}

    def retrieve_dense(self, wildcards) -> dict:
        variant = self.reg.variants.get(wildcards.model)
        # the corpus is not an input: the id order is checked against the id-list hash gather_embeddings stored
        return self._embeddings(wildcards.benchmark, wildcards.task, self.reg.model_of(wildcards.model), variant)

    # rerank, fuse
    def rerank_run(self, wildcards) -> dict:
        """The run to re-score and the task; a dense re-scorer also reuses its cached embeddings."""
        job = self.reg.derived[wildcards.model]
        w = {"benchmark": wildcards.benchmark, "task": wildcards.task}
        inputs = {"run": self._run(**w, model=job["run"]), "queries": fill(QUERIES, **w), "corpus": fill(CORPUS, **w)}
        if self.cfg["models"][job["reranker"]]["type"] in ENCODER_TYPES:
            inputs.update(self._embeddings(wildcards.benchmark, wildcards.task, job["reranker"]))
        inputs.update(self.weights(job["reranker"]))
        return inputs

    def llm_rerank_run(self, wildcards) -> dict:
        """The run to rerank and the task; a pointwise reranker's prompt template; a Hub tokenizer's manifest."""
        job = self.reg.derived[wildcards.model]
        w = {"benchmark": wildcards.benchmark, "task": wildcards.task}
        inputs = {"run": self._run(**w, model=job["run"]), "queries": fill(QUERIES, **w), "corpus": fill(CORPUS, **w)}
        spec = self.cfg["models"][job["reranker"]]
        if spec["type"] == "llm_pointwise":
            inputs["prompt"] = prompt_file(spec)
        return {**inputs, **self.weights(job["reranker"])}  # a ReasonRank mode's tokenizer from the Hub

    def fuse_runs(self, wildcards) -> list[str]:
        job = self.reg.derived[wildcards.model]
        return [self._run(wildcards.benchmark, wildcards.task, r) for r in job_inputs(job)]

    def _run(self, benchmark: str, task: str, model: str) -> str:
        """A run's file: binary on a CliniQ benchmark (full depth), TREC text elsewhere."""
        return fill(RUN_BINARY if self.reg.is_cliniq(benchmark) else RUN, benchmark=benchmark, task=task, model=model)

    # report
    def _per_run(self, pattern: str, benchmark: str | None = None) -> list[str]:
        return [fill(pattern, benchmark=b, task=t, model=m) for b, t, m in self.reg.run_tasks()
                if benchmark is None or b == benchmark]

    def metric_files(self) -> list[str]:
        return self._per_run(METRICS)

    def per_query_files(self) -> list[str]:
        """The per-query files of the runs of the benchmarks whose report this run writes (the significance)."""
        report = set(earlier.reported(self.reg))
        return [p for b in self.reg.benchmarks if b in report for p in self._per_run(PER_QUERY, b)]

    def stats_files(self) -> list[str]:
        return [fill(STATS, benchmark=b, task=t) for b, t in self.reg.tasks]

    def benchmark_metrics(self, wildcards) -> list[str]:
        """The metric JSONs of a benchmark's runs (rule collect_metrics)."""
        return self._per_run(METRICS, wildcards.benchmark)

    def scored(self) -> list[str]:
        """Every benchmark with a scored run, in the registry's order."""
        return list(dict.fromkeys(b for b, _, _ in self.reg.run_tasks()))

    def metric_tables(self) -> list[str]:
        """The collected metrics of every benchmark with a scored run, in the registry's order."""
        return [fill(METRICS_TABLE, benchmark=b) for b in self.scored()]

    def empty_hydoc_variants(self) -> list[str]:
        """The expansion files of the runs whose paper comparison counts empty hypothetical documents."""
        files: dict[str, None] = {}
        for v in self.reg.empty_hydoc_runs().values():
            for b, t in self.reg.tasks:
                if b == v["benchmark"]:
                    files[fill(VARIANT, benchmark=b, task=t, method=v["method"], llm=v["llm"])] = None
        return list(files)

    def benchmark_metric_table(self, wildcards) -> list[str]:
        return [fill(METRICS_TABLE, benchmark=wildcards.benchmark)]

    def benchmark_figure(self, wildcards) -> dict:
        """A benchmark's figures: its collected metrics, its palette, the bootstrap intervals."""
        return {"metrics": self.benchmark_metric_table(wildcards), "significance": fill(SIGNIFICANCE, ext="csv"),
                "palette": fill(PALETTE, benchmark=wildcards.benchmark)}

    def plot_scatter(self, wildcards) -> dict:
        a, b = self.reg.scatter_runs(wildcards.benchmark)
        tasks = [t for bb, t in self.reg.tasks if bb == wildcards.benchmark]
        return {"a": [fill(PER_QUERY, benchmark=wildcards.benchmark, task=t, model=a) for t in tasks],
                "b": [fill(PER_QUERY, benchmark=wildcards.benchmark, task=t, model=b) for t in tasks]}

    def plot_cliniq(self, wildcards) -> dict:
        """CliniQ's breakdowns, the palette, and the collected metrics (the leaderboard's order of the runs)."""
        if not self.reg.is_cliniq(wildcards.benchmark):
            return {}
        return {**{g: fill(CLINIQ_TABLE, benchmark=wildcards.benchmark, grouping=g, ext="csv")
                   for g in ("match_type", "query_type")}, "palette": fill(PALETTE, benchmark=wildcards.benchmark),
                "metrics": self.benchmark_metric_table(wildcards)}

    def llm_lineage(self, benchmark: str | None = None) -> list[str]:
        """The lineage JSONs of the LLM-reranked runs (their accounting, unusable answers included)."""
        return [fill(RUN_LINEAGE, benchmark=b, task=t, model=r) for b, t, r in self.reg.run_tasks()
                if self.reg.llm_reranked(r) and (benchmark is None or b == benchmark)]

    def leaderboard(self) -> dict:
        """The combined leaderboard: every benchmark's collected metrics, the significance table, the LLM-reranked
        runs' lineage, and what earlier runs left of benchmarks this configuration does not select."""
        report, shown = earlier.reported(self.reg), earlier.shown(self.reg)
        return {"metrics": [fill(METRICS_TABLE, benchmark=b) for b in report if b in self.scored()],
                "significance": fill(SIGNIFICANCE, ext="csv"), "mteb_reference": self.mteb_reference(),
                "lineage": self.llm_lineage(), "earlier": self.earlier_tables(),
                "earlier_boards": self.earlier_boards(),
                "selections": [fill(METRICS_SELECTION, benchmark=b) for b in report] + earlier.existing(
                    fill(METRICS_SELECTION, benchmark=b) for b in shown)}

    def leaderboard_benchmark(self, wildcards) -> dict:
        return {"metrics": self.benchmark_metric_table(wildcards), "significance": fill(SIGNIFICANCE, ext="csv"),
                "lineage": self.llm_lineage(wildcards.benchmark)}

    def provenance(self) -> dict:
        """Metrics and task statistics; each run file is named in its metrics JSON (and hashed from there)."""
        return {"metrics": self.metric_tables(), "stats": self.stats_files(),
                "generation": [fill(GENERATED_INFO, **g) for g in self.reg.generated_variants()],
                "llm_rerank": self.llm_lineage(),
                "judging": [fill(COMPLETION_JUDGING, benchmark=b) for b in self.reg.completion_benchmark()]}


    def report_cliniq(self, wildcards) -> dict:
        b = wildcards.benchmark
        w = {"benchmark": b, "task": self.reg.cliniq_task(b)}
        models = self.reg.runs_of(b)
        return {"metrics": [fill(CLINIQ_METRICS, **w, model=m) for m in models],
                "runs": [self._run(**w, model=m) for m in models],
                "cliniq_qrels": fill(CLINIQ_QRELS, **w), "query_types": fill(QUERY_TYPES, **w),
                "ids": fill(CHUNK_IDS, **w)}

    # CliniQ's judgment completion
    def _completion_task(self, benchmark: str) -> dict:
        return {"benchmark": benchmark, "task": self.reg.cliniq_task(benchmark)}

    def _completion_runs(self, benchmark: str) -> list[str]:
        w = self._completion_task(benchmark)
        return [self._run(**w, model=m) for m in self.reg.completion_runs()]

    def _completion_design(self, benchmark: str) -> dict:
        return {"sample": fill(COMPLETION_SAMPLE, benchmark=benchmark),
                "design": fill(COMPLETION_DESIGN, benchmark=benchmark),
                "labels": fill(COMPLETION_LABELS, benchmark=benchmark),
                "info": fill(COMPLETION_JUDGING, benchmark=benchmark)}

    def cliniq_completion_sample(self, wildcards) -> dict:
        """CliniQ's own judgment files (who carries a query's code), every judgment row, the chunk ids and the runs
        whose top chunks form the pool."""
        from ..cliniq.corpus import QUERY_TYPES as TYPES

        b = wildcards.benchmark
        w = self._completion_task(b)
        folder = self.cfg["benchmarks"][b]["tasks"][w["task"]]["path"]
        out = {"annotations": [f"{folder}/queries_{t}.jsonl" for t in TYPES] + [f"{folder}/qrels_{t}.tsv"
                                                                                 for t in TYPES],
               "cliniq_qrels": fill(CLINIQ_QRELS, **w), "query_types": fill(QUERY_TYPES, **w),
               "ids": fill(CHUNK_IDS, **w),
               "runs": [self._run(**w, model=m) for m in self.reg.completion_pool_runs()]}
        if self.reg.completion_coded_from() == "codes":  # MIMIC's code tables, in cliniq.codes.TABLES order
            out["code_tables"] = [str(p) for p in self.reg.completion_code_tables().values()]
        return out

    def cliniq_completion_judge(self, wildcards) -> dict:
        w = self._completion_task(wildcards.benchmark)
        return {"sample": fill(COMPLETION_SAMPLE, benchmark=wildcards.benchmark),
                "design": fill(COMPLETION_DESIGN, benchmark=wildcards.benchmark), "queries": fill(QUERIES, **w),
                "chunks": fill(CLINIQ_CHUNKS, **w)}

    def cliniq_completion_estimate(self, wildcards) -> dict:
        out = self._completion_design(wildcards.benchmark)
        present, _ = self.reg.completion_experts()
        if present:  # with the corpus's chunk ids, which the experts' must name
            out["human_labels"] = present
            out["ids"] = fill(CHUNK_IDS, **self._completion_task(wildcards.benchmark))
        return out

    def cliniq_completion_rescore(self, wildcards) -> dict:
        w = self._completion_task(wildcards.benchmark)
        out = {**self._completion_design(wildcards.benchmark), "cliniq_qrels": fill(CLINIQ_QRELS, **w),
               "query_types": fill(QUERY_TYPES, **w), "ids": fill(CHUNK_IDS, **w),
               "runs": self._completion_runs(wildcards.benchmark)}
        if self.reg.completion_experts()[0]:  # the expert arm, reported in the verdict
            out["agreement"] = fill(COMPLETION_FILE, benchmark=wildcards.benchmark, name="agreement", ext="csv")
        return out

    def mteb_reference(self) -> list[str]:
        """The MTEB result files of leaderboard.mteb_reference (their edits rerun the leaderboard)."""
        from pathlib import Path

        folder = self.cfg["leaderboard"].get("mteb_reference")
        if not folder:
            return []
        root = Path(folder) / "results" if (Path(folder) / "results").is_dir() else Path(folder)
        return sorted(str(p) for p in root.glob("*/*/*.json"))

    def mteb_export(self) -> list[str]:
        """The collected metrics of each benchmark with a run on an R2MED task (params mteb_export's entries)."""
        from ..benchmarks.r2med import paper_task

        benchmarks = dict.fromkeys(b for b, t, _ in self.reg.run_tasks()
                                   if paper_task(self.cfg["benchmarks"][b]["tasks"][t]))
        return [fill(METRICS_TABLE, benchmark=b) for b in benchmarks]

    # the claims (docs/report.md#claims)
    def claims_overlap(self, wildcards) -> dict:
        """The task's analysed corpus and queries (rule analyse_bm25_paper: ids and token numbers) and its qrels."""
        w = {"benchmark": wildcards.benchmark, "task": wildcards.task}
        return {"tokens": fill(BM25_PAPER_TOKENS, **w), "query_tokens": fill(BM25_PAPER_QUERY_TOKENS, **w),
                "qrels": fill(QRELS, **w)}

    def claims(self, wildcards) -> dict:
        """What the claims read: the per-query files of the runs they compare (CliniQ: their per-query figures by
        match type), the lexical overlap of every R2MED-layout task, the lineage of the reranked and fused runs they
        compare, the judgment completion's verdict."""
        out: dict[str, list[str]] = {"per_query": [], "overlap": [], "cliniq": [], "lineage": [], "verdicts": []}
        for b, entry in self.reg.claims().items():
            specs = entry["claims"]
            runs = list(dict.fromkeys(r for spec in specs.values() for r in spec["runs"]))
            derived = [r for p in specs["r2med.rerank_depth"]["pairs"] for r in (p["shallow"], p["deep"])] \
                if "r2med.rerank_depth" in specs else []
            derived += [f["fusion"] for f in specs["cliniq.rrf_improves"]["fusions"]] \
                if "cliniq.rrf_improves" in specs else []
            for t in entry["tasks"]:
                w = {"benchmark": b, "task": t}
                if entry["kind"] == "cliniq":
                    out["cliniq"] += [fill(CLINIQ_PER_QUERY, **w, model=r) for r in runs]
                else:
                    out["per_query"] += [fill(PER_QUERY, **w, model=r) for r in runs]
                    out["overlap"].append(fill(CLAIMS_OVERLAP, **w))
                out["lineage"] += [fill(RUN_LINEAGE, **w, model=r) for r in dict.fromkeys(derived)]
            if b in self.reg.completion_benchmark():
                out["verdicts"].append(fill(COMPLETION_FILE, benchmark=b, name="verdict", ext="json"))
        return out

    def report_index(self) -> list[str]:
        """Every output the index page links: the targets of ``rule all`` but the page itself, and the report files an
        earlier run left of a benchmark this configuration does not select (``earlier_files``)."""
        return [t for t in all_targets(self.reg) if t != INDEX_PAGE] + earlier.files(self.reg)

    # what earlier runs left: the report is the union of what is scored (workflow.earlier)
    def earlier_tables(self) -> list[str]:
        return [fill(METRICS_TABLE, benchmark=b) for b in earlier.shown(self.reg)]

    def earlier_boards(self) -> list[str]:
        """The per-benchmark leaderboard CSVs of the earlier benchmarks (their significance marks), where present."""
        return earlier.existing(fill(BENCHMARK_LEADERBOARD, benchmark=b, ext="csv")
                                for b in earlier.shown(self.reg))


def prompt_file(spec: dict) -> str:
    """A pointwise LLM reranker's prompt template: its ``prompt``, else the shipped one."""
    from ..rerank.pointwise import DEFAULT_POINTWISE_PROMPT

    return spec.get("prompt") or str(DEFAULT_POINTWISE_PROMPT)


# ---------------------------------------------------------------- targets of rule all


def plot_names(reg: Registry, benchmark: str) -> list[str]:
    """The figures of a benchmark (``results/plots/{benchmark}/{name}.{png,svg}``) but the judgment completion's."""
    names = ["by_task", "heatmap"]
    names += ["rerank_depth"] if reg.rerank_lineage(benchmark) else []
    names += ["scatter"] if reg.scatter_runs(benchmark) else []
    names += ["cliniq_by_match_type", "cliniq_by_query_type"] if reg.is_cliniq(benchmark) else []
    return names


def report_targets(reg: Registry) -> list[str]:
    targets = [fill(LEADERBOARD, ext="html"), fill(TABLE, name="leaderboard")]
    targets += [fill(SIGNIFICANCE, ext=e) for e in ("csv", "md")] + [PROVENANCE]
    targets += [fill(CLAIMS, ext=e) for e in ("json", "md")] + [fill(TABLE, name="claims")]
    for b in earlier.reported(reg):
        targets += [fill(BENCHMARK_LEADERBOARD, benchmark=b, ext=e) for e in ("csv", "md", "html")]
        targets.append(fill(TABLE, name=f"leaderboard-{b}"))
        targets += [fill(PLOT, benchmark=b, name=n, ext=e) for n in plot_names(reg, b) for e in ("png", "svg")]
        targets.append(fill(PALETTE, benchmark=b))
    return targets


def cliniq_targets(reg: Registry) -> list[str]:
    out = []
    for b in [b for b in reg.cliniq_benchmarks if b in earlier.reported(reg)]:
        out += [fill(CLINIQ_TABLE, benchmark=b, grouping=g, ext=e) for g in ("match_type", "query_type")
                for e in ("csv", "md")]
        out += [fill(TABLE, name=f"cliniq-{b}-by_{g}") for g in ("match_type", "query_type")]
        out.append(fill(CLINIQ_POOL, benchmark=b))
    return out


COMPLETION_FILES = {"estimates": ("csv", "md", "tex"), "per_query": ("csv",), "agreement": ("csv", "md", "tex"),
                    "rescored": ("csv", "md", "tex"), "ranking": ("csv", "tex"), "verdict": ("md", "json")}


def completion_targets(reg: Registry) -> list[str]:
    """CliniQ's judgment completion, when configured: the design, the labels, every table and the plot (the
    owner-only table of the judge's rationale is the judging rule's output, not a target: the index links
    results/ only)."""
    out = []
    for b in reg.completion_benchmark():
        out += [fill(p, benchmark=b) for p in (COMPLETION_SAMPLE, COMPLETION_DESIGN, COMPLETION_LABELS,
                                               COMPLETION_JUDGING)]
        out += [fill(COMPLETION_FILE, benchmark=b, name=n, ext=e) for n, exts in COMPLETION_FILES.items()
                for e in exts]
        out += [fill(PLOT, benchmark=b, name="cliniq_completion", ext=e) for e in ("png", "svg")]
    return out


def prefetch_targets(reg: Registry) -> list[str]:
    """Everything a configuration downloads, for ``snakemake prefetch`` on a machine with network: each Hub
    model's snapshot manifest, each source task's download and its query variants, CliniQ's annotations."""
    from ..cliniq.corpus import ANNOTATION_FILES

    out = [fill(MODEL_MANIFEST, model=m) for m in reg.hub_models()]
    source = reg.source_tasks()
    out += [fill(DOWNLOAD_FILES["manifest"], benchmark=b, task=t) for b, t in source]
    for v in reg.variants.values():
        out += [fill(DOWNLOAD_VARIANT, benchmark=b, task=t, method=v["method"], llm=v["llm"]) for b, t in source
                if b == v["benchmark"] and not reg.generated(v["llm"])]
    for folder in Inputs(reg).cliniq_download_dirs():
        out += [f"{folder}/{name}" for name in ANNOTATION_FILES]
    return list(dict.fromkeys(out))


def mteb_targets(reg: Registry) -> list[str]:
    """MTEB's results layout when a selected task is an R2MED task."""
    from ..benchmarks.r2med import paper_task

    return [MTEB_EXPORT] if any(paper_task(reg.cfg["benchmarks"][b]["tasks"][t]) for b, t in reg.tasks) else []


def all_targets(reg: Registry) -> list[str]:
    return ([fill(LEADERBOARD, ext=e) for e in ("csv", "md")] + [R2MED_VS_PAPER, fill(TABLE, name="r2med_vs_paper")]
            + report_targets(reg) + cliniq_targets(reg) + completion_targets(reg) + mteb_targets(reg) + [INDEX_PAGE])

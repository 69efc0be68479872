# Helpers shared by the workflow files (config access, input functions, wildcard constraints).
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from r2med_eval import config as r2config  # noqa: E402
from r2med_eval.datasets import raw_files  # noqa: E402


def validated_config(raw):
    """Schema validation before any job runs; one message naming the key on failure."""
    from r2med_eval.errors import ConfigError

    files = ", ".join(dict.fromkeys(str(f) for f in workflow.configfiles)) or "config.yaml"
    try:
        cfg = r2config.validate(raw, config_file=files)
        r2config.check_paths(cfg, config_file=files)
    except ConfigError as exc:
        raise WorkflowError(f"r2med-eval: {exc}") from None
    skipped = r2config.skipped_derived(cfg)
    if skipped:
        print(f"r2med-eval: skipping derived runs whose inputs are not selected: {', '.join(skipped)}",
              file=sys.stderr)
    return cfg


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


def benchmark_names():
    return r2config.selected_benchmarks(CFG)


def task_pairs():
    return [(b, t) for b in benchmark_names() for t in CFG["benchmarks"][b]["tasks"]]


def benchmark_constraint():
    return _alternatives(benchmark_names())


def task_constraint():
    return _alternatives({t for _, t in task_pairs()})


def model_constraint():
    return _alternatives(r2config.all_runs(CFG))


def rerank_jobs():
    return {n: d for n, d in r2config.derived_runs(CFG).items() if d["kind"] == "rerank"}


def fusion_jobs():
    return {n: d for n, d in r2config.derived_runs(CFG).items() if d["kind"] == "fusion"}


def rerank_constraint():
    return _alternatives(rerank_jobs())


def fusion_constraint():
    return _alternatives(fusion_jobs())


def rerank_inputs(wildcards):
    """The run to re-score and the task; a dense re-scorer also reuses its cached embeddings."""
    job = rerank_jobs()[wildcards.model]
    base = f"results/data/{wildcards.benchmark}/{wildcards.task}"
    inputs = {
        "run": f"results/runs/{wildcards.benchmark}/{wildcards.task}/{job['run']}.trec",
        "queries": f"{base}/queries.jsonl",
        "corpus": f"{base}/corpus.jsonl",
    }
    if CFG["models"][job["reranker"]]["type"] == "dense":
        emb = f"results/embeddings/{wildcards.benchmark}/{wildcards.task}/{job['reranker']}"
        inputs.update(emb=f"{emb}/corpus.npy", ids=f"{emb}/corpus_ids.txt", query_emb=f"{emb}/queries.npy",
                      query_ids=f"{emb}/queries_ids.txt")
    return inputs


def rerank_params(wildcards):
    job = rerank_jobs()[wildcards.model]
    return {**job, "reranker_spec": CFG["models"][job["reranker"]]}


def fusion_inputs(wildcards):
    job = fusion_jobs()[wildcards.model]
    return [f"results/runs/{wildcards.benchmark}/{wildcards.task}/{r}.trec" for r in job["runs"]]


def fusion_params(wildcards):
    return fusion_jobs()[wildcards.model]


def rerank_gpu(wildcards):
    spec = CFG["models"][rerank_jobs()[wildcards.model]["reranker"]]
    return 0 if spec.get("device") == "cpu" else 1


def models_of_type(*types):
    return [m for m in r2config.selected_models(CFG) if CFG["models"][m]["type"] in types]


def constraint_models(*types):
    """Models of these types that run, as retrievers or as dense re-scorers."""
    names = set(models_of_type(*types))
    if "dense" in types:
        names |= {j["reranker"] for j in CFG.get("rerank", []) if CFG["models"][j["reranker"]]["type"] == "dense"}
    return _alternatives(names)


def task_spec(wildcards):
    bench = CFG["benchmarks"][wildcards.benchmark]
    spec = {k: v for k, v in bench.items() if k not in ("tasks", "ignore_identical_ids")}
    spec.update(task_location(wildcards.benchmark, wildcards.task))
    return spec


def task_raw_files(wildcards):
    spec = task_spec(wildcards)
    return raw_files(spec["layout"], spec["path"], spec.get("split", "test")) + source_manifest(spec)


def variant_of(run):
    return r2config.variant_runs(CFG).get(run)


def model_spec(wildcards):
    """A retriever's entry; for a query-variant run, its model's entry and the variant."""
    variant = variant_of(wildcards.model)
    if variant is None:
        return CFG["models"][wildcards.model]
    return {**CFG["models"][variant["model"]], "variant": variant}


def constraint_runs(model_type):
    """First-stage run names of one retriever type, query-variant runs included."""
    names = set(models_of_type(model_type))
    names |= {n for n, v in r2config.variant_runs(CFG).items() if CFG["models"][v["model"]]["type"] == model_type}
    return _alternatives(names)


def variant_file(wildcards):
    path = task_spec(wildcards)["path"]
    return f"{path}/{wildcards.method}/{wildcards.llm}/query_with_hydoc.jsonl"


def query_file(wildcards):
    base = f"results/data/{wildcards.benchmark}/{wildcards.task}"
    variant = variant_of(wildcards.model)
    if variant is None:
        return {"queries": f"{base}/queries.jsonl"}
    return {"queries": f"{base}/queries.jsonl",
            "variant": f"{base}/variants/{variant['method']}--{variant['llm']}.jsonl"}


def bm25_inputs(wildcards):
    return {"index": f"results/index/{wildcards.benchmark}/{wildcards.task}/lucene", **query_file(wildcards)}


def dense_inputs(wildcards):
    variant = variant_of(wildcards.model)
    model = variant["model"] if variant else wildcards.model
    emb = f"results/embeddings/{wildcards.benchmark}/{wildcards.task}/{model}"
    query = f"{emb}/variants/{variant['method']}--{variant['llm']}" if variant else f"{emb}/queries"
    return {"emb": f"{emb}/corpus.npy", "ids": f"{emb}/corpus_ids.txt", "query_emb": f"{query}.npy",
            "query_ids": f"{query}_ids.txt",
            "corpus": f"results/data/{wildcards.benchmark}/{wildcards.task}/corpus.jsonl"}


def search_spec(wildcards):
    spec = model_spec(wildcards)
    return {"top_k": spec["top_k"], "index": spec["index"]}


def metric_files():
    return [
        f"results/metrics/{b}/{t}/{m}.json"
        for b, t in task_pairs()
        for m in r2config.runs_for_benchmark(CFG, b)
    ]


def all_targets():
    return (["results/leaderboard.csv", "results/leaderboard.md", "results/r2med_vs_paper.md"] + report_targets()
            + cliniq_targets())


def _size_mb(path):
    path = Path(str(path))
    if path.is_file():
        return path.stat().st_size / 1024**2
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1024**2
    return 0.0


def lucene_mem_mb(wildcards, input, attempt):
    """JVM and Lucene: 1 GB plus a quarter of the input's size, doubled on each retry."""
    return int((1024 + 0.25 * _size_mb(input[0])) * 2 ** (attempt - 1))


ENCODER_IRRELEVANT = ("enabled", "description", "top_k", "index", "shards", "paper_name")


def encoder_spec(wildcards):
    """The part of a dense entry that shapes its embeddings (top_k, index, shards do not)."""
    spec = CFG["models"][wildcards.model]
    return {k: v for k, v in spec.items() if k not in ENCODER_IRRELEVANT}


def embedding_shards(wildcards):
    n = CFG["models"][wildcards.model]["shards"]
    base = f"results/embeddings/{wildcards.benchmark}/{wildcards.task}/{wildcards.model}/shards"
    return [f"{base}/{i}-of-{n}.npz" for i in range(1, n + 1)]


def gpu_count(wildcards):
    return 0 if CFG["models"][wildcards.model].get("device") == "cpu" else 1


def search_mem_mb(wildcards, input, attempt):
    return int((1024 + 2 * _size_mb(input[0])) * 2 ** (attempt - 1))


def embedding_storage(wildcards):
    return CFG["models"][wildcards.model]["embedding_dtype"]


# ---------------------------------------------------------------- report (rules/report.smk)


def per_query_files():
    return [
        f"results/per_query/{b}/{t}/{m}.tsv"
        for b, t in task_pairs()
        for m in r2config.runs_for_benchmark(CFG, b)
    ]


def benchmark_tasks(benchmark):
    return [t for b, t in task_pairs() if b == benchmark]


def benchmark_metric_files(wildcards):
    runs = r2config.runs_for_benchmark(CFG, wildcards.benchmark)
    return [f"results/metrics/{wildcards.benchmark}/{t}/{m}.json" for t in benchmark_tasks(wildcards.benchmark)
            for m in runs]


def report_params():
    rep = CFG["report"]
    return {"baseline": r2config.report_baseline(CFG), "metric": CFG["leaderboard"]["metric"],
            "permutations": rep["permutations"], "bootstrap": rep["bootstrap"], "seed": rep["seed"],
            "alpha": rep["alpha"]}


def has_rerank_runs(benchmark):
    return any(r in rerank_jobs() for r in r2config.runs_for_benchmark(CFG, benchmark))


def scatter_runs(benchmark):
    pair = r2config.report_scatter(CFG)
    runs = r2config.runs_for_benchmark(CFG, benchmark)
    return pair if pair and all(r in runs for r in pair) else []


def scatter_inputs(wildcards):
    a, b = scatter_runs(wildcards.benchmark)
    return {
        "a": [f"results/per_query/{wildcards.benchmark}/{t}/{a}.tsv" for t in benchmark_tasks(wildcards.benchmark)],
        "b": [f"results/per_query/{wildcards.benchmark}/{t}/{b}.tsv" for t in benchmark_tasks(wildcards.benchmark)],
    }


def scatter_params(wildcards):
    a, b = scatter_runs(wildcards.benchmark)
    return {"a": a, "b": b, "metric": CFG["leaderboard"]["metric"]}


def plot_notes(wildcards):
    """Why optional plots of a benchmark are not drawn (written to the plot_leaderboard log)."""
    notes = []
    if not has_rerank_runs(wildcards.benchmark):
        notes.append("reranking-depth plot skipped: no runs named <run>--<reranker>@<k> on this benchmark")
    if not scatter_runs(wildcards.benchmark):
        notes.append("per-query scatter skipped: report.scatter (or the first two runs) not all run here")
    return notes


# ---------------------------------------------------------------- CliniQ (rules/chunk.smk; CliniQ rules in data, score, report)


def cliniq_benchmarks():
    return [b for b in benchmark_names() if CFG["benchmarks"][b]["layout"] == "cliniq"]


def cliniq_breakdowns(wildcards):
    """The CliniQ breakdown tables of a CliniQ benchmark (long format: model,setting,group,metric,value,
    n_queries); {} for any other benchmark."""
    if wildcards.benchmark not in cliniq_benchmarks():
        return {}
    base = f"results/cliniq/{wildcards.benchmark}"
    return {"match_type": f"{base}/by_match_type.csv", "query_type": f"{base}/by_query_type.csv"}


def cliniq_plot_targets():
    """The CliniQ plots when a benchmark with layout: cliniq is selected; [] otherwise."""
    return [f"results/plots/{b}/cliniq_by_{kind}.{ext}" for b in cliniq_benchmarks()
            for kind in ("match_type", "query_type") for ext in ("png", "svg")]


def provenance_inputs():
    pairs = [(b, t, m) for b, t in task_pairs() for m in r2config.runs_for_benchmark(CFG, b)]
    return {
        "metrics": [f"results/metrics/{b}/{t}/{m}.json" for b, t, m in pairs],
        "runs": [f"results/runs/{b}/{t}/{m}.trec" for b, t, m in pairs],
        "stats": [f"results/data/{b}/{t}/stats.json" for b, t in task_pairs()],
    }


def report_targets():
    targets = ["results/leaderboard.html", "results/significance.csv", "results/significance.md",
               "results/provenance.json"]
    for b in benchmark_names():
        targets += [f"results/leaderboards/{b}.{ext}" for ext in ("csv", "md", "html")]
        targets += [f"results/plots/{b}/{name}.{ext}" for name in ("by_task", "heatmap") for ext in ("png", "svg")]
        if has_rerank_runs(b):
            targets += [f"results/plots/{b}/rerank_depth.{ext}" for ext in ("png", "svg")]
        if scatter_runs(b):
            targets += [f"results/plots/{b}/scatter.{ext}" for ext in ("png", "svg")]
    return targets + cliniq_plot_targets()


def cliniq_benchmark_constraint():
    return _alternatives(cliniq_benchmarks())


def generic_benchmark_constraint():
    return _alternatives(set(benchmark_names()) - set(cliniq_benchmarks()))


def cliniq_spec(wildcards):
    return r2config.cliniq_settings(CFG["benchmarks"][wildcards.benchmark])


def cliniq_chunk_spec(wildcards):
    """Only what shapes the corpus (new judgments or pool depth do not re-chunk)."""
    spec = cliniq_spec(wildcards)
    return {k: spec[k] for k in ("expected_chunks", "allow_missing_notes")}


def cliniq_judgment_spec(wildcards):
    spec = cliniq_spec(wildcards)
    return {k: spec[k] for k in ("new_judgments", "missing_chunk_qrels_max")}


def cliniq_annotation_dir(wildcards):
    return CFG["benchmarks"][wildcards.benchmark]["tasks"][wildcards.task]["path"]


def cliniq_chunk_inputs(wildcards):
    return {"notes": CFG["benchmarks"][wildcards.benchmark]["noteevents"],
            "hadm_ids": f"{cliniq_annotation_dir(wildcards)}/test_hadm_ids.txt"}


def cliniq_query_inputs(wildcards):
    from r2med_eval.cliniq_corpus import QUERY_TYPES

    folder = cliniq_annotation_dir(wildcards)
    return {"queries": [f"{folder}/queries_{t}.jsonl" for t in QUERY_TYPES]}


def cliniq_prepare_inputs(wildcards):
    from r2med_eval.cliniq_corpus import ANNOTATION_FILES

    folder = cliniq_annotation_dir(wildcards)
    inputs = {"ids": f"results/data/{wildcards.benchmark}/{wildcards.task}/chunk_ids.txt",
              "hadm_ids": f"{folder}/test_hadm_ids.txt",
              "annotations": [f"{folder}/{name}" for name in ANNOTATION_FILES]}
    extra = cliniq_spec(wildcards)["new_judgments"]
    if extra:
        inputs["new_judgments"] = extra
    return inputs


def cliniq_download_dirs():
    return {CFG["benchmarks"][b]["tasks"][t]["path"].rstrip("/"): b for b in cliniq_benchmarks()
            for t in CFG["benchmarks"][b]["tasks"] if cliniq_settings_of(b)["download"]}


def cliniq_settings_of(benchmark):
    return r2config.cliniq_settings(CFG["benchmarks"][benchmark])


def cliniq_download_constraint():
    return _alternatives(cliniq_download_dirs())


def cliniq_download_spec(wildcards):
    return cliniq_settings_of(cliniq_download_dirs()[wildcards.anndir])


def cliniq_task(benchmark):
    return next(iter(CFG["benchmarks"][benchmark]["tasks"]))


def cliniq_models(wildcards):
    return r2config.runs_for_benchmark(CFG, wildcards.benchmark)


def cliniq_report_inputs(wildcards):
    b, t = wildcards.benchmark, cliniq_task(wildcards.benchmark)
    models = cliniq_models(wildcards)
    return {"metrics": [f"results/cliniq/{b}/{t}/{m}.json" for m in models],
            "runs": [f"results/runs/{b}/{t}/{m}.trec" for m in models],
            "cliniq_qrels": f"results/data/{b}/{t}/cliniq_qrels.tsv",
            "query_types": f"results/data/{b}/{t}/query_types.tsv"}


def cliniq_pool_depth(wildcards):
    return cliniq_settings_of(wildcards.benchmark)["pool_depth"]


def cliniq_targets():
    return [f"results/cliniq/{b}/{name}" for b in cliniq_benchmarks()
            for name in ("by_match_type.csv", "by_match_type.md", "by_query_type.csv", "by_query_type.md",
                         "pool.tsv")]


# ---------------------------------------------------------------- R2MED: Hub downloads, paper-faithful BM25, report


def task_location(benchmark, task):
    """A path task's folder; a source task's download folder resources/<benchmark>/<task>, its source and R2MED task."""
    from r2med_eval.r2med import paper_task

    spec = CFG["benchmarks"][benchmark]["tasks"][task]
    if "source" not in spec:
        out = {"path": spec["path"]}
    else:
        out = {"path": f"resources/{benchmark}/{task}", "source": spec["source"]}
    ptask = paper_task(spec)
    if ptask:
        out["paper_task"] = ptask
    return out


def source_manifest(spec):
    return [f"{spec['path']}/manifest.json"] if "source" in spec else []


def source_task_pairs():
    return [(b, t) for b, t in task_pairs() if "source" in CFG["benchmarks"][b]["tasks"][t]]


def source_benchmark_constraint():
    return _alternatives({b for b, _ in source_task_pairs()})


def source_task_constraint():
    return _alternatives({t for _, t in source_task_pairs()})


def download_params(wildcards):
    spec = CFG["benchmarks"][wildcards.benchmark]["tasks"][wildcards.task]
    return {"source": spec["source"], "local": spec.get("local"), "sha256": spec.get("sha256", {})}


def bm25_paper_inputs(wildcards):
    return {"corpus": f"results/data/{wildcards.benchmark}/{wildcards.task}/corpus.jsonl", **query_file(wildcards)}


def run_root_types(run, seen=()):
    """Types of the first-stage retrievers a run comes from (through reranking and fusion)."""
    if run in CFG["models"]:
        return {CFG["models"][run]["type"]}
    variant = variant_of(run)
    if variant is not None:
        return {CFG["models"][variant["model"]]["type"]}
    job = r2config.derived_runs(CFG, include_skipped=True).get(run)
    if job is None or run in seen:
        return set()
    inputs = [job["run"]] if job["kind"] == "rerank" else job["runs"]
    return set().union(*(run_root_types(r, seen + (run,)) for r in inputs))


def ignore_identical_ids(wildcards):
    """BEIR's ignore_identical_ids per benchmark; official: as R2MED's code, dense runs yes, BM25 no."""
    policy = CFG["benchmarks"][wildcards.benchmark].get("ignore_identical_ids", "official")
    if policy == "official":
        return "dense" in run_root_types(wildcards.model)
    return policy == "always"


def stats_files():
    return [f"results/data/{b}/{t}/stats.json" for b, t in task_pairs()]


def r2med_report_params():
    from r2med_eval import r2med

    runs = sorted({m for b in benchmark_names() for m in r2config.runs_for_benchmark(CFG, b)})
    return {"keys": r2med.paper_keys(CFG, runs), "tasks": r2med.paper_tasks(CFG, benchmark_names())}


def paper_table():
    return str(Path(workflow.basedir) / "data" / "reference" / "r2med_paper_ndcg10.tsv")


def bm25_paper_mem_mb(wildcards, input, attempt):
    """JVM, token lists and the sparse index: 1 GB plus 20x the corpus size, doubled on each retry."""
    return int((1024 + 20 * _size_mb(input[0])) * 2 ** (attempt - 1))
# Cluster resources from the data (r2med_eval.resources): run time in minutes and memory in MB from the
# corpus size and the model's weight size, doubled on each retry (a job killed for memory or time
# comes back with more). Input sizes are read when the job is scheduled, once its inputs exist.
from r2med_eval import resources as r2res  # noqa: E402


def _dense_spec(wildcards):
    variant = variant_of(wildcards.model)
    return CFG["models"][variant["model"] if variant else wildcards.model]


def encoder_mem_mb(wildcards, input, attempt):
    return r2res.encode_mem_mb(_size_mb(input[0]), r2res.weights_mb(_dense_spec(wildcards)), attempt)


def encode_shard_runtime(wildcards, input, attempt):
    spec = _dense_spec(wildcards)
    return r2res.shard_minutes(_size_mb(input.corpus), r2res.weights_mb(spec), int(wildcards.nshards),
                               gpu_count(wildcards) > 0, attempt)


def encode_queries_runtime(wildcards, input, attempt):
    return r2res.encode_minutes(sum(_size_mb(f) for f in input), r2res.weights_mb(_dense_spec(wildcards)),
                                gpu_count(wildcards) > 0, attempt)


def lucene_index_mem_mb(wildcards, input, attempt):
    return r2res.lucene_index_mem_mb(_size_mb(input.corpus), attempt)


def lucene_index_runtime(wildcards, input, threads, attempt):
    return r2res.lucene_index_minutes(_size_mb(input.corpus), threads, attempt)


def bm25_search_runtime(wildcards, input, attempt):
    return r2res.search_minutes(_size_mb(input.index), attempt)


def dense_search_runtime(wildcards, input, attempt):
    return r2res.search_minutes(_size_mb(input.emb), attempt)


def gather_mem_mb(wildcards, input, attempt):
    return r2res.light_mem_mb(sum(_size_mb(f) for f in input.shards), attempt)


def light_mem_mb(wildcards, input, attempt):
    return r2res.light_mem_mb(sum(_size_mb(f) for f in input), attempt)


def light_runtime(wildcards, input, attempt):
    return r2res.light_minutes(sum(_size_mb(f) for f in input), attempt)


def _reranker_spec(wildcards):
    return CFG["models"][rerank_jobs()[wildcards.model]["reranker"]]


def rerank_mem_mb(wildcards, input, attempt):
    return r2res.encode_mem_mb(_size_mb(input.corpus), r2res.weights_mb(_reranker_spec(wildcards)), attempt)


def rerank_runtime(wildcards, input, attempt):
    job = rerank_jobs()[wildcards.model]
    docs = max(1, r2res.count_lines(input.corpus))
    pairs = int(job["depth"]) * r2res.count_lines(input.queries)
    return r2res.rerank_minutes(pairs, _size_mb(input.corpus) / docs, r2res.weights_mb(_reranker_spec(wildcards)),
                                rerank_gpu(wildcards) > 0, attempt)

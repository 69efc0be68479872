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
    spec = {k: v for k, v in bench.items() if k != "tasks"}
    spec["path"] = bench["tasks"][wildcards.task]["path"]
    return spec


def task_raw_files(wildcards):
    spec = task_spec(wildcards)
    return raw_files(spec["layout"], spec["path"], spec.get("split", "test"))


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
    return ["results/leaderboard.csv", "results/leaderboard.md"]


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


ENCODER_IRRELEVANT = ("enabled", "description", "top_k", "index", "shards")


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

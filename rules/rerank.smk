# Stage rerank: re-score the top k of a run with a cross-encoder, a bi-encoder or an LLM (run <run>--<reranker>@<k>).


rule rerank_run:
    input:
        unpack(W.inputs.rerank_run),
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
        scores=paths.RUN_RESCORED,
        info=paths.RUN_LINEAGE,
    log:
        paths.log_file("rerank_run"),
    benchmark:
        paths.benchmark_file("rerank_run")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
        model=W.constraint("rerank"),
    conda:
        "../envs/dense.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.rerank_mem_mb,
        runtime=W.resources.rerank_runtime,
        gpu=W.resources.rerank_gpu,
    params:
        spec=W.params.of("rerank_run"),
    script:
        "../scripts/rerank_run.py"


# An LLM reranker (RankGPT's listwise window, or pointwise yes/no) asking an OpenAI-compatible server; on a
# MIMIC-derived benchmark its cache and a started server's output stay owner-only under resources/ and its
# prompts go only to a loopback or declared server (phi_servers).
rule llm_rerank_run:
    input:
        unpack(W.inputs.llm_rerank_run),
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
        scores=paths.RUN_RESCORED,
        info=paths.RUN_LINEAGE,
    log:
        paths.log_file("llm_rerank_run"),
    benchmark:
        paths.benchmark_file("llm_rerank_run")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
        model=W.constraint("llm_rerank"),
    conda:
        "../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=W.resources.light_mem_mb,
        runtime=W.resources.llm_rerank_runtime,
        gpu=W.resources.llm_rerank_gpu,
    params:
        spec=W.params.of("llm_rerank_run"),
    script:
        "../scripts/llm_rerank_run.py"


use rule rerank_run as rerank_run_binary with:
    output:
        run=paths.RUN_BINARY,
        scores=paths.RUN_RESCORED,
        info=paths.RUN_LINEAGE,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("rerank"),


use rule llm_rerank_run as llm_rerank_run_binary with:
    output:
        run=paths.RUN_BINARY,
        scores=paths.RUN_RESCORED,
        info=paths.RUN_LINEAGE,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("llm_rerank"),

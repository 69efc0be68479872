# Stage rerank: re-score the top k of a run with a cross-encoder or a bi-encoder (run <run>--<reranker>@<k>).


rule rerank_run:
    input:
        unpack(W.inputs.rerank_run),
    output:
        run=paths.RUN,
        scores=paths.RUN_RESCORED,
        info=paths.RUN_LINEAGE,
    log:
        paths.log_file("rerank_run"),
    benchmark:
        paths.benchmark_file("rerank_run")
    wildcard_constraints:
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

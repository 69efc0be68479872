# Stage rerank: re-score the top k of a run with a cross-encoder or a bi-encoder (run <run>--<reranker>@<k>).


rule rerank_run:
    input:
        unpack(W.inputs.rerank_run),
    output:
        run=paths.RUN,
        scores=paths.RUN_RESCORED,
        info=paths.RUN_LINEAGE,
    wildcard_constraints:
        model=W.constraint("rerank"),
    params:
        spec=W.params.of("rerank_run"),
    threads: 2
    resources:
        mem_mb=W.resources.rerank_mem_mb,
        runtime=W.resources.rerank_runtime,
        gpu=W.resources.rerank_gpu,
    log:
        paths.log_file("rerank_run"),
    benchmark:
        paths.benchmark_file("rerank_run")
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/rerank_run.py"

# Stage: rerank. Re-score the top k of a run with a cross-encoder or a bi-encoder.


rule rerank_run:
    input:
        unpack(rerank_inputs),
    output:
        run="results/runs/{benchmark}/{task}/{model}.trec",
        scores="results/runs/{benchmark}/{task}/{model}.rescored.tsv",
        info="results/runs/{benchmark}/{task}/{model}.lineage.json",
    wildcard_constraints:
        model=rerank_constraint(),
    params:
        job=rerank_params,
    threads: 2
    resources:
        mem_mb=rerank_mem_mb,
        runtime=rerank_runtime,
        gpu=rerank_gpu,
    log:
        "logs/rerank_run/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/rerank_run/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/rerank_run.py"

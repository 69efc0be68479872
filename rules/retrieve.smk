# Stage: retrieve. First-stage runs, one TREC run file per (benchmark, task, model).


rule retrieve_bm25_lucene:
    input:
        unpack(bm25_inputs),
    output:
        run="results/runs/{benchmark}/{task}/{model}.trec",
    wildcard_constraints:
        model=constraint_runs("bm25_lucene"),
    params:
        model=model_spec,
    threads: 2
    resources:
        mem_mb=lucene_mem_mb,
        runtime=bm25_search_runtime,
    log:
        "logs/retrieve_bm25_lucene/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/retrieve_bm25_lucene/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/lucene.yaml"
    script:
        "../scripts/retrieve_bm25_lucene.py"


rule retrieve_dense:
    input:
        unpack(dense_inputs),
    output:
        run="results/runs/{benchmark}/{task}/{model}.trec",
        info="results/runs/{benchmark}/{task}/{model}.search.json",
    wildcard_constraints:
        model=constraint_runs("dense"),
    params:
        search=search_spec,
    threads: 2
    resources:
        mem_mb=search_mem_mb,
        runtime=dense_search_runtime,
    log:
        "logs/retrieve_dense/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/retrieve_dense/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/retrieve_dense.py"


rule retrieve_bm25_paper:
    input:
        unpack(bm25_paper_inputs),
    output:
        run="results/runs/{benchmark}/{task}/{model}.trec",
        info="results/runs/{benchmark}/{task}/{model}.bm25_paper.json",
    wildcard_constraints:
        model=constraint_runs("bm25_paper"),
    params:
        model=model_spec,
    threads: 2
    resources:
        mem_mb=bm25_paper_mem_mb,
    log:
        "logs/retrieve_bm25_paper/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/retrieve_bm25_paper/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/lucene.yaml"
    script:
        "../scripts/retrieve_bm25_paper.py"

# Stage retrieve: first-stage runs, one TREC run file per (benchmark, task, model); query-variant runs
# <model>+<method>-<llm> go through the same rules. A type: run model's runs are imported (validated, copied).


rule retrieve_bm25_lucene:
    input:
        unpack(W.inputs.retrieve_bm25_lucene),
    output:
        run=paths.RUN,
    log:
        paths.log_file("retrieve_bm25_lucene"),
    benchmark:
        paths.benchmark_file("retrieve_bm25_lucene")
    wildcard_constraints:
        model=W.constraint("bm25_lucene"),
    conda:
        "../envs/lucene.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.bm25_search_mem_mb,
        runtime=W.resources.bm25_search_runtime,
    params:
        spec=W.params.of("retrieve_bm25_lucene"),
    script:
        "../scripts/retrieve_bm25_lucene.py"


rule retrieve_dense:
    input:
        unpack(W.inputs.retrieve_dense),
    output:
        run=paths.RUN,
        info=paths.RUN_SEARCH_INFO,
    log:
        paths.log_file("retrieve_dense"),
    benchmark:
        paths.benchmark_file("retrieve_dense")
    wildcard_constraints:
        model=W.constraint("dense"),
    conda:
        "../envs/dense.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.dense_search_mem_mb,
        runtime=W.resources.dense_search_runtime,
    params:
        spec=W.params.of("retrieve_dense"),
    script:
        "../scripts/retrieve_dense.py"


rule retrieve_bm25_paper:
    input:
        unpack(W.inputs.retrieve_bm25_paper),
    output:
        run=paths.RUN,
        info=paths.RUN_BM25_PAPER_INFO,
    log:
        paths.log_file("retrieve_bm25_paper"),
    benchmark:
        paths.benchmark_file("retrieve_bm25_paper")
    wildcard_constraints:
        model=W.constraint("bm25_paper"),
    conda:
        "../envs/lucene.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.bm25_paper_search_mem_mb,
        runtime=W.resources.bm25_paper_search_runtime,
    params:
        spec=W.params.of("retrieve_bm25_paper"),
    script:
        "../scripts/retrieve_bm25_paper.py"


rule import_run:
    input:
        unpack(W.inputs.import_run),
    output:
        run=paths.RUN,
        info=paths.RUN_IMPORT_INFO,
    log:
        paths.log_file("import_run"),
    benchmark:
        paths.benchmark_file("import_run")
    wildcard_constraints:
        model=W.constraint("run"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("import_run"),
    script:
        "../scripts/import_run.py"

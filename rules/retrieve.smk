# Stage retrieve: first-stage runs, one run file per (benchmark, task, model); query-variant runs
# <model>+<method>-<llm> go through the same rules. A type: run model's runs are imported (validated, copied).
# On a CliniQ benchmark (full depth: every chunk for every query) each rule's *_binary twin writes the run in
# the binary format (paths.RUN_BINARY, scoring.binrun); export_trec_run writes its top k as TREC on request.
# Every run records what made it (scoring.identity): a TREC run in its sidecar (paths.RUN_IDENTITY), a binary run in
# its metadata; the corpus fingerprint (paths.CORPUS_IDS) is an input of every rule that writes or reads a run.


rule retrieve_bm25_lucene:
    input:
        unpack(W.inputs.retrieve_bm25_lucene),
        fingerprint=paths.CORPUS_IDS,
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
    log:
        paths.log_file("retrieve_bm25_lucene"),
    benchmark:
        paths.benchmark_file("retrieve_bm25_lucene")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
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
        fingerprint=paths.CORPUS_IDS,
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
        info=paths.RUN_SEARCH_INFO,
    log:
        paths.log_file("retrieve_dense"),
    benchmark:
        paths.benchmark_file("retrieve_dense")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
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
        fingerprint=paths.CORPUS_IDS,
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
        info=paths.RUN_BM25_PAPER_INFO,
    log:
        paths.log_file("retrieve_bm25_paper"),
    benchmark:
        paths.benchmark_file("retrieve_bm25_paper")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
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
        fingerprint=paths.CORPUS_IDS,
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
        info=paths.RUN_IMPORT_INFO,
    log:
        paths.log_file("import_run"),
    benchmark:
        paths.benchmark_file("import_run")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
        model=W.constraint("run"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("import_run"),
    script:
        "../scripts/import_run.py"


use rule retrieve_bm25_lucene as retrieve_bm25_lucene_binary with:
    output:
        run=paths.RUN_BINARY,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("bm25_lucene"),


use rule retrieve_dense as retrieve_dense_binary with:
    output:
        run=paths.RUN_BINARY,
        info=paths.RUN_SEARCH_INFO,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("dense"),


use rule retrieve_bm25_paper as retrieve_bm25_paper_binary with:
    output:
        run=paths.RUN_BINARY,
        info=paths.RUN_BM25_PAPER_INFO,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("bm25_paper"),


use rule import_run as import_run_binary with:
    output:
        run=paths.RUN_BINARY,
        info=paths.RUN_IMPORT_INFO,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("run"),


# On request (a target such as results/runs/cliniq-demo/cliniq/minilm.top100.trec): a binary run's top {depth}
# as TREC text, for trec_eval and other tools.
rule export_trec_run:
    input:
        run=paths.RUN_BINARY,
        fingerprint=paths.CORPUS_IDS,
    output:
        run=paths.RUN_TREC_TOP,
    log:
        paths.log_file("export_trec_run"),
    benchmark:
        paths.benchmark_file("export_trec_run")
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("model"),
        depth="[1-9][0-9]*",
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("export_trec_run"),
    script:
        "../scripts/export_trec_run.py"

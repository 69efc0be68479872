# Stage: data. Load each task from its on-disk layout once, validate it, write the internal layout.


rule prepare_task:
    input:
        task_raw_files,
    output:
        corpus="results/data/{benchmark}/{task}/corpus.jsonl",
        queries="results/data/{benchmark}/{task}/queries.jsonl",
        qrels="results/data/{benchmark}/{task}/qrels.tsv",
        stats="results/data/{benchmark}/{task}/stats.json",
    wildcard_constraints:
        benchmark=generic_benchmark_constraint(),
    params:
        spec=task_spec,
    resources:
        mem_mb=light_mem_mb,
        runtime=light_runtime,
    log:
        "logs/prepare_task/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/prepare_task/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/prepare_task.py"


rule prepare_query_variant:
    input:
        variant=variant_file,
        queries="results/data/{benchmark}/{task}/queries.jsonl",
    output:
        "results/data/{benchmark}/{task}/variants/{method}--{llm}.jsonl",
    wildcard_constraints:
        method="hyde|query2doc|lamer",
        llm=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    log:
        "logs/prepare_query_variant/{benchmark}/{task}/{method}--{llm}.log",
    benchmark:
        "benchmarks/prepare_query_variant/{benchmark}/{task}/{method}--{llm}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/prepare_query_variant.py"


rule download_task:
    output:
        corpus="resources/{benchmark}/{task}/corpus.jsonl",
        queries="resources/{benchmark}/{task}/query.jsonl",
        qrels="resources/{benchmark}/{task}/qrels.jsonl",
        manifest="resources/{benchmark}/{task}/manifest.json",
    wildcard_constraints:
        benchmark=source_benchmark_constraint(),
        task=source_task_constraint(),
    params:
        fetch=download_params,
    localrule: True
    log:
        "logs/download_task/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/download_task/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/download_task.py"


rule download_query_variant:
    input:
        manifest="resources/{benchmark}/{task}/manifest.json",
    output:
        "resources/{benchmark}/{task}/{method}/{llm}/query_with_hydoc.jsonl",
    wildcard_constraints:
        benchmark=source_benchmark_constraint(),
        task=source_task_constraint(),
        method="hyde|query2doc|lamer",
        llm=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    params:
        fetch=download_params,
    localrule: True
    log:
        "logs/download_query_variant/{benchmark}/{task}/{method}--{llm}.log",
    benchmark:
        "benchmarks/download_query_variant/{benchmark}/{task}/{method}--{llm}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/download_query_variant.py"


rule link_cliniq_corpus:
    input:
        corpus="resources/cliniq/{benchmark}/{task}/corpus.jsonl",
    output:
        corpus="results/data/{benchmark}/{task}/corpus.jsonl",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    log:
        "logs/link_cliniq_corpus/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/link_cliniq_corpus/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/link_cliniq_corpus.py"


rule prepare_cliniq_queries:
    input:
        unpack(cliniq_query_inputs),
    output:
        queries="results/data/{benchmark}/{task}/queries.jsonl",
        query_types="results/data/{benchmark}/{task}/query_types.tsv",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    log:
        "logs/prepare_cliniq_queries/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/prepare_cliniq_queries/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/prepare_cliniq_queries.py"


rule prepare_cliniq:
    input:
        unpack(cliniq_prepare_inputs),
    output:
        qrels="results/data/{benchmark}/{task}/qrels.tsv",
        cliniq_qrels="results/data/{benchmark}/{task}/cliniq_qrels.tsv",
        stats="results/data/{benchmark}/{task}/stats.json",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    params:
        spec=cliniq_judgment_spec,
    log:
        "logs/prepare_cliniq/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/prepare_cliniq/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/prepare_cliniq.py"

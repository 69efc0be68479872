# Stage: CliniQ data and scoring. Queries and judgments with match types; multi- and single-patient
# measures per model; tables by match type and query type; the pool of unjudged chunks.


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


rule score_cliniq:
    input:
        run="results/runs/{benchmark}/{task}/{model}.trec",
        cliniq_qrels="results/data/{benchmark}/{task}/cliniq_qrels.tsv",
        query_types="results/data/{benchmark}/{task}/query_types.tsv",
        ids="results/data/{benchmark}/{task}/chunk_ids.txt",
    output:
        metrics="results/cliniq/{benchmark}/{task}/{model}.json",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    log:
        "logs/score_cliniq/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/score_cliniq/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/score_cliniq.py"


rule report_cliniq:
    input:
        unpack(cliniq_report_inputs),
    output:
        match_csv="results/cliniq/{benchmark}/by_match_type.csv",
        match_md="results/cliniq/{benchmark}/by_match_type.md",
        query_csv="results/cliniq/{benchmark}/by_query_type.csv",
        query_md="results/cliniq/{benchmark}/by_query_type.md",
        pool="results/cliniq/{benchmark}/pool.tsv",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    params:
        models=cliniq_models,
        depth=cliniq_pool_depth,
    log:
        "logs/report_cliniq/{benchmark}.log",
    benchmark:
        "benchmarks/report_cliniq/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/report_cliniq.py"

# Stage: score. trec_eval measures per query and mean, under R2MED's result names.


rule score_run:
    input:
        run="results/runs/{benchmark}/{task}/{model}.trec",
        qrels="results/data/{benchmark}/{task}/qrels.tsv",
        queries="results/data/{benchmark}/{task}/queries.jsonl",
    output:
        metrics="results/metrics/{benchmark}/{task}/{model}.json",
        per_query="results/per_query/{benchmark}/{task}/{model}.tsv",
    params:
        ignore_identical_ids=ignore_identical_ids,
    log:
        "logs/score_run/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/score_run/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/score_run.py"


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

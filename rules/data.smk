# Stage: data. Load each task from its on-disk layout once, validate it, write the internal layout.


rule prepare_task:
    input:
        task_raw_files,
    output:
        corpus="results/data/{benchmark}/{task}/corpus.jsonl",
        queries="results/data/{benchmark}/{task}/queries.jsonl",
        qrels="results/data/{benchmark}/{task}/qrels.tsv",
        stats="results/data/{benchmark}/{task}/stats.json",
    params:
        spec=task_spec,
    log:
        "logs/prepare_task/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/prepare_task/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/prepare_task.py"

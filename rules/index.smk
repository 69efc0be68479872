# Stage: index. One Lucene index per task, shared by every BM25 configuration.


rule lucene_index:
    input:
        corpus="results/data/{benchmark}/{task}/corpus.jsonl",
    output:
        index=directory("results/index/{benchmark}/{task}/lucene"),
        info="results/index/{benchmark}/{task}/lucene.json",
    threads: 4
    resources:
        mem_mb=lucene_index_mem_mb,
        runtime=lucene_index_runtime,
    log:
        "logs/lucene_index/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/lucene_index/{benchmark}/{task}.tsv"
    conda:
        "../envs/lucene.yaml"
    script:
        "../scripts/lucene_index.py"

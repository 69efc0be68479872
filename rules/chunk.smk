# Stage: chunk. CliniQ's corpus rebuilt from the user's MIMIC-III NOTEEVENTS (credentialed text:
# written only under resources/, owner-only), and CliniQ's annotations fetched at a pinned commit.


rule download_cliniq_annotations:
    output:
        hadm_ids="{anndir}/test_hadm_ids.txt",
        queries_disease="{anndir}/queries_disease.jsonl",
        queries_procedure="{anndir}/queries_procedure.jsonl",
        queries_drug="{anndir}/queries_drug.jsonl",
        qrels_disease="{anndir}/qrels_disease.tsv",
        qrels_procedure="{anndir}/qrels_procedure.tsv",
        qrels_drug="{anndir}/qrels_drug.tsv",
        sums="{anndir}/SHA256SUMS",
    wildcard_constraints:
        anndir=cliniq_download_constraint(),
    params:
        spec=cliniq_download_spec,
    log:
        "logs/download_cliniq_annotations/{anndir}.log",
    benchmark:
        "benchmarks/download_cliniq_annotations/{anndir}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/download_cliniq_annotations.py"


rule chunk_cliniq:
    input:
        unpack(cliniq_chunk_inputs),
    output:
        corpus="resources/cliniq/{benchmark}/{task}/corpus.jsonl",
        ids="results/data/{benchmark}/{task}/chunk_ids.txt",
        stats="results/data/{benchmark}/{task}/chunk_stats.json",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    params:
        spec=cliniq_chunk_spec,
    resources:
        mem_mb=4096,
    log:
        "logs/chunk_cliniq/{benchmark}/{task}.log",
    benchmark:
        "benchmarks/chunk_cliniq/{benchmark}/{task}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/chunk_cliniq.py"

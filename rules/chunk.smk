# Stage chunk: CliniQ's corpus rebuilt from the user's MIMIC-III NOTEEVENTS (credentialed text: written only
# under resources/, owner-only), and CliniQ's annotations fetched at a pinned commit (a local rule).


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
        anndir=W.constraint("anndir"),
    params:
        spec=W.params.of("download_cliniq_annotations"),
    localrule: True
    log:
        paths.log_file("download_cliniq_annotations"),
    benchmark:
        paths.benchmark_file("download_cliniq_annotations")
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/download_cliniq_annotations.py"


rule chunk_cliniq:
    input:
        unpack(W.inputs.chunk_cliniq),
    output:
        corpus=paths.CLINIQ_CHUNKS,
        ids=paths.CHUNK_IDS,
        stats=paths.CHUNK_STATS,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
    params:
        spec=W.params.of("chunk_cliniq"),
    resources:
        mem_mb=4096,
    log:
        paths.log_file("chunk_cliniq"),
    benchmark:
        paths.benchmark_file("chunk_cliniq")
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/chunk_cliniq.py"

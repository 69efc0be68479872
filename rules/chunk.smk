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
    log:
        paths.log_file("download_cliniq_annotations"),
    benchmark:
        paths.benchmark_file("download_cliniq_annotations")
    wildcard_constraints:
        anndir=W.constraint("anndir"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("download_cliniq_annotations"),
    script:
        "../scripts/download_cliniq_annotations.py"


rule chunk_cliniq:
    input:
        unpack(W.inputs.chunk_cliniq),
    output:
        corpus=paths.CLINIQ_CHUNKS,
        ids=paths.CHUNK_IDS,
        stats=paths.CHUNK_STATS,
    log:
        paths.log_file("chunk_cliniq"),
    benchmark:
        paths.benchmark_file("chunk_cliniq")
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
    conda:
        "../envs/core.yaml"
    resources:
        mem_mb=4096,
    params:
        spec=W.params.of("chunk_cliniq"),
    script:
        "../scripts/chunk_cliniq.py"

# Stage data: load each task from its on-disk layout once, validate it, write the internal layout; query
# variants; Hub downloads of datasets and model weights (local rules: compute nodes are often offline; the
# target `prefetch` in the Snakefile fetches all a configuration needs); CliniQ's queries and judgments.


rule prepare_task:
    input:
        W.inputs.prepare_task,
    output:
        corpus=paths.CORPUS,
        queries=paths.QUERIES,
        qrels=paths.QRELS,
        stats=paths.STATS,
    log:
        paths.log_file("prepare_task"),
    benchmark:
        paths.benchmark_file("prepare_task")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
    conda:
        "../envs/core.yaml"
    resources:
        mem_mb=W.resources.light_mem_mb,
        runtime=W.resources.light_runtime,
    params:
        spec=W.params.of("prepare_task"),
    script:
        "../scripts/prepare_task.py"


# the fingerprint of a task's corpus ids (scoring.identity): every rule that writes or reads a run has it as input
rule fingerprint_corpus:
    input:
        paths.CORPUS,
    output:
        paths.CORPUS_IDS,
    log:
        paths.log_file("fingerprint_corpus"),
    benchmark:
        paths.benchmark_file("fingerprint_corpus")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("fingerprint_corpus"),
    script:
        "../scripts/fingerprint_corpus.py"


use rule fingerprint_corpus as fingerprint_corpus_cliniq with:
    input:
        paths.CHUNK_IDS,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),


rule prepare_query_variant:
    input:
        unpack(W.inputs.prepare_query_variant),
    output:
        paths.VARIANT,
    log:
        paths.log_file("prepare_query_variant"),
    benchmark:
        paths.benchmark_file("prepare_query_variant")
    wildcard_constraints:
        benchmark=W.constraint("public_benchmark"),
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("prepare_query_variant"),
    script:
        "../scripts/prepare_query_variant.py"


# A MIMIC-derived benchmark: the variant file (expansions may quote the notes) owner-only under resources/.
rule prepare_private_query_variant:
    input:
        unpack(W.inputs.prepare_query_variant),
    output:
        paths.PRIVATE_VARIANT,
    log:
        paths.log_file("prepare_private_query_variant"),
    benchmark:
        paths.benchmark_file("prepare_private_query_variant")
    wildcard_constraints:
        benchmark=W.constraint("private_benchmark"),
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("prepare_private_query_variant"),
    script:
        "../scripts/prepare_private_query_variant.py"


rule generate_query_variant:
    input:
        unpack(W.inputs.generate_query_variant),
    output:
        variant=paths.GENERATED,
        info=paths.GENERATED_INFO,
    log:
        paths.log_file("generate_query_variant"),
    benchmark:
        paths.benchmark_file("generate_query_variant")
    wildcard_constraints:
        benchmark=W.constraint("public_benchmark"),
    conda:
        "../envs/core.yaml"
    threads: 1
    resources:
        gpu=W.resources.generate_gpu,
        runtime=W.resources.generate_runtime,
    params:
        spec=W.params.of("generate_query_variant"),
    script:
        "../scripts/generate_query_variant.py"


# A MIMIC-derived benchmark: expansions, their cache and a started server's output owner-only under resources/
# (the info file holds ids and numbers); LameR's prompts go only to a loopback or declared server (phi_servers).
rule generate_private_query_variant:
    input:
        unpack(W.inputs.generate_query_variant),
    output:
        variant=paths.PRIVATE_GENERATED,
        info=paths.GENERATED_INFO,
    log:
        paths.log_file("generate_private_query_variant"),
    benchmark:
        paths.benchmark_file("generate_private_query_variant")
    wildcard_constraints:
        benchmark=W.constraint("private_benchmark"),
    conda:
        "../envs/core.yaml"
    threads: 1
    resources:
        gpu=W.resources.generate_gpu,
        runtime=W.resources.generate_runtime,
    params:
        spec=W.params.of("generate_private_query_variant"),
    script:
        "../scripts/generate_private_query_variant.py"


rule download_task:
    output:
        **paths.DOWNLOAD_FILES,
    log:
        paths.log_file("download_task"),
    benchmark:
        paths.benchmark_file("download_task")
    wildcard_constraints:
        benchmark=W.constraint("source_benchmark"),
        task=W.constraint("source_task"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("download_task"),
    script:
        "../scripts/download_task.py"


rule download_query_variant:
    input:
        manifest=paths.DOWNLOAD_FILES["manifest"],
    output:
        paths.DOWNLOAD_VARIANT,
    log:
        paths.log_file("download_query_variant"),
    benchmark:
        paths.benchmark_file("download_query_variant")
    wildcard_constraints:
        benchmark=W.constraint("source_benchmark"),
        task=W.constraint("source_task"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("download_query_variant"),
    script:
        "../scripts/download_query_variant.py"


rule prefetch_model:
    output:
        paths.MODEL_MANIFEST,
    log:
        paths.log_file("prefetch_model"),
    benchmark:
        paths.benchmark_file("prefetch_model")
    wildcard_constraints:
        model=W.constraint("hub_model"),
    localrule: True
    conda:
        "../envs/dense.yaml"
    params:
        spec=W.params.of("prefetch_model"),
    script:
        "../scripts/prefetch_model.py"


rule link_cliniq_corpus:
    input:
        corpus=paths.CLINIQ_CHUNKS,
    output:
        corpus=paths.CORPUS,
    log:
        paths.log_file("link_cliniq_corpus"),
    benchmark:
        paths.benchmark_file("link_cliniq_corpus")
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("link_cliniq_corpus"),
    script:
        "../scripts/link_cliniq_corpus.py"


rule prepare_cliniq_queries:
    input:
        unpack(W.inputs.prepare_cliniq_queries),
    output:
        queries=paths.QUERIES,
        query_types=paths.QUERY_TYPES,
    log:
        paths.log_file("prepare_cliniq_queries"),
    benchmark:
        paths.benchmark_file("prepare_cliniq_queries")
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("prepare_cliniq_queries"),
    script:
        "../scripts/prepare_cliniq_queries.py"


rule prepare_cliniq:
    input:
        unpack(W.inputs.prepare_cliniq),
    output:
        qrels=paths.QRELS,
        cliniq_qrels=paths.CLINIQ_QRELS,
        stats=paths.STATS,
    log:
        paths.log_file("prepare_cliniq"),
    benchmark:
        paths.benchmark_file("prepare_cliniq")
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("prepare_cliniq"),
    script:
        "../scripts/prepare_cliniq.py"

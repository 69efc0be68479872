# Stage score: trec_eval measures per query and mean, under R2MED's result names; CliniQ's own measures; a
# benchmark's metrics collected into one file for the reports.


rule score_run:
    input:
        run=paths.RUN,
        qrels=paths.QRELS,
        queries=paths.QUERIES,
    output:
        metrics=paths.METRICS,
        per_query=paths.PER_QUERY,
    log:
        paths.log_file("score_run"),
    benchmark:
        paths.benchmark_file("score_run")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("score_run"),
    script:
        "../scripts/score_run.py"


rule collect_metrics:
    input:
        W.inputs.benchmark_metrics,
    output:
        paths.METRICS_TABLE,
    log:
        paths.log_file("collect_metrics"),
    benchmark:
        paths.benchmark_file("collect_metrics")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("collect_metrics"),
    script:
        "../scripts/collect_metrics.py"


rule score_cliniq:
    input:
        run=paths.RUN,
        cliniq_qrels=paths.CLINIQ_QRELS,
        query_types=paths.QUERY_TYPES,
        ids=paths.CHUNK_IDS,
    output:
        metrics=paths.CLINIQ_METRICS,
    log:
        paths.log_file("score_cliniq"),
    benchmark:
        paths.benchmark_file("score_cliniq")
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("score_cliniq"),
    script:
        "../scripts/score_cliniq.py"

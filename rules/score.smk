# Stage score: trec_eval measures per query and mean, under R2MED's result names; CliniQ's own measures; a
# benchmark's metrics collected into one file for the reports, with what that scoring selected (complete or not).
# A benchmark scored in part while a complete scoring of it lies here keeps that one (workflow.earlier.kept): the
# report rules of such a benchmark (reported_benchmark) do not run.


rule score_run:
    input:
        run=paths.RUN,
        qrels=paths.QRELS,
        queries=paths.QUERIES,
        exclude=W.train_qrels,
        fingerprint=paths.CORPUS_IDS,
    output:
        metrics=paths.METRICS,
        per_query=paths.PER_QUERY,
    log:
        paths.log_file("score_run"),
    benchmark:
        paths.benchmark_file("score_run")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("score_run"),
    script:
        "../scripts/score_run.py"


use rule score_run as score_run_binary with:
    input:
        run=paths.RUN_BINARY,
        qrels=paths.QRELS,
        queries=paths.QUERIES,
        exclude=W.train_qrels,
        fingerprint=paths.CORPUS_IDS,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),


rule collect_metrics:
    input:
        W.inputs.benchmark_metrics,
    output:
        paths.METRICS_TABLE,
        selection=paths.METRICS_SELECTION,
    log:
        paths.log_file("collect_metrics"),
    benchmark:
        paths.benchmark_file("collect_metrics")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("collect_metrics"),
    script:
        "../scripts/collect_metrics.py"


rule score_cliniq:
    input:
        run=paths.RUN_BINARY,
        cliniq_qrels=paths.CLINIQ_QRELS,
        query_types=paths.QUERY_TYPES,
        ids=paths.CHUNK_IDS,
    output:
        metrics=paths.CLINIQ_METRICS,
        per_query=paths.CLINIQ_PER_QUERY,
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


# CliniQ's judgment completion (cliniq_completion, docs/cliniq.md#judgment-completion): the sampling design, the LLM
# judge (its prompts quote the notes: owner-only under resources/, loopback or declared servers only), the
# false-negative estimates and the re-scoring with the verdict.
rule cliniq_completion_sample:
    input:
        unpack(W.inputs.cliniq_completion_sample),
    output:
        sample=paths.COMPLETION_SAMPLE,
        design=paths.COMPLETION_DESIGN,
    log:
        paths.log_file("cliniq_completion_sample"),
    benchmark:
        paths.benchmark_file("cliniq_completion_sample")
    wildcard_constraints:
        benchmark=W.constraint("completion_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("cliniq_completion_sample"),
    script:
        "../scripts/cliniq_completion_sample.py"


rule cliniq_completion_judge:
    input:
        unpack(W.inputs.cliniq_completion_judge),
    output:
        judgments=paths.PRIVATE_JUDGMENTS,
        labels=paths.COMPLETION_LABELS,
        info=paths.COMPLETION_JUDGING,
    log:
        paths.log_file("cliniq_completion_judge"),
    benchmark:
        paths.benchmark_file("cliniq_completion_judge")
    wildcard_constraints:
        benchmark=W.constraint("completion_benchmark"),
    conda:
        "../envs/core.yaml"
    threads: 1
    resources:
        gpu=W.resources.judge_gpu,
        runtime=W.resources.judge_runtime,
    params:
        spec=W.params.of("cliniq_completion_judge"),
    script:
        "../scripts/cliniq_completion_judge.py"


rule cliniq_completion_estimate:
    input:
        unpack(W.inputs.cliniq_completion_estimate),
    output:
        estimates_csv=paths.partial(paths.COMPLETION_FILE, name="estimates", ext="csv"),
        estimates_md=paths.partial(paths.COMPLETION_FILE, name="estimates", ext="md"),
        estimates_tex=paths.partial(paths.COMPLETION_FILE, name="estimates", ext="tex"),
        per_query=paths.partial(paths.COMPLETION_FILE, name="per_query", ext="csv"),
        agreement_csv=paths.partial(paths.COMPLETION_FILE, name="agreement", ext="csv"),
        agreement_md=paths.partial(paths.COMPLETION_FILE, name="agreement", ext="md"),
        agreement_tex=paths.partial(paths.COMPLETION_FILE, name="agreement", ext="tex"),
    log:
        paths.log_file("cliniq_completion_estimate"),
    benchmark:
        paths.benchmark_file("cliniq_completion_estimate")
    wildcard_constraints:
        benchmark=W.constraint("completion_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("cliniq_completion_estimate"),
    script:
        "../scripts/cliniq_completion_estimate.py"


rule cliniq_completion_rescore:
    input:
        unpack(W.inputs.cliniq_completion_rescore),
    output:
        rescored_csv=paths.partial(paths.COMPLETION_FILE, name="rescored", ext="csv"),
        rescored_md=paths.partial(paths.COMPLETION_FILE, name="rescored", ext="md"),
        rescored_tex=paths.partial(paths.COMPLETION_FILE, name="rescored", ext="tex"),
        ranking_csv=paths.partial(paths.COMPLETION_FILE, name="ranking", ext="csv"),
        ranking_tex=paths.partial(paths.COMPLETION_FILE, name="ranking", ext="tex"),
        verdict_md=paths.partial(paths.COMPLETION_FILE, name="verdict", ext="md"),
        verdict_json=paths.partial(paths.COMPLETION_FILE, name="verdict", ext="json"),
    log:
        paths.log_file("cliniq_completion_rescore"),
    benchmark:
        paths.benchmark_file("cliniq_completion_rescore")
    wildcard_constraints:
        benchmark=W.constraint("completion_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("cliniq_completion_rescore"),
    script:
        "../scripts/cliniq_completion_rescore.py"

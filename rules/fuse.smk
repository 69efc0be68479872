# Stage fuse: reciprocal rank fusion or linear fusion of named runs.


rule fuse_runs:
    input:
        runs=W.inputs.fuse_runs,
        train=W.train_qrels,
        fingerprint=paths.CORPUS_IDS,
    output:
        run=paths.RUN,
        identity=paths.RUN_IDENTITY,
        info=paths.RUN_LINEAGE,
    log:
        paths.log_file("fuse_runs"),
    benchmark:
        paths.benchmark_file("fuse_runs")
    wildcard_constraints:
        benchmark=W.constraint("generic_benchmark"),
        model=W.constraint("fusion"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("fuse_runs"),
    script:
        "../scripts/fuse_runs.py"


use rule fuse_runs as fuse_runs_binary with:
    output:
        run=paths.RUN_BINARY,
        info=paths.RUN_LINEAGE,
    wildcard_constraints:
        benchmark=W.constraint("cliniq_benchmark"),
        model=W.constraint("fusion"),

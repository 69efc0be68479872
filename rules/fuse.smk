# Stage: fuse. Reciprocal rank fusion or linear fusion of named runs.


rule fuse_runs:
    input:
        runs=fusion_inputs,
    output:
        run="results/runs/{benchmark}/{task}/{model}.trec",
        info="results/runs/{benchmark}/{task}/{model}.lineage.json",
    wildcard_constraints:
        model=fusion_constraint(),
    params:
        job=fusion_params,
    log:
        "logs/fuse_runs/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/fuse_runs/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/fuse_runs.py"

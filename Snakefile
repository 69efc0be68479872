# r2med-eval: reproducible evaluation of retrieval models on reasoning-driven medical retrieval.
# This file only wires: config, schema validation, includes and the `all` target.

configfile: "config.yaml"


include: "rules/common.smk"


CFG = validated_config(config)


wildcard_constraints:
    benchmark=benchmark_constraint(),
    task=task_constraint(),
    model=model_constraint(),


include: "rules/data.smk"
include: "rules/chunk.smk"
include: "rules/index.smk"
include: "rules/encode.smk"
include: "rules/retrieve.smk"
include: "rules/rerank.smk"
include: "rules/fuse.smk"
include: "rules/score.smk"
include: "rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True

# r2med-eval: reproducible evaluation of retrieval models on reasoning-driven medical retrieval.
# This file only wires: config, schema validation, includes, the `all` target and the `prefetch` target
# (every download a configuration needs, run on a machine with network: docs/cluster.md).


include: "rules/common.smk"


check_config_file("config.yaml")


configfile: "config.yaml"


W = load_workflow(config)


wildcard_constraints:
    benchmark=W.constraint("benchmark"),
    task=W.constraint("task"),
    model=W.constraint("model"),
    method=W.gar_methods(),
    llm=r"[A-Za-z0-9][A-Za-z0-9._-]*",


include: "rules/data.smk"
include: "rules/chunk.smk"
include: "rules/index.smk"
include: "rules/retrieve.smk"
include: "rules/rerank.smk"
include: "rules/fuse.smk"
include: "rules/score.smk"
include: "rules/report.smk"


declare_parameters(W)


rule all:
    default_target: True
    input:
        W.targets(),


rule prefetch:
    input:
        W.prefetch_targets(),
    localrule: True

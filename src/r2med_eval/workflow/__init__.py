"""The control layer: configuration -> runs, paths, per-rule params and resources.

``rules/*.smk`` only delegate to a ``Workflow`` built once per Snakemake invocation::

    W = Workflow.load(config, config_files)   # validated, defaults filled; ConfigError on bad input
    W.inputs.rerank_run                       # input function of rule rerank_run
    W.params.of("score_run")                  # params function: the config keys it reads + code hash
    W.resources.encoder_mem_mb                # resource function
    W.constraint("model")                     # wildcard constraint

Nothing here imports Snakemake, so all of it is unit-tested without it.
"""

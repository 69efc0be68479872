"""The work of each Snakemake rule, one module per ``rules/<stage>.smk`` and one function per rule, named
after the rule. Each function reads only ``snakemake.input/output/params/wildcards/threads`` (the rule's
params are ``params.spec``, built by ``r2med_eval.workflow.params``), so tests can drive it directly.
``scripts/<rule>.py`` are the adapters that call them."""

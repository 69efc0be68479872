# Delegation to the control layer, r2med_eval.workflow (unit-tested without Snakemake): the registry of runs,
# every path (paths.*), each rule's params (W.params.of(rule): the config keys that shape its output and
# the hash of the package code it runs), resources and wildcard constraints. Rules hold no logic.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from r2med_eval.errors import ConfigError  # noqa: E402
from r2med_eval.workflow.cache import PlanningCache  # noqa: E402
from r2med_eval.workflow.control import Workflow, tune_gc  # noqa: E402
from r2med_eval.workflow import paths
from r2med_eval.workflow.config import check_file  # noqa: E402


def check_config_file(path):
    """The configuration file the Snakefile names, checked before Snakemake merges it (its merge expands YAML
    aliases of mappings): an alias bomb, a non-finite number, a key that is not a string stop with one message.
    """
    try:
        check_file(path)
    except ConfigError as exc:
        raise WorkflowError(f"r2med-eval: {exc}") from None


def load_workflow(raw):
    """Schema validation and defaults before any job runs; one message naming the key on failure. The garbage
    collector's thresholds are raised for this planning process (r2med_eval.workflow.tune_gc). Only the planning
    process checks mteb models against MTEB's registry (a job's process skips it). The code hashes and the schema
    check come from the working directory's planning cache when nothing they depend on changed
    (r2med_eval.workflow.cache; R2MED_EVAL_PLANNING_CACHE=off turns it off).
    """
    tune_gc()
    try:
        loaded = Workflow.load(
            raw,
            workflow.configfiles,
            planning=workflow.is_main_process,
            cache=PlanningCache.for_workdir(),
        )
    except ConfigError as exc:
        raise WorkflowError(f"r2med-eval: {exc}") from None
    note = loaded.skipped_note()
    if note:
        print(note, file=sys.stderr)
    return loaded


def declare_parameters(loaded):
    """Snakemake reads the parameters of every input, params and resource function for every job
    (inspect.signature, a tenth of a large dry run); declare them once through its own hook instead.
    """
    import inspect

    from snakemake.common import overwrite_function_params

    for target, func in loaded.callables():
        overwrite_function_params(target, inspect.signature(func).parameters)

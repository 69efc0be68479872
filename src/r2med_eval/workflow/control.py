"""The control layer's one object, ``Workflow`` (what ``rules/common.smk`` loads: the validated configuration
and its registry, inputs, params and resources), and ``tune_gc`` for Snakemake's planning process."""


from __future__ import annotations

from pathlib import Path

from . import earlier, inputs, paths, registry
from .cache import PlanningCache
from .code import CodeIndex
from .config import validate
from .disk_checks import check_mteb_models, check_paths
from .params import Params
from .registry import Registry
from .resources import Resources

# CPython collects its youngest generation every 700 net allocations. Planning a large matrix allocates millions of
# objects that live until Snakemake exits (jobs, their files, wildcards, params), so the collector runs thousands
# of times over objects that are never garbage: about a sixth of the dry run of the full R2MED matrix
# (bench/dry_run.py). Snakemake's process collects every million allocations instead (as mypy raises its own
# thresholds for its large graphs), for about 10% more memory (191 -> 214 MB on that dry run).
# At exit, CPython's shutdown runs one more full collection over every object the process still holds (Snakemake,
# its plugins, pandas and numpy that the SLURM plugin imports, the DAG): about 0.1 s of every `snakemake` call,
# a sixth of a no-op (docs/scale.md), to free memory the operating system takes back anyway. The planning process
# freezes its objects (gc.freeze) in an atexit handler, which skips only that collection: the atexit handlers
# registered before it (logging's flush and close among them) still run after it, and nothing in
# Snakemake's process relies on a collection at exit (files are closed by `with` or by those handlers; CPython
# does not promise finalizers at exit). R2MED_EVAL_GC=default keeps CPython's thresholds and its collection at
# exit. Job scripts run in their own processes and keep both.
PLANNING_GC_THRESHOLDS = (1_000_000, 50, 100)
_FREEZE_AT_EXIT = []  # the one atexit registration of this process


def tune_gc(environ=None, at_exit=None) -> tuple[int, int, int]:
    """Raise the garbage collector's thresholds for Snakemake's planning process (``rules/common.smk``) and freeze
    its objects at exit (once a process; ``at_exit``: the registration function, ``atexit.register`` by default);
    returns the thresholds in force after the call."""
    import atexit
    import gc
    import os

    environ = os.environ if environ is None else environ
    if environ.get("R2MED_EVAL_GC", "") != "default":
        gc.set_threshold(*PLANNING_GC_THRESHOLDS)
        if not _FREEZE_AT_EXIT:
            (at_exit or atexit.register)(gc.freeze)
            _FREEZE_AT_EXIT.append(gc.freeze)
    return gc.get_threshold()


class Workflow:
    def __init__(self, cfg: dict, code: CodeIndex | None = None):
        self.cfg = cfg
        self.registry = Registry(cfg)
        self.inputs = inputs.Inputs(self.registry)
        self.params = Params(self.registry, code)
        self.resources = Resources(self.registry)

    @classmethod
    def load(cls, raw: dict, config_files=(), base: Path | None = None, planning: bool = True,
             cache: PlanningCache | None = None) -> Workflow:
        """``planning``: Snakemake's main process, which also checks ``mteb`` models against MTEB's registry
        (seconds to import mteb; a job's own process skips it). ``cache``: the planning cache
        (``workflow.cache``) for the code hashes and the schema check; None computes both."""
        files = ", ".join(dict.fromkeys(str(f) for f in config_files)) or "config.yaml"
        code = CodeIndex(cache=cache)
        cfg = validate(raw, config_file=files, cache=cache, code_key=code.fingerprint() if cache else "")
        check_paths(cfg, config_file=files, base=base)
        if planning:
            check_mteb_models(cfg, config_file=files)
        return cls(cfg, code)

    def train_qrels(self, wildcards) -> list[str]:
        """Input function: a learned fusion's training judgments (fuse_runs learns on them, score_run leaves their
        queries out); none for other runs."""
        return self.registry.train_qrels(wildcards.model, wildcards.benchmark, wildcards.task)

    # ------------------------------------------------------------ wildcard constraints

    def constraint(self, kind: str) -> str:
        """The regex of a wildcard: exactly the names this configuration runs (each kind computed once: the rules
        files ask for the same few kinds some sixty times while Snakemake parses them)."""
        cache = self.__dict__.setdefault("_constraints", {})
        if kind not in cache:
            cache[kind] = paths.alternatives(self._constraint_names(kind))
        return cache[kind]

    def _constraint_names(self, kind: str) -> list[str]:
        reg = self.registry
        names = {
            "benchmark": lambda: reg.benchmarks,
            "task": lambda: [t for _, t in reg.tasks],
            "model": lambda: reg.all_runs + reg.encoders(),
            "encoder": lambda: reg.encoders(),
            "whole_encoder": lambda: [m for m in reg.encoders() if reg.cfg["models"][m]["shards"] == 1],
            "sharded_encoder": lambda: [m for m in reg.encoders() if reg.cfg["models"][m]["shards"] > 1],
            "hub_model": lambda: reg.hub_models(),
            "bm25_lucene": lambda: reg.retriever_runs("bm25_lucene"),
            "bm25_paper": lambda: reg.retriever_runs("bm25_paper"),
            "run": lambda: reg.retriever_runs("run"),
            "dense": lambda: reg.retriever_runs(*registry.ENCODER_TYPES),
            "rerank": lambda: [n for n in reg.rerank_jobs if not reg.llm_reranked(n)],
            "llm_rerank": lambda: [n for n in reg.rerank_jobs if reg.llm_reranked(n)],
            "fusion": lambda: list(reg.fusion_jobs),
            "cliniq_benchmark": lambda: reg.cliniq_benchmarks,
            "reported_benchmark": lambda: earlier.reported(reg),
            "reported_cliniq_benchmark": lambda: [b for b in earlier.reported(reg) if reg.is_cliniq(b)],
            "completion_benchmark": lambda: reg.completion_benchmark(),
            "generic_benchmark": lambda: [b for b in reg.benchmarks if not reg.is_cliniq(b)],
            "r2med_benchmark": lambda: [b for b, e in reg.claims().items() if e["kind"] == "r2med"],
            "private_benchmark": lambda: [b for b in reg.benchmarks if reg.is_private(b)],
            "public_benchmark": lambda: [b for b in reg.benchmarks if not reg.is_private(b)],
            "source_benchmark": lambda: [b for b, _ in reg.source_tasks()],
            "source_task": lambda: [t for _, t in reg.source_tasks()],
            "anndir": lambda: list(self.inputs.cliniq_download_dirs()),
        }
        return names[kind]()

    @staticmethod
    def gar_methods() -> str:
        """The GAR methods, from the schema (the one list of them)."""
        from .schema import SCHEMA_PATH, _load_schema

        return paths.alternatives(_load_schema(str(SCHEMA_PATH))["$defs"]["gar_method"]["enum"])

    def callables(self):
        """(holder, name, callable) of every function the rules hand to Snakemake: input functions, resource
        functions and the params functions made so far. Snakemake inspects a callable's parameters for every
        job; rules/common.smk declares them once instead."""
        import inspect

        for obj in (self.inputs, self.resources):
            for name, member in inspect.getmembers(type(obj), inspect.isfunction):
                if not name.startswith("_"):
                    yield member, getattr(obj, name)
        for spec in self.params.made:
            yield spec, spec

    def targets(self) -> list[str]:
        return inputs.all_targets(self.registry)

    def prefetch_targets(self) -> list[str]:
        return inputs.prefetch_targets(self.registry)

    def skipped_note(self) -> str | None:
        skipped = self.registry.skipped
        if not skipped:
            return None
        return ("r2med-eval: skipping derived runs whose inputs or reranker are not selected: "
                + ", ".join(skipped))

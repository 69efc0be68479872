"""Validation of the configuration against ``schemas/config.schema.yaml``.

``validate`` checks the schema (one message naming the key), fills every default written in the schema at
every depth (model entries by type, nested ``index`` and ``source`` objects, rerank ``depths``, fusion ``k``,
CliniQ's settings for ``layout: cliniq`` only) and then checks what a schema cannot say: selections name
registry entries, derived runs name configured runs, sources resolve. Defaults live in the schema alone.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from ..errors import ConfigError
from . import registry

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "schemas" / "config.schema.yaml"
FIX = "see schemas/config.schema.yaml and docs/configuration.md."


@functools.lru_cache(maxsize=None)
def _load_schema(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when present


def load_schema(path=SCHEMA_PATH) -> dict:
    return copy.deepcopy(_load_schema(str(path)))


def _key_path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _message(error) -> str:
    where = _key_path(error.absolute_path)
    v = error.validator
    if v == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        key = _key_path(list(error.absolute_path) + [extra[0]]) if extra else where
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return f"unknown key {key!r} (allowed here: {allowed})."
    if v == "enum":
        return f"{where}: {error.instance!r} is not one of {', '.join(map(repr, error.validator_value))}."
    if v == "required":
        return f"{where}: {error.message}."
    if v in ("pattern", "propertyNames"):
        return f"{where}: name {error.instance!r} must match {error.schema.get('pattern', '')} (letters, digits, '.', '-')."
    return f"{where}: {error.message}."


def _schema_errors(config: dict, schema: dict, config_file: str) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    # prefer the deepest error: it names the key (unknown key, misspelt type)
    deepest = max(errors, key=lambda e: len(list(e.absolute_path)))
    error = deepest if len(list(deepest.absolute_path)) > len(list(best.absolute_path)) else best
    if error.validator == "propertyNames" or (error.absolute_path == best.absolute_path and best.context):
        error = best
    raise ConfigError(_message(error), path=config_file, fix=FIX)


# ---------------------------------------------------------------- defaults from the schema, at every depth


def _resolve(node: dict, root: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        target = root
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


_VALIDATORS: dict[tuple[int, int], object] = {}


def _is_valid(instance, schema: dict, root: dict) -> bool:
    """``instance`` against a subschema (its $refs resolved in ``root``); one validator per subschema."""
    import jsonschema

    key = (id(schema), id(root))
    if key not in _VALIDATORS:
        _VALIDATORS[key] = (jsonschema.Draft202012Validator({**schema, "$defs": root.get("$defs", {})}), schema, root)
    return _VALIDATORS[key][0].is_valid(instance)


def fill_defaults(instance, schema: dict, root: dict):
    """Fill ``default`` values of ``schema`` into ``instance`` (in place), recursing through properties,
    additionalProperties, items, $ref, allOf/if-then and the oneOf branch the instance matches."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return instance
    for sub in schema.get("allOf", []):
        sub = _resolve(sub, root)
        if "if" in sub:
            branch = sub.get("then") if _is_valid(instance, sub["if"], root) else sub.get("else")
            if branch is not None:
                fill_defaults(instance, branch, root)
        else:
            fill_defaults(instance, sub, root)
    for key in ("oneOf", "anyOf"):
        for sub in schema.get(key, []):
            if _is_valid(instance, _resolve(sub, root), root):
                fill_defaults(instance, sub, root)
                break
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key, prop in props.items():
            prop = _resolve(prop, root)
            if key not in instance and isinstance(prop, dict) and "default" in prop:
                instance[key] = copy.deepcopy(prop["default"])
            if key in instance:
                fill_defaults(instance[key], prop, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in instance:
                if key not in props:
                    fill_defaults(instance[key], extra, root)
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for item in instance:
            fill_defaults(item, schema["items"], root)
    return instance


def with_defaults(definition: str, obj: dict, schema: dict | None = None) -> dict:
    """A copy of ``obj`` with the defaults of ``$defs/<definition>`` (e.g. a model type) filled in."""
    schema = schema or _load_schema(str(SCHEMA_PATH))
    return fill_defaults(copy.deepcopy(obj), schema["$defs"][definition], schema)


def schema_default(*path: str, schema: dict | None = None):
    """The default written in the schema at ``$defs`` path, e.g. ``schema_default('dense', 'max_length')``."""
    schema = schema or _load_schema(str(SCHEMA_PATH))
    node = schema["$defs"][path[0]]
    for part in path[1:]:
        node = _resolve(node, schema)["properties"][part]
    return copy.deepcopy(node["default"])


def cliniq_default(*path: str):
    """A CliniQ default (filled only for layout: cliniq), e.g. ``cliniq_default('annotations', 'commit')``."""
    schema = _load_schema(str(SCHEMA_PATH))
    node = schema["$defs"]["benchmark"]["allOf"][0]["then"]
    for part in path:
        node = node["properties"][part]
    return copy.deepcopy(node["default"])


# ---------------------------------------------------------------- validation


def validate(config: dict, config_file: str = "config.yaml", schema: dict | None = None) -> dict:
    """Validate ``config`` and return a copy with every schema default filled in. Raises ConfigError."""
    schema = schema or _load_schema(str(SCHEMA_PATH))
    _schema_errors(config, schema, config_file)
    cfg = fill_defaults(copy.deepcopy(config), schema, schema)
    _local_tasks(cfg, config_file)
    _check_selection(cfg, config_file)
    check_layout_keys(cfg, config_file, schema)
    _check_variants(cfg, config_file)
    _check_derived(cfg, config_file)
    _check_backends(cfg, config_file)
    _check_report(cfg, config_file)
    _check_sources(cfg, config_file)
    _check_run_models(cfg, config_file)
    return cfg


def _check_selection(cfg: dict, config_file: str) -> None:
    for key, section in (("benchmarks_to_run", "benchmarks"), ("models_to_run", "models")):
        for name in cfg.get(key, []):
            if name not in cfg[section]:
                raise ConfigError(f"{key} names {name!r}, which is not in {section} "
                                  f"(known: {', '.join(sorted(cfg[section]))}).", path=config_file,
                                  fix=f"add {name!r} to {section} or remove it from {key}.")


def cliniq_keys(schema: dict | None = None) -> list[str]:
    """Benchmark keys only a cliniq benchmark takes: those the schema gives CliniQ defaults for, and noteevents."""
    schema = schema or _load_schema(str(SCHEMA_PATH))
    return ["noteevents"] + list(schema["$defs"]["benchmark"]["allOf"][0]["then"]["properties"])


def check_layout_keys(cfg: dict, config_file: str = "config.yaml", schema: dict | None = None) -> None:
    keys = cliniq_keys(schema)
    for bname, bench in cfg["benchmarks"].items():
        extra = [k for k in keys if k in bench]
        if bench["layout"] != "cliniq" and extra:
            raise ConfigError(f"benchmarks.{bname}.{extra[0]}: only a cliniq benchmark takes this key.",
                              path=config_file, fix="remove it or set layout: cliniq.")


def _check_variants(cfg: dict, config_file: str) -> None:
    for i, v in enumerate(cfg["query_variants"]):
        if v["benchmark"] not in cfg["benchmarks"]:
            raise ConfigError(f"query_variants[{i}].benchmark names {v['benchmark']!r}, which is not in benchmarks.",
                              path=config_file, fix="name a configured benchmark.")
        for m in v["models"]:
            if m not in cfg["models"] or cfg["models"][m]["type"] not in registry.VARIANT_TYPES:
                raise ConfigError(f"query_variants[{i}].models names {m!r}, which is not a retriever in models that "
                                  "can run a query variant.", path=config_file,
                                  fix=f"name {', '.join(registry.VARIANT_TYPES)} entries (a type: run model's file "
                                      "holds one run per task).")
    for name, llm in cfg.get("llms", {}).items():
        gen = llm.get("generate")
        if not gen:
            continue
        m = gen["lamer_retriever"]
        uses_lamer = any(v["llm"] == name and v["method"] == "lamer" for v in cfg["query_variants"])
        if uses_lamer and (m not in cfg["models"] or cfg["models"][m]["type"] not in registry.RETRIEVER_TYPES):
            raise ConfigError(f"llms.{name}.generate.lamer_retriever names {m!r}, which is not a retriever in models.",
                              path=config_file, fix="name the retriever whose top passages LameR's prompt lists.")
        uses_q2d = any(v["llm"] == name and v["method"] == "query2doc" for v in cfg["query_variants"])
        if uses_q2d and not gen.get("examples"):
            raise ConfigError(f"llms.{name}.generate.examples is not set, and query2doc needs few-shot examples.",
                              path=config_file, fix="give a JSON file {R2MED task: examples text}.")


def _check_backends(cfg: dict, config_file: str) -> None:
    from ..dense_models import backend_problem

    for name, spec in cfg["models"].items():
        problem = backend_problem(spec) if spec.get("type") == "dense" else None
        if problem:
            raise ConfigError(f"models.{name}: {problem[0]}.", path=config_file, fix=f"{problem[1]} in models.{name}.")


def _check_derived(cfg: dict, config_file: str) -> None:
    known = set(cfg["models"]) | set(registry.all_variant_names(cfg)) | set(registry.derived_jobs(cfg))
    for i, job in enumerate(cfg["rerank"]):
        if job["run"] not in known:
            raise ConfigError(f"rerank[{i}].run names {job['run']!r}, which is not a configured run "
                              f"(known: {', '.join(sorted(known))}).", path=config_file,
                              fix="name a retriever in models or a derived run.")
        model = cfg["models"].get(job["reranker"])
        if model is None or model["type"] not in registry.RERANKER_TYPES:
            raise ConfigError(f"rerank[{i}].reranker names {job['reranker']!r}, which is not a cross_encoder, "
                              "rankllama or dense entry in models.", path=config_file, fix="add it to models.")
    for name, spec in cfg["fusion"].items():
        if name in cfg["models"]:
            raise ConfigError(f"fusion.{name}: the name is also a model.", path=config_file, fix="rename it.")
        for run in spec["runs"]:
            if run not in known or run == name:
                raise ConfigError(f"fusion.{name}.runs names {run!r}, which is not a configured run "
                                  f"(known: {', '.join(sorted(known - {name}))}).", path=config_file,
                                  fix="name retrievers in models or derived runs.")
        if "weights" in spec and len(spec["weights"]) != len(spec["runs"]):
            raise ConfigError(f"fusion.{name}.weights has {len(spec['weights'])} values for {len(spec['runs'])} runs.",
                              path=config_file, fix="give one weight per run.")


def _check_report(cfg: dict, config_file: str) -> None:
    """The leaderboard metric must be one score_run computes; the baseline and the scatter runs must be
    configured runs (the baseline also selected)."""
    from ..metrics import metric_names

    metric = cfg["leaderboard"]["metric"]
    if metric not in metric_names():
        raise ConfigError(f"leaderboard.metric {metric!r} is not a computed metric "
                          f"(computed: {', '.join(metric_names())}).", path=config_file,
                          fix="name one of the computed metrics.")
    report = cfg["report"]
    configured = set(cfg["models"]) | set(registry.derived_jobs(cfg)) | set(registry.all_variant_names(cfg))
    runs = registry.Registry(cfg).all_runs
    for key, names in (("baseline", [report["baseline"]] if "baseline" in report else []),
                       ("scatter", report.get("scatter", []))):
        for name in names:
            if name not in configured:
                raise ConfigError(f"report.{key} names {name!r}, which is not a configured run "
                                  f"(runs: {', '.join(runs)}).", path=config_file,
                                  fix="name a model, query-variant, rerank or fusion run.")
    if "baseline" in report and report["baseline"] not in runs:
        raise ConfigError(f"report.baseline {report['baseline']!r} is configured but not among the runs that "
                          f"will run ({', '.join(runs)}).", path=config_file,
                          fix="select it (models_to_run, enabled) or set report.baseline to a selected run, "
                              "e.g. --config 'report={baseline: <run>}'.")


def _check_run_models(cfg: dict, config_file: str) -> None:
    """A ``type: run`` model's path pattern: only {benchmark} and {task}, and one file per selected task; an
    ``mteb`` model knows the MTEB task of every selected task."""
    import re

    from ..factories import mteb_task_name
    from ..r2med import paper_task

    reg = registry.Registry(cfg)
    for name, spec in cfg["models"].items():
        if spec["type"] == "mteb" and name in reg.encoders():
            for b, t in reg.tasks:
                if not mteb_task_name(spec, t, paper_task(cfg["benchmarks"][b]["tasks"][t])):
                    raise ConfigError(f"models.{name}: task {b}/{t} is not an R2MED task, so MTEB's task (its "
                                      "metadata and prompts) for it is unknown.", path=config_file,
                                      fix=f"set models.{name}.mteb_tasks: {{{t}: <MTEB retrieval task name>}}, e.g. "
                                          "R2MEDBiologyRetrieval.")
        if spec["type"] != "run":
            continue
        unknown = sorted(set(re.findall(r"\{([^}]*)\}", spec["path"])) - {"benchmark", "task"})
        if unknown:
            raise ConfigError(f"models.{name}.path {spec['path']!r} has the placeholder {{{unknown[0]}}}.",
                              path=config_file, fix="use only {benchmark} and {task}.")
        seen: dict[str, str] = {}
        for b, t in reg.tasks:
            file = registry.run_file(spec["path"], b, t)
            if file in seen:
                raise ConfigError(f"models.{name}.path {spec['path']!r} gives the same file {file!r} for {seen[file]} "
                                  f"and {b}/{t}.", path=config_file,
                                  fix="put {task} (and {benchmark}) in the pattern, one run file per task.")
            seen[file] = f"{b}/{t}"


def _local_tasks(cfg: dict, config_file: str) -> None:
    """A task with ``local:`` alone is the offline copy of an R2MED task: ``source: {hf: R2MED/<Task>}`` with
    ``local``, the task named by ``paper_task`` or by the task's own name."""
    from ..hfdata import R2MED_TASKS

    for bname, bench in cfg["benchmarks"].items():
        for tname, task in bench["tasks"].items():
            if "local" not in task or "source" in task or "path" in task:
                continue
            ptask = task.get("paper_task", tname)
            if ptask not in R2MED_TASKS:
                raise ConfigError(f"benchmarks.{bname}.tasks.{tname}: local alone stands for an R2MED task, and "
                                  f"{tname!r} is not one ({', '.join(R2MED_TASKS)}).", path=config_file,
                                  fix=f"name the task after its R2MED task, add paper_task: <Task>, or use path: "
                                      f"{task['local']} for any other folder in R2MED's layout.")
            task["source"] = {"hf": f"R2MED/{ptask}"}


def _check_sources(cfg: dict, config_file: str) -> None:
    """Tasks downloaded from the Hub: R2MED layout, a known R2MED task, a revision (filled in for R2MED)."""
    from ..errors import InputError
    from ..hfdata import resolve_source

    for bname, bench in cfg["benchmarks"].items():
        for tname, task in bench["tasks"].items():
            if "source" not in task:
                for key in ("local", "sha256"):
                    if key in task:
                        raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.{key} applies only to a task with "
                                          "source.", path=config_file, fix=f"remove {key} or use source instead of path.")
                continue
            where = f"benchmarks.{bname}.tasks.{tname}"
            if bench["layout"] != "r2med":
                raise ConfigError(f"benchmarks.{bname}: tasks with source need layout r2med.", path=config_file,
                                  fix="set layout: r2med for this benchmark.")
            try:
                resolved = resolve_source(task["source"], where)
            except InputError as exc:
                raise ConfigError(exc.problem, path=config_file, fix=exc.fix) from None
            task["source"] = {"hf": resolved["hf"], "revision": resolved["revision"]}
            if resolved["r2med_task"] and task.get("paper_task", resolved["r2med_task"]) != resolved["r2med_task"]:
                raise ConfigError(f"{where}.paper_task is {task['paper_task']!r} but source is {resolved['hf']!r}.",
                                  path=config_file, fix="remove paper_task (the source names the task).")


# ---------------------------------------------------------------- paths on disk


def _exists(path: str, base: Path, kind: str) -> bool:
    p = Path(path).expanduser()
    p = p if p.is_absolute() else base / p
    return p.is_file() if kind == "file" else p.is_dir()


def check_paths(cfg: dict, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """Every task of a benchmark that will run must point at an existing folder."""
    base = base or Path.cwd()
    check_run_files(cfg, config_file, base)
    for bname in registry.Registry(cfg).benchmarks:
        bench = cfg["benchmarks"][bname]
        if bench["layout"] == "cliniq":
            check_cliniq(bench, bname, config_file, base)
            continue
        for tname, task in bench["tasks"].items():
            if "source" in task:
                if task.get("local") and not _exists(task["local"], base, "dir"):
                    raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.local: folder {task['local']!r} does not "
                                      "exist.", path=config_file, fix="point it at a folder holding corpus.jsonl, "
                                      "query.jsonl and qrels.jsonl, or remove it to download from the Hub.")
                continue
            if not _exists(task["path"], base, "dir"):
                raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.path: folder {task['path']!r} does not exist.",
                                  path=config_file, fix="point it at the task's dataset folder.")


def check_run_files(cfg: dict, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """Every selected ``type: run`` model has its run file for every task that will run; every selected
    ``python`` model's factory module is found (without importing it)."""
    from ..factories import module_file, split_factory

    base = base or Path.cwd()
    reg = registry.Registry(cfg)
    for model in reg.encoders():
        spec = reg.models[model]
        if spec["type"] != "python":
            continue
        folder = spec.get("python_path")
        if folder is not None and not _exists(folder, base, "dir"):
            raise ConfigError(f"models.{model}.python_path: folder {folder!r} does not exist.", path=config_file,
                              fix="point it at the folder that holds the factory's module (or package).")
        where = str(base / Path(folder).expanduser()) if folder else None
        if module_file(spec["factory"], where) is None:
            module = split_factory(spec["factory"])[0]
            raise ConfigError(f"models.{model}.factory: module {module!r} is not found"
                              + (f" in {folder!r} nor" if folder else "") + " on the Python path.",
                              path=config_file, fix=f"set models.{model}.python_path to the folder holding "
                                                    f"{module.split('.')[0]}, or install its package.")
    for model in reg.retriever_runs("run"):
        for b, t in reg.tasks:
            file = reg.run_file(model, b, t)
            if not _exists(file, base, "file"):
                raise ConfigError(f"models.{model}: the run file {file!r} of task {b}/{t} does not exist (path "
                                  f"pattern {reg.models[model]['path']!r}).", path=config_file,
                                  fix="write the model's TREC run of this task there, fix models."
                                      f"{model}.path, or leave the task out (benchmarks_to_run).")


def check_cliniq(bench: dict, name: str, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """A cliniq benchmark: one task (its path CliniQ's benchmark/ folder), and an existing NOTEEVENTS file."""
    from ..cliniq_corpus import MIMIC_ACCESS

    base = base or Path.cwd()
    if len(bench["tasks"]) != 1:
        raise ConfigError(f"benchmarks.{name}.tasks: a cliniq benchmark has exactly one task (found "
                          f"{len(bench['tasks'])}).", path=config_file, fix="keep one task, e.g. cliniq.")
    tname, task = next(iter(bench["tasks"].items()))
    if not bench["annotations"]["download"] and not _exists(task["path"], base, "dir"):
        raise ConfigError(f"benchmarks.{name}.tasks.{tname}.path: folder {task['path']!r} does not exist.",
                          path=config_file, fix="point it at CliniQ's benchmark/ folder, or set "
                          f"benchmarks.{name}.annotations: {{download: true}} to fetch it there.")
    notes = bench.get("noteevents")
    if not notes or not _exists(notes, base, "file"):
        raise ConfigError(f"benchmarks.{name}.noteevents: MIMIC-III NOTEEVENTS file {notes!r} not found.",
                          path=config_file, fix=MIMIC_ACCESS)
    if bench["new_judgments"] and not _exists(bench["new_judgments"], base, "file"):
        raise ConfigError(f"benchmarks.{name}.new_judgments: file {bench['new_judgments']!r} not found.",
                          path=config_file, fix="point it at a TSV of query_id, chunk_id, label.")

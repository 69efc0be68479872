"""Validation of the configuration against ``schemas/config.schema.yaml``.

``validate`` checks the schema (one message naming the key), fills every default written in the schema at
every depth (model entries by type, nested ``index`` and ``source`` objects, rerank ``depths``, fusion ``k``,
CliniQ's settings for ``layout: cliniq`` only) and then checks what a schema cannot say: selections name
registry entries, derived runs name configured runs, sources resolve. Defaults live in the schema alone.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from ..bounds import TreeProblem, check_tree, shown
from ..errors import ConfigError, did_you_mean, name_list
from . import registry
from .disk_checks import check_cliniq, check_mteb_models, check_paths, check_run_files  # noqa: F401 (read the disk)
from .schema import (  # noqa: F401 (the config API's names)
    FIX,
    SCHEMA_PATH,
    _load_schema,
    cliniq_default,
    fill_defaults,
    load_schema,
    schema_default,
    schema_errors,
    with_defaults,
)


def check_values(config, config_file: str = "config.yaml") -> None:
    """What must hold before anything walks the configuration (``bounds.check_tree``): at most
    ``bounds.MAX_VALUES`` values once YAML's aliases are expanded, no value containing itself, string keys,
    finite numbers. ConfigError naming the key."""
    try:
        check_tree(config)
    except TreeProblem as exc:
        raise ConfigError(str(exc), path=config_file, fix=exc.fix) from None


def check_file(path) -> None:
    """A YAML configuration file, before Snakemake merges it: Snakemake's merge (``snakemake.utils.update_config``)
    copies every mapping and so expands aliases of mappings; ``check_values`` on the file as YAML loads it (every
    alias one shared object) refuses an alias bomb before that. A file that does not parse is left to Snakemake's
    own message."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        with open(path, "rb") as handle:
            # Snakemake's loader (yte) uses FullLoader; libyaml's parser under the same constructor when present
            data = yaml.load(handle, Loader=getattr(yaml, "CFullLoader", yaml.FullLoader))
    except (yaml.YAMLError, ValueError, RecursionError):
        return
    check_values(data, str(path))


# ---------------------------------------------------------------- validation


def validate(config: dict, config_file: str = "config.yaml", schema: dict | None = None, cache=None,
             code_key: str = "") -> dict:
    """Validate ``config`` and return a copy with every schema default filled in. Raises ConfigError.

    ``cache`` (a ``workflow.cache.PlanningCache``): the schema check and the defaults come from it when this
    configuration was checked before against the same schema with the same code (``code_key``: the package's
    fingerprint, ``CodeIndex.fingerprint()``) and jsonschema; every other check runs on every call."""
    schema = schema or _load_schema(str(SCHEMA_PATH), cache)
    check_values(config, config_file)
    cfg = _against_schema(config, schema, config_file, cache, code_key)
    _local_tasks(cfg, config_file)
    _check_selection(cfg, config_file)
    check_layout_keys(cfg, config_file, schema)
    _check_variants(cfg, config_file)
    _check_derived(cfg, config_file)
    _check_backends(cfg, config_file)
    _check_protocols(cfg, config_file)
    _check_report(cfg, config_file)
    _check_sources(cfg, config_file)
    _check_run_models(cfg, config_file)
    _check_completion(cfg, config_file)
    return cfg


def _jsonschema_stamp() -> str:
    """The installed jsonschema, without importing it: its file's path, size and modification time."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("jsonschema")
    if spec is None or not spec.origin:
        return "jsonschema missing"
    stat = os.stat(spec.origin)
    return f"{spec.origin} {stat.st_size} {stat.st_mtime_ns}"


def _against_schema(config: dict, schema: dict, config_file: str, cache, code_key: str) -> dict:
    """``config`` checked against the schema (ConfigError naming the key) and a deep copy of it with the schema's
    defaults filled: from the planning cache where the same configuration (its keys in the same order), schema,
    code and jsonschema gave it before; only a configuration that passed is stored."""
    import json

    from .cache import key_of, plain

    key = None
    if cache is not None and plain(config):
        if not code_key:
            from .code import CodeIndex

            code_key = CodeIndex().fingerprint()
        key = key_of("config", code_key, json.dumps(schema), _jsonschema_stamp(), json.dumps(config))
        cfg = cache.get("config", key)
        if isinstance(cfg, dict):
            return cfg
    schema_errors(config, schema, config_file)
    cfg = fill_defaults(copy.deepcopy(config), schema, schema)
    if key is not None and plain(cfg):
        cache.put("config", key, cfg)
    return cfg


def _hint(name: str, known) -> str:
    """``; did you mean 'x'?`` for a name that is not in a registry, or ""."""
    hint = did_you_mean(name, known)
    return f"; {hint}" if hint else ""


def _check_selection(cfg: dict, config_file: str) -> None:
    for key, section in (("benchmarks_to_run", "benchmarks"), ("models_to_run", "models")):
        for name in cfg.get(key, []):
            if name not in cfg[section]:
                raise ConfigError(f"{key} names {shown(name)}, which is not in {section}{_hint(name, cfg[section])} "
                                  f"(known: {name_list(sorted(cfg[section]))}).", path=config_file,
                                  fix=f"add {shown(name)} to {section} or remove it from {key}.")


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
            raise ConfigError(f"query_variants[{i}].benchmark names {v['benchmark']!r}, which is not in benchmarks"
                              f"{_hint(v['benchmark'], cfg['benchmarks'])}.",
                              path=config_file, fix="name a configured benchmark.")
        for m in v["models"]:
            if m not in cfg["models"] or cfg["models"][m]["type"] not in registry.VARIANT_TYPES:
                able = [n for n, spec in cfg["models"].items() if spec["type"] in registry.VARIANT_TYPES]
                raise ConfigError(f"query_variants[{i}].models names {m!r}, which is not a retriever in models that "
                                  f"can run a query variant{_hint(m, able)}.", path=config_file,
                                  fix=f"name {', '.join(registry.VARIANT_TYPES)} entries (a type: run model's file "
                                      "holds one run per task).")
    for name, llm in cfg.get("llms", {}).items():
        gen = llm.get("generate")
        if not gen:
            continue
        from ..llm.server import job_owned_args  # here: only a configuration with a served LLM pays for the import

        owned = job_owned_args(gen["vllm"]["args"])
        if owned:
            raise ConfigError(f"llms.{name}.generate.vllm.args sets {', '.join(map(shown, owned))}, which the job sets "
                              "itself: the server it starts listens on 127.0.0.1 only, under a fresh random key and "
                              "the model's name.", path=config_file,
                              fix=f"remove them; choose the port with llms.{name}.generate.vllm.port.")
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
    from ..dense.models import backend_problem

    for name, spec in cfg["models"].items():
        if spec.get("type") == "dense" and spec.get("server"):
            _check_served(name, spec, config_file)
        problem = backend_problem(spec) if spec.get("type") == "dense" else None
        if problem:
            raise ConfigError(f"models.{name}: {problem[0]}.", path=config_file, fix=f"{problem[1]} in models.{name}.")


def _check_served(name: str, spec: dict, config_file: str) -> None:
    """A served dense entry (``server``): what its in-process twin does must be servable, and ``server.vllm.args``
    may not set what the job sets for the server it starts."""
    from ..dense.served import served_problem  # here: only a configuration with a served entry pays for the import
    from ..llm.server import job_owned_args

    problem = served_problem(spec)
    if problem:
        raise ConfigError(f"models.{name}: {problem[0]}.", path=config_file, fix=f"{problem[1]} in models.{name}.")
    owned = job_owned_args(spec["server"]["vllm"]["args"])
    if owned:
        raise ConfigError(f"models.{name}.server.vllm.args sets {', '.join(map(shown, owned))}, which the job sets "
                          "itself: the server it starts listens on 127.0.0.1 only, under a fresh random key and the "
                          "model's name.", path=config_file,
                          fix=f"remove them; choose the port with models.{name}.server.vllm.port.")


def _check_protocols(cfg: dict, config_file: str) -> None:
    """A declared protocol's depth is the entry's top_k; published_as names a known source and one of its rows."""
    from ..benchmarks import protocols

    for name, spec in cfg["models"].items():
        problem = protocols.top_k_problem(spec)
        if not problem and spec.get("published_as"):
            from ..report.r2med_paper import published_problem

            problem = published_problem(spec["published_as"], reranker=spec["type"] == "llm_listwise")
        if problem:
            raise ConfigError(f"models.{name}{problem[0]}.", path=config_file, fix=problem[1].format(name=name))


def _check_derived(cfg: dict, config_file: str) -> None:
    known = set(cfg["models"]) | set(registry.all_variant_names(cfg)) | set(registry.derived_jobs(cfg))
    for i, job in enumerate(cfg["rerank"]):
        if job["run"] not in known:
            raise ConfigError(f"rerank[{i}].run names {shown(job['run'])}, which is not a configured run"
                              f"{_hint(job['run'], known)} (known: {name_list(sorted(known))}).", path=config_file,
                              fix="name a retriever in models or a derived run.")
        model = cfg["models"].get(job["reranker"])
        if model is None or model["type"] not in registry.RERANKER_TYPES:
            able = [n for n, spec in cfg["models"].items() if spec["type"] in registry.RERANKER_TYPES]
            raise ConfigError(f"rerank[{i}].reranker names {shown(job['reranker'])}, which is not a cross_encoder, "
                              f"rankllama, dense, llm_listwise or llm_pointwise entry in models"
                              f"{_hint(job['reranker'], able)}.", path=config_file, fix="add it to models.")
        if model["type"] in registry.LLM_RERANKER_TYPES and "generate" not in cfg["llms"].get(model["llm"], {}):
            raise ConfigError(f"models.{job['reranker']}.llm names {shown(model['llm'])}, which is not an llms entry "
                              "with generate (the server, model and sampling to ask).", path=config_file,
                              fix=f"add llms: {{{model['llm']}: {{generate: {{model: <served name>}}}}}}.")
    for name, model in cfg["models"].items():
        if model["type"] == "llm_listwise" and model["prompt_mode"] != "rankgpt" and "tokenizer" not in model:
            raise ConfigError(f"models.{name}: prompt_mode {model['prompt_mode']} cuts passages in tokens of the "
                              "served model's tokenizer, and the entry names none.", path=config_file,
                              fix=f"add models.{name}.tokenizer: {{hf: <the served model's Hub repo>, revision: "
                                  "<commit>}} (or {path: <a local copy>}).")
        words = [w.lower() for w in model.get("answers") or ()] if model["type"] == "llm_pointwise" else []
        if words and words[0] == words[1]:
            raise ConfigError(f"models.{name}.answers names the same word twice ({', '.join(model['answers'])}): "
                              "every score would be 0.5.", path=config_file,
                              fix='name the positive answer, then the negative one, e.g. ["yes", "no"].')
    for name, spec in cfg["fusion"].items():
        if name in cfg["models"]:
            raise ConfigError(f"fusion.{name}: the name is also a model.", path=config_file, fix="rename it.")
        for run in spec["runs"]:
            if run not in known or run == name:
                raise ConfigError(f"fusion.{name}.runs names {shown(run)}, which is not a configured run"
                                  f"{_hint(run, known - {name})} (known: {name_list(sorted(known - {name}))}).",
                                  path=config_file,
                                  fix="name retrievers in models or derived runs.")
        if "weights" in spec and len(spec["weights"]) != len(spec["runs"]):
            raise ConfigError(f"fusion.{name}.weights has {len(spec['weights'])} values for {len(spec['runs'])} runs.",
                              path=config_file, fix="give one weight per run.")
        _check_ranx_fusion(name, {**spec, "cliniq": [b for b, v in cfg["benchmarks"].items()
                                                     if v.get("layout") == "cliniq"]}, config_file)


def _check_ranx_fusion(name: str, spec: dict, config_file: str) -> None:
    """A fusion entry's method, norm, params and optimize as ranx takes them (``ranx_fusion.check_entry``)."""
    from ..errors import InputError
    from ..scoring import ranx_fusion

    try:
        ranx_fusion.check_entry(spec)
    except InputError as exc:
        raise ConfigError(f"fusion.{name}: {exc.problem}", path=config_file, fix=exc.fix) from None


def metric_name(name, key: str = "leaderboard.metric", config_file: str = "config.yaml") -> str:
    """score_run's name of a metric named as score_run (``ndcg_at_10``), ir_measures (``nDCG@10``, ``R@100``,
    ``AP@100``, ``P@10``, ``RR``) or trec_eval (``ndcg_cut_10``, ``recall_100``, ``recip_rank``) names it: the
    configuration takes the command line's names, and the params hold one spelling, so that a respelling reruns
    nothing. A measure score_run does not compute stops with its names."""
    from ..errors import InputError
    from ..scoring.metrics import measure, metric_names

    names = metric_names()
    if name in names:
        return name
    computed = f"(computed: {', '.join(names)}; or the same measures as nDCG@10, R@100, AP@100, P@10, RR)"
    try:
        wanted = measure(name)
    except InputError:
        raise ConfigError(f"{key} {shown(name)} is not a computed metric{_hint(str(name), names)} {computed}.",
                          path=config_file, fix="name one of the computed metrics.") from None
    def same(m):  # a relevance level not given is the default, 1
        return m.trec, 1 if m.rel is None else m.rel, m.depth

    for ours in names:
        if same(measure(ours)) == same(wanted):
            return ours
    raise ConfigError(f"{key} {shown(name)} is a measure score_run does not compute {computed}.", path=config_file,
                      fix="name one of the computed metrics, or score it with r2med-eval eval (docs/api.md).")


def _check_report(cfg: dict, config_file: str) -> None:
    """The leaderboard metric must be one score_run computes (in its name or in ir_measures' or trec_eval's spelling,
    ``metric_name``); the baseline and the scatter runs must be configured runs (the baseline also selected)."""
    cfg["leaderboard"]["metric"] = metric_name(cfg["leaderboard"]["metric"], "leaderboard.metric", config_file)
    report = cfg["report"]
    configured = set(cfg["models"]) | set(registry.derived_jobs(cfg)) | set(registry.all_variant_names(cfg))
    runs = registry.Registry(cfg).all_runs
    for key, names in (("baseline", [report["baseline"]] if "baseline" in report else []),
                       ("scatter", report.get("scatter", []))):
        for name in names:
            if name not in configured:
                raise ConfigError(f"report.{key} names {shown(name)}, which is not a configured run"
                                  f"{_hint(name, configured)} (runs: {name_list(runs)}).", path=config_file,
                                  fix="name a model, query-variant, rerank or fusion run.")
    if "baseline" in report and report["baseline"] not in runs:
        raise ConfigError(f"report.baseline {shown(report['baseline'])} is configured but not among the runs that "
                          f"will run ({name_list(runs)}).", path=config_file,
                          fix="select it (models_to_run, enabled) or set report.baseline to a selected run, "
                              "e.g. --config 'report={baseline: <run>}'.")


def _check_run_models(cfg: dict, config_file: str) -> None:
    """A ``type: run`` model's path pattern: only {benchmark} and {task}, and one file per selected task; an
    ``mteb`` model knows the MTEB task of every selected task."""
    import re

    from ..benchmarks.r2med import paper_task
    from ..dense.factories import mteb_task_name

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
            raise ConfigError(f"models.{name}.path {shown(spec['path'])} has the placeholder {{{unknown[0]}}}.",
                              path=config_file, fix="use only {benchmark} and {task}.")
        seen: dict[str, str] = {}
        for b, t in reg.tasks:
            file = registry.run_file(spec["path"], b, t)
            if file in seen:
                raise ConfigError(f"models.{name}.path {shown(spec['path'])} gives the same file {shown(file)} for "
                                  f"{seen[file]} "
                                  f"and {b}/{t}.", path=config_file,
                                  fix="put {task} (and {benchmark}) in the pattern, one run file per task.")
            seen[file] = f"{b}/{t}"


def _check_completion(cfg: dict, config_file: str) -> None:
    """cliniq_completion: a cliniq benchmark that runs, an LLM with generate, runs of that benchmark."""
    comp = cfg.get("cliniq_completion")
    if not comp:
        return
    b, key = comp["benchmark"], "cliniq_completion"
    bench = cfg["benchmarks"].get(b)
    if bench is None or bench["layout"] != "cliniq":
        raise ConfigError(f"{key}.benchmark names {b!r}, which is not a cliniq benchmark in benchmarks.",
                          path=config_file, fix="name a benchmark with layout: cliniq.")
    if "completion" in bench["tasks"]:
        raise ConfigError(f"benchmarks.{b}.tasks: a task named 'completion' collides with the judgment completion's "
                          f"folder resources/cliniq/{b}/completion.", path=config_file, fix="rename the task.")
    reg = registry.Registry(cfg)
    if b not in reg.benchmarks:
        raise ConfigError(f"{key}.benchmark {b!r} is not among the benchmarks that run.", path=config_file,
                          fix=f"add it to benchmarks_to_run, or remove {key}.")
    llm = comp["llm"]
    if "generate" not in (cfg.get("llms") or {}).get(llm, {}):
        raise ConfigError(f"{key}.llm names {llm!r}, which is not an llms entry with generate.", path=config_file,
                          fix=f"add llms.{llm}.generate (model, base_url_env, ...), the judge's server and model.")
    labels = comp.get("human_labels")
    if isinstance(labels, str):
        comp["human_labels"] = labels = [labels]
    stems = [Path(f).stem for f in labels or ()]
    if len(set(stems)) < len(stems):
        raise ConfigError(f"{key}.human_labels names two files of the same name ({', '.join(stems)}): the tables "
                          "name each expert by the file's name.", path=config_file,
                          fix="give each expert's file its own name (e.g. expert_a.tsv, expert_b.tsv).")
    runs = reg.runs_of(b)
    for run in comp.get("runs") or ():
        if run not in runs:
            raise ConfigError(f"{key}.runs names {run!r}, which is not a run of benchmark {b} "
                              f"(its runs: {', '.join(runs)}).", path=config_file,
                              fix="name runs that run on that benchmark, or leave runs out (every run).")
    if not runs:
        raise ConfigError(f"{key}: benchmark {b} has no run to pool and re-score.", path=config_file,
                          fix="select a retriever (models_to_run, enabled).")


def _local_tasks(cfg: dict, config_file: str) -> None:
    """A task with ``local:`` alone is the offline copy of an R2MED task: ``source: {hf: R2MED/<Task>}`` with
    ``local``, the task named by ``paper_task`` or by the task's own name."""
    from ..hub.datasets import R2MED_TASKS

    for bname, bench in cfg["benchmarks"].items():
        for tname, task in bench["tasks"].items():
            if "local" not in task or "source" in task or "path" in task:
                continue
            ptask = task.get("paper_task", tname)
            if ptask not in R2MED_TASKS:
                raise ConfigError(f"benchmarks.{bname}.tasks.{tname}: local alone stands for an R2MED task, and "
                                  f"{shown(tname)} is not one ({', '.join(R2MED_TASKS)}).", path=config_file,
                                  fix=f"name the task after its R2MED task, add paper_task: <Task>, or use path: "
                                      f"{task['local']} for any other folder in R2MED's layout.")
            task["source"] = {"hf": f"R2MED/{ptask}"}


def _check_sources(cfg: dict, config_file: str) -> None:
    """Tasks downloaded from the Hub: R2MED layout, a known R2MED task, a revision (filled in for R2MED)."""
    from ..errors import InputError
    from ..hub.datasets import resolve_source

    for bname, bench in cfg["benchmarks"].items():
        for tname, task in bench["tasks"].items():
            if "source" not in task:
                for key in ("local", "sha256"):
                    if key in task:
                        raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.{key} applies only to a task with "
                                          "source.", path=config_file,
                                          fix=f"remove {key} or use source instead of path.")
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
                raise ConfigError(f"{where}.paper_task is {shown(task['paper_task'])} but source is "
                                  f"{shown(resolved['hf'])}.",
                                  path=config_file, fix="remove paper_task (the source names the task).")

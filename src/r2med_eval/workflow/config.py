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
        problem = backend_problem(spec) if spec.get("type") == "dense" else None
        if problem:
            raise ConfigError(f"models.{name}: {problem[0]}.", path=config_file, fix=f"{problem[1]} in models.{name}.")


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


# ---------------------------------------------------------------- paths on disk


def _exists(path: str, base: Path, kind: str) -> bool:
    """Whether the file or folder exists; a path the system cannot even look up (a name too long) does not."""
    try:
        p = Path(path).expanduser()
        p = p if p.is_absolute() else base / p
        return p.is_file() if kind == "file" else p.is_dir()
    except (OSError, ValueError):  # ENAMETOOLONG; a NUL byte in the path
        return False


def check_paths(cfg: dict, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """Every task of a benchmark that will run must point at an existing folder."""
    base = base or Path.cwd()
    check_run_files(cfg, config_file, base)
    _check_prompts(cfg, config_file, base)
    comp = cfg.get("cliniq_completion")
    for key, what in (("human_labels", "a TSV of query_id, chunk_id, label"),
                      ("prompt", "a text file with {QUERY}, {QUERY_TYPE} and {CHUNK}")):
        files = comp[key] if comp and isinstance(comp[key], list) else [comp[key]] if comp and comp[key] else []
        for file in files:
            if key == "human_labels" and comp.get("human_labels_missing") == "report":
                continue  # expected: the verdict says the expert arm was not run on a missing file
            if not _exists(file, base, "file"):
                raise ConfigError(f"cliniq_completion.{key}: file {shown(file)} not found.", path=config_file,
                                  fix=f"point it at {what}, or set it to null" + (
                                      " (or human_labels_missing: report, when the experts' files are to come)"
                                      if key == "human_labels" else "") + ".")
    if comp and comp["coded_from"] == "codes":
        from ..cliniq.codes import table_files

        notes = Path(cfg["benchmarks"][comp["benchmark"]]["noteevents"]).expanduser()
        missing = [name for name, path in table_files(notes if notes.is_absolute() else base / notes).items()
                   if path is None]
        if missing:
            where = notes.parent
            raise ConfigError(f"cliniq_completion.coded_from is codes, but MIMIC-III's {', '.join(missing)} "
                              f"(.csv.gz or .csv) are not beside NOTEEVENTS in {shown(str(where))}.",
                              path=config_file, fix="copy them from your MIMIC-III v1.4 folder there, or set "
                                                    "coded_from: judgments (or auto).")
    for bname in registry.Registry(cfg).benchmarks:
        bench = cfg["benchmarks"][bname]
        if bench["layout"] == "cliniq":
            check_cliniq(bench, bname, config_file, base)
            continue
        for tname, task in bench["tasks"].items():
            if "source" in task:
                if task.get("local") and not _exists(task["local"], base, "dir"):
                    raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.local: folder {shown(task['local'])} does not "
                                      "exist.", path=config_file, fix="point it at a folder holding corpus.jsonl, "
                                      "query.jsonl and qrels.jsonl, or remove it to download from the Hub.")
                continue
            if not _exists(task["path"], base, "dir"):
                raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.path: folder {shown(task['path'])} does not "
                                  "exist.",
                                  path=config_file, fix="point it at the task's dataset folder.")


MTEB_FIXES = {
    "name": "set models.{m}.name to a model in MTEB's registry (mteb.get_model_meta), or use type: dense with "
            "source: {{hf: <repo>}} for a sentence-transformers model MTEB does not list.",
    "revision": "remove models.{m}.revision to use the revision MTEB pins, or set it to that one.",
    "mteb_tasks": "set models.{m}.mteb_tasks to MTEB retrieval task names.",
}


def check_mteb_models(cfg: dict, config_file: str = "config.yaml") -> None:
    """Every selected ``type: mteb`` model's name, revision and MTEB tasks are in MTEB's registry (offline), so
    that a typo stops before any job instead of failing on the Hub after the other jobs. Skipped where Snakemake's
    own environment lacks mteb (the model's jobs check again)."""
    from ..benchmarks.r2med import paper_task
    from ..dense.factories import mteb_problem, mteb_task_name

    reg = registry.Registry(cfg)
    models = [m for m in reg.encoders() if cfg["models"][m]["type"] == "mteb"]
    if not models:
        return
    try:
        import mteb  # noqa: F401
    except ImportError:
        return
    for m in models:
        spec = cfg["models"][m]
        tasks = dict.fromkeys(mteb_task_name(spec, t, paper_task(cfg["benchmarks"][b]["tasks"][t]))
                              for b, t in reg.tasks)
        problem = mteb_problem(spec["name"], spec.get("revision"), [t for t in tasks if t])
        if problem:
            raise ConfigError(f"models.{m}: {problem[0]}.", path=config_file, fix=MTEB_FIXES[problem[1]].format(m=m))


def _check_prompts(cfg: dict, config_file: str, base: Path) -> None:
    """The prompt template of every selected pointwise LLM reranker is readable and has its placeholders."""
    from ..errors import InputError

    reg = registry.Registry(cfg)
    for name in dict.fromkeys(j["reranker"] for j in reg.rerank_jobs.values()):
        prompt = reg.models[name].get("prompt")
        if prompt is None:
            continue
        from ..rerank.pointwise import read_template  # here: only a pointwise LLM reranker pays for the import

        if not _exists(prompt, base, "file"):
            raise ConfigError(f"models.{name}.prompt: file {shown(prompt)} does not exist.", path=config_file,
                              fix="point it at a prompt template (a text file with {query} and {passage}).")
        try:
            read_template(base / Path(prompt).expanduser())
        except InputError as exc:
            raise ConfigError(f"models.{name}.prompt: {exc.problem}", path=config_file, fix=exc.fix) from None


def check_run_files(cfg: dict, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """Every selected ``type: run`` model has its run file for every task that will run; every selected
    ``python`` model's factory module is found (without importing it)."""
    from ..dense.factories import module_file, split_factory

    base = base or Path.cwd()
    reg = registry.Registry(cfg)
    for model in reg.encoders():
        spec = reg.models[model]
        if spec["type"] != "python":
            continue
        folder = spec.get("python_path")
        if folder is not None and not _exists(folder, base, "dir"):
            raise ConfigError(f"models.{model}.python_path: folder {shown(folder)} does not exist.", path=config_file,
                              fix="point it at the folder that holds the factory's module (or package).")
        where = str(base / Path(folder).expanduser()) if folder else None
        if module_file(spec["factory"], where) is None:
            module = split_factory(spec["factory"])[0]
            raise ConfigError(f"models.{model}.factory: module {shown(module)} is not found"
                              + (f" in {shown(folder)} nor" if folder else "") + " on the Python path.",
                              path=config_file, fix=f"set models.{model}.python_path to the folder holding "
                                                    f"{module.split('.')[0]}, or install its package.")
    for model in reg.retriever_runs("run"):
        for b, t in reg.tasks:
            file = reg.run_file(model, b, t)
            if not _exists(file, base, "file"):
                raise ConfigError(f"models.{model}: the run file {shown(file)} of task {b}/{t} does not exist (path "
                                  f"pattern {shown(reg.models[model]['path'])}).", path=config_file,
                                  fix="write the model's TREC run of this task there, fix models."
                                      f"{model}.path, or leave the task out (benchmarks_to_run).")


def check_cliniq(bench: dict, name: str, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """A cliniq benchmark: one task (its path CliniQ's benchmark/ folder), and an existing NOTEEVENTS file."""
    from ..cliniq.corpus import noteevents_problem

    base = base or Path.cwd()
    if len(bench["tasks"]) != 1:
        raise ConfigError(f"benchmarks.{name}.tasks: a cliniq benchmark has exactly one task (found "
                          f"{len(bench['tasks'])}).", path=config_file, fix="keep one task, e.g. cliniq.")
    tname, task = next(iter(bench["tasks"].items()))
    if not bench["annotations"]["download"] and not _exists(task["path"], base, "dir"):
        raise ConfigError(f"benchmarks.{name}.tasks.{tname}.path: folder {shown(task['path'])} does not exist.",
                          path=config_file, fix="point it at CliniQ's benchmark/ folder, or set "
                          f"benchmarks.{name}.annotations: {{download: true}} to fetch it there.")
    problem = noteevents_problem(bench.get("noteevents"), base)
    if problem:
        raise ConfigError(f"benchmarks.{name}.noteevents: {problem[0]}", path=config_file, fix=problem[1])
    if bench["new_judgments"] and not _exists(bench["new_judgments"], base, "file"):
        raise ConfigError(f"benchmarks.{name}.new_judgments: file {shown(bench['new_judgments'])} not found.",
                          path=config_file, fix="point it at a TSV of query_id, chunk_id, label.")

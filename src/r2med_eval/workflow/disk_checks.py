"""The configuration's checks that read the disk: every file and folder a selected run needs exists (tasks, run
files, factories, prompts, tokenizers, MIMIC-III tables, expert files), and MTEB's registry knows the selected MTEB
models. They run on every ``snakemake`` call (``control.Workflow``), after the schema (``config.validate``)."""

from __future__ import annotations

from pathlib import Path

from ..bounds import shown
from ..errors import ConfigError
from . import registry


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
    """The prompt template of every selected pointwise LLM reranker is readable and has its placeholders; the
    tokenizer folder of a selected listwise one in a ReasonRank mode exists."""
    from ..errors import InputError

    reg = registry.Registry(cfg)
    for name in dict.fromkeys(j["reranker"] for j in reg.rerank_jobs.values()):
        folder = (reg.models[name].get("tokenizer") or {}).get("path")
        if folder is not None and not _exists(folder, base, "dir"):
            raise ConfigError(f"models.{name}.tokenizer.path: folder {shown(folder)} does not exist.",
                              path=config_file, fix="point it at a folder holding the served model's tokenizer "
                                                    "(tokenizer.json, tokenizer_config.json), or use tokenizer: "
                                                    "{hf: <repo>, revision: <commit>}.")
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

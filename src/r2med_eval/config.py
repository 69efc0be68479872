"""Validation of config.yaml against ``schemas/config.schema.yaml``, with one message naming the key."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from .errors import ConfigError

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


def load_schema(path=SCHEMA_PATH) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _key_path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _message(error, schema) -> str:
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
    if v == "pattern" or (v == "propertyNames"):
        return f"{where}: name {error.instance!r} must match {error.schema.get('pattern', '')} (letters, digits, '.', '-')."
    return f"{where}: {error.message}."


def validate(config: dict, config_file: str = "config.yaml", schema: dict | None = None) -> dict:
    """Validate ``config`` and return a copy with defaults filled in. Raises ConfigError."""
    import jsonschema

    schema = schema or load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        # prefer the deepest error: it names the key (unknown key, misspelt type)
        deepest = max(errors, key=lambda e: len(list(e.absolute_path)))
        error = deepest if len(list(deepest.absolute_path)) > len(list(best.absolute_path)) else best
        if error.validator == "propertyNames" or (error.absolute_path == best.absolute_path and best.context):
            error = best
        raise ConfigError(_message(error, schema), path=config_file,
                          fix="see schemas/config.schema.yaml and the README's configuration section.")
    cfg = copy.deepcopy(config)
    defs = schema["$defs"]
    for bench in cfg["benchmarks"].values():
        _fill(bench, defs["benchmark"])
    for model in cfg["models"].values():
        _fill(model, defs[model["type"]])
    cfg.setdefault("leaderboard", {})
    _fill(cfg["leaderboard"], schema["properties"]["leaderboard"])
    cfg.setdefault("rerank", [])
    for job in cfg["rerank"]:
        job.setdefault("depths", [10, 100])
    cfg.setdefault("fusion", {})
    for spec in cfg["fusion"].values():
        spec.setdefault("k", 60)
    cfg.setdefault("query_variants", [])
    _check_selection(cfg, config_file)
    check_layout_keys(cfg, config_file)
    _check_variants(cfg, config_file)
    _check_derived(cfg, config_file)
    _check_report(cfg, config_file, schema)
    _check_sources(cfg, config_file)
    return cfg


def variant_name(model: str, method: str, llm: str) -> str:
    return f"{model}+{method}-{llm}"


def variant_runs(cfg: dict, benchmark: str | None = None) -> dict[str, dict]:
    """GAR run name -> {model, method, llm, benchmark} for selected models (and benchmark)."""
    selected = set(selected_models(cfg))
    out = {}
    for v in cfg.get("query_variants", []):
        if benchmark is not None and v["benchmark"] != benchmark:
            continue
        for m in v["models"]:
            if m in selected:
                out[variant_name(m, v["method"], v["llm"])] = {"model": m, "method": v["method"], "llm": v["llm"],
                                                              "benchmark": v["benchmark"]}
    return out


def _check_variants(cfg: dict, config_file: str) -> None:
    for i, v in enumerate(cfg.get("query_variants", [])):
        if v["benchmark"] not in cfg["benchmarks"]:
            raise ConfigError(f"query_variants[{i}].benchmark names {v['benchmark']!r}, which is not in benchmarks.",
                              path=config_file, fix="name a configured benchmark.")
        for m in v["models"]:
            if m not in cfg["models"] or cfg["models"][m]["type"] not in RETRIEVER_TYPES:
                raise ConfigError(f"query_variants[{i}].models names {m!r}, which is not a retriever in models.",
                                  path=config_file, fix="name bm25_lucene or dense entries.")


RETRIEVER_TYPES = ("bm25_lucene", "dense", "bm25_paper")
RERANKER_TYPES = ("cross_encoder", "dense")


def rerank_name(run: str, reranker: str, depth: int) -> str:
    return f"{run}--{reranker}@{depth}"


def derived_runs(cfg: dict, include_skipped: bool = False) -> dict[str, dict]:
    """Every derived run name -> its lineage, in dependency order. Jobs whose input runs are in the
    registry but not selected (``models_to_run``, ``enabled: false``) are skipped; see skipped_derived."""
    out: dict[str, dict] = {}
    for job in cfg.get("rerank", []):
        for depth in job["depths"]:
            out[rerank_name(job["run"], job["reranker"], depth)] = {
                "kind": "rerank", "run": job["run"], "reranker": job["reranker"], "depth": depth}
    for name, spec in cfg.get("fusion", {}).items():
        out[name] = {"kind": "fusion", **spec}
    if include_skipped:
        return out
    return {n: d for n, d in out.items() if n not in skipped_derived(cfg)}


def _inputs(job: dict) -> list[str]:
    return [job["run"]] if job["kind"] == "rerank" else list(job["runs"])


def skipped_derived(cfg: dict) -> list[str]:
    everything = derived_runs(cfg, include_skipped=True)
    available = set(selected_models(cfg)) | set(variant_runs(cfg))
    changed = True
    kept: set = set()
    while changed:
        changed = False
        for name, job in everything.items():
            if name not in kept and all(r in available or r in kept for r in _inputs(job)):
                kept.add(name)
                changed = True
    return [n for n in everything if n not in kept]


def _check_derived(cfg: dict, config_file: str) -> None:
    registry = set(cfg["models"]) | set(variant_runs(cfg))
    derived = derived_runs(cfg, include_skipped=True)
    known = registry | set(derived)
    for i, job in enumerate(cfg.get("rerank", [])):
        if job["run"] not in known:
            raise ConfigError(f"rerank[{i}].run names {job['run']!r}, which is not a configured run "
                              f"(known: {', '.join(sorted(known))}).", path=config_file,
                              fix="name a retriever in models or a derived run.")
        model = cfg["models"].get(job["reranker"])
        if model is None or model["type"] not in RERANKER_TYPES:
            raise ConfigError(f"rerank[{i}].reranker names {job['reranker']!r}, which is not a cross_encoder or "
                              "dense entry in models.", path=config_file, fix="add it to models.")
    for name, spec in cfg.get("fusion", {}).items():
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


def _fill(obj: dict, schema: dict) -> None:
    for key, prop in schema.get("properties", {}).items():
        if "default" in prop and key not in obj:
            obj[key] = copy.deepcopy(prop["default"])


def _check_selection(cfg: dict, config_file: str) -> None:
    for key, registry in (("benchmarks_to_run", "benchmarks"), ("models_to_run", "models")):
        for name in cfg.get(key, []):
            if name not in cfg[registry]:
                raise ConfigError(f"{key} names {name!r}, which is not in {registry} "
                                  f"(known: {', '.join(sorted(cfg[registry]))}).", path=config_file,
                                  fix=f"add {name!r} to {registry} or remove it from {key}.")


def check_paths(cfg: dict, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """Every task of a benchmark that will run must point at an existing folder."""
    base = base or Path.cwd()
    for bname in selected_benchmarks(cfg):
        if cfg["benchmarks"][bname]["layout"] == "cliniq":
            check_cliniq(cfg["benchmarks"][bname], bname, config_file, base)
            continue
        for tname, task in cfg["benchmarks"][bname]["tasks"].items():
            if "source" in task:
                if task.get("local") and not _exists_dir(task["local"], base):
                    raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.local: folder {task['local']!r} does not "
                                      "exist.", path=config_file, fix="point it at a folder holding corpus.jsonl, "
                                      "query.jsonl and qrels.jsonl, or remove it to download from the Hub.")
                continue
            path = Path(task["path"])
            if not (path if path.is_absolute() else base / path).is_dir():
                raise ConfigError(f"benchmarks.{bname}.tasks.{tname}.path: folder {task['path']!r} does not exist.",
                                  path=config_file, fix="point it at the task's dataset folder.")


def selected_benchmarks(cfg: dict) -> list[str]:
    return list(cfg.get("benchmarks_to_run") or cfg["benchmarks"])


def selected_models(cfg: dict) -> list[str]:
    """First-stage retrievers that run (rerankers only run through ``rerank``)."""
    names = cfg.get("models_to_run") or [m for m, spec in cfg["models"].items() if spec.get("enabled", True)]
    return [m for m in names if cfg["models"][m]["type"] in RETRIEVER_TYPES]


def all_runs(cfg: dict) -> list[str]:
    return selected_models(cfg) + list(variant_runs(cfg)) + list(derived_runs(cfg))


def runs_for_benchmark(cfg: dict, benchmark: str) -> list[str]:
    """Runs that exist for one benchmark (GAR runs only where their variant files are configured);
    derived runs only where all their inputs exist."""
    base = set(selected_models(cfg)) | set(variant_runs(cfg, benchmark))
    kept = []
    for name, job in derived_runs(cfg).items():
        if all(r in base for r in _inputs(job)):
            base.add(name)
            kept.append(name)
    return selected_models(cfg) + list(variant_runs(cfg, benchmark)) + kept


def _check_report(cfg: dict, config_file: str, schema: dict) -> None:
    """The report section: defaults filled; the leaderboard metric must be one score_run computes; the
    baseline and the scatter runs must be configured runs (the baseline also selected)."""
    from .metrics import metric_names

    metric = cfg["leaderboard"]["metric"]
    if metric not in metric_names():
        raise ConfigError(f"leaderboard.metric {metric!r} is not a computed metric "
                          f"(computed: {', '.join(metric_names())}).", path=config_file,
                          fix="name one of the computed metrics.")
    cfg.setdefault("report", {})
    _fill(cfg["report"], schema["properties"]["report"])
    report = cfg["report"]
    registry = set(cfg["models"]) | set(derived_runs(cfg, include_skipped=True)) | {
        variant_name(m, v["method"], v["llm"]) for v in cfg.get("query_variants", []) for m in v["models"]}
    runs = all_runs(cfg)
    for key, names in (("baseline", [report["baseline"]] if "baseline" in report else []),
                       ("scatter", report.get("scatter", []))):
        for name in names:
            if name not in registry:
                raise ConfigError(f"report.{key} names {name!r}, which is not a configured run "
                                  f"(runs: {', '.join(runs)}).", path=config_file,
                                  fix="name a model, query-variant, rerank or fusion run.")
    if "baseline" in report and report["baseline"] not in runs:
        raise ConfigError(f"report.baseline {report['baseline']!r} is configured but not among the runs that "
                          f"will run ({', '.join(runs)}).", path=config_file,
                          fix="select it (models_to_run, enabled) or set report.baseline to a selected run, "
                              "e.g. --config 'report={baseline: <run>}'.")


def report_baseline(cfg: dict) -> str | None:
    """The configured baseline, else the first selected run."""
    runs = all_runs(cfg)
    return cfg.get("report", {}).get("baseline") or (runs[0] if runs else None)


def report_scatter(cfg: dict) -> list[str]:
    """The two runs of the per-query scatter (configured, else the first two runs); [] when either is not
    selected."""
    runs = all_runs(cfg)
    pair = cfg.get("report", {}).get("scatter") or runs[:2]
    return list(pair) if len(pair) == 2 and all(r in runs for r in pair) else []
CLINIQ_KEYS = ("noteevents", "annotations", "expected_chunks", "allow_missing_notes", "missing_chunk_qrels_max",
               "new_judgments", "pool_depth")


def cliniq_settings(bench: dict) -> dict:
    """A cliniq benchmark's settings with their defaults (kept out of the schema's defaults so that
    other layouts' parameters do not change)."""
    from .cliniq_corpus import EXPECTED_CHUNKS, GITHUB_RAW, PINNED_COMMIT

    ann = bench.get("annotations", {})
    return {"download": bool(ann.get("download", False)), "commit": ann.get("commit", PINNED_COMMIT),
            "base_url": ann.get("base_url", GITHUB_RAW), "sha256": dict(ann.get("sha256", {})),
            "expected_chunks": bench.get("expected_chunks", EXPECTED_CHUNKS),
            "allow_missing_notes": bool(bench.get("allow_missing_notes", False)),
            "missing_chunk_qrels_max": float(bench.get("missing_chunk_qrels_max", 0.001)),
            "new_judgments": bench.get("new_judgments", ""), "pool_depth": int(bench.get("pool_depth", 10))}


def check_cliniq(bench: dict, name: str, config_file: str = "config.yaml", base: Path | None = None) -> None:
    """A cliniq benchmark: one task (its path CliniQ's benchmark/ folder), and an existing NOTEEVENTS file."""
    from .cliniq_corpus import MIMIC_ACCESS

    base = base or Path.cwd()

    def exists(p, kind):
        p = Path(p)
        p = p if p.is_absolute() else base / p
        return p.is_file() if kind == "file" else p.is_dir()

    if len(bench["tasks"]) != 1:
        raise ConfigError(f"benchmarks.{name}.tasks: a cliniq benchmark has exactly one task (found "
                          f"{len(bench['tasks'])}).", path=config_file, fix="keep one task, e.g. cliniq.")
    settings = cliniq_settings(bench)
    tname, task = next(iter(bench["tasks"].items()))
    if not settings["download"] and not exists(task["path"], "dir"):
        raise ConfigError(f"benchmarks.{name}.tasks.{tname}.path: folder {task['path']!r} does not exist.",
                          path=config_file, fix="point it at CliniQ's benchmark/ folder, or set "
                          f"benchmarks.{name}.annotations: {{download: true}} to fetch it there.")
    notes = bench.get("noteevents")
    if not notes or not exists(notes, "file"):
        raise ConfigError(f"benchmarks.{name}.noteevents: MIMIC-III NOTEEVENTS file {notes!r} not found.",
                          path=config_file, fix=MIMIC_ACCESS)
    if settings["new_judgments"] and not exists(settings["new_judgments"], "file"):
        raise ConfigError(f"benchmarks.{name}.new_judgments: file {settings['new_judgments']!r} not found.",
                          path=config_file, fix="point it at a TSV of query_id, chunk_id, label.")


def check_layout_keys(cfg: dict, config_file: str = "config.yaml") -> None:
    for bname, bench in cfg["benchmarks"].items():
        extra = [k for k in CLINIQ_KEYS if k in bench]
        if bench["layout"] != "cliniq" and extra:
            raise ConfigError(f"benchmarks.{bname}.{extra[0]}: only a cliniq benchmark takes this key.",
                              path=config_file, fix="remove it or set layout: cliniq.")


def _exists_dir(path: str, base: Path) -> bool:
    p = Path(path)
    return (p if p.is_absolute() else base / p).is_dir()


def _check_sources(cfg: dict, config_file: str) -> None:
    """Tasks downloaded from the Hub: R2MED layout, a known R2MED task, a revision (filled in for R2MED)."""
    from .errors import InputError
    from .hfdata import resolve_source

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

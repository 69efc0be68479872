"""What earlier runs left in the working directory, for the report (docs/report.md#what-the-report-shows): the
report is the union of what is scored, each benchmark from its last complete scoring. A benchmark with collected
metrics on disk that this configuration does not select is shown as the run that scored it left it, and so is a
selected benchmark that this configuration scores only in part (``models_to_run``) when a complete scoring of it
lies here (``kept``); report files nothing shows are listed; runs of a selected task that this configuration does
not select are named. Read when the workflow is planned: no rule of this run writes these files, so Snakemake takes
them as given."""

from __future__ import annotations

from pathlib import Path

from .paths import INDEX_PAGE, METRICS, METRICS_SELECTION, METRICS_TABLE, fill

REPORT_EXTENSIONS = (".md", ".csv", ".html", ".tex", ".png", ".svg", ".tsv", ".json")


def benchmarks(reg) -> list[str]:
    """Benchmarks with collected metrics here (``results/metrics/<benchmark>.jsonl``) that ``reg`` does not select."""
    root = Path(METRICS_TABLE).parent
    if not root.is_dir():
        return []
    names = (p.name[:-len(".jsonl")] for p in root.glob("*.jsonl") if p.is_file() and not p.name.startswith("."))
    return sorted(b for b in names if b not in reg.benchmarks)


def selection(benchmark: str) -> dict | None:
    """What the scoring whose collected metrics lie here selected (``results/metrics/<benchmark>.selection.json``,
    rule collect_metrics: complete or not, its runs); None where there is none (or an older version wrote them)."""
    import json

    try:
        with open(fill(METRICS_SELECTION, benchmark=benchmark), encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def kept(reg) -> list[str]:
    """Selected benchmarks whose selection is not complete (``models_to_run`` leaves some of their runs out) while
    a complete scoring of them lies here: the report keeps that scoring (its columns, marks, tables and plots) rather
    than show a part of the benchmark; this run still scores the runs it selects."""
    return [b for b in reg.benchmarks if not reg.complete(b) and Path(fill(METRICS_TABLE, benchmark=b)).is_file()
            and (selection(b) or {}).get("complete") is True]


def shown(reg) -> list[str]:
    """The benchmarks the report shows as an earlier scoring left them: those not selected (``benchmarks``) and
    those ``kept``."""
    return sorted(set(benchmarks(reg)) | set(kept(reg)))


def reported(reg) -> list[str]:
    """The selected benchmarks whose report this run writes: all of them but the ``kept``."""
    keep = set(kept(reg))
    return [b for b in reg.benchmarks if b not in keep]


def files(reg) -> list[str]:
    """Every report file of the benchmarks shown as an earlier scoring left them: their leaderboards, tables, plots and
    CliniQ tables (the index shows them in sections of their own)."""
    earlier = set(shown(reg))
    return [f for f in report_files() if benchmark_of(f) in earlier]


def stale(reg, targets) -> list[str]:
    """Report files that this run neither writes (``targets``) nor shows as an earlier benchmark's: a plot that no
    longer applies, a table of a benchmark without collected metrics. The index lists them."""
    keep = set(targets) | set(files(reg))
    return [f for f in report_files() if f not in keep]


def unselected_runs(reg) -> dict[str, list[str]]:
    """{benchmark/task: [run...]}: runs with a metrics file on a selected task that ``reg`` does not select (the
    leaderboard names them as not shown)."""
    out = {}
    report = set(reported(reg))
    for b, t in reg.tasks:
        if b not in report:  # a kept benchmark shows its complete scoring's runs
            continue
        folder = Path(fill(METRICS, benchmark=b, task=t, model="x")).parent
        if not folder.is_dir():
            continue
        runs = set(reg.runs_of(b))
        names = sorted(p.name[:-len(".json")] for p in folder.glob("*.json") if not p.name.startswith("."))
        gone = [n for n in names if n not in runs]
        if gone:
            out[f"{b}/{t}"] = gone
    return out


def report_files() -> list[str]:
    """The report files here: per-benchmark leaderboards, LaTeX tables, plots, CliniQ's tables, pool and judgment
    completion (the files a benchmark's report is made of)."""
    root = Path(INDEX_PAGE).parent
    found = []
    for pattern in ("leaderboards/*", "tables/*.tex", "plots/*/*", "cliniq/*/by_*", "cliniq/*/pool.tsv",
                    "cliniq/*/completion/*"):
        found += [p for p in root.glob(pattern) if p.is_file() and not p.name.startswith(".")
                  and p.suffix in REPORT_EXTENSIONS]
    return sorted(str(p) for p in found)


def benchmark_of(path: str) -> str | None:
    """The benchmark a report file belongs to (None for the combined tables)."""
    parts = Path(path).parts
    if len(parts) >= 3 and parts[1] in ("plots", "cliniq"):
        return parts[2]
    if len(parts) == 3 and parts[1] == "leaderboards":
        return Path(parts[2]).stem
    if len(parts) == 3 and parts[1] == "tables":
        name = Path(parts[2]).stem
        for prefix, suffixes in (("leaderboard-", ("",)), ("cliniq-", ("-by_match_type", "-by_query_type"))):
            for suffix in suffixes:
                if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
                    return name[len(prefix):len(name) - len(suffix)] if suffix else name[len(prefix):]
    return None


def existing(paths) -> list[str]:
    return [p for p in paths if Path(p).is_file()]

"""What earlier runs left in the working directory, for the report (docs/report.md#what-the-report-shows): the
report is the union of what is scored. A benchmark with collected metrics on disk that this configuration does not
select is shown as the run that scored it left it; report files nothing shows are listed; runs of a selected task
that this configuration does not select are named. Read when the workflow is planned: no rule of this run writes
these files, so Snakemake takes them as given."""

from __future__ import annotations

from pathlib import Path

from .paths import INDEX_PAGE, METRICS, METRICS_TABLE, fill

REPORT_EXTENSIONS = (".md", ".csv", ".html", ".tex", ".png", ".svg", ".tsv", ".json")


def benchmarks(reg) -> list[str]:
    """Benchmarks with collected metrics here (``results/metrics/<benchmark>.jsonl``) that ``reg`` does not select."""
    root = Path(METRICS_TABLE).parent
    if not root.is_dir():
        return []
    names = (p.name[:-len(".jsonl")] for p in root.glob("*.jsonl") if p.is_file() and not p.name.startswith("."))
    return sorted(b for b in names if b not in reg.benchmarks)


def files(reg) -> list[str]:
    """Every report file of the earlier benchmarks: their leaderboards, tables, plots and CliniQ tables (the index
    shows them in sections of their own)."""
    earlier = set(benchmarks(reg))
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
    for b, t in reg.tasks:
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

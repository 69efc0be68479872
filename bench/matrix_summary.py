"""Summary of a finished Snakemake run from its own records: wall and CPU, per-rule cost, planning and job start-up,
the report rules, disk per stage.

    python bench/matrix_summary.py --workdir /work/scratch/r2med-full/run [--timing run.json] [--markdown out.md]

Reads, in Snakemake's working directory ``--workdir``:

* ``benchmarks/<rule>/**.tsv`` (every rule's ``benchmark:`` file: wall ``s``, ``cpu_time``, ``max_rss``);
* the newest ``.snakemake/log/*.snakemake.log`` (or ``--log``, repeated for a run resumed over several
  invocations, or ``--all-logs``: every invocation of the working directory that started a job): the time each
  job started and finished (``[date]`` lines, one-second resolution);
* ``--timing``: the JSON that ``bench/full_matrix.py run`` writes (the invocation's wall, user + system CPU of
  Snakemake and every job, its start); without it the wall is taken from the log (its name's start time to its
  last line).

Reports:

* total wall and CPU; the sum of the jobs' own wall (benchmark ``s``) against ``cores x wall``; over several
  invocations the wall is the sum of theirs (each from its log's start to its last line; the time between them is
  not the run's), and each invocation is listed;
* planning: from the start of the invocation to the first job's start (Snakemake's parse and DAG), summed over the
  invocations;
* scheduling and job start: per job, the span Snakemake logged minus the job's own benchmark wall (process spawn,
  output checks, benchmark and metadata writes), summed; the time before each job's stage function (its wall
  minus the ``done in`` its log ends with: the interpreter, Snakemake's script wrapper, the imports at module
  level); with ``--startup-from`` (the working directory of the same matrix on tiny data, ``bench/full_matrix.py
  run --kind rehearsal``), each rule's fixed cost (its median job wall there: imports, model loading, almost no
  work) times its jobs here;
* per rule: jobs, summed wall and CPU, the largest peak RSS; the top ``--top`` by summed wall;
* the report rules (leaderboards, plots, significance, provenance, index page, ...), each job;
* disk per stage: ``results/<folder>``, ``resources/``, ``logs/``, ``benchmarks/``, ``.snakemake/`` (apparent size
  of the files, symlinks not followed).

Prints Markdown (and writes it to ``--markdown``); ``--json`` writes every figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

REPORT_RULES = ("collect_metrics", "leaderboard", "leaderboard_benchmark", "significance", "plot_leaderboard",
                "plot_rerank_depth", "plot_scatter", "plot_cliniq", "report_cliniq", "provenance", "r2med_vs_paper",
                "mteb_export", "report_index")
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")
RULE = re.compile(r"^(?:local)?rule (\w+):$")
BENCH = re.compile(r"^\s+benchmark: (\S+)$")
THREADS = re.compile(r"^\s+threads: (\d+)$")


def read_benchmarks(workdir: Path) -> list[dict]:
    """One row per benchmark file: rule, file, s, cpu_time, max_rss (MB)."""
    rows = []
    for path in sorted((workdir / "benchmarks").rglob("*.tsv")):
        rule = path.relative_to(workdir / "benchmarks").parts[0]
        with open(path, newline="") as handle:
            records = list(csv.DictReader(handle, delimiter="\t"))
        if not records:
            continue
        last = records[-1]

        def num(key):
            try:
                return float(last.get(key) or "nan")
            except ValueError:
                return float("nan")

        rows.append({"rule": rule, "file": str(path.relative_to(workdir)), "s": num("s"), "cpu": num("cpu_time"),
                     "rss": num("max_rss")})
    return rows


DONE = re.compile(r" r2med_eval: done in ([0-9.]+) s$")


def stage_seconds(workdir: Path, bench_file: str) -> float | None:
    """The time the job's stage function took (its log's last ``done in`` line, r2med_eval.smk.run); the log
    mirrors the benchmark file's path under logs/."""
    log = workdir / "logs" / Path(bench_file).relative_to("benchmarks").with_suffix(".log")
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        m = DONE.search(line)
        if m:
            return float(m.group(1))
    return None


def parse_log(path: Path) -> dict:
    """Start and end of every job (epoch seconds) with its rule, the first and last stamp, and the threads of each
    job by its benchmark file."""
    stamp = None
    started: dict[str, tuple[float, str]] = {}
    spans: list[dict] = []
    threads: dict[str, int] = {}  # benchmark file -> the job's threads
    first = last = None
    rule = bench = None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.rstrip("\n")
            m = STAMP.match(line)
            if m:
                stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
                first = stamp if first is None else first
                last = stamp
                continue
            m = RULE.match(line)
            if m:
                rule, bench = m.group(1), None
                continue
            m = BENCH.match(line)
            if m:
                bench = m.group(1)
                continue
            m = THREADS.match(line)
            if m and bench:
                threads[bench] = int(m.group(1))
                continue
            m = JOBID.match(line)
            if m and rule and stamp is not None:
                started.setdefault(m.group(1), (stamp, rule))
                continue
            m = FINISHED.match(line)
            if m and m.group(1) in started and stamp is not None:
                t0, r = started.pop(m.group(1))
                spans.append({"rule": r, "start": t0, "end": stamp})
    return {"first": first, "last": last, "spans": spans, "threads": threads,
            "started": len(spans) + len(started)}


def log_start(path: Path) -> float | None:
    """The start time in a Snakemake log's name (``2026-12-03T201334.479515.snakemake.log``)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d{6}\.\d+)", path.name)
    return datetime.strptime(m.group(1), "%Y-%m-%dT%H%M%S.%f").timestamp() if m else None


def invocation_logs(workdir: Path) -> list[Path]:
    """The logs of every invocation in ``workdir`` that started at least one job, oldest first (``--unlock``, a
    dry run or a refused start are not the run's)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    return [p for p in logs if parse_log(p)["started"]]


def invocations(logs: list[Path]) -> list[dict]:
    """Each log's invocation: its start (the log's name, else its first stamp), end (its last stamp), wall, planning
    (start to its first job) and its jobs started and finished, with the spans and threads of its jobs."""
    out = []
    for path in logs:
        parsed = parse_log(path)
        if parsed["last"] is None:
            continue
        start = log_start(path) or parsed["first"]
        first_job = min((s["start"] for s in parsed["spans"]), default=None)
        out.append({"log": str(path), "start": start, "end": parsed["last"], "wall_s": parsed["last"] - start,
                    "planning_s": None if first_job is None else first_job - start,
                    "jobs_started": parsed["started"], "jobs_finished": len(parsed["spans"]),
                    "spans": parsed["spans"], "threads": parsed["threads"]})
    return out


def disk_usage(workdir: Path) -> dict[str, int]:
    def size(folder: Path) -> int:
        total = 0
        for root, _dirs, files in os.walk(folder):
            for name in files:
                p = Path(root) / name
                if not p.is_symlink():
                    total += p.stat().st_size
        return total

    out = {}
    results = workdir / "results"
    if results.is_dir():
        for child in sorted(results.iterdir()):
            out[f"results/{child.name}"] = size(child) if child.is_dir() else child.stat().st_size
    for name in ("resources", "logs", "benchmarks", ".snakemake"):
        if (workdir / name).is_dir():
            out[name] = size(workdir / name)
    return out


def summarise(workdir: Path, logs: list[Path] | None, timing: dict | None, cores: int, top: int,
              startup_from: Path | None = None) -> dict:
    rows = read_benchmarks(workdir)
    if not rows:
        raise SystemExit(f"no benchmark files under {workdir / 'benchmarks'}")
    by_rule: dict[str, dict] = {}
    for r in rows:
        agg = by_rule.setdefault(r["rule"], {"rule": r["rule"], "jobs": 0, "wall": 0.0, "cpu": 0.0, "max_rss": 0.0,
                                             "max_wall": 0.0})
        agg["jobs"] += 1
        agg["wall"] += r["s"]
        agg["cpu"] += r["cpu"] if r["cpu"] == r["cpu"] else 0.0
        agg["max_rss"] = max(agg["max_rss"], r["rss"] if r["rss"] == r["rss"] else 0.0)
        agg["max_wall"] = max(agg["max_wall"], r["s"])
    job_wall = sum(r["s"] for r in rows)
    job_cpu = sum(r["cpu"] for r in rows if r["cpu"] == r["cpu"])
    out: dict = {"workdir": str(workdir), "jobs": len(rows), "cores": cores, "job_wall_s": round(job_wall, 1),
                 "job_cpu_s": round(job_cpu, 1)}

    if not logs:
        newest = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
        logs = newest[-1:]
    if timing and len(logs) > 1:
        raise SystemExit("--timing describes one invocation: give it with one --log")
    runs = invocations(logs)
    spans = [s for inv in runs for s in inv["spans"]]
    threads = {k: v for inv in runs for k, v in inv["threads"].items()}
    if timing:
        wall = timing["wall_s"]
        out["cpu_s"] = round(timing["cpu_s"], 1)
        if runs:
            runs[0]["wall_s"] = wall
            first_job = min((s["start"] for s in runs[0]["spans"]), default=None)
            runs[0]["planning_s"] = None if first_job is None else first_job - timing["start"]
    elif runs:
        wall = sum(inv["wall_s"] for inv in runs)
    else:
        raise SystemExit("no timing file and no Snakemake log: cannot tell the wall time")
    out["wall_s"] = round(wall, 1)
    out["occupancy"] = round(job_wall / (cores * wall), 3) if wall else None
    if threads:  # a job holds min(threads, cores) cores for its wall
        held = sum(r["s"] * min(cores, threads.get(r["file"], 1)) for r in rows)
        out["core_occupancy"] = round(held / (cores * wall), 3) if wall else None
    out["invocations"] = [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in inv.items()
                           if k not in ("spans", "threads")} for inv in runs]
    if spans:
        out["log"] = [inv["log"] for inv in runs]
        out["planning_s"] = round(sum(inv["planning_s"] or 0.0 for inv in runs), 1)
        logged = sum(s["end"] - s["start"] for s in spans)
        out["logged_job_span_s"] = round(logged, 1)
        out["scheduling_overhead_s"] = round(logged - job_wall, 1)
    outside = [(r, r["s"] - t) for r in rows if (t := stage_seconds(workdir, r["file"])) is not None]
    if outside:  # interpreter start, Snakemake's script wrapper, module-level imports: before the stage function
        out["outside_stage_s"] = round(sum(max(0.0, o) for _, o in outside), 1)
        out["outside_stage_jobs"] = len(outside)
        out["outside_stage_median_s"] = round(statistics.median(o for _, o in outside), 2)
    if startup_from:
        # each rule's start-up: the median wall of its jobs in a rehearsal on tiny data (work close to nothing)
        tiny: dict[str, list] = {}
        for r in read_benchmarks(startup_from):
            tiny.setdefault(r["rule"], []).append(r["s"])
        per_rule = {rule: statistics.median(v) for rule, v in tiny.items()}
        total = sum(per_rule.get(a["rule"], 0.0) * a["jobs"] for a in by_rule.values())
        out["startup_by_rule_s"] = {k: round(v, 2) for k, v in sorted(per_rule.items())}
        out["startup_estimate_s"] = round(total, 1)
        out["startup_estimate_share_of_job_wall"] = round(total / job_wall, 3) if job_wall else None
    ranked = sorted(by_rule.values(), key=lambda a: -a["wall"])
    out["rules"] = [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in a.items()} for a in ranked]
    out["top"] = out["rules"][:top]
    out["report"] = [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}
                     for r in rows if r["rule"] in REPORT_RULES]
    out["disk_bytes"] = disk_usage(workdir)
    return out


def hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def markdown(s: dict) -> str:
    lines = ["| what | value |", "|---|---:|",
             f"| jobs (benchmark files) | {s['jobs']:,} |",
             f"| wall | {hms(s['wall_s'])} ({s['wall_s']:,.0f} s) |"]
    if "cpu_s" in s:
        lines.append(f"| CPU, Snakemake and every job (user + system) | {hms(s['cpu_s'])} ({s['cpu_s']:,.0f} s) |")
    lines += [f"| jobs' own wall, summed (benchmark `s`) | {hms(s['job_wall_s'])} |",
              f"| jobs' own CPU, summed (benchmark `cpu_time`) | {hms(s['job_cpu_s'])} |",
              f"| occupancy: jobs' own wall / ({s['cores']} cores x wall) | {s['occupancy']:.0%} |"]
    if "core_occupancy" in s:
        lines.append(f"| cores held by jobs: jobs' own wall x their threads / ({s['cores']} cores x wall) | "
                     f"{s['core_occupancy']:.0%} |")
    if len(s.get("invocations", [])) > 1:
        lines.append(f"| invocations (the run resumed with `--rerun-incomplete`; walls summed) | "
                     f"{len(s['invocations'])} |")
    if "planning_s" in s:
        summed = ", summed over the invocations" if len(s["invocations"]) > 1 else ""
        lines += [f"| planning (start to the first job{summed}) | {s['planning_s']:,.0f} s |",
                  f"| scheduling and job start outside the jobs (logged span - own wall, summed) | "
                  f"{s['scheduling_overhead_s']:,.0f} s |"]
    if "outside_stage_s" in s:
        lines.append(f"| before each job's stage function (interpreter, Snakemake's script wrapper, imports at module "
                     f"level: wall - the log's `done in`), {s['outside_stage_jobs']:,} jobs | "
                     f"{s['outside_stage_s']:,.0f} s (median {s['outside_stage_median_s']:.2f} s a job) |")
    if "startup_estimate_s" in s:
        lines += [f"| start-up inside the jobs, per rule (median wall of its jobs in a rehearsal on tiny data, x its "
                  f"jobs here) | {s['startup_estimate_s']:,.0f} s ({s['startup_estimate_share_of_job_wall']:.0%} of "
                  "the jobs' own wall) |"]
    if len(s.get("invocations", [])) > 1:
        lines += ["", "Invocations:", "", "| log | wall | planning | jobs started | jobs finished |",
                  "|---|---:|---:|---:|---:|"]
        for inv in s["invocations"]:
            plan = "-" if inv["planning_s"] is None else f"{inv['planning_s']:,.0f} s"
            lines.append(f"| `{Path(inv['log']).name}` | {hms(inv['wall_s'])} | {plan} | {inv['jobs_started']:,} | "
                         f"{inv['jobs_finished']:,} |")
    lines += ["", "Slowest rules (summed wall):", "",
              "| rule | jobs | wall, summed | CPU, summed | longest job | peak RSS |", "|---|---:|---:|---:|---:|---:|"]
    for a in s["top"]:
        lines.append(f"| `{a['rule']}` | {a['jobs']:,} | {hms(a['wall'])} | {hms(a['cpu'])} | {a['max_wall']:,.0f} s "
                     f"| {a['max_rss'] / 1024:.2f} GB |")
    lines += ["", "Report rules:", "", "| job | wall | CPU | peak RSS |", "|---|---:|---:|---:|"]
    for r in s["report"]:
        lines.append(f"| `{r['file'].removeprefix('benchmarks/').removesuffix('.tsv')}` | {r['s']:.1f} s | "
                     f"{r['cpu']:.1f} s | {r['rss']:.0f} MB |")
    lines += ["", "Disk:", "", "| folder | size |", "|---|---:|"]
    for k, v in s["disk_bytes"].items():
        lines.append(f"| `{k}` | {gb(v)} |")
    lines.append(f"| total | {gb(sum(s['disk_bytes'].values()))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True, help="Snakemake's working directory of the run")
    parser.add_argument("--log", type=Path, action="append",
                        help="the Snakemake log of the run (default: the newest in .snakemake/log); repeat it for a "
                             "run resumed over several invocations")
    parser.add_argument("--all-logs", action="store_true",
                        help="every invocation in the working directory that started a job (a resumed run)")
    parser.add_argument("--timing", type=Path, help="the JSON bench/full_matrix.py run wrote (wall, CPU, start)")
    parser.add_argument("--cores", type=int, default=2, help="the run's --cores (default 2)")
    parser.add_argument("--top", type=int, default=10, help="rules listed by summed wall (default 10)")
    parser.add_argument("--startup-from", type=Path,
                        help="working directory of the same matrix run on tiny data: each rule's median job wall there "
                             "is taken as its start-up (interpreter, imports, model load)")
    parser.add_argument("--markdown", type=Path, help="also write the Markdown here")
    parser.add_argument("--json", type=Path, help="write every figure as JSON here")
    args = parser.parse_args(argv)
    timing = json.loads(args.timing.read_text()) if args.timing else None
    workdir = args.workdir.resolve()
    logs = invocation_logs(workdir) if args.all_logs else args.log
    s = summarise(workdir, logs, timing, args.cores, args.top, args.startup_from)
    text = markdown(s)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

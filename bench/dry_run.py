"""Benchmark: wall time of the dry run of the full R2MED matrix, an anchor commit against this checkout.

    python bench/dry_run.py --anchor db73a08 [--repeats 5]

The matrix (about 2,200 planned jobs at db73a08) is the repository's own configuration files, given in this
order to both sides: ``config.yaml``, ``config/r2med.yaml`` (the eight R2MED tasks from the Hugging Face Hub,
plus the demo; a dry run only plans the download jobs, it needs no network), ``config/r2med_models.yaml``,
``config/rerankers.yaml``, and last a generated file (MATRIX below, written into a temporary folder) that
selects:

* every retriever: the 13 of config/r2med_models.yaml (all ``enabled: false``), bm25 and bm25-paper, and the
  three cross-encoders of config/rerankers.yaml (listed too: in later checkouts a rerank job runs only when
  its reranker is selected);
* benchmarks_to_run [demo, r2med], as config/r2med.yaml sets it;
* rerank: each of the three cross-encoders at depths 10 and 100 over bm25, bge-large-en-v1.5 and
  nv-embed-v2 (18 rerank runs);
* query_variants: R2MED's 15 published generation-augmented (method, llm) pairs (hyde with 9 LLMs,
  query2doc and lamer with 3 each; data/reference/r2med_paper_ndcg10.tsv) on the r2med benchmark, for the
  three retrievers R2MED publishes them for: bm25, bge-large-en-v1.5 and nv-embed-v2 (45 GAR runs).

At db73a08 this plans 2,182 jobs (``--print-config`` prints the generated file).

What it does: ``git worktree add --detach`` of the anchor into a temporary folder (removed at the end, as is
everything else this script writes), then in one process, for each repeat, a dry run of the anchor followed
by one of the current checkout (the repository this script lives in, or ``--current``):

    <this python> -m snakemake -n --cores 8 all -d <fresh dir> -s <checkout>/Snakefile --quiet rules reason \
        --configfile <checkout>/config.yaml <checkout>/config/r2med.yaml <checkout>/config/r2med_models.yaml \
        <checkout>/config/rerankers.yaml <tmp>/matrix.yaml

Every dry run gets a FRESH, empty working directory (no ``.snakemake`` metadata, locks or IO cache from an
earlier run), holding only a symlink ``data`` -> ``<checkout>/data``, so the relative paths of the configs
(data/demo, data/cliniq-demo) resolve to that side's own files; rule and reference paths are relative to the
Snakefile. One untimed warm-up dry run per side comes first (``--warmup``), which also compiles the fresh
worktree's bytecode. Each run's job total is parsed from Snakemake's "Job stats" table.

Prints each pair's wall times, job totals and CPU times (user + system of the snakemake process), then the
median wall time of each side and the median of the per-pair ratios anchor/current (> 1: the current
checkout is faster), and the same for CPU time. ``--default-gc`` times the current checkout a second time in
each pair with ``R2MED_EVAL_GC=default`` (CPython's garbage-collector thresholds instead of the raised ones of
``r2med_eval.workflow.tune_gc``), which separates what the thresholds contribute from what fewer jobs and
inputs do. ``--order alternate`` runs the current checkout first in every second pair. Wall times on a shared VM vary by
about +-10% from run to run for identical code: use 5 or more repeats before reading a ratio. Exits 1 if a dry run fails
(its output tail is printed) or its job table cannot be parsed; a job total that differs between the sides is reported
but is not an error (the flag ``--require-same-jobs`` makes it one).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Config files of a checkout, in merge order; the generated matrix comes last.
CONFIG_FILES = ["config.yaml", "config/r2med.yaml", "config/r2med_models.yaml", "config/rerankers.yaml"]
# Checkout folders linked into each working directory, so that configs' relative paths resolve.
LINKED = ["data"]

RETRIEVERS = [
    "bm25", "bm25-paper",
    # config/r2med_models.yaml
    "contriever-msmarco", "bge-large-en-v1.5", "e5-mistral-7b-instruct", "SFR-Embedding-Mistral",
    "bmretriever-410m", "bmretriever-2b", "bmretriever-7b", "instructor-large", "instructor-xl",
    "gritlm-7b", "nv-embed-v2", "medcpt-official", "medcpt",
]
RERANKERS = ["bge-reranker-v2-m3", "medcpt-cross-encoder", "monobert-large"]  # config/rerankers.yaml
RERANKED = ["bm25", "bge-large-en-v1.5", "nv-embed-v2"]
GAR_MODELS = ["bm25", "bge-large-en-v1.5", "nv-embed-v2"]  # R2MED's GAR rows: bm25, bge, nv
GAR_PAIRS = (
    [("hyde", llm) for llm in ("gpt4", "huatuo-o1-70b", "llama-70b", "qwen-32b", "qwen-72b", "qwen-7b",
                               "qwq-32b", "r1-llama-70b", "r1-qwen-32b")]
    + [(method, llm) for method in ("query2doc", "lamer") for llm in ("gpt4", "qwen-72b", "qwen-7b")]
)

MATRIX = {
    "benchmarks_to_run": ["demo", "r2med"],
    "models_to_run": RETRIEVERS + RERANKERS,
    "rerank": [{"run": run, "reranker": rr, "depths": [10, 100]} for run in RERANKED for rr in RERANKERS],
    "query_variants": [{"benchmark": "r2med", "method": m, "llm": llm, "models": GAR_MODELS} for m, llm in GAR_PAIRS],
}


def matrix_yaml() -> str:
    import yaml  # snakemake's dependency: present in the interpreter that runs snakemake

    header = "# Generated by bench/dry_run.py: the full R2MED matrix (merged over the repository's config files).\n"
    return header + yaml.safe_dump(MATRIX, sort_keys=False, width=120, default_flow_style=None)


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


JOB_TOTAL = re.compile(r"^total\s+(\d+)\s*$", re.MULTILINE)


def job_total(output: str) -> int | None:
    """The "total" row of the last "Job stats" table (a dry run prints the table twice)."""
    if "Job stats:" not in output:
        return None
    found = JOB_TOTAL.findall(output[output.rindex("Job stats:"):])
    return int(found[0]) if found else None


class DryRunError(RuntimeError):
    pass


class Side:
    def __init__(self, name: str, checkout: Path, matrix: Path, scratch: Path, cores: int, quiet: bool,
                 env: dict | None = None):
        self.name, self.checkout, self.matrix, self.scratch = name, checkout, matrix, scratch
        self.cores, self.quiet, self.env = cores, quiet, env
        self.runs = 0
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.jobs: list[int] = []
        self.warnings: list[str] = []

    def command(self, workdir: Path) -> list[str]:
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", str(self.cores), "all",
               "-d", str(workdir), "-s", str(self.checkout / "Snakefile")]
        if self.quiet:
            cmd += ["--quiet", "rules", "reason"]  # keeps the Job stats table
        return cmd + ["--configfile", *[str(self.checkout / f) for f in CONFIG_FILES], str(self.matrix)]

    def dry_run(self) -> tuple[float, int, float]:
        """Wall seconds, job total, CPU seconds (user + system of the snakemake process and its children)."""
        self.runs += 1
        workdir = self.scratch / f"{self.name}-{self.runs}"
        workdir.mkdir(parents=True)
        for entry in LINKED:
            if (self.checkout / entry).exists():
                (workdir / entry).symlink_to(self.checkout / entry)
        cmd = self.command(workdir)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        env = {**os.environ, **self.env} if self.env else None
        proc = subprocess.run(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        output = proc.stdout
        if proc.returncode != 0:
            tail = "\n".join(output.splitlines()[-40:])
            raise DryRunError(f"{self.name} dry run failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
        total = job_total(output)
        if total is None:
            tail = "\n".join(output.splitlines()[-40:])
            raise DryRunError(f"{self.name}: no Job stats total in the dry run's output:\n{tail}")
        for line in output.splitlines():
            if re.search(r"warn", line, re.IGNORECASE) and line not in self.warnings:
                self.warnings.append(line)
        shutil.rmtree(workdir, ignore_errors=True)
        return elapsed, total, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="See the module docstring for the matrix and the method.")
    parser.add_argument("--anchor", default="db73a08", help="commit (any git revision) to compare against "
                        "(default: db73a08)")
    parser.add_argument("--current", type=Path, default=REPO,
                        help="checkout to measure against the anchor (default: the one holding this script, "
                             "working tree as it is, uncommitted changes included)")
    parser.add_argument("--repeats", type=int, default=5, help="timed pairs (default: 5)")
    parser.add_argument("--order", choices=["fixed", "alternate"], default="fixed",
                        help="fixed: anchor then current in every pair (default); alternate: pairs 2, 4, ... run "
                             "current first (cancels an effect of the position within a pair)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed dry runs per side first (default: 1)")
    parser.add_argument("--cores", type=int, default=8, help="snakemake --cores (default: 8)")
    parser.add_argument("--full-output", action="store_true",
                        help="do not pass --quiet rules reason (snakemake then prints every planned job; "
                             "the output is captured and discarded, but formatting it is timed)")
    parser.add_argument("--default-gc", action="store_true",
                        help="also time the current checkout with R2MED_EVAL_GC=default (CPython's garbage-collector "
                             "thresholds, see r2med_eval.workflow.tune_gc) in every pair, to show what the raised "
                             "thresholds contribute")
    parser.add_argument("--require-same-jobs", action="store_true",
                        help="exit 1 if the two sides plan different job totals")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (worktree, matrix)")
    parser.add_argument("--print-config", action="store_true", help="print the generated matrix config and exit")
    args = parser.parse_args()
    if args.print_config:
        print(matrix_yaml(), end="")
        return 0
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")

    current = args.current.resolve()
    anchor_sha = git("rev-parse", "--verify", f"{args.anchor}^{{commit}}")
    head = git("rev-parse", "--short", "HEAD", cwd=current)
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", cwd=current))

    # SIGTERM/SIGHUP -> SystemExit, so the finally block removes the worktree.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))

    tmp = Path(tempfile.mkdtemp(prefix="r2med-dry-run-"))
    worktree = tmp / "anchor"
    added = False
    try:
        git("worktree", "add", "--detach", str(worktree), anchor_sha)
        added = True
        matrix = tmp / "matrix.yaml"
        matrix.write_text(matrix_yaml(), encoding="utf-8")
        quiet = not args.full_output
        anchor = Side("anchor", worktree, matrix, tmp / "work", args.cores, quiet)
        cur = Side("current", current, matrix, tmp / "work", args.cores, quiet)
        gcd = Side("gc-default", current, matrix, tmp / "work", args.cores, quiet, {"R2MED_EVAL_GC": "default"}) \
            if args.default_gc else None

        print(f"anchor : {args.anchor} = {anchor_sha[:12]} (worktree {worktree})")
        print(f"current: {current} (HEAD {head}{', with uncommitted changes' if dirty else ''})")
        print(f"python : {sys.executable}; snakemake -n --cores {args.cores} all"
              f"{'' if args.full_output else ' --quiet rules reason'}; fresh working directory per dry run")
        print(f"config : {' '.join(CONFIG_FILES)} + {matrix.name} (--print-config shows it)", flush=True)

        for i in range(args.warmup):
            for side in (anchor, cur) + ((gcd,) if gcd else ()):
                t, n, c = side.dry_run()
                print(f"warm-up {i + 1}: {side.name:7s} {t:7.2f} s (CPU {c:.2f} s)  {n} jobs", flush=True)

        ratios = []
        print(f"\norder: {'anchor then current in every pair' if args.order == 'fixed' else 'alternating'}")
        print(f"{'pair':>4}  {'anchor s':>9}  {'current s':>9}  {'ratio':>6}  {'anchor jobs':>11}  {'current jobs':>12}"
              f"  {'anchor CPU s':>12}  {'current CPU s':>13}")
        for i in range(args.repeats):
            if args.order == "alternate" and i % 2 == 1:
                (tc, nc, cc), (ta, na, ca) = cur.dry_run(), anchor.dry_run()
            else:
                (ta, na, ca), (tc, nc, cc) = anchor.dry_run(), cur.dry_run()
            for side, t, n, c in ((anchor, ta, na, ca), (cur, tc, nc, cc)):
                side.times.append(t)
                side.jobs.append(n)
                side.cpu.append(c)
            ratios.append(ta / tc)
            extra = ""
            if gcd:
                tg, ng, cg = gcd.dry_run()
                gcd.times.append(tg)
                gcd.jobs.append(ng)
                gcd.cpu.append(cg)
                extra = f"  gc-default {tg:6.2f} s (CPU {cg:.2f} s, ratio {ta / tg:.3f})"
            print(f"{i + 1:>4}  {ta:9.2f}  {tc:9.2f}  {ta / tc:6.3f}  {na:>11}  {nc:>12}  {ca:12.2f}  {cc:13.2f}"
                  + extra, flush=True)

        ma, mc = statistics.median(anchor.times), statistics.median(cur.times)
        print(f"\nmedian anchor  : {ma:.2f} s ({args.anchor}; jobs {sorted(set(anchor.jobs))})")
        print(f"median current : {mc:.2f} s (jobs {sorted(set(cur.jobs))})")
        print(f"median ratio anchor/current over {args.repeats} pairs: {statistics.median(ratios):.3f} "
              f"(ratio of medians {ma / mc:.3f})")
        print(f"median CPU time: anchor {statistics.median(anchor.cpu):.2f} s, "
              f"current {statistics.median(cur.cpu):.2f} s, "
              f"median ratio {statistics.median(a / c for a, c in zip(anchor.cpu, cur.cpu)):.3f}")
        if gcd:
            print(f"current with R2MED_EVAL_GC=default: median {statistics.median(gcd.times):.2f} s, median ratio "
                  f"anchor/it {statistics.median(a / g for a, g in zip(anchor.times, gcd.times)):.3f}, median CPU "
                  f"{statistics.median(gcd.cpu):.2f} s (CPU ratio "
                  f"{statistics.median(a / g for a, g in zip(anchor.cpu, gcd.cpu)):.3f})")
        for side in (anchor, cur) + ((gcd,) if gcd else ()):
            if side.warnings:
                print(f"{side.name} printed warnings:\n  " + "\n  ".join(side.warnings))
        same = set(anchor.jobs) == set(cur.jobs) and len(set(anchor.jobs)) == 1
        if not same:
            print(f"NOTE: job totals differ: anchor {anchor.jobs}, current {cur.jobs}", file=sys.stderr)
            if args.require_same_jobs:
                return 1
        return 0
    except DryRunError as err:
        print(f"ERROR: {err}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            if added:
                done = subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO,
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"could not remove the worktree {worktree}: {done.stderr.strip()} "
                          "(`git worktree prune` clears the entry once the folder is gone)", file=sys.stderr)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: what planning costs a `snakemake` call, as a user meets it (issue 39, item 3): whole processes, this
checkout against an earlier commit (``--anchor``) and against bare Snakemake on a one-rule Snakefile, paired.

Two measurements:

* ``noop`` (default): ``snakemake --cores 2 all`` on a finished run (``--workdir``: a folder where that command has
  run to its end, e.g. a copy of the checkout), which plans the whole DAG and finds nothing to do. Every call of
  this checkout and of the anchor must print "Nothing to be done". The yardstick is bare Snakemake: a one-rule
  Snakefile in a temporary folder, run once before timing, so that its calls are no-ops too.
* ``--matrix OUT``: the dry run of the full matrix (``bench/full_matrix.py``: ``OUT`` is the folder its
  ``generate`` wrote; ``--scale 0.01`` plans the same 1,533 jobs as the real sizes), ``snakemake -n --cores 2 all
  --quiet rules`` with the matrix's configuration files, each side in its own working directory (made here, with
  ``data`` linked as ``bench/full_matrix.py`` does). Both sides must plan the same number of jobs.

``--attribute N`` (noop) also splits N further calls of each checkout into the control layer's parts, in the
call's own process: a small driver imports Snakemake as its command line does, then times the import of
``r2med_eval.workflow.control``, ``Workflow.load`` (validation, path checks, the planning cache), the params
functions' making (``Params.of``: the code hashes) and every call Snakemake makes into the control layer (input,
params and resource functions, wildcard constraints, targets, the callables ``rules/common.smk`` declares), then
runs Snakemake's own ``main``; the rest of the call's wall is Snakemake's. No profiler: its overhead would land on
the pure-Python side unevenly.

``--at-exit N`` also times N calls of each side under a probe: an atexit handler registered before Snakemake is
imported runs after every other handler, and from it to the process's end is the interpreter's shutdown, whose last
full garbage collection the planning process skips (``r2med_eval.workflow.tune_gc``; docs/scale.md).

Each side keeps its working directory across its calls, as a user's does, so this checkout's planning cache
(``.snakemake/r2med-eval``) is warm after the untimed warm-up call; ``--cold`` removes it before every call (the
first call after an edit of the package or the configuration). The anchor runs from its whole tree extracted with
``git archive`` (nothing is added to the repository's worktree list). In each repeat the sides run one after the
other, the order rotating from repeat to repeat; each call is a child process timed from outside (wall, and the peak
RSS of ``wait4``). Prints each side's median wall and peak, and the medians of the paired ratios.

    python bench/planning.py --workdir /tmp/default-run --anchor e059215 --repeats 11 --attribute 5
    python bench/planning.py --workdir /tmp/default-run --anchor 1e1ab67 --repeats 21 --at-exit 7
    python bench/planning.py --matrix /work/scratch/r2med-small/synthetic --anchor e059215 --repeats 5
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ONE_RULE = 'rule all:\n    output:\n        "done.txt",\n    shell:\n        "touch {output}"\n'
JOB_TOTAL = re.compile(r"^total\s+(\d+)\s*$", re.MULTILINE)


def driver(src: str, argv: list[str]) -> int:
    """One `snakemake` call in this process with the control layer's entry points timed (``--attribute``); prints
    one JSON line of milliseconds on stderr."""
    import functools
    import json
    import time

    start = time.perf_counter()
    import snakemake.cli  # as `python -m snakemake`: its command line loads the executor plugins
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    ExecutorPluginRegistry()
    spent: dict[str, float] = {}

    def timed_call(part, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                spent[part] = spent.get(part, 0.0) + time.perf_counter() - t
        return wrapper

    sys.path.insert(0, src)
    t = time.perf_counter()
    from r2med_eval.workflow import control, inputs, params, resources

    spent["import"] = time.perf_counter() - t
    workflow = control.Workflow
    workflow.load = classmethod(timed_call("Workflow.load", workflow.load.__func__))
    for name in ("constraint", "targets", "prefetch_targets", "skipped_note"):
        setattr(workflow, name, timed_call("constraints, targets, callables", getattr(workflow, name)))
    listed = workflow.callables  # a generator: its work is done while rules/common.smk iterates it
    workflow.callables = timed_call("constraints, targets, callables", lambda self: list(listed(self)))
    workflow.gar_methods = staticmethod(timed_call("constraints, targets, callables", workflow.gar_methods))
    for cls, part in ((inputs.Inputs, "input functions"), (resources.Resources, "resource functions")):
        for name, member in list(vars(cls).items()):
            if callable(member) and not name.startswith("_"):
                setattr(cls, name, timed_call(part, member))
    make = params.Params.of
    params.Params.of = lambda self, rule: timed_call("params functions", timed_call("Params.of", make)(self, rule))
    sys.argv = ["snakemake", *argv]
    try:
        snakemake.cli.main()
    except SystemExit:
        pass
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall * 1000, **{k: v * 1000 for k, v in spent.items()}}), file=sys.stderr)
    return 0


def attribute(checkout: Path, work: Path, n: int) -> list[str]:
    """``n`` driver calls of the no-op in ``work`` with ``checkout``'s Snakefile: the median milliseconds of each
    part."""
    import json
    import statistics
    import subprocess

    rows = []
    for _ in range(n):
        proc = subprocess.run([sys.executable, __file__, "--driver", str(checkout / "src"), "--", "-s",
                               str(checkout / "Snakefile"), "-d", str(work), "--cores", "2", "all"],
                              cwd=work, capture_output=True, text=True)
        if proc.returncode != 0 or "Nothing to be done" not in proc.stderr + proc.stdout:
            raise SystemExit(f"attribution call failed or was not a no-op:\n{proc.stderr[-3000:]}")
        rows.append(json.loads(proc.stderr.strip().splitlines()[-1]))
    parts = [k for k in rows[0] if k != "wall"]
    med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in ["wall", *parts]}
    ours = statistics.median(sum(r.get(k, 0.0) for k in parts) for r in rows)
    lines = [f"control layer inside the call (median of {n} calls, ms): "
             + ", ".join(f"{k} {med[k]:.1f}" for k in parts)]
    lines.append(f"control layer {ours:.0f} ms of the call's {med['wall']:.0f} ms in-process wall; Snakemake "
                 f"{med['wall'] - ours:.0f} ms; control layer / Snakemake's own = {ours / (med['wall'] - ours):.3f}")
    return lines


# the ``--at-exit`` probe: an atexit handler registered before Snakemake is imported runs after every other one;
# from its stamp to the process's end is the interpreter's shutdown (its last garbage collection included)
EXIT_PROBE = ("import atexit, runpy, sys, time\n"
              "atexit.register(lambda: sys.stderr.write('r2med-planning-atexit %.6f\\n' % time.time()))\n"
              "sys.argv = ['snakemake', *sys.argv[1:]]\n"
              "runpy.run_module('snakemake', run_name='__main__', alter_sys=True)\n")


def exit_cost(sides: dict, n: int) -> list[str]:
    """``n`` calls of each side under the probe, in turn: the median milliseconds from the last atexit handler to
    the process's end, and of the whole call."""
    import statistics
    import subprocess
    import time

    after: dict[str, list[float]] = {name: [] for name in sides}
    whole: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(n):
        for name, (cmd, cwd) in sides.items():
            start = time.time()
            proc = subprocess.run([sys.executable, "-c", EXIT_PROBE, *cmd[3:]], cwd=cwd, capture_output=True,
                                  text=True)
            end = time.time()
            stamps = [line.split()[1] for line in proc.stderr.splitlines()
                      if line.startswith("r2med-planning-atexit ")]
            if proc.returncode != 0 or not stamps:
                raise SystemExit(f"{name}: the probe's call failed:\n{proc.stderr[-3000:]}")
            after[name].append((end - float(stamps[-1])) * 1000)
            whole[name].append((end - start) * 1000)
    return [f"{name}: shutdown after the last atexit handler {statistics.median(after[name]):.0f} ms of "
            f"{statistics.median(whole[name]):.0f} ms (median of {n} calls)" for name in sides]


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--driver":
        return driver(sys.argv[2], sys.argv[4:])
    sys.path.insert(0, str(HERE))
    from _paired import REPO, anchor_src, summary, timed

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="a finished run's working directory (noop)")
    parser.add_argument("--matrix", type=Path, help="bench/full_matrix.py generate's folder: time its dry run")
    parser.add_argument("--anchor", help="commit to compare against (omit: this checkout and bare Snakemake only)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cold", action="store_true", help="remove this checkout's planning cache before each call")
    parser.add_argument("--attribute", type=int, default=0, metavar="N",
                        help="noop: also split N calls of each checkout into the control layer's parts")
    parser.add_argument("--at-exit", type=int, default=0, metavar="N",
                        help="also time N calls of each side from the last atexit handler to the process's end")
    args = parser.parse_args()
    if (args.workdir is None) == (args.matrix is None):
        parser.error("give --workdir (a finished run's no-op) or --matrix (the full matrix's dry run)")

    snakemake = [sys.executable, "-m", "snakemake"]
    with tempfile.TemporaryDirectory(prefix="r2med-planning-") as tmp:
        tmp = Path(tmp)
        checkouts = {"current": REPO}
        if args.anchor:
            anchor_src(args.anchor, tmp / "anchor", paths=())
            checkouts[f"anchor {args.anchor}"] = tmp / "anchor"
        sides: dict[str, tuple[list[str], Path]] = {}
        if args.workdir:
            work = args.workdir.resolve()
            for name, checkout in checkouts.items():
                sides[name] = ([*snakemake, "-s", str(checkout / "Snakefile"), "-d", str(work), "--cores", "2",
                                "all"], work)
            bare = tmp / "bare"
            bare.mkdir()
            (bare / "Snakefile").write_text(ONE_RULE)
            sides["bare snakemake"] = ([*snakemake, "--cores", "2", "all"], bare)
        else:
            from full_matrix import config_files, prepare_workdir

            for name, checkout in checkouts.items():
                work = tmp / f"work-{len(sides)}"
                prepare_workdir(work, checkout)
                sides[name] = ([*snakemake, "-s", str(checkout / "Snakefile"), "-d", str(work), "-n", "--cores",
                                "2", "all", "--configfile", *config_files(args.matrix.resolve(), checkout),
                                "--quiet", "rules"], work)

        def call(name: str) -> tuple[float, float]:
            cmd, cwd = sides[name]
            if args.cold and name == "current":
                shutil.rmtree(cwd / ".snakemake" / "r2med-eval", ignore_errors=True)
            wall, rss, out = timed(cmd, cwd=cwd)
            if args.workdir and name in checkouts and "Nothing to be done" not in out:
                raise SystemExit(f"{name}: not a no-op (is {args.workdir} a finished run?):\n{out[-3000:]}")
            if args.matrix:
                found = JOB_TOTAL.findall(out[out.rindex("Job stats:"):]) if "Job stats:" in out else []
                jobs.setdefault(name, set()).add(int(found[0]) if found else None)
            return wall, rss

        jobs: dict[str, set] = {}
        names = list(sides)
        for name in names:  # warm-up: bytecode, the OS's file cache, the planning cache, bare's first real run
            call(name)
        walls = {n: [] for n in names}
        rss = {n: [] for n in names}
        for i in range(args.repeats):
            for name in names[i % len(names):] + names[:i % len(names)]:
                wall, peak = call(name)
                walls[name].append(wall)
                rss[name].append(peak)
        if args.matrix and len({frozenset(v) for v in jobs.values()}) != 1:
            print(f"job totals differ: {jobs}", file=sys.stderr)
            return 1
        what = (f"no-op `snakemake --cores 2 all` on {args.workdir}" if args.workdir else
                f"dry run of the full matrix ({', '.join(map(str, sorted(jobs['current'])))} jobs)")
        base = "bare snakemake" if args.workdir else names[-1]  # the anchor where there is one
        print("\n".join(summary(what + (", planning cache removed before each call" if args.cold else ""),
                                walls, rss, base, [n for n in names if n != base])))
        if args.at_exit:
            print("\n".join(exit_cost(sides, args.at_exit)))
        if args.attribute and args.workdir:
            for name, checkout in checkouts.items():
                print(f"{name}: " + "\n  ".join(attribute(checkout, args.workdir.resolve(), args.attribute)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

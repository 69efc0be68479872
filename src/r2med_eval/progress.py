"""Time-based progress of long jobs, in the rule's log and on the terminal Snakemake runs in.

* ``Progress(label, total, unit, log)``: ``update(n)`` after each piece of work; a log line at most every
  ``R2MED_EVAL_PROGRESS_SECONDS`` (default 30) with the count done, the rate and the estimated time left, and one
  at ``finish()``. The rate of the ETA is a moving one (the work done over about the last four intervals), so a
  job whose first items are slower (encoding sorts the longest texts first) is not promised twice its time.
* ``heartbeat(job)`` (started by ``smk.run`` for every job): a line every interval on the terminal
  (``sys.__stderr__``: Snakemake's own terminal locally, the job's output file on SLURM), naming the job and
  showing the innermost running ``Progress``, else the job's current ``phase()`` and the time it has run; so
  every job that runs longer than one interval says so at least once per interval.
* ``RunMonitor``: the whole run's terminal under ``r2med-eval run`` (Snakemake's ``--logger r2med-eval``, the plugin
  ``snakemake_logger_plugin_r2med_eval`` beside this package): a line per finished job with done/total and an ETA
  from the jobs' ``benchmark:`` files, failures with their logs, and at the end the report's path.

Lines hold ids, names and counts only, never text of the data. Nothing here changes an output: the outputs are
byte-identical whatever the interval, and ``workflow.code`` leaves this module out of the rules' code hashes.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from collections import deque

DEFAULT_SECONDS = 30.0
ENV = "R2MED_EVAL_PROGRESS_SECONDS"
WINDOW_INTERVALS = 4  # the moving rate covers about this many intervals
SHAPES_OUTPUTS = False  # read by workflow.code: not part of any rule's code hash

# the innermost running Progress last; the phase and the job label of this process (one job per process)
_ACTIVE: list[Progress] = []
_STATE = {"phase": "", "job": ""}


def interval() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV, DEFAULT_SECONDS)))
    except ValueError:
        return DEFAULT_SECONDS


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s") if seconds >= 60 \
        else f"{seconds}s"


def phase(text: str) -> None:
    """Name what the job does now (a fixed description, never data), for the heartbeat's lines between or
    without ``Progress`` counts, e.g. ``phase("loading the model")``."""
    _STATE["phase"] = text


class Progress:
    """Counts of one long loop; also a context manager (``finish()`` on a normal exit)."""

    def __init__(self, label: str, total: int | None, unit: str, logger: logging.Logger,
                 every: float | None = None, clock=time.monotonic):
        self.label, self.total, self.unit, self.log = label, total, unit, logger
        self.every = interval() if every is None else every
        self.clock = clock
        self.done = 0
        self.start = self.last = clock()
        self.window = max(WINDOW_INTERVALS * self.every, 1e-6)
        self._samples: deque[tuple[float, int]] = deque([(self.start, 0)])
        _ACTIVE.append(self)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.finish()
        else:
            self._leave()

    def _sample(self, now: float) -> None:
        """Keep (time, count) samples so that the oldest is the last one at or before ``now - window``."""
        samples = self._samples
        if now - samples[-1][0] >= self.window / 16:
            samples.append((now, self.done))
        while len(samples) > 2 and samples[1][0] <= now - self.window:
            samples.popleft()

    def rate(self, now: float | None = None) -> float:
        """Items per second over the moving window (since the start while the job is younger than it)."""
        now = self.clock() if now is None else now
        t0, n0 = self._samples[0]
        if now - t0 <= 0 or self.done == n0:
            elapsed = now - self.start
            return self.done / elapsed if elapsed > 0 else 0.0
        return (self.done - n0) / (now - t0)

    def line(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        elapsed = max(now - self.start, 0.0)
        rate = self.rate(now)
        if self.total is None:
            return (f"{self.label}: {self.done} {self.unit}, {rate:.1f} {self.unit}/s, "
                    f"elapsed {duration(elapsed)}")
        left = (self.total - self.done) / rate if rate > 0 else None
        pct = 100.0 * self.done / self.total if self.total else 100.0
        return (f"{self.label}: {self.done}/{self.total} {self.unit} ({pct:.1f}%), {rate:.1f} {self.unit}/s, "
                f"elapsed {duration(elapsed)}, ETA {duration(left) if left is not None else 'unknown'}")

    def update(self, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        self._sample(now)
        if now - self.last >= self.every and (self.total is None or self.done < self.total):
            self.last = now
            self.log.info("%s", self.line(now))

    def finish(self) -> None:
        now = self.clock()
        elapsed = max(now - self.start, 0.0)
        average = self.done / elapsed if elapsed > 0 else 0.0
        self.log.info("%s: %d %s in %s, %.1f %s/s (done)", self.label, self.done, self.unit, duration(elapsed),
                      average, self.unit)
        self._leave()

    def _leave(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        _STATE["phase"] = ""  # what came before this loop is over


def status(now: float, started: float) -> str:
    """What the heartbeat prints: the innermost running Progress, else the phase and the time run."""
    try:
        return _ACTIVE[-1].line()
    except IndexError:  # no Progress runs (or the last one just ended)
        pass
    what = _STATE["phase"] or "running"
    return f"{what}, elapsed {duration(now - started)}"


class Heartbeat:
    """A daemon thread printing ``r2med-eval [job] <status>`` every ``every`` seconds to ``stream``."""

    def __init__(self, job: str, stream=None, every: float | None = None):
        self.job = job
        self.stream = stream if stream is not None else sys.__stderr__
        self.every = interval() if every is None else every
        self.started = time.monotonic()
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="r2med-eval-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        _ACTIVE.clear()  # a new job: nothing of an earlier one (a loop an exception left) is running
        _STATE.update(job=self.job, phase="")
        if self.every > 0 and self.stream is not None:
            self._thread.start()
        return self

    def _print(self, text: str) -> None:
        try:
            print(f"r2med-eval [{self.job}] {text}", file=self.stream, flush=True)
        except (OSError, ValueError):  # the terminal went away: the job goes on
            self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._print(status(time.monotonic(), self.started))
            self.lines += 1

    def stop(self, outcome: str = "finished") -> None:
        """Stop the thread; a job that printed a line also prints its end (``finished`` or ``failed``)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self.lines:
            self._print(f"{outcome} after {duration(time.monotonic() - self.started)}")


def job_label(rule: str, wildcards) -> str:
    """``rule a/b/c`` from the rule name and its wildcard values (names and ids only)."""
    if wildcards is not None and not hasattr(wildcards, "__iter__"):  # a namespace (the tests' stand-in)
        wildcards = vars(wildcards).values()
    values = [str(v) for v in (wildcards or [])]
    return f"{rule} {'/'.join(values)}" if values else rule


# ---------------------------------------------------------------- the run's terminal (r2med-eval run)

PLUGIN = "r2med-eval"  # Snakemake's --logger name of snakemake_logger_plugin_r2med_eval (src/), which feeds RunMonitor
INDEX_PAGE = "results/index.html"  # workflow.paths.INDEX_PAGE (progress sits below workflow: no import)
PRIOR_FILES_PER_RULE = 200  # earlier benchmark files read per rule for the ETA


def read_benchmark_seconds(path) -> float | None:
    """The wall seconds (column ``s``) of a Snakemake ``benchmark:`` file, or None."""
    try:
        with open(path, encoding="utf-8") as handle:
            header = handle.readline().rstrip("\n").split("\t")
            values = handle.readline().rstrip("\n").split("\t")
        seconds = float(values[header.index("s")])
    except (OSError, ValueError, IndexError):
        return None
    return seconds if seconds == seconds and seconds >= 0 else None


def prior_seconds(rule: str, root="benchmarks", limit: int = PRIOR_FILES_PER_RULE) -> list[float]:
    """Wall seconds of a rule's jobs in earlier runs, from the ``benchmark:`` files under ``<root>/<rule>/``."""
    from pathlib import Path

    folder = Path(root) / rule
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.rglob("*.tsv"))[:limit]:
        value = read_benchmark_seconds(path)
        if value is not None:
            out.append(value)
    return out


class RunMonitor:
    """The terminal of a Snakemake run, in lines a person reads: one per finished job with the overall done/total,
    the time run and an ETA; a failed job with its log; warnings and errors; at the end the report's path, the
    failed jobs' logs and Snakemake's full log. The job blocks (input, output, reason, wildcards) are left to
    Snakemake's own log file (``.snakemake/log/``), which keeps everything.

    The ETA: each remaining job takes its rule's mean wall time, from this run's finished jobs of the rule (their
    ``benchmark:`` files) or else the rule's benchmark files of earlier runs (``prior``), or else the mean over
    every job finished so far; the work left is divided by the concurrency the run has shown (the finished jobs'
    time over the time run, between 1 and the cores). Names and counts only, never data."""

    def __init__(self, write, clock=time.monotonic, prior=prior_seconds, index_page: str = INDEX_PAGE):
        self.write, self.clock, self.prior, self.index_page = write, clock, prior, index_page
        self.start = clock()
        self.jobs: dict = {}  # jobid -> {rule, label, log, benchmark, started}
        self.counts: dict[str, int] = {}  # rule -> jobs planned (Snakemake's job stats)
        self.done_by_rule: dict[str, list[float]] = {}
        self.prior_mean: dict[str, float | None] = {}
        self.failed: list[tuple[str, list[str]]] = []
        self.failed_ids: set = set()
        self.errors = 0  # error records: the run did not end well, whatever the report page on disk says
        self.cores: int | None = None
        self.total = 0
        self.done = 0
        self.last_finished: str | None = None
        self.logfile: str | None = None
        self.summarised = False
        self.started_any = False

    # events
    def run_info(self, stats: dict) -> None:
        self.counts = {r: int(n) for r, n in stats.items() if r != "total"}
        self.total = int(stats.get("total", sum(self.counts.values())))
        self.write(f"r2med-eval: {self.total} jobs to run ({', '.join(f'{n} {r}' for r, n in self.counts.items())}); "
                   "one line per finished job, the full log at the end")

    def resources(self, cores) -> None:
        if isinstance(cores, int) and cores > 0:
            self.cores = cores

    def job_started(self, jobid, rule: str, wildcards: dict | None, log=(), benchmark=None) -> None:
        self.started_any = True
        self.jobs[jobid] = {"rule": rule, "label": job_label(rule, (wildcards or {}).values()),
                            "log": [str(x) for x in log or ()], "benchmark": benchmark, "started": self.clock()}

    def job_finished(self, jobid) -> None:
        job = self.jobs.pop(jobid, None)
        if job is None:
            return
        seconds = read_benchmark_seconds(job["benchmark"]) if job["benchmark"] else None
        if seconds is None:
            seconds = max(self.clock() - job["started"], 0.0)
        self.done_by_rule.setdefault(job["rule"], []).append(seconds)
        self.last_finished = f"{job['label']} ({duration(seconds)})"

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = int(done), int(total)
        what = self.last_finished or "job"
        self.last_finished = None
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = self.eta()
        self.write(f"r2med-eval [{self.done}/{self.total} {pct:.0f}%] done {what}; elapsed "
                   f"{duration(self.clock() - self.start)}, ETA {duration(eta) if eta is not None else 'unknown'}")

    def job_failed(self, jobid, rule: str, log=()) -> None:
        """Once per job (Snakemake reports a failed job's error more than once)."""
        if jobid is not None and jobid in self.failed_ids:
            return
        self.failed_ids.add(jobid)
        job = self.jobs.pop(jobid, None)
        label = job["label"] if job else rule
        logs = [str(x) for x in log or ()] or (job["log"] if job else [])
        self.failed.append((label, logs))
        self.write(f"r2med-eval: FAILED {label}" + (f"; its log: {', '.join(logs)}" if logs else ""))

    def message(self, level: int, text: str) -> None:
        """A record without a job event: warnings and errors are shown; of the rest only what a person needs."""
        text = (text or "").rstrip()
        if not text:
            return
        if text.startswith("Complete log(s): "):
            self.logfile = text[len("Complete log(s): "):]
            self.summary()
            return
        if text.startswith("Nothing to be done"):
            self.write(f"r2med-eval: {text}")
            self.summary()
            return
        if level >= logging.ERROR:
            self.errors += 1
        if level >= logging.WARNING:
            self.write(text)

    # the ETA and the end
    def _rule_mean(self, rule: str) -> float | None:
        mine = self.done_by_rule.get(rule)
        if mine:
            return math.fsum(mine) / len(mine)
        if rule not in self.prior_mean:
            earlier = self.prior(rule)
            self.prior_mean[rule] = math.fsum(earlier) / len(earlier) if earlier else None
        return self.prior_mean[rule]

    def eta(self) -> float | None:
        finished = [s for values in self.done_by_rule.values() for s in values]
        if self.done >= self.total:
            return 0.0
        if not finished:
            return None
        overall = math.fsum(finished) / len(finished)
        left = 0.0
        if self.counts:
            for rule, planned in self.counts.items():
                remaining = planned - len(self.done_by_rule.get(rule, []))
                if remaining > 0:
                    mean = self._rule_mean(rule)
                    left += remaining * (overall if mean is None else mean)
            now = self.clock()
            for job in self.jobs.values():  # running: the part of their estimate already spent
                mean = self._rule_mean(job["rule"])
                left -= min(now - job["started"], overall if mean is None else mean)
        else:
            left = (self.total - self.done) * overall
        elapsed = max(self.clock() - self.start, 1e-9)
        concurrency = max(1.0, min(float(self.cores or 1 << 30), math.fsum(finished) / elapsed))
        return max(left, 0.0) / concurrency

    def summary(self) -> None:
        """The end of the run: the failed jobs' logs, the report page (after a run without errors), Snakemake's full
        log (once)."""
        if self.summarised:
            return
        self.summarised = True
        if self.started_any or self.total:
            state = f"{len(self.failed)} failed" if self.failed else "all done"
            self.write(f"r2med-eval: {self.done}/{self.total} jobs in {duration(self.clock() - self.start)}, {state}")
        for label, logs in self.failed:
            self.write(f"r2med-eval: failed {label}: {', '.join(logs) if logs else 'no log file'}")
        if os.path.isfile(self.index_page) and not self.failed and not self.errors:
            self.write(f"r2med-eval: report: {os.path.abspath(self.index_page)}")
        if self.logfile:
            self.write(f"r2med-eval: Snakemake's full log: {self.logfile}")

"""Time-based progress of long jobs, in the rule's log and on the terminal Snakemake runs in.

* ``Progress(label, total, unit, log)``: ``update(n)`` after each piece of work; a log line at most every
  ``R2MED_EVAL_PROGRESS_SECONDS`` (default 30) with the count done, the rate and the estimated time left, and one
  at ``finish()``. The rate of the ETA is a moving one (the work done over about the last four intervals), so a
  job whose first items are slower (encoding sorts the longest texts first) is not promised twice its time.
* ``heartbeat(job)`` (started by ``smk.run`` for every job): a line every interval on the terminal
  (``sys.__stderr__``: Snakemake's own terminal locally, the job's output file on SLURM), naming the job and
  showing the innermost running ``Progress``, else the job's current ``phase()`` and the time it has run; so
  every job that runs longer than one interval says so at least once per interval.

Lines hold ids, names and counts only, never text of the data. Nothing here changes an output: the outputs are
byte-identical whatever the interval, and ``workflow.code`` leaves this module out of the rules' code hashes.
"""

from __future__ import annotations

import logging
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

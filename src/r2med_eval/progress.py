"""Time-based progress for long loops: a log line every ``R2MED_EVAL_PROGRESS_SECONDS`` (default 30)
with the count done, the rate and the estimated time left, and one at the end.

Progress goes to the log only (the outputs stay byte-identical, whatever the interval)."""

from __future__ import annotations

import logging
import os
import time

DEFAULT_SECONDS = 30.0


def interval() -> float:
    try:
        return max(0.0, float(os.environ.get("R2MED_EVAL_PROGRESS_SECONDS", DEFAULT_SECONDS)))
    except ValueError:
        return DEFAULT_SECONDS


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s") if seconds >= 60 \
        else f"{seconds}s"


class Progress:
    """``update(n)`` after each piece of work; a line at most every ``every`` seconds, and at ``finish()``."""

    def __init__(self, label: str, total: int, unit: str, logger: logging.Logger, every: float | None = None):
        self.label, self.total, self.unit, self.log = label, total, unit, logger
        self.every = interval() if every is None else every
        self.done = 0
        self.start = self.last = time.monotonic()

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta = duration(left) if left != float("inf") else "unknown"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        return (f"{self.label}: {self.done}/{self.total} {self.unit} ({pct:.1f}%), {rate:.1f} {self.unit}/s, "
                f"elapsed {duration(elapsed)}, ETA {eta}")

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every and self.done < self.total:
            self.last = now
            self.log.info("%s", self.line())

    def finish(self) -> None:
        self.log.info("%s (done)", self.line())

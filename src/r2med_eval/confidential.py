"""What may carry MIMIC-derived text, and where it may go.

CliniQ's corpus is cut from MIMIC-III's notes, credentialed data: its text stays under ``resources/``, owner-only,
and logs, reports and plots outside it hold ids and numbers only. Code that is not ours — a ``type: python``
encoder, an MTEB model — sees that text, and what it says when it fails may quote it (an API client's
``ValueError(f"input rejected: {text!r}")``). So:

* ``mimic_benchmark(config, benchmark)``: whether a benchmark's texts are MIMIC-derived (layout ``cliniq``), from
  the raw configuration a job carries (``snakemake.config``). The control layer decides the owner-only outputs
  with it (params ``private``), and ``smk.run`` decides with it, from the job's own configuration and
  ``benchmark`` wildcard, where a job's log goes, without a parameter in any rule (a new parameter would rerun
  every job once, and where a log goes changes no output).
* ``ExternalError``: a failure of code outside this package. Its ``summary`` (the model, the factory, the call, the
  exception's type) and ``fix`` are ours and safe to print anywhere; its ``detail`` (the exception's message and
  traceback) is what the outside code said. ``str()`` holds the first line of the detail (for benchmarks that are
  not MIMIC-derived: it helps to debug); ``withheld(file)`` holds only the summary and names the owner-only file
  that has the detail.
* ``private_log(log)``: where a MIMIC-derived job's full log goes: ``logs/<rule>/<key>.log`` becomes
  ``resources/job_logs/<rule>/<key>.log``, the file 0600 in 0700 folders (``open_job_log``).
"""

from __future__ import annotations

import traceback
from pathlib import Path

from .errors import InputError
from .io import open_private

MIMIC_LAYOUTS = ("cliniq",)
PRIVATE_LOGS = "resources/job_logs"  # benchmark names hold no underscore: no download folder can be named so
DETAIL_CHARS = 300


def mimic_benchmark(config: dict, benchmark: str | None) -> bool:
    """Whether ``benchmark``'s texts are MIMIC-derived, from a raw or validated configuration."""
    benchmarks = (config or {}).get("benchmarks") or {}
    bench = benchmarks.get(benchmark) if benchmark is not None else None
    return isinstance(bench, dict) and bench.get("layout") in MIMIC_LAYOUTS


class ExternalError(InputError):
    """Code outside this package failed: ``summary`` and ``fix`` are ours; ``detail`` and ``traceback`` are the
    exception's and may quote the texts the code was given."""

    def __init__(self, summary: str, exc: BaseException, *, fix: str):
        self.summary = summary
        self.exc_type = type(exc).__name__
        self.detail = str(exc)
        self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        first = (self.detail.strip().splitlines() or [""])[0]
        first = first if len(first) <= DETAIL_CHARS else first[:DETAIL_CHARS] + "..."
        super().__init__(f"{summary} raised {self.exc_type}" + (f": {first}" if first else "") + ".", fix=fix)

    def withheld(self, where) -> str:
        """The message without the exception's text, naming the owner-only file ``where`` that has it."""
        return (f"{self.summary} raised {self.exc_type} (its message is withheld: the job reads MIMIC-derived text; "
                f"the message and traceback are in {where}, owner-only). Fix: {self.fix}")


def private_log(log_path) -> Path:
    """The owner-only full log of a MIMIC-derived job whose log is ``log_path`` (``logs/<rule>/<key>.log``)."""
    log_path = Path(log_path)
    if log_path.is_absolute():
        try:
            log_path = log_path.relative_to(Path.cwd())
        except ValueError:
            log_path = Path(log_path.name)
    parts = log_path.parts[1:] if log_path.parts[:1] == ("logs",) else log_path.parts
    return Path(PRIVATE_LOGS, *parts)


def open_job_log(path):
    """The owner-only full log ``path`` of a MIMIC-derived job (``private_log``), opened for writing: 0600, its
    folders from ``resources/job_logs`` down 0700 (``io.open_private``)."""
    return open_private(path, top=PRIVATE_LOGS)

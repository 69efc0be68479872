"""Glue for the thin scripts in ``scripts/``: logging to ``snakemake.log`` and clean failures.

A job's stderr and logging go to its log file, and so do file descriptors 1 and 2 (what the JVM, C libraries or
progress bars print: Lucene's ``INFO: Using MemorySegmentIndexInput`` line stays off the terminal); the
terminal, ``sys.__stderr__`` during the job (a copy of the terminal's descriptor), keeps the job's progress lines,
its failure line and whatever else the job writes there for a person. A bad-input error (``InputError``) goes to
the log and, as one ``r2med-eval:`` line, to the terminal, and the job fails. A failure of code outside this package
(``confidential.ExternalError``: a ``type: python`` encoder, an MTEB model) is such an error too; the log also
gets the outside code's traceback.

A job over MIMIC-derived text (a CliniQ benchmark: ``confidential.mimic_benchmark`` on the job's configuration
and ``benchmark`` wildcard, or a ``private`` params entry) may meet that text in anything code outside this
package prints or raises. Its full log — every logging record, everything written to stdout and stderr (by Python,
C libraries or the JVM: file descriptors 1 and 2 point to it), every traceback — goes to
``resources/job_logs/<its log path>`` (0600, folders 0700). Its log under ``logs/`` and the terminal get only this
package's own logging records, which hold ids and numbers, and one line per failure with the exception's type,
the model, the job and the fix: an outside exception's message, and any unexpected exception's message and
traceback, stay in the owner-only file that line names.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback

from .confidential import ExternalError, mimic_benchmark, open_job_log, private_log
from .errors import InputError
from .progress import Heartbeat, job_label

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
log = logging.getLogger("r2med_eval")


def mimic_job(snakemake) -> bool:
    """Whether the job reads MIMIC-derived text: its params say so (``spec["private"]``), or its ``benchmark``
    wildcard names a benchmark whose layout is MIMIC-derived in the job's configuration."""
    spec = getattr(getattr(snakemake, "params", None), "spec", None)
    if isinstance(spec, dict) and spec.get("private"):
        return True
    benchmark = getattr(getattr(snakemake, "wildcards", None), "benchmark", None)
    return mimic_benchmark(getattr(snakemake, "config", None) or {}, benchmark)


def job_name(snakemake, log_path) -> str:
    """``<rule> <wildcards as in the log path>``, e.g. ``encode_corpus cliniq-demo/cliniq/bm25``."""
    rule = getattr(snakemake, "rule", None) or "job"
    key = str(log_path or "")
    prefix = f"logs/{rule}/"
    if key.startswith(prefix) and key.endswith(".log"):
        return f"{rule} {key[len(prefix):-len('.log')]}"
    return rule


class TerminalLines(logging.Handler):
    """This package's records marked ``extra={"terminal": True}`` (warnings a user must see at the end of a job,
    ids and numbers only) also go to the terminal, as one ``r2med-eval [<job>] warning: ...`` line each."""

    def __init__(self, stream, job: str):
        super().__init__(logging.WARNING)
        self.stream, self.job = stream, job

    def emit(self, record) -> None:
        if not getattr(record, "terminal", False) or not record.name.startswith("r2med_eval"):
            return
        try:
            print(f"r2med-eval [{self.job}] {record.levelname.lower()}: {record.getMessage()}", file=self.stream,
                  flush=True)
        except (OSError, ValueError):  # the terminal went away: the job goes on
            pass


def run(snakemake, func) -> None:
    """Call ``func(snakemake)`` with stderr and logging sent to the rule's log file (on a MIMIC-derived benchmark:
    to the owner-only full log, see the module's docstring). While the job runs, a progress line (ids and counts
    only) goes to the terminal every R2MED_EVAL_PROGRESS_SECONDS (``progress.Heartbeat``)."""
    log_path = snakemake.log[0] if len(snakemake.log) else None
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if log_path is not None and mimic_job(snakemake):
        _run_private(snakemake, func, log_path)
        return
    handle = open(log_path, "w", encoding="utf-8") if log_path else sys.stderr
    real_stderr = terminal_before = sys.__stderr__
    saved = {}
    if log_path:  # what code outside Python prints (the JVM's start-up lines, C libraries) goes to the log too
        sys.stdout.flush()
        sys.stderr.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        real_stderr = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace")  # the terminal
        for fd in saved:
            os.dup2(handle.fileno(), fd)
        sys.__stderr__ = real_stderr  # the job's terminal, as before: a line for a person goes there
    sys.stderr = handle
    logging.basicConfig(stream=handle, level=logging.INFO, force=True, format=FORMAT)
    lines = TerminalLines(real_stderr, job_label(snakemake.rule, snakemake.wildcards))
    logging.getLogger().addHandler(lines)
    start = time.perf_counter()
    heartbeat = Heartbeat(job_label(snakemake.rule, snakemake.wildcards), stream=real_stderr).start()
    outcome = "failed"
    try:
        func(snakemake)
        outcome = "finished"
    except InputError as exc:
        if isinstance(exc, ExternalError):  # not MIMIC-derived: the outside code's traceback helps to debug
            handle.write(exc.traceback)
        log.error("%s", exc)
        print(f"r2med-eval: {exc}", file=real_stderr, flush=True)
        handle.flush()
        raise SystemExit(1) from None
    finally:
        heartbeat.stop(outcome)
        logging.getLogger().removeHandler(lines)
        log.info("done in %.2f s", time.perf_counter() - start)
        handle.flush()
        if saved:
            sys.stdout.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            real_stderr.flush()
            sys.__stderr__ = terminal_before
            real_stderr.close()


def _run_private(snakemake, func, log_path) -> None:
    full_path = private_log(log_path)
    public = open(log_path, "w", encoding="utf-8")
    full = open_job_log(full_path)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    everything = logging.StreamHandler(full)
    ours = logging.StreamHandler(public)
    ours.addFilter(logging.Filter("r2med_eval"))  # this package's records only: ids and numbers
    for handler in (everything, ours):
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    # progress lines hold ids and counts only: they go to the terminal, through a copy of it taken before
    # file descriptors 1 and 2 point to the owner-only log
    terminal = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace")
    for fd in saved:
        os.dup2(full.fileno(), fd)
    sys.stdout = sys.stderr = full
    log.info("the job reads MIMIC-derived text: its full log, with whatever code outside r2med-eval printed, is "
             "%s (owner-only)", full_path)
    failure = None
    start = time.perf_counter()
    heartbeat = Heartbeat(job_label(snakemake.rule, snakemake.wildcards), stream=terminal).start()
    lines = TerminalLines(terminal, job_label(snakemake.rule, snakemake.wildcards))
    root.addHandler(lines)
    try:
        func(snakemake)
    except ExternalError as exc:
        full.write(exc.traceback)
        full.write(f"{exc}\n")
        failure = exc.withheld(full_path)
    except InputError as exc:  # our own messages hold ids and numbers only
        failure = str(exc)
    except Exception as exc:  # noqa: BLE001 - its message may quote note text
        traceback.print_exc(file=full)
        failure = (f"job {job_name(snakemake, log_path)} failed with {type(exc).__name__} (its message and traceback "
                   f"are withheld: the job reads MIMIC-derived text; they are in {full_path}, owner-only). Fix: read "
                   "that file; to report a bug of r2med-eval, give the exception's type and the traceback's files "
                   "and lines, not its message.")
    finally:
        heartbeat.stop("failed" if failure is not None or sys.exc_info()[0] is not None else "finished")
        root.removeHandler(lines)
        terminal.close()
        if failure is not None:
            log.error("%s", failure)
        log.info("done in %.2f s", time.perf_counter() - start)
        for handler in (everything, ours):
            handler.flush()
            root.removeHandler(handler)
        full.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        full.close()
        public.close()
    if failure is not None:
        print(f"r2med-eval: {failure}", file=sys.__stderr__, flush=True)
        raise SystemExit(1)

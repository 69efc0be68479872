"""Snakemake's logger plugin ``r2med-eval`` (``snakemake --logger r2med-eval``; ``r2med-eval run`` and ``make`` use
it): the terminal of a run in readable lines, from ``r2med_eval.progress.RunMonitor``. Snakemake's full output stays
in its log file (``.snakemake/log/``, named at the end); ``--verbose`` (``r2med-eval run --verbose``) shows it on
the terminal instead. Snakemake finds the plugin by this module's name."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    pass


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        import atexit

        from r2med_eval.progress import RunMonitor

        self.stream = sys.stdout if getattr(self.common_settings, "stdout", False) else sys.stderr
        self.monitor = RunMonitor(self._write)
        atexit.register(self.monitor.summary)  # a run that ends before Snakemake names its log

    def _write(self, text: str) -> None:
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):  # the terminal went away: the run goes on
            pass

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._emit(record)
        except Exception:  # noqa: BLE001 - a display problem must never stop the run
            self.handleError(record)

    def _emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        m = self.monitor
        if event == LogEvent.RUN_INFO and isinstance(getattr(record, "stats", None), dict):
            m.run_info(record.stats)
        elif event == LogEvent.RESOURCES_INFO:
            m.resources(getattr(record, "cores", None))
        elif event == LogEvent.JOB_INFO:
            m.job_started(record.jobid, record.rule_name, getattr(record, "wildcards", None),
                          getattr(record, "log", None), getattr(record, "benchmark", None))
        elif event == LogEvent.JOB_FINISHED:
            m.job_finished(record.job_id)
        elif event == LogEvent.PROGRESS:
            m.progress(record.done, record.total)
        elif event == LogEvent.JOB_ERROR:
            m.job_failed(getattr(record, "jobid", None), getattr(record, "rule_name", "job"),
                         getattr(record, "log", None))
        elif event in (LogEvent.SHELLCMD, LogEvent.JOB_STARTED, LogEvent.DEBUG_DAG, LogEvent.RULEGRAPH,
                       LogEvent.WORKFLOW_STARTED, LogEvent.GROUP_INFO):
            return
        elif event in (LogEvent.ERROR, LogEvent.GROUP_ERROR):
            m.message(logging.ERROR, record.getMessage())
        elif record.msg is not None:
            m.message(record.levelno, record.getMessage())

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False

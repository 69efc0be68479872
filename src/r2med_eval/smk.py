"""Glue for the thin scripts in ``scripts/``: logging to ``snakemake.log`` and clean failures."""

from __future__ import annotations

import logging
import os
import sys
import time

from .errors import InputError


def run(snakemake, func) -> None:
    """Call ``func(snakemake)`` with stderr and logging sent to the rule's log file.

    A bad-input error is written to the log and, as one line, to the terminal, then the job fails. While the
    job runs, a progress line goes to the terminal every R2MED_EVAL_PROGRESS_SECONDS (``progress.Heartbeat``).
    """
    from .progress import Heartbeat, job_label

    log_path = snakemake.log[0] if len(snakemake.log) else None
    handle = open(log_path, "w", encoding="utf-8") if log_path else sys.stderr
    real_stderr = sys.__stderr__
    sys.stderr = handle
    logging.basicConfig(stream=handle, level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    heartbeat = Heartbeat(job_label(snakemake.rule, snakemake.wildcards), stream=real_stderr).start()
    outcome = "failed"
    try:
        func(snakemake)
        outcome = "finished"
    except InputError as exc:
        logging.getLogger("r2med_eval").error("%s", exc)
        print(f"r2med-eval: {exc}", file=real_stderr)
        handle.flush()
        raise SystemExit(1) from None
    finally:
        heartbeat.stop(outcome)
        logging.getLogger("r2med_eval").info("done in %.2f s", time.perf_counter() - start)
        handle.flush()

"""Stage fuse (rules/fuse.smk): reciprocal rank fusion or linear fusion of named runs."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def fuse_runs(sm) -> None:
    from .. import fusion, io, runs

    job = sm.params.spec
    inputs = [runs.read_run(p) for p in sm.input.runs]
    fused = fusion.fuse(inputs, job["method"], **{n: job[n] for n in ("k", "weights", "depth") if n in job})
    runs.write_run(fused, sm.output.run, tag=sm.wildcards.model, decimals=8)
    io.write_json(sm.output.info, {"kind": "fusion", "method": job["method"], "inputs": job["runs"],
                                   **{k: v for k, v in job.items() if k in ("k", "weights", "depth")}})
    log.info("fused %s with %s into %d queries", ", ".join(job["runs"]), job["method"], len(fused))

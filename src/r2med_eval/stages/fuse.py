"""Stage fuse (rules/fuse.smk): reciprocal rank fusion or linear fusion of named runs."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def fuse_runs(sm) -> None:
    from .. import io
    from ..scoring import fusion, identity, runs

    job = sm.params.spec
    w, fingerprint = sm.wildcards, getattr(sm.input, "fingerprint", None)
    identity.verify_files(sm.input.runs, job["runs"], w.benchmark, w.task, identity.read_fingerprint(fingerprint))
    options = {n: job[n] for n in ("k", "weights", "depth", "convention") if n in job}
    # query by query: each query's fusion reads only that query's documents of each run (fusion.fuse is per query),
    # so no run is held as dicts whole (three full-depth CliniQ runs are 62 M lines)
    inputs = [runs.QueryDocs(p) for p in sm.input.runs]
    qids = sorted({q for run in inputs for q in run.qids()})

    def fused():
        for q in qids:
            yield q, fusion.fuse([{q: run.docs(q)} if q in run else {} for run in inputs], job["method"], **options)[q]

    runs.write_run_stream(fused(), sm.output.run, tag=sm.wildcards.model, decimals=8,
                          identity=identity.of_job(w, fingerprint))
    io.write_json(sm.output.info, {"kind": "fusion", "method": job["method"], "inputs": job["runs"],
                                   **{k: v for k, v in job.items() if k in ("k", "weights", "depth", "convention")}})
    log.info("fused %s with %s into %d queries", ", ".join(job["runs"]), job["method"], len(qids))

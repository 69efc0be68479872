"""Stage fuse (rules/fuse.smk): reciprocal rank fusion, linear fusion or one of ranx's methods, of named runs."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def fuse_runs(sm) -> None:
    from .. import io
    from ..scoring import fusion, identity, runs

    job = sm.params.spec
    w, fingerprint = sm.wildcards, getattr(sm.input, "fingerprint", None)
    identity.verify_files(sm.input.runs, job["runs"], w.benchmark, w.task, identity.read_fingerprint(fingerprint))
    if job["method"] not in fusion.METHODS:
        return _fuse_with_ranx(sm, job, identity.of_job(w, fingerprint))
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


def _fuse_with_ranx(sm, job: dict, made_by: dict) -> None:
    """A fusion by ranx (any method but the pipeline's rrf, minmax and zscore): the runs read whole (ranx fuses every
    query at once), each query's documents handed to ranx in trec_eval's order (``scoring.ranx_fusion``)."""
    from .. import io
    from ..benchmarks import datasets
    from ..scoring import fusion, ranx_fusion, runs

    inputs = fusion.cut([runs.read_run(p) for p in sm.input.runs], job.get("depth"))
    norm = job.get("norm", "min-max")
    info = {"kind": "fusion", "method": job["method"], "inputs": job["runs"],
            **{k: v for k, v in job.items() if k in ("depth", "norm", "params", "optimize")}}
    if job.get("optimize"):  # learned on the training queries only; the fused run holds the others
        train = datasets.read_any_qrels(sm.input.train[0])
        fused, learned = ranx_fusion.fuse_trained(train, inputs, job["method"], norm, job["optimize"]["metric"])
        info.update(learned=learned, training_queries=len(train))
        log.info("learned %s's parameters for %s on %d training queries (%s)", job["method"],
                 job["optimize"]["metric"], len(train), sm.input.train[0])
    else:
        fused = ranx_fusion.fuse(inputs, job["method"], norm, job.get("params"))
    runs.write_run(fused, sm.output.run, tag=sm.wildcards.model, decimals=8, identity=made_by)
    io.write_json(sm.output.info, info)
    log.info("fused %s with ranx's %s (norm %s) into %d queries", ", ".join(job["runs"]), job["method"], norm,
             len(fused))

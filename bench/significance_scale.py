"""Significance tests of the full matrix at R2MED's query counts: about 60 runs (tests/conftest.py's
``full_matrix_runs``) on the eight tasks with ``r2med.PAPER_STATS``' queries (876), random per-query values
(seeded), every run against ``bm25`` with the rule's defaults (10,000 sign flips, 10,000 bootstrap resamples).

    python bench/significance_scale.py

Prints the rows, the wall and CPU time and the peak RSS of ``significance.compute_values`` (the work of rule
``significance``; the per-query files it reads are a few MB). Results: docs/scale.md.
"""
from __future__ import annotations

import random
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]

from conftest import full_matrix_runs  # noqa: E402

from r2med_eval.benchmarks.r2med import PAPER_STATS  # noqa: E402
from r2med_eval.report import significance as sig  # noqa: E402


def main() -> int:
    runs, _ = full_matrix_runs()
    rng = random.Random(0)
    tasks = {("r2med", task): {run: {f"q{i}": rng.random() for i in range(n)} for run in runs}
             for task, (n, _) in PAPER_STATS.items()}
    wall, cpu = time.perf_counter(), time.process_time()
    rows = sig.compute_values(tasks, "bm25")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(runs)} runs x {len(tasks)} tasks, {sum(n for n, _ in PAPER_STATS.values())} queries: {len(rows)} "
          f"rows in {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

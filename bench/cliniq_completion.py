"""Coverage of the judgment completion's 95% intervals against a judge whose truth is known.

The synthetic CliniQ demo (data/cliniq-demo), three full-depth runs, and the fake judge of tests/llm_fake_server.py
(mode ``judge``), which labels every chunk by ``rule_label``, a rule over the query and the chunk's text: the true
false-negative rate of every group (all queries, each query type, each match type, each query) is computed over
every chunk of the population. Each repetition draws the uniform sample with another seed (0, 1, ...) and runs
the stages sample, judge and estimate (tests/completion_fixture.py, no Snakemake); the answers are cached across
repetitions, so only chunks not drawn before are asked. Prints, per estimate, in how many repetitions its 95%
interval holds the truth, and the mean estimate against the truth (bias).

    python bench/cliniq_completion.py --repetitions 100
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]


def run(repetitions: int, sample_per_query: int, pool_depth: int, queries, work: Path) -> dict:
    import completion_fixture as fx
    from llm_fake_server import FakeLLM

    os.chdir(work)
    prepared = fx.prepare(Path("."))
    start = time.perf_counter()
    with FakeLLM() as server:
        server.mode = "judge"
        result = fx.coverage(prepared, server.url, range(repetitions), queries=queries,
                             sample_per_query=sample_per_query, pool_depth=pool_depth)
        asked = len(server.requests)
    rows = [{"scope": s, "group": g, "measure": m, "truth": truth, "covered": hits,
             "mean_estimate": total / repetitions} for (s, g, m), (hits, total, truth) in sorted(result.items())]
    return {"repetitions": repetitions, "sample_per_query": sample_per_query, "pool_depth": pool_depth,
            "queries": queries, "requests_sent": asked, "seconds": round(time.perf_counter() - start, 1),
            "estimates": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repetitions", type=int, default=100)
    ap.add_argument("--sample-per-query", type=int, default=50)
    ap.add_argument("--pool-depth", type=int, default=10)
    ap.add_argument("--queries", default="100", help="N, all, or comma-separated query ids")
    ap.add_argument("--out", help="write the result as JSON here")
    args = ap.parse_args(argv)
    queries = int(args.queries) if args.queries.isdigit() else (
        "all" if args.queries == "all" else args.queries.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.repetitions, args.sample_per_query, args.pool_depth, queries, Path(tmp))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['repetitions']} repetitions, {result['sample_per_query']} sampled chunks per query, pool depth "
          f"{result['pool_depth']}; {result['requests_sent']} requests to the fake judge; {result['seconds']} s")
    print(f"{'scope':<11} {'group':<13} {'measure':<13} {'truth':>8} {'mean est.':>9} {'covered':>8}")
    for r in result["estimates"]:
        print(f"{r['scope']:<11} {r['group']:<13} {r['measure']:<13} {r['truth']:8.4f} {r['mean_estimate']:9.4f} "
              f"{r['covered']:5d}/{result['repetitions']}")
    worst = min(r["covered"] for r in result["estimates"])
    print(f"lowest coverage: {worst}/{result['repetitions']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Coverage of the judgment completion's 95% intervals at CliniQ's real scale, the review's sample-only design.

The simulation (every draw seeded): 100 completed queries (50 "disease", 50 "procedure"), each with a population of
N_q unjudged chunks of uncoded admissions, N_q uniform in [14,000, 16,000] (CliniQ's 16,550 chunks less those of the
query's coded admissions); a uniform sample of 200 chunks per query without replacement (``pool_depth: 0``). For
each mean false-negative rate r, every query gets its own true rate p_q = r w_q, w_q from a Gamma(2, 1/2) draw
rescaled to mean 1 over the queries (queries differ: some have none, some several times r), and K_q = round(p_q N_q)
relevant chunks; the queries and their truth stay fixed, only the draw repeats. In each repetition the number of
relevant chunks sampled for each query is hypergeometric(K_q, N_q - K_q, 200), and the package's own estimator
(``cliniq.completion.rest_interval``, arrays of repetitions x queries) gives the interval of each query and of each
group (all queries; each query type), as the estimate stage does. Coverage: the share of repetitions whose interval
holds the truth. Beside the simulation, each query's exact coverage: the hypergeometric probabilities of every
possible count summed over the counts whose interval holds the truth (no simulation noise).

    python bench/completion_coverage.py --repetitions 1000
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RATES = (0.001, 0.002, 0.005, 0.01, 0.02)


def population(queries: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = rng.integers(14000, 16001, queries)
    weights = rng.gamma(2.0, 0.5, queries)
    return sizes, weights / weights.mean()


def coverage(rate: float, sizes, weights, sample: int, repetitions: int, method: str, seed: int) -> dict:
    import numpy as np
    from scipy.stats import hypergeom

    from r2med_eval.cliniq.completion import rest_interval

    q = len(sizes)
    relevant = np.rint(rate * weights * sizes).astype(int)
    truth = relevant / sizes
    rng = np.random.default_rng([seed, int(rate * 1e6)])
    hits = rng.hypergeometric(relevant, sizes - relevant, sample, size=(repetitions, q))
    n = np.full(hits.shape, sample)

    def held(low, high, true):
        return (low - 1e-12 <= true) & (true <= high + 1e-12)

    _, low, high, _, _ = rest_interval(np.broadcast_to(sizes, hits.shape)[..., None], n[..., None], hits[..., None],
                                       method=method)
    per_query = held(low, high, truth).mean(axis=0)
    groups = {"all": np.arange(q), "disease": np.arange(q // 2), "procedure": np.arange(q // 2, q)}
    group_cov = {}
    for name, idx in groups.items():
        true = relevant[idx].sum() / sizes[idx].sum()
        _, gl, gh, _, _ = rest_interval(np.broadcast_to(sizes[idx], (repetitions, len(idx))), n[:, idx],
                                        hits[:, idx], method=method)
        group_cov[name] = float(held(gl, gh, true).mean())
    # exact per-query coverage: every possible count y = 0..sample with its hypergeometric probability
    ys = np.arange(sample + 1)
    pmf = hypergeom.pmf(ys[None, :], sizes[:, None], relevant[:, None], sample)
    _, el, eh, _, _ = rest_interval(np.broadcast_to(sizes[:, None], pmf.shape)[..., None],
                                    np.full(pmf.shape, sample)[..., None], np.broadcast_to(ys, pmf.shape)[..., None],
                                    method=method)
    exact = (pmf * held(el, eh, truth[:, None])).sum(axis=1)
    return {"rate": rate, "method": method, "queries_without_relevant": int((relevant == 0).sum()),
            "max_query_rate": float(truth.max()),
            "per_query_min": float(per_query.min()), "per_query_p05": float(np.quantile(per_query, 0.05)),
            "per_query_mean": float(per_query.mean()), "queries_below_0.93": int((per_query < 0.93).sum()),
            "queries_below_0.90": int((per_query < 0.90).sum()),
            "exact_per_query_min": float(exact.min()), "exact_per_query_mean": float(exact.mean()),
            **{f"group_{k}": v for k, v in group_cov.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--sample", type=int, default=200, help="uniform sample per query")
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="mean false-negative rates")
    parser.add_argument("--methods", nargs="+", default=["clopper-pearson", "wilson"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    sizes, weights = population(args.queries, args.seed)
    start = time.perf_counter()
    rows = [coverage(r, sizes, weights, args.sample, args.repetitions, m, args.seed)
            for m in args.methods for r in args.rates]
    elapsed = time.perf_counter() - start
    print(f"{args.queries} queries, N_q {sizes.min()}-{sizes.max()}, {args.sample} sampled per query, "
          f"{args.repetitions} repetitions, {elapsed:.1f} s")
    print("| method | mean rate | per query: min (simulated) | below 0.93 | mean | exact min | all | disease | "
          "procedure |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['method']} | {r['rate']:g} | {r['per_query_min']:.3f} | {r['queries_below_0.93']} | "
              f"{r['per_query_mean']:.3f} | {r['exact_per_query_min']:.3f} | {r['group_all']:.3f} | "
              f"{r['group_disease']:.3f} | {r['group_procedure']:.3f} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"seconds": elapsed, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

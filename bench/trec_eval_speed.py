"""Benchmark: ``r2med-eval eval`` against trec_eval 10.0 (and optionally ir_measures and ranx) on a 2 M-line run, as
whole processes, paired and alternating (issue 39.1; docs/scale.md).

    python bench/trec_eval_speed.py generate --out /tmp/b2m
    python bench/trec_eval_speed.py compare --out /tmp/b2m --trec-eval /path/to/trec_eval --repeats 7 \\
        [--python-ir-measures /tmp/venv/bin/python] [--python-ranx /tmp/venv/bin/python]

``generate`` writes ``run.trec`` (2,000 queries x 1,000 documents of a 500,000-document corpus, scores with 4
decimals so that some tie, each query's lines score-descending) and ``qrels.txt`` (about 40 judgments a query, half
of them among the query's retrieved documents, grades 0, 0, 1, 2 drawn uniformly: 80,000 graded judgments), seeded.

``compare`` runs, in turn and ``--repeats`` times, ``python -m r2med_eval eval qrels.txt run.trec -m nDCG@10 R@100 AP
RR P@10`` (this checkout) and ``trec_eval -m ndcg_cut.10 -m recall.100 -m map -m recip_rank -m P.10 qrels.txt
run.trec`` (build trec_eval 10.0 from https://github.com/usnistgov/trec_eval with ``make``), and, where a Python
with them is given, ir_measures' and ranx's evaluation of the same files in a fresh process each. Each process is
measured from outside (``wait4``: wall, user + system CPU, peak RSS); r2med-eval's figures must equal
trec_eval's to 4 decimals (exit 1 otherwise), the others' differences are printed. Prints each side's medians and
the medians of the paired ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEASURES = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "AP": "map", "RR": "recip_rank", "P@10": "P_10"}
IR_MEASURES = """
import sys, ir_measures
from ir_measures import nDCG, R, AP, RR, P
qrels = ir_measures.read_trec_qrels(sys.argv[1])
run = ir_measures.read_trec_run(sys.argv[2])
res = ir_measures.calc_aggregate([nDCG@10, R@100, AP, RR, P@10], qrels, run)
names = {"nDCG@10": nDCG@10, "R@100": R@100, "AP": AP, "RR": RR, "P@10": P@10}
print("\\n".join(f"{n}\\tall\\t{res[m]:.4f}" for n, m in names.items()))
"""
RANX = """
import sys
from ranx import Qrels, Run, evaluate
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
res = evaluate(qrels, run, ["ndcg@10", "recall@100", "map", "mrr", "precision@10"], make_comparable=True)
names = {"nDCG@10": "ndcg@10", "R@100": "recall@100", "AP": "map", "RR": "mrr", "P@10": "precision@10"}
print("\\n".join(f"{n}\\tall\\t{res[m]:.4f}" for n, m in names.items()))
"""


def generate(out: Path, seed: int = 0) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    n_queries, depth, corpus, judged = 2000, 1000, 500_000, 40
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "run.trec", "w") as run, open(out / "qrels.txt", "w") as qrels:
        for i in range(n_queries):
            docs = rng.choice(corpus, depth, replace=False)
            scores = np.round(rng.normal(10, 3, depth), 4)
            order = np.lexsort((docs, -scores))
            run.write("".join(f"q{i} Q0 d{docs[j]} {k} {scores[j]:.4f} run\n" for k, j in enumerate(order, 1)))
            pool = np.unique(np.concatenate([rng.choice(docs, judged // 2, replace=False),
                                             rng.choice(corpus, judged // 2, replace=False)]))
            grades = rng.choice([0, 0, 1, 2], len(pool))
            qrels.write("".join(f"q{i} 0 d{d} {g}\n" for d, g in zip(pool, grades)))


def _timed(cmd, env=None):
    """Run ``cmd`` and account it with wait4 (Popen's own wait would reap it first)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({proc.returncode})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode()


def _figures(text: str) -> dict[str, str]:
    back = {v: k for k, v in MEASURES.items()}
    out = {}
    for line in text.splitlines():
        name, qid, value = (p.strip() for p in line.split("\t"))
        if qid == "all":
            out[back.get(name, name)] = value
    return out


def compare(args) -> int:
    qrels, run = str(args.out / "qrels.txt"), str(args.out / "run.trec")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    sides = {"r2med-eval": ([sys.executable, "-m", "r2med_eval", "eval", qrels, run, "-m", *MEASURES], env),
             "trec_eval": ([args.trec_eval, *[x for m in ("ndcg_cut.10", "recall.100", "map", "recip_rank", "P.10")
                                              for x in ("-m", m)], qrels, run], None)}
    if args.python_ir_measures:
        sides["ir_measures"] = ([args.python_ir_measures, "-c", IR_MEASURES, qrels, run], None)
    if args.python_ranx:
        sides["ranx"] = ([args.python_ranx, "-c", RANX, qrels, run], None)
    rows = {s: [] for s in sides}
    reference = None
    for _ in range(args.repeats + 1):  # the first round warms the caches and is not counted
        for name, (cmd, side_env) in sides.items():
            wall, cpu, peak, out = _timed(cmd, side_env)
            figures = _figures(out)
            reference = reference or (figures if name == "trec_eval" else None)
            rows[name].append((wall, cpu, peak, figures))
    ok = True
    for name in sides:
        rows[name] = rows[name][1:]
        differ = {k: v for k, v in rows[name][0][3].items() if reference.get(k) != v}
        if differ or any(r[3] != rows[name][0][3] for r in rows[name]):
            ok = ok and name != "r2med-eval"  # the others' ties are theirs (ranx: numba's sort)
            print(f"{name}: {differ} where trec_eval gives {({k: reference[k] for k in differ})}")
    print(f"figures (trec_eval): {json.dumps(reference)}")
    print(f"{'side':<12}{'wall s':>9}{'cpu s':>9}{'peak MB':>9}{'wall/te':>9}{'cpu/te':>9}   (medians of "
          f"{args.repeats} alternating rounds; ratios: medians of the paired ratios)")
    te = rows["trec_eval"]
    for name, rs in rows.items():
        med = [statistics.median(r[i] for r in rs) for i in range(3)]
        ratio = [statistics.median(a[i] / b[i] for a, b in zip(rs, te)) for i in range(2)]
        print(f"{name:<12}{med[0]:>9.2f}{med[1]:>9.2f}{med[2]:>9.0f}{ratio[0]:>9.2f}{ratio[1]:>9.2f}")
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write the 2 M-line run and its qrels")
    gen.add_argument("--out", type=Path, required=True)
    gen.add_argument("--seed", type=int, default=0)
    cmp_ = sub.add_parser("compare", help="paired whole-process timings")
    cmp_.add_argument("--out", type=Path, required=True, help="the folder `generate` wrote")
    cmp_.add_argument("--trec-eval", required=True, help="a trec_eval 10.0 binary")
    cmp_.add_argument("--repeats", type=int, default=7)
    cmp_.add_argument("--python-ir-measures", help="a Python with ir_measures installed")
    cmp_.add_argument("--python-ranx", help="a Python with ranx installed")
    args = parser.parse_args(argv)
    if args.command == "generate":
        generate(args.out, args.seed)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())

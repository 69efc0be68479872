"""Benchmark: the rules that read whole runs, on the full-depth CliniQ runs of a full-matrix working directory
(issue 28; docs/scale.md): this checkout against an earlier commit (``--anchor``), paired, as child processes.

A CliniQ run at ``depth: full`` ranks all 16,550 chunks for each of the 1,246 queries: 20.6 M lines, about 1 GB.
Four rules read such runs:

* ``score_run``: trec_eval's measures of one run (``--run``, default the largest);
* ``rerank_run``: a truncating reranker at depth 10 over a full-depth run (``--rerank``);
* ``fuse_runs``: a reciprocal-rank fusion of three full-depth runs (``--fusion``);
* ``report_cliniq``: the tables and the pool of unjudged chunks over the benchmark's runs; the first
  ``--report-runs`` of them (the earlier code reads every run whole at once: all of them do not fit in memory).

Each side runs the rule's own stage function in a fresh process (``PYTHONPATH`` the side's ``src/``; the anchor's
whole tree is extracted with ``git archive``, its schema and data files included), with the
rule's inputs and params from that side's control layer (``Workflow``) and the working directory's configuration
(``--configfile``, the files the run was made with), writing its outputs to a temporary folder. Every repeat's
outputs must be byte-identical between the two sides (exit 1 if not). Prints, per rule, each side's median wall and
peak RSS (``wait4`` of the child) and the median of the paired ratios.

    python bench/large_runs.py --workdir /work/scratch/r2med-full/run --anchor 9de4bfb --repeats 3 \\
        --configfile config.yaml config/r2med.yaml ... /work/scratch/r2med-full/synthetic/matrix.yaml
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RULES = ("score_run", "rerank_run", "fuse_runs", "report_cliniq")
BENCH = TASK = "cliniq"


def _workflow(configfiles: list[str]):
    """The control layer of the run's configuration, files merged key by key as Snakemake merges them."""
    import yaml
    from snakemake.utils import update_config

    from r2med_eval.workflow import config
    from r2med_eval.workflow.control import Workflow

    raw: dict = {}
    for f in configfiles:
        update_config(raw, yaml.safe_load(Path(f).read_text(encoding="utf-8")))
    return Workflow(config.validate(raw))


def _outputs(rule: str, out: Path):
    from types import SimpleNamespace

    names = {"score_run": ("metrics", "per_query"), "rerank_run": ("run", "scores", "info"),
             "fuse_runs": ("run", "info"),
             "report_cliniq": ("match_csv", "match_md", "query_csv", "query_md", "match_tex", "query_tex",
                               "pool")}[rule]
    return SimpleNamespace(**{n: str(out / n) for n in names})


def child(args) -> None:
    """One rule's stage function on one job, in this process, with the ``r2med_eval`` found on PYTHONPATH."""
    import logging
    from types import SimpleNamespace

    from r2med_eval.stages import fuse, report, rerank, score
    from r2med_eval.workflow import paths

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.chdir(args.workdir)
    w = _workflow(args.configfile)
    wc = SimpleNamespace(benchmark=BENCH, task=TASK, model=args.model)
    names = {"benchmark": BENCH, "task": TASK, "model": args.model}
    if args.rule == "score_run":  # the rule's inputs are path patterns
        inputs = {k: paths.fill(p, **names) for k, p in (("run", paths.RUN), ("qrels", paths.QRELS),
                                                         ("queries", paths.QUERIES))}
    elif args.rule == "fuse_runs":
        inputs = {"runs": list(w.inputs.fuse_runs(wc))}
    else:
        inputs = getattr(w.inputs, args.rule)(wc)
    pattern = getattr(paths, "CORPUS_IDS", None)  # the rules add the corpus fingerprint (an anchor may predate it)
    if pattern and args.rule in ("score_run", "fuse_runs"):
        inputs["fingerprint"] = paths.fill(pattern, benchmark=BENCH, task=TASK)
    spec = w.params.of(args.rule)(wc)
    if args.rule == "report_cliniq":  # the first n runs of the benchmark
        n = args.report_runs
        spec = {**spec, "models": list(spec["models"])[:n],
                "tie_orders": {m: spec["tie_orders"][m] for m in list(spec["models"])[:n]}}
        inputs = {**inputs, "metrics": inputs["metrics"][:n], "runs": inputs["runs"][:n]}
    sm = SimpleNamespace(input=SimpleNamespace(**inputs), output=_outputs(args.rule, Path(args.out)),
                         params=SimpleNamespace(spec=spec), wildcards=wc, log=[], threads=2,
                         config={"phi_servers": []}, resources=SimpleNamespace(gpu=0))
    stage = {"score_run": score, "rerank_run": rerank, "fuse_runs": fuse, "report_cliniq": report}[args.rule]
    getattr(stage, args.rule)(sm)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", required=True, help="the full matrix's working directory")
    ap.add_argument("--configfile", nargs="+", required=True, help="the configuration files of that run, in order")
    ap.add_argument("--anchor", help="the earlier commit to compare with (required)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--run", default="e5-mistral-7b-instruct", help="score_run's run")
    ap.add_argument("--rerank", default="nv-embed-v2--monobert-large@10", help="rerank_run's job")
    ap.add_argument("--fusion", default="rrf-bm25-bge-nv", help="fuse_runs' job")
    ap.add_argument("--report-runs", type=int, default=4, help="report_cliniq over the benchmark's first n runs")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--child", choices=RULES, dest="rule", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rule:
        child(args)
        return 0
    if not args.anchor:
        ap.error("--anchor is required")

    sys.path.insert(0, str(HERE))
    from _paired import REPO, anchor_src, env_with, median, summary, timed

    configfiles = [str(Path(f).resolve()) for f in args.configfile]
    model = {"score_run": args.run, "rerank_run": args.rerank, "fuse_runs": args.fusion, "report_cliniq": BENCH}
    figures, same = {}, True
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sides = {f"@{args.anchor}": anchor_src(args.anchor, tmp / "anchor", paths=()), "this checkout": REPO / "src"}
        for rule in args.rules.split(","):
            walls = {s: [] for s in sides}
            rss = {s: [] for s in sides}
            for i in range(args.repeats):
                outs = {}
                for side, src in sides.items():
                    out = tmp / f"{rule}-{i}-{len(outs)}"
                    out.mkdir()
                    cmd = [sys.executable, __file__, "--child", rule, "--model", model[rule], "--out", str(out),
                           "--workdir", args.workdir, "--report-runs", str(args.report_runs),
                           "--configfile", *configfiles]
                    wall, peak, _ = timed(cmd, env=env_with(src, HF_HUB_OFFLINE=1))
                    walls[side].append(wall)
                    rss[side].append(peak)
                    outs[side] = out
                a, b = outs.values()
                for f in sorted(p.name for p in a.iterdir()):
                    if f in ("metrics", "info"):  # JSON naming the run's path or a timing: compare the values
                        x, y = (json.loads((d / f).read_text()) for d in (a, b))
                        for drop in ("seconds", "pairs_per_second", "run"):
                            x.pop(drop, None), y.pop(drop, None)
                        ok = x == y
                    else:
                        ok = filecmp.cmp(a / f, b / f, shallow=False)
                    if not ok:
                        same = False
                        print(f"{rule}: {f} differs between the sides", file=sys.stderr)
            base = f"@{args.anchor}"
            print("\n".join(summary(f"{rule} ({model[rule]})", walls, rss, base, ["this checkout"])), flush=True)
            figures[rule] = {"job": model[rule], "repeats": args.repeats,
                             **{side: {"wall_s": median(walls[side]), "peak_mb": median(rss[side])} for side in sides},
                             "speed_up": median([b / a for a, b in zip(walls["this checkout"], walls[base])])}
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print("outputs identical" if same else "OUTPUTS DIFFER", flush=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""The ``r2med-eval`` command (``python -m r2med_eval``): the library's scoring, significance and fusion on files,
with the same numbers as the pipeline, and the workflow itself.

    r2med-eval eval qrels.tsv run.trec -m nDCG@10 R@100        # trec_eval-style lines: metric, query, value
    r2med-eval eval qrels.tsv run.trec -m ndcg_cut_10 -q --format json
    r2med-eval compare qrels.tsv bm25.trec minilm.trec --baseline bm25
    r2med-eval fuse bm25.trec minilm.trec --method rrf -o fused.trec
    r2med-eval run --cores 8                                   # snakemake --cores 8 --rerun-incomplete all
    r2med-eval build-medquad resources/medquad                 # MedQuAD / LiveQA-Med in BEIR layout (network)

Documented in docs/api.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from .errors import InputError

DEFAULT_METRICS = ("nDCG@10", "R@100", "P@10", "AP@100", "RR")


def _measures(names: list[str]) -> list[str]:
    """``-m`` values, each once (trec_eval's comma lists, ``P.5,10``, expand in ``metrics.measures``)."""
    return list(dict.fromkeys(names))


def _fields(path) -> int | None:
    """The fields of the first line of a text file that is not blank or a comment (None: none, or unreadable)."""
    try:
        with open(path, "rb") as handle:
            for _ in range(100):
                raw = handle.readline(1 << 16)
                if not raw:
                    return None
                parts = raw.split()
                if parts and not parts[0].startswith(b"#"):
                    return len(parts)
    except OSError:
        return None
    return None


def _swapped(qrels, run) -> None:
    """Stop with a hint when the two files look like a run and qrels in the wrong order."""
    from .scoring import binrun

    if Path(qrels).is_file() and Path(run).is_file() and not binrun.is_binary(run) and (
            binrun.is_binary(qrels) or (_fields(qrels) or 0) >= 6 and _fields(run) in (3, 4)):
        raise InputError("the judgments argument looks like a run and the run like judgments.", path=qrels,
                         fix="give the qrels first: r2med-eval eval QRELS RUN.")


def _read_qrels(args):
    from . import api

    return api.read_qrels(args.qrels, split=args.split, duplicates=args.duplicate_qrels,
                          duplicate_fix="pass --duplicate-qrels max, first or last to merge them.")


def _identity(args, files, names=None) -> None:
    """With ``--benchmark``: a run that carries what made it (the pipeline's: a binary run's metadata, a TREC run's
    sidecar) must be the run its file (or ``--names``) names, of that benchmark and ``--task``, over the corpus whose
    fingerprint lies beside the qrels where the pipeline wrote them (``scoring.identity.verify_given``)."""
    if not args.benchmark:
        return
    from .scoring import identity
    from .scoring.runfile import regular_file

    corpus = identity.fingerprint_beside(args.qrels)
    for i, path in enumerate(files):
        identity.verify_given(regular_file(path), run=names[i] if names else identity.name_of(path),
                              benchmark=args.benchmark, task=args.task or None, corpus=corpus)


def cmd_eval(args) -> int:
    from . import api
    from .scoring import metrics, trec_all, trec_jg, zscores

    names = _measures(args.metrics or list(DEFAULT_METRICS))
    chosen = metrics.chosen(names)
    _swapped(args.qrels, args.run)
    _identity(args, [args.run])
    groups, prefs = _rel_format(args, chosen)
    table = zscores.read(args.zscores) if args.zscores else None
    qrels = None if prefs is not None else _read_qrels(args) if groups is None else trec_jg.merged(groups)
    complete = False if args.retrieved_only else True if args.complete else None
    result = api.evaluate(qrels, args.run, metrics=chosen, ignore_identical_ids=args.ignore_identical_ids,
                          level=args.level, depth=args.depth, complete=complete, judged_only=args.judged_only,
                          num_docs=args.num_docs, zscores=table, judgment_groups=groups, preferences=prefs)
    c = result["counts"]
    if args.retrieved_only and not c["judged_queries_scored"]:
        raise InputError(f"the run retrieved nothing for any of the {c['judged_queries_with_empty_run']} judged "
                         "queries, so --retrieved-only averages over none (every figure would be NaN).",
                         path=args.run, fix="check that the run's query ids are those of the judgments, or drop "
                                            "--retrieved-only (every judged query then counts, scoring 0 where the "
                                            "run retrieved nothing: trec_eval -c).")
    keys = [m.name for m in chosen]
    if args.format == "json":
        out = {"qrels": args.qrels, "run": args.run, "metrics": result["metrics"], "counts": result["counts"]}
        if args.per_query:
            out["per_query"] = result["per_query"]
        print(json.dumps(out, indent=1))
        return 0
    z = "Z" if table is not None else ""
    counts = {m.name for m in chosen if m.family in metrics.COUNT_FAMILIES} if not z else set()
    silent = {m.name for m in chosen if m.family in metrics.PER_QUERY_SILENT}
    strings = {m.name for m in chosen if m.family in trec_all.STRINGS}

    def shown(name, value):
        if name in strings:
            return f"'{value}'" if name not in silent else str(value)
        if value != value:  # nan: trec_eval's 0 / 0, which C's printf shows as -nan
            return "-nan"
        return str(int(round(value))) if name in counts else f"{value:.{args.decimals}f}"

    lines = []
    if args.per_query:
        for qid, row in result["per_query"].items():
            lines += [f"{'' if name in strings else z}{name}\t{qid}\t{shown(name, row[name])}" for name in keys
                      if name not in silent]
    lines += [f"{'' if name in strings else z}{name}\tall\t{shown(name, result['metrics'][name])}" for name in keys
              if name in result["metrics"]]
    print("\n".join(lines))
    return 0


def _rel_format(args, chosen) -> tuple:
    """trec_eval's ``-R``: (judgments in groups, preferences), None where not given: ``qrels`` (the judgments as
    read_qrels reads them), ``qrels_jg`` (judgments in groups, ``scoring.trec_jg``), ``prefs`` or ``qrels_prefs``
    (preferences, ``scoring.trec_prefs``); only the format's measures, num_q and runid read it, as in trec_eval."""
    from .scoring import trec_jg, trec_prefs

    if args.rel_format == "qrels":
        return None, None
    if args.rel_format not in ("qrels_jg", *trec_prefs.FORMATS):
        raise InputError(f"-R {args.rel_format}: not a format of trec_eval's judgments.",
                         fix="use -R qrels (the default), qrels_jg, prefs or qrels_prefs.")
    grouped = args.rel_format == "qrels_jg"
    module = trec_jg if grouped else trec_prefs
    other = [m.name for m in chosen if m.family not in module.FAMILIES + ("num_q", "runid")]
    if other:
        raise InputError(f"-R {args.rel_format}: {other[0]} does not read {module.WHAT} (trec_eval cannot compute it "
                         "either).", fix=f"name {module.NAMES}.")
    return (trec_jg.read(args.qrels), None) if grouped else (None, trec_prefs.read(args.qrels, args.rel_format))


def cmd_compare(args) -> int:
    from . import api
    from .report import significance

    if args.names and len(args.names) != len(args.runs):
        raise InputError(f"--names gives {len(args.names)} names for {len(args.runs)} runs.", fix="one name per run.")
    runs = dict(zip(args.names, args.runs)) if args.names else list(args.runs)
    _identity(args, args.runs, args.names)
    measures = list(dict.fromkeys(args.metric or ["ndcg_at_10"]))
    if args.baseline is None:
        return _compare_pairs(args, runs, measures)
    rows = []
    for measure in measures:
        rows += api.compare(runs, _read_qrels(args), baseline=args.baseline, metric=measure,
                            ignore_identical_ids=args.ignore_identical_ids, permutations=args.permutations,
                            resamples=args.bootstrap, seed=args.seed, alpha=args.alpha, benchmark=args.benchmark,
                            task=args.task)
    if args.format == "csv":
        sys.stdout.write(significance.to_csv(rows))
    elif args.format == "json":
        print(json.dumps(rows, indent=1))
    elif args.format == "latex":
        raise InputError("--format latex is the table of every pair (without --baseline).",
                         fix="drop --baseline, or use --format md, csv or json.")
    else:
        sys.stdout.write(significance.to_markdown(rows, args.baseline, args.alpha, args.permutations, args.bootstrap))
    return 0


def _compare_pairs(args, runs, measures) -> int:
    """``compare`` without ``--baseline``: every pair on every measure, ranx's test, Holm over the family."""
    from . import api
    from .scoring import comparison

    rows = api.compare_pairs(runs, _read_qrels(args), metrics=measures, test=args.test, alpha=args.alpha,
                             correction=args.correction, permutations=args.permutations, seed=args.seed,
                             ignore_identical_ids=args.ignore_identical_ids)
    names = list(dict.fromkeys([r["a"] for r in rows] + [r["b"] for r in rows]))
    if args.format == "csv":
        sys.stdout.write(comparison.to_csv(rows))
    elif args.format == "json":
        print(json.dumps(rows, indent=1))
    else:
        report = comparison.report(rows, names, measures, args.test, args.alpha)
        print(report.to_latex() if args.format == "latex" else report.to_table())
        if args.format == "md":
            print(f"\nSuperscripts: the runs a mean is significantly above ({args.test}, "
                  f"{'Holm-adjusted ' if args.correction == 'holm' else ''}p <= {args.alpha}; {len(rows)} tests).")
    return 0


def _check_output(path: str) -> None:
    target = Path(path)
    if target.is_dir():
        raise InputError("the output is a folder.", path=target, fix="name a file, e.g. -o fused.trec (or "
                                                                      "fused.run.npz for the binary format).")
    if target.exists() and not target.is_file():
        raise InputError("the output is not a regular file.", path=target, fix="name a file, e.g. -o fused.trec.")


def cmd_fuse(args) -> int:
    from . import api
    from .scoring import fusion, runs

    if args.weights is not None and len(args.weights) != len(args.runs):
        raise InputError(f"--weights gives {len(args.weights)} weights for {len(args.runs)} runs.",
                         fix="give one weight per run, in the order of the runs.")
    if args.weights is not None and args.method == "rrf":
        raise InputError("--weights applies to the linear methods (minmax, zscore), not to rrf.",
                         fix="drop --weights, or pass --method minmax or zscore.")
    if args.weights is not None and not any(args.weights):
        raise InputError(f"--weights are all 0 for the {len(args.runs)} runs: every fused score would be 0, the "
                         "order that of the document ids alone.", fix="give at least one run a weight other than 0.")
    if args.output != "-":
        _check_output(args.output)
    params = _params(args.param)
    if args.weights is not None and args.method not in fusion.METHODS:
        params.setdefault("weights", list(args.weights))
    if args.method in fusion.METHODS and (params or args.norm != "min-max") and not args.optimize:
        raise InputError(f"--norm and --param apply to ranx's methods, not to {args.method}.",
                         fix="drop them (rrf: --k; minmax, zscore: --weights, --convention), or name one of ranx's.")
    if args.optimize:
        if not args.train_qrels:
            raise InputError("--optimize learns on declared training queries: --train-qrels is missing.",
                             fix="pass --train-qrels FILE with the judgments of the training queries only.")
        fused, learned = api.optimize_fusion(api.read_qrels(args.train_qrels), list(args.runs), args.method,
                                             norm=args.norm, metric=args.optimize, depth=args.depth)
        print(f"r2med-eval: learned on {args.train_qrels}'s queries ({args.optimize}): {json.dumps(learned)[:400]}; "
              "the fused run holds the other queries", file=sys.stderr)
    else:
        fused = api.fuse(list(args.runs), args.method, k=args.k, weights=args.weights, depth=args.depth,
                         convention=args.convention, norm=args.norm, params=params)
    if not any(fused.values()):  # fusion keeps every document of every run: only empty runs fuse to nothing
        raise InputError(f"every run given holds no entry ({', '.join(map(str, args.runs))}): there is nothing "
                         "to fuse.", fix="give runs with retrieved documents (check the files and their paths).")
    if args.output == "-":
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            runs.write_run(fused, Path(tmp) / "fused.trec", tag=args.tag, decimals=8)
            sys.stdout.write((Path(tmp) / "fused.trec").read_text(encoding="utf-8"))
    else:
        n = runs.write_run(fused, args.output, tag=args.tag, decimals=8)
        print(f"r2med-eval: fused {len(args.runs)} runs ({args.method}) into {args.output}: {len(fused)} queries, "
              f"{n} lines", file=sys.stderr)
    return 0


def _params(items) -> dict:
    """``--param name=value`` (a JSON value: 0.5, [0.7, 0.3], true), ranx's parameters of a fusion method."""
    out = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError(f"--param {item!r} is not name=value.", fix="write e.g. --param gamma=0.5 or "
                                                                        "--param weights=[0.7,0.3].")
        try:
            out[name] = json.loads(text)
        except ValueError:
            raise InputError(f"--param {item!r}: {text!r} is not a number, a list or true/false.",
                             fix="write e.g. --param phi=0.8 or --param weights=[0.7,0.3].") from None
    return out


def _count(text: str, low: int = 1) -> int:
    """An argument that is a whole number of at least ``low``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} is below {low}")
    return value


def _level(text: str) -> int:
    return _count(text, 0)


def _finite(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _rrf_k(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative (RRF adds k to each rank: 1 / (k + rank))")
    return int(value) if value == int(value) else value


def checkout() -> Path | None:
    """The r2med-eval checkout to run: the working directory if it holds the Snakefile, else the checkout this
    package was installed from (an editable install)."""
    for folder in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (folder / "Snakefile").is_file() and (folder / "rules").is_dir():
            return folder
    return None


def _given(extra: list[str], *names: str) -> bool:
    """Whether a Snakemake option is among the passed-through arguments (``--opt``, ``--opt=x``, ``-d x``)."""
    return any(a == n or a.startswith(n + "=") for a in extra for n in names)


def run_command(args, extra: list[str]) -> list[str]:
    """``snakemake`` as the README's command 1 runs it (``--cores``, ``--rerun-incomplete``, target ``all``), with
    the repository's SLURM profile under ``--slurm``, and the remaining arguments passed through. Run in a folder
    that is neither the checkout nor holds a config.yaml of its own, the checkout is the working directory
    (``--directory``: its config.yaml and the demo's relative paths); ``--configfile`` paths are taken from where
    the command runs, else from the checkout. The terminal shows one line
    per finished job (the logger plugin ``r2med-eval``, ``progress.RunMonitor``) unless ``--verbose`` (Snakemake's
    own output), a dry run, or ``--logger`` of the user's."""
    import importlib.util

    from . import progress

    if importlib.util.find_spec("snakemake") is None:
        raise InputError("Snakemake is not installed in this environment.",
                         fix="install the pinned requirements (make setup, or pip install -r requirements.lock).")
    repo = checkout()
    if repo is None:
        raise InputError("no r2med-eval checkout here (a folder with the Snakefile and rules/).",
                         fix="run it in your clone of r2med-eval (pip install -e . from it).")
    extra = list(extra)
    in_configfiles = False
    for i, a in enumerate(extra):  # relative config files: where the command runs, else the checkout's
        if a.startswith("-"):
            in_configfiles = a in ("--configfile", "--configfiles")
            continue
        if in_configfiles and not Path(a).is_absolute():
            found = [p for p in (Path(a), repo / a) if p.is_file()]
            extra[i] = str(found[0].resolve()) if found else a
    cmd = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile")]
    if (repo.resolve() != Path.cwd().resolve() and not (Path.cwd() / "config.yaml").is_file()
            and not _given(extra, "--directory", "-d")):  # a folder without its own config.yaml: the checkout's
        cmd += ["--directory", str(repo)]
    if args.slurm:
        cmd += ["--profile", str(repo / "profiles" / "slurm")]
    else:
        cmd += ["--cores", str(args.cores)]
    cmd += ["--rerun-incomplete"]
    verbose = getattr(args, "verbose", False)
    quiet_terminal = not (verbose or _given(extra, "--logger", "--dry-run", "--dryrun", "-n", "--verbose",
                                                   "--report", "--lint", "--unlock", "--summary", "--detailed-summary",
                                                   "--list-rules", "--list", "-l", "--dag", "--rulegraph"))
    if quiet_terminal:
        cmd += [f"--logger={progress.PLUGIN}"]  # "=": the option takes several values
    if verbose:
        cmd += ["--verbose"]
    cmd += extra
    if not [a for a in extra if not a.startswith("-")] and "--report" not in extra:
        cmd.append("all")  # no target given: the default job
    return cmd


def cmd_run(args, extra: list[str]) -> int:
    cmd = run_command(args, extra)
    print("r2med-eval: " + " ".join(cmd[1:]), file=sys.stderr)
    if "--directory" in cmd and "--directory" not in extra:
        print(f"r2med-eval: working directory {cmd[cmd.index('--directory') + 1]} (the checkout: its config.yaml, "
              "results/ and logs/)", file=sys.stderr)
    return subprocess.call(cmd)


def cmd_build_medquad(args) -> int:
    from .benchmarks import medquad

    info = medquad.build(args.out, pool=args.pool, sources=args.sources)
    print(json.dumps(info, indent=1))
    return 0


def parser() -> argparse.ArgumentParser:
    from . import __version__
    from .scoring.fusion import METHODS
    from .scoring.ranx_fusion import METHODS as RANX_METHODS
    from .scoring.ranx_fusion import NORMS

    top = _Parser(prog="r2med-eval", description="Medical retrieval evaluation: score, compare and "
                  "fuse TREC runs as the r2med-eval pipeline does, or run the pipeline.")
    top.add_argument("--version", action="version", version=f"r2med-eval {__version__}")
    sub = top.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def qrels_options(p):
        p.add_argument("qrels", help="judgments: TREC qrels, BEIR qrels/<split>.tsv, R2MED qrels.jsonl, or a task "
                                     "folder")
        p.add_argument("--split", default="test", help="BEIR split when QRELS is a folder (default test)")
        p.add_argument("--duplicate-qrels", default="error", choices=["error", "max", "first", "last"],
                       help="a query-document pair judged twice: stop (default, as trec_eval) or merge")
        p.add_argument("--ignore-identical-ids", action="store_true",
                       help="drop retrieved documents whose id is the query id (BEIR's option)")

    p = sub.add_parser("eval", help="score a run (trec_eval's measures)",
                       description="Score a run: one line per measure, `metric<TAB>query<TAB>value` as "
                                   "trec_eval prints (query `all` for the mean over the judged queries), or JSON. "
                                   "The run is read as trec_eval 10.0 reads it (comment lines, fields after the "
                                   "sixth ignored), with the pipeline's checks (finite scores in trec_eval's "
                                   "number syntax, no document twice for a query).")
    qrels_options(p)
    p.add_argument("run", help="a TREC run file (or a binary .run.npz run of the pipeline)")
    p.add_argument("-m", "--metrics", nargs="+", action="extend", metavar="METRIC",
                   help="ir_measures names (nDCG@10 R@100 P@10 AP@100 RR RR@10 Success@10 P(rel=2)@10 Judged@10) "
                        "or trec_eval's (ndcg_cut_10 recall_100 P.5,10 map_cut_100 recip_rank map num_ret num_rel "
                        "num_rel_ret gm_map iprec_at_recall Rprec_mult official); default: "
                        + " ".join(DEFAULT_METRICS))
    p.add_argument("-q", "--per-query", action="store_true", help="per-query values too (trec_eval -q)")
    p.add_argument("-c", "--complete", action="store_true",
                   help="average over every judged query, one the run misses scoring 0 (trec_eval -c; the default, "
                        "as the pipeline)")
    p.add_argument("--retrieved-only", action="store_true",
                   help="average over the judged queries the run retrieved for instead (trec_eval 9 without -c, "
                        "pytrec_eval, ir_measures)")
    p.add_argument("-l", "--level", type=_level, default=1, metavar="N",
                   help="relevance level: grades below N count as not relevant (trec_eval -l; default 1)")
    p.add_argument("-M", "--depth", type=_count, metavar="N",
                   help="only the first N documents of each query, in trec_eval's order (trec_eval -M)")
    p.add_argument("-J", "--judged-only", action="store_true",
                   help="drop the documents without a judgment before ranking (trec_eval -J)")
    p.add_argument("-N", "--num-docs", type=_level, default=0, metavar="N",
                   help="documents in the collection, for utility's fourth parameter (trec_eval -N; default 0)")
    p.add_argument("-Z", "--zscores", metavar="FILE",
                   help="print each value as a z-score against FILE's `qid measure mean stddev` lines (trec_eval -Z)")
    p.add_argument("-R", "--rel-format", default="qrels", metavar="FORMAT",
                   help="the judgments' format (trec_eval -R): qrels (the default), qrels_jg (qid jg docno rel: "
                        "judgment groups, for map_avgjg, P_avgjg, Rprec_mult_avgjg), prefs (qid jg jsg docno level: "
                        "preferences) or qrels_prefs (TREC qrels as preferences), for the preference measures "
                        "(prefs, all_prefs)")
    p.add_argument("--format", choices=["trec", "json"], default="trec")
    p.add_argument("--decimals", type=_level, default=4, help="decimals of the trec format (default 4, as trec_eval)")
    p.add_argument("--benchmark", default="", help="check that a run the pipeline wrote is of this benchmark (its "
                                                   "name, --task and corpus too)")
    p.add_argument("--task", default="", help="with --benchmark: the task the run must be of")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("compare", help="significance table against a baseline",
                       description="Every run against the baseline, as the pipeline's significance stage: paired "
                                   "t-test and randomization test, Holm-corrected, 95% bootstrap intervals.")
    qrels_options(p)
    p.add_argument("runs", nargs="+", help="TREC run files (named after their file names, or --names)")
    p.add_argument("--baseline", help="the run the others are tested against (the pipeline's significance table); "
                                       "without it, every pair is tested with --test")
    p.add_argument("--names", nargs="+", help="the runs' names, in order")
    p.add_argument("-m", "--metric", nargs="+", action="extend", metavar="METRIC",
                   help="the measures (any eval takes; default ndcg_at_10, i.e. nDCG@10)")
    p.add_argument("--test", choices=["student", "fisher", "tukey"], default="student",
                   help="every pair: ranx's test (paired t-test, Fisher's randomization test, Tukey's HSD)")
    p.add_argument("--correction", choices=["holm", "none"], default="holm",
                   help="every pair: Holm's correction over every (pair, measure) test (default), or none")
    p.add_argument("--permutations", type=_count, default=10000,
                   help="randomization test sign flips (default 10000)")
    p.add_argument("--bootstrap", type=_count, default=10000, help="bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=_level, default=0)
    p.add_argument("--alpha", type=_alpha, default=0.05)
    p.add_argument("--benchmark", default="", help="the benchmark column of the table; a run the pipeline wrote "
                                                   "must be of it (its name, --task and corpus too)")
    p.add_argument("--task", default="", help="the task column of the table")
    p.add_argument("--format", choices=["md", "csv", "json", "latex"], default="md",
                   help="latex: ranx's LaTeX table of every pair")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("fuse", help="fuse runs (RRF, linear, or any of ranx's methods)",
                       description="Fuse TREC runs as the pipeline's fuse_runs rule does: rrf, minmax, zscore, or "
                                   "any of ranx's 25 fusion methods with its normalisations, through ranx.")
    p.add_argument("runs", nargs="+", help="run files (TREC, or the pipeline's .run.npz), in the order they are summed")
    p.add_argument("--method", choices=list(dict.fromkeys([*METHODS, *RANX_METHODS])), default="rrf",
                   help="rrf, minmax, zscore (the pipeline's), or ranx's: " + ", ".join(RANX_METHODS))
    p.add_argument("--norm", choices=list(NORMS), default="min-max",
                   help="ranx's methods: ranx's normalisation (default min-max)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="ranx's methods: a parameter (JSON value), e.g. --param gamma=0.5 --param weights=[0.7,0.3]")
    p.add_argument("--optimize", metavar="METRIC",
                   help="learn the method's parameters with ranx's optimize_fusion for METRIC (ranx's name, e.g. "
                        "ndcg@10) on the training queries of --train-qrels; the fused run holds the other queries")
    p.add_argument("--train-qrels", metavar="FILE", help="the judgments of the training queries (--optimize)")
    p.add_argument("--k", type=_rrf_k, default=60, help="RRF constant, 0 or more (default 60)")
    p.add_argument("--weights", type=_finite, nargs="+", help="linear fusion weights, one per run (default equal)")
    p.add_argument("--depth", type=_count, help="use only each run's top DEPTH (1 or more)")
    p.add_argument("--convention", choices=["floor", "ranx"], default="floor",
                   help="minmax/zscore: floor (a missing document gets the run's lowest normalised score; default) or "
                        "ranx (0, the mean for zscore, as ranx's min-max/zmuv norms with wsum)")
    p.add_argument("--tag", default="fused", help="the run tag (last column)")
    p.add_argument("-o", "--output", default="-", help="the fused run: TREC text, or the binary format for a name "
                                                       "ending in .run.npz (default: TREC on standard output)")
    p.set_defaults(func=cmd_fuse)

    p = sub.add_parser("run", help="run the workflow (snakemake)",
                       description="Run the r2med-eval workflow of this checkout through Snakemake: `snakemake "
                                   "--cores N --rerun-incomplete all`, or through the repository's SLURM profile "
                                   "(profiles/slurm), from any directory (the checkout is the working directory). "
                                   "Other arguments (targets, --configfile, --config, -n, ...) are passed to "
                                   "Snakemake.")
    p.add_argument("--cores", type=_count, default=os.cpu_count() or 1, help="local cores (default: all)")
    p.add_argument("--slurm", action="store_true", help="submit the jobs to SLURM with profiles/slurm")
    p.add_argument("--verbose", action="store_true",
                   help="Snakemake's full output on the terminal (default: a line per finished job with an ETA; the "
                        "full output is in .snakemake/log/, named at the end)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("build-medquad", help="build MedQuAD / LiveQA-Med in BEIR layout from its public sources",
                       description="Download MedQuAD and the TREC 2017 LiveQA medical task at their pinned commits "
                                   "(network) and write the BEIR folder config/medquad.yaml reads.")
    p.add_argument("out", help="the BEIR folder to write (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    p.add_argument("--pool", help="also write the judged-documents-only variant to this folder")
    p.add_argument("--sources", help="a folder holding the two repositories' archives or checkouts "
                                     "(MedQuAD/, LiveQA_MedicalTask_TREC2017/) instead of downloading them")
    p.set_defaults(func=cmd_build_medquad)
    return top


def _alpha(text: str) -> float:
    value = _finite(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one ``r2med-eval:`` line (the usage is in ``--help``), exit status 2."""

    def error(self, message):
        command = self.prog.removeprefix("r2med-eval").strip()
        sys.stderr.write(f"r2med-eval: {command + ': ' if command else ''}{message}. Fix: see {self.prog} --help.\n")
        sys.exit(2)


def _a_file(value: str) -> bool:
    """Whether a value after ``-m`` names a file rather than a measure: it exists, or it reads as a path (a folder
    part, or a run or qrels file's ending); no measure name holds a slash or ends so."""
    return os.path.exists(value) or "/" in value or value.endswith((".trec", ".tsv", ".txt", ".jsonl", ".json",
                                                                      ".npz", ".qrels", ".run", ".gz", ".csv"))


def _metrics_last(argv: list[str]) -> list[str]:
    """``eval -m nDCG@10 R@100 qrels run`` (the options first, as trec_eval's users write them): ``-m`` takes one or
    more measures, so the files after them would be read as measures too. The first value after ``-m`` that names a
    file (``_a_file``) ends its list: it and the values after it are moved before it, so a missing file is named as
    such rather than read as a measure."""
    if not argv or argv[0] != "eval":
        return argv
    out, i = list(argv), 0
    while i < len(out):
        if out[i] in ("-m", "--metrics"):
            j = i + 1
            while j < len(out) and not out[j].startswith("-") and not _a_file(out[j]):
                j += 1
            k = j  # the files end the list: every value after the first file is a file, found or not
            while k < len(out) and not out[k].startswith("-"):
                k += 1
            if k > j:
                out = out[:i] + out[j:k] + out[i:j] + out[k:]
                i += k - j
        i += 1
    return out


def main(argv=None) -> int:
    argv = _metrics_last(list(sys.argv[1:] if argv is None else argv))
    args, extra = parser().parse_known_args(argv)
    if extra and args.command != "run":
        parser().parse_args(argv)  # unknown options of the other commands: one line, exit 2
    try:
        return args.func(args, extra) if args.command == "run" else args.func(args)
    except InputError as exc:
        print(f"r2med-eval: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print("r2med-eval: out of memory reading the input. Fix: check that the files are a run and judgments.",
              file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file that vanished or cannot be written after the checks
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"r2med-eval: {where}{exc.strerror or exc}. Fix: check the path and its permissions.", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

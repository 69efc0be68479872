"""Benchmark: a full-depth CliniQ run through ``snakemake``, this checkout against an anchor commit, paired (issue 39;
docs/scale.md): writing the run (``retrieve_dense``), scoring it with trec_eval's measures (``score_run``) and with
CliniQ's (``score_cliniq``), and the run's size on disk.

    python bench/cliniq_runs.py --out /tmp/cliniq-runs --anchor e059215 --repeats 3

CliniQ at its real size, generated (bench/full_matrix.py's generator: 1,000 notes chunked into about 16,550 chunks,
1,246 queries), and one dense retriever, a randomly initialised one-layer BERT of 16 dimensions (tests/tiny_models.py)
whose encoding costs little beside the pipeline's own work. A working directory per side (the anchor's code, its
whole tree extracted with ``git archive``; this checkout's) is built once with ``snakemake all``, untimed; then each
repeat runs, on one side and then the other, ``snakemake --cores 2 --forcerun <rule> -- <target>`` for the three
targets, timed from outside (``wait4``: the whole process, Snakemake's start and planning included). Prints the
medians, the medians of the paired ratios, each side's run files in bytes per entry, whether CliniQ's figures are
the same on both sides and whether this checkout's scorer gives the anchor's trec_eval figures on the anchor's TREC
file (exit 1 if not); the binary run's own trec_eval figures differ where the TREC file's 6-decimal scores tie.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE))
SIZE = (16, 1)  # hidden size, layers of the stand-in encoder


def prepare(out: Path, scale: float, seed: int = 0) -> dict:
    """The data, the stand-in encoder and the configuration (written once)."""
    import full_matrix

    sys.path.insert(0, str(REPO / "tests"))
    import cliniq_scale
    import tiny_models
    import yaml

    info_file = out / "prepared.json"
    if info_file.exists():
        return json.loads(info_file.read_text())
    out.mkdir(parents=True, exist_ok=True)
    stats = full_matrix.write_cliniq(out / "cliniq", seed, scale)
    model = tiny_models.bert_dir(out / "encoder", seed, [" ".join(cliniq_scale.VOCAB)], vocab_size=6000,
                                 max_positions=512, size=SIZE)
    config = {
        "benchmarks": {"cliniq": {"layout": "cliniq", "noteevents": str(out / "cliniq" / "NOTEEVENTS.csv"),
                                  "expected_chunks": stats["chunks"],
                                  "tasks": {"cliniq": {"path": str(out / "cliniq" / "annotations")}}}},
        "benchmarks_to_run": ["cliniq"],
        "models": {"tiny": {"type": "dense", "source": {"path": str(model)}, "pooling": "mean", "normalize": True,
                            "max_length": 256, "batch_size": 256, "device": "cpu"}},
        "leaderboard": {"metric": "ndcg_at_10"}, "report": {"baseline": "tiny", "permutations": 100,
                                                             "bootstrap": 100}}
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    info = {**stats, "config": str(out / "config.yaml")}
    info_file.write_text(json.dumps(info, indent=1))
    return info


def timed(cmd, cwd=None) -> tuple[float, float]:
    """(wall s, peak RSS MB of the largest process) of a whole process, from outside (``_paired.timed``)."""
    from _paired import timed as paired_timed

    wall, rss, _ = paired_timed(cmd, cwd=cwd)
    return wall, rss


def main(argv=None) -> int:
    from _paired import anchor_src

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a folder outside the repository")
    parser.add_argument("--anchor", required=True, help="the commit to compare against (e.g. e059215)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="CliniQ's size (1: the real one)")
    args = parser.parse_args(argv)
    info = prepare(args.out, args.scale)
    anchor = args.out / f"anchor-{args.anchor}"
    if not (anchor / "Snakefile").exists():
        anchor_src(args.anchor, anchor, paths=())
    sides = {"anchor": anchor, "this": REPO}
    work = {name: args.out / f"work-{name}" for name in sides}
    snakemake = [sys.executable, "-m", "snakemake"]
    for name, checkout in sides.items():
        work[name].mkdir(exist_ok=True)
        print(f"building {name} (untimed) ...", flush=True)
        timed(snakemake + ["-s", str(checkout / "Snakefile"), "-d", str(work[name]), "--configfile", info["config"],
                           "--cores", "2", "all"])
    ext = {"anchor": ".trec", "this": ".run.npz"}
    steps = {
        "write the run (retrieve_dense)": lambda s: (["retrieve_dense" + ("_binary" if s == "this" else "")],
                                                     f"results/runs/cliniq/cliniq/tiny{ext[s]}"),
        "score_run": lambda s: (["score_run" + ("_binary" if s == "this" else "")],
                                "results/metrics/cliniq/cliniq/tiny.json"),
        "score_cliniq": lambda s: (["score_cliniq"], "results/cliniq/cliniq/cliniq/tiny.json"),
    }
    results = {step: {s: [] for s in sides} for step in steps}
    for _ in range(args.repeats):
        for step, make in steps.items():
            for name, checkout in sides.items():
                rule, target = make(name)
                results[step][name].append(timed(snakemake + [
                    "-s", str(checkout / "Snakefile"), "-d", str(work[name]), "--configfile", info["config"],
                    "--cores", "2", "--forcerun", *rule, "--", target]))
    print(f"CliniQ: {info['notes']} notes, {info['chunks']} chunks, {info['queries']} queries; medians of "
          f"{args.repeats} paired repeats")
    print(f"{'step':<34}{'anchor s':>10}{'MB':>7}{'this s':>10}{'MB':>7}{'anchor/this':>13}")
    for step, by in results.items():
        a, b = by["anchor"], by["this"]
        ratio = statistics.median(x[0] / y[0] for x, y in zip(a, b))
        print(f"{step:<34}{statistics.median(x[0] for x in a):>10.1f}{statistics.median(x[1] for x in a):>7.0f}"
              f"{statistics.median(y[0] for y in b):>10.1f}{statistics.median(y[1] for y in b):>7.0f}{ratio:>12.1f}x")
    entries = info["queries"] * info["chunks"]
    for name in sides:
        files = list((work[name] / "results/runs/cliniq/cliniq").glob("tiny.*"))
        size = sum(f.stat().st_size for f in files)
        print(f"{name}: run files {', '.join(sorted(f.name for f in files))}: {size:,} bytes, "
              f"{size / entries:.2f} bytes an entry ({entries:,} entries)")
    rel = "results/cliniq/cliniq/cliniq/tiny.json"
    a, b = (json.loads((work[n] / rel).read_text()) for n in sides)
    a.pop("run", None)
    b.pop("run", None)
    same = a == b
    print(f"{rel} (CliniQ's measures): {'the same figures' if same else 'DIFFERENT'}")
    # trec_eval's measures: the anchor's TREC file holds the scores rounded to 6 decimals, which makes ties the binary
    # run (the float32 scores as computed) keeps apart; this checkout's scorer on the anchor's file gives its figures
    from r2med_eval.benchmarks import datasets
    from r2med_eval.scoring import metrics

    data = work["anchor"] / "results/data/cliniq/cliniq"
    rescored = metrics.evaluate(work["anchor"] / "results/runs/cliniq/cliniq/tiny.trec",
                                datasets.read_qrels(data / "qrels.tsv"), datasets.read_queries(data / "queries.jsonl"))
    rel = "results/metrics/cliniq/cliniq/tiny.json"
    a, b = (json.loads((work[n] / rel).read_text())["metrics"] for n in sides)
    again = all(round(rescored["metrics"][k], 6) == v for k, v in a.items())
    same &= again
    print(f"{rel}: this checkout's scorer on the anchor's TREC file gives the anchor's figures: {again}; the binary "
          f"run's differ by at most {max(abs(a[k] - b[k]) for k in a):.6f} (rounding ties)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

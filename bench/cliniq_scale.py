"""Benchmark: CliniQ at full scale on a generated corpus (no MIMIC text involved).

1. Chunking: a generated NOTEEVENTS.csv with 1,000 listed discharge summaries (plus as many other rows)
   read, cleaned, split into 100-word chunks and written, as the ``chunk_cliniq`` rule does.
2. Scoring: 1,246 queries over the ~16,550 chunks, both settings (multi- and single-patient, per
   query type and match type, condensed lists, judged@10), from a run of depth ``--depth``, as the
   ``score_cliniq`` rule does (run file reading included).

    python bench/cliniq_scale.py --depth 1000

Prints one JSON object (seconds, chunk count, peak RSS).

3. With ``--anchor <commit>`` (and ``--repeats``), scoring is also timed as whole child processes, paired:
   ``score@<anchor>`` (the anchor's ``src/`` from ``git archive``: ``runs.read_run`` + ``cliniq.evaluate``,
   one dict per query) against ``score`` (this checkout: ``cliniq.read_ranked_run`` + ``evaluate_ranked``,
   pyarrow + numpy, as the ``score_cliniq`` rule runs it); prints medians, the median of the paired
   speed-ups and peak RSS, and checks that both give the same result (exit 1 if not).

    python bench/cliniq_scale.py --depth 16550 --anchor db73a08 --repeats 3
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from r2med_eval import cliniq, runs  # noqa: E402
from r2med_eval import cliniq_corpus as cc  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate_notes(path: Path, n_notes: int, rng: random.Random) -> list[str]:
    vocab = [f"w{i}" for i in range(5000)] + ["[**Name**]", "mg", "q6h", "Pt.", "\t"]
    hadm = [str(100000 + 7 * i) for i in range(n_notes)]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        w = csv.writer(handle, lineterminator="\n")
        w.writerow(cc.NOTE_HEADER)
        for i, h in enumerate(hadm):
            w.writerow([2 * i, i, h, "2101-01-01", "", "", "Nursing/other", "Report", "", "", "short note"])
            words = [rng.choice(vocab) for _ in range(rng.randint(1100, 1900))]
            lines = [" ".join(words[j:j + 12]) for j in range(0, len(words), 12)]
            w.writerow([2 * i + 1, i, h, "2101-01-01", "", "", "Discharge summary", "Report", "", "", "\n".join(lines)])
    return hadm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=1246)
    ap.add_argument("--judgments", type=int, default=77000)
    ap.add_argument("--depth", type=int, default=1000, help="run depth per query")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--anchor", help="also time scoring against this commit's implementation, paired")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        hadm = generate_notes(tmp / "NOTEEVENTS.csv", args.notes, rng)
        (tmp / "ids.txt").write_text("".join(h + "\n" for h in hadm))
        start = time.perf_counter()
        stats = cc.chunk_corpus(tmp / "NOTEEVENTS.csv", tmp / "ids.txt", tmp / "res" / "corpus.jsonl", expected=None)
        out["chunking_seconds"] = round(time.perf_counter() - start, 3)
        chunk_ids = stats["chunk_ids"]
        out["notes"], out["chunks"] = stats["notes_found"], len(chunk_ids)

        qtypes = {f"{cc.QUERY_TYPES[i % 3]}-{i}": cc.QUERY_TYPES[i % 3] for i in range(args.queries)}
        qids = list(qtypes)
        by_note: dict[str, list[str]] = {}
        for c in chunk_ids:
            by_note.setdefault(cliniq.note_of(c), []).append(c)
        notes = list(by_note)
        rows = []
        per_query = args.judgments // args.queries
        for q in qids:
            for note in rng.sample(notes, max(1, per_query // 4)):
                for c in rng.sample(by_note[note], min(len(by_note[note]), 4)):
                    rows.append((q, c, rng.choice(cc.MATCH_TYPES)))
        out["judgments"] = len(rows)
        run = {}
        relevant_by_q: dict[str, list[str]] = {}
        for q, c, _ in rows:
            relevant_by_q.setdefault(q, []).append(c)
        for q in qids:
            picked = set(rng.sample(chunk_ids, args.depth))
            picked |= set(rng.sample(relevant_by_q[q], len(relevant_by_q[q]) // 2))
            run[q] = {d: rng.random() for d in picked}
        runs.write_run(run, tmp / "run.trec", tag="bench")
        del run
        start = time.perf_counter()
        loaded = runs.read_run(tmp / "run.trec")
        out["run_read_seconds"] = round(time.perf_counter() - start, 3)
        start = time.perf_counter()
        result = cliniq.evaluate(loaded, rows, qtypes, chunk_ids)
        out["scoring_seconds"] = round(time.perf_counter() - start, 3)
        out["scoring_plus_read_seconds"] = round(out["scoring_seconds"] + out["run_read_seconds"], 3)
        out["queries"] = result["multi"]["all"]["n"]
        out["single_patient_notes_scored"] = result["single"]["all"]["n"]
        out["run_depth"] = runs.run_depth(loaded)
        del loaded, result
        out["peak_rss_mb"] = round(peak_rss_mb(), 1)
        print(json.dumps(out, indent=2), flush=True)
        if args.anchor:
            paired_scoring(tmp, rows, qtypes, chunk_ids, args.anchor, args.repeats)


SCORE = r"""
import hashlib, json, sys
from r2med_eval import cliniq, runs
work, out = sys.argv[1], sys.argv[2]
inputs = json.load(open(f"{work}/inputs.json"))
rows = [tuple(r) for r in inputs["rows"]]
if hasattr(cliniq, "evaluate_ranked"):
    # equal scores by chunk id: the anchor's (db73a08) only tie order, so that both sides' figures must match
    ranked = cliniq.read_ranked_run(f"{work}/run.trec", inputs["chunk_ids"], "doc_id")
    result = cliniq.evaluate_ranked(ranked, rows, inputs["qtypes"], inputs["chunk_ids"])
else:
    result = cliniq.evaluate(runs.read_run(f"{work}/run.trec"), rows, inputs["qtypes"], inputs["chunk_ids"])
text = json.dumps(result, sort_keys=True)
open(out, "w").write(hashlib.sha256(text.encode()).hexdigest())
"""


def paired_scoring(tmp: Path, rows, qtypes, chunk_ids, anchor: str, repeats: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _paired import REPO, anchor_src, env_with, summary, timed

    (tmp / "inputs.json").write_text(json.dumps({"rows": rows, "qtypes": qtypes, "chunk_ids": chunk_ids}))
    old = anchor_src(anchor, tmp / "anchor")
    sides = {f"score@{anchor}": env_with(old), "score": env_with(REPO / "src")}
    walls = {s: [] for s in sides}
    rss = {s: [] for s in sides}
    digests = {}
    for rep in range(repeats):
        for side, env in sides.items():
            wall, peak, _ = timed([sys.executable, "-c", SCORE, str(tmp), str(tmp / f"{side}.sha")], env=env)
            walls[side].append(wall)
            rss[side].append(peak)
            digests[side] = (tmp / f"{side}.sha").read_text()
            print(f"repeat {rep + 1}: {side:<16} {wall:7.2f} s {peak:7.0f} MB", flush=True)
    for line in summary("CliniQ scoring (run file read included)", walls, rss, f"score@{anchor}", ["score"]):
        print(line)
    same = len(set(digests.values())) == 1
    print(f"identical results (every figure): {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

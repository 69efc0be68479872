"""Benchmark: CliniQ at full scale on a generated corpus (no MIMIC text involved).

1. Chunking: a generated NOTEEVENTS.csv with 1,000 listed discharge summaries (plus as many other rows)
   read, cleaned, split into 100-word chunks and written, as the ``chunk_cliniq`` rule does.
2. Scoring: 1,246 queries over the ~16,550 chunks, both settings (multi- and single-patient, per
   query type and match type, condensed lists, judged@10), from a run of depth ``--depth``, as the
   ``score_cliniq`` rule does (run file reading included).

    python bench/cliniq_scale.py --depth 1000

Prints one JSON object (seconds, chunk count, peak RSS).

3. With ``--claims``, the two parts of rule ``score_cliniq`` on the same ranking (``read_ranked_run`` once):
   its figures (``evaluate_ranked``) and the per-query figures by match type the claims read
   (``cliniq.per_query.per_query``), in this process, one after the other, ``--repeats`` times (medians).

4. With ``--anchor <commit>`` (and ``--repeats``), scoring is also timed as whole child processes, paired:
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

from r2med_eval.cliniq import corpus as cc  # noqa: E402
from r2med_eval.cliniq import metrics as cliniq
from r2med_eval.scoring import runs  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


VOCAB = [f"w{i}" for i in range(5000)] + ["[**Name**]", "mg", "q6h", "Pt.", "\t"]


def _note_text(words: list[str]) -> str:
    return "\n".join(" ".join(words[j:j + 12]) for j in range(0, len(words), 12))


def _chunk_count(words: list[str]) -> int:
    return len(cc.split_text(cc.clean_text(_note_text(words))))


def _words_for(rng: random.Random, chunks: int) -> list[str]:
    """Words of a note that the real chunking cuts into exactly ``chunks`` chunks (100 words, overlap 10)."""
    words = [rng.choice(VOCAB) for _ in range(100 + 90 * (chunks - 1) - 30)]
    while _chunk_count(words) < chunks:
        words += [rng.choice(VOCAB) for _ in range(5)]
    while len(words) > 5 and _chunk_count(words) > chunks:
        del words[-5:]
    if _chunk_count(words) != chunks:
        raise RuntimeError(f"no note of {chunks} chunks from the generator")  # cannot happen: +-5 words per step
    return words


def generate_notes(path: Path, n_notes: int, rng: random.Random, total_chunks: int | None = None) -> list[str]:
    """NOTEEVENTS.csv with ``n_notes`` listed discharge summaries (plus as many other rows); their HADM_IDs.

    Without ``total_chunks`` a note has 1,100-1,900 words; with it, the notes are sized so that the real chunking
    (``cliniq_corpus.clean_text`` + ``split_text``) gives exactly ``total_chunks`` chunks, spread evenly."""
    hadm = [str(100000 + 7 * i) for i in range(n_notes)]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        w = csv.writer(handle, lineterminator="\n")
        w.writerow(cc.NOTE_HEADER)
        for i, h in enumerate(hadm):
            w.writerow([2 * i, i, h, "2101-01-01", "", "", "Nursing/other", "Report", "", "", "short note"])
            if total_chunks is None:
                words = [rng.choice(VOCAB) for _ in range(rng.randint(1100, 1900))]
            else:
                words = _words_for(rng, total_chunks // n_notes + (i < total_chunks % n_notes))
            w.writerow([2 * i + 1, i, h, "2101-01-01", "", "", "Discharge summary", "Report", "", "",
                        _note_text(words)])
    return hadm


def write_annotations(folder: Path, chunks: list[tuple[str, str]], n_queries: int, n_judgments: int,
                      rng: random.Random) -> dict:
    """CliniQ's annotation files for generated chunks (``benchmark/`` of github.com/zhao-zy15/CliniQ:
    queries_{type}.jsonl ``{_id, text}``, qrels_{type}.tsv without header: query id, chunk id, match type). Each query
    is judged on about ``n_judgments / n_queries`` chunks of a few notes, every match type, and its text is two words of
    its first relevant chunk (so that lexical retrieval finds something). test_hadm_ids.txt is written by the caller."""
    by_note: dict[str, list[str]] = {}
    text_of = dict(chunks)
    for cid, _ in chunks:
        by_note.setdefault(cliniq.note_of(cid), []).append(cid)
    notes = list(by_note)
    per_query = max(1, n_judgments // n_queries)
    counts = {"queries": 0, "judgments": 0}
    folder.mkdir(parents=True, exist_ok=True)
    for t, qtype in enumerate(cc.QUERY_TYPES):
        ids = [str(i) for i in range(n_queries // 3 + (t < n_queries % 3))]
        rows, queries = [], []
        for qid in ids:
            judged = []
            for note in rng.sample(notes, min(len(notes), max(1, per_query // 4))):
                judged += rng.sample(by_note[note], min(len(by_note[note]), 4))
            rows += [(qid, c, rng.choice(cc.MATCH_TYPES)) for c in judged]
            words = [w for w in text_of[judged[0]].split() if w.startswith("w")] or ["w0"]
            queries.append({"_id": qid, "text": " ".join(rng.sample(words, min(2, len(words))))})
        (folder / f"queries_{qtype}.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
        (folder / f"qrels_{qtype}.tsv").write_text("".join(f"{q}\t{c}\t{m}\n" for q, c, m in rows))
        counts["queries"] += len(queries)
        counts["judgments"] += len(rows)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=1246)
    ap.add_argument("--judgments", type=int, default=77000)
    ap.add_argument("--depth", type=int, default=1000, help="run depth per query")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--anchor", help="also time scoring against this commit's implementation, paired")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--claims", action="store_true", help="also time the claims' per-query figures of the run")
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
        if args.claims:
            claims_timing(tmp / "run.trec", rows, qtypes, chunk_ids, args.repeats)
        if args.anchor:
            paired_scoring(tmp, rows, qtypes, chunk_ids, args.anchor, args.repeats)


def claims_timing(run_path: Path, rows, qtypes, chunk_ids, repeats: int) -> None:
    """Seconds of score_cliniq's two parts on one ranking: its figures and the claims' per-query figures (medians)."""
    from statistics import median

    from r2med_eval.cliniq import per_query

    ranked = cliniq.read_ranked_run(run_path, chunk_ids, "corpus")
    times: dict[str, list[float]] = {"figures": [], "per_query": []}
    for _ in range(repeats):
        for name, job in (("figures", lambda: cliniq.evaluate_ranked(ranked, rows, qtypes, chunk_ids)),
                          ("per_query", lambda: per_query.per_query(ranked, rows, qtypes, chunk_ids))):
            start = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - start)
    print(json.dumps({f"{k}_seconds_median": round(median(v), 3) for k, v in times.items()}
                     | {"per_query_over_figures": round(median(times["per_query"]) / median(times["figures"]), 2),
                        "repeats": repeats, "peak_rss_mb": round(peak_rss_mb(), 1)}, indent=2), flush=True)


SCORE = r"""
import hashlib, json, sys
try:  # the layout of subpackages
    from r2med_eval.cliniq import metrics as cliniq
    from r2med_eval.scoring import runs
except ImportError:  # an anchor of the flat layout
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

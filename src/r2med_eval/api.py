"""The library without Snakemake: load a task, read or write a run, score it as the pipeline does.

``r2med_eval.evaluate``, ``r2med_eval.load_task`` and the rest are these functions (``r2med_eval/__init__.py``
forwards them lazily). Documented, with examples the tests execute, in docs/api.md.
"""

from __future__ import annotations

from pathlib import Path

from .benchmarks import datasets
from .errors import InputError
from .scoring import metrics as _metrics
from .scoring import runs


def load_task(path, layout: str = "r2med", *, split: str = "test", empty_text: str = "error",
              unknown_qrels: str = "error", duplicate_qrels: str = "error") -> datasets.Dataset:
    """One task from disk (``r2med``: corpus.jsonl, query.jsonl, qrels.jsonl; ``beir``: corpus.jsonl,
    queries.jsonl, qrels/<split>.tsv), validated as the pipeline's ``prepare_task`` does: ``.corpus`` {id: {title,
    text}}, ``.queries`` {id: text}, ``.qrels`` {qid: {docid: grade}}, ``.stats``."""
    return datasets.load(layout, path, split=split, empty_text=empty_text, unknown_qrels=unknown_qrels,
                         duplicate_qrels=duplicate_qrels)


def read_run(path) -> dict:
    """A run file, TREC text or the pipeline's binary ``.run.npz``, as {qid: {docid: score}}; checked as the
    pipeline checks it (one InputError naming the file, the line and the fix)."""
    return runs.read_run(path)


def write_run(run: dict, path, tag: str = "run", decimals: int = 6) -> int:
    """Write {qid: {docid: score}} as a TREC run (score descending, ties by document id descending: trec_eval's
    order), or in the binary format for a path ending in ``.run.npz``; returns the lines (entries)."""
    return runs.write_run(run, path, tag=tag, decimals=decimals)


def read_qrels(path, *, split: str = "test", duplicates: str = "error", duplicate_fix: str | None = None) -> dict:
    """Judgments {qid: {docid: grade}} from any qrels layout the pipeline reads, told apart by content: R2MED's
    ``qrels.jsonl`` ({q_id, p_id, score}), BEIR's ``qrels/<split>.tsv`` (``query-id corpus-id score``, header
    optional), TREC qrels (``qid iter docid grade``, the pipeline's ``qrels.tsv``), or a task folder in one of
    these layouts. Validated as ``prepare_task`` does; ``duplicates``: ``error`` (as trec_eval), ``max``,
    ``first`` or ``last`` (``duplicate_fix``: the fix a duplicate's message gives)."""
    return datasets.read_any_qrels(path, split=split, duplicates=duplicates, duplicate_fix=duplicate_fix)


def _qrels(qrels) -> dict:
    return read_qrels(qrels) if isinstance(qrels, (str, Path)) else qrels


def _run(run) -> dict:
    return read_run(run) if isinstance(run, (str, Path)) else run


def evaluate(qrels, run, queries=None, *, metrics=None, ignore_identical_ids: bool = False,
             k_values=_metrics.K_VALUES, level: int = 1, depth: int | None = None, complete: bool = True) -> dict:
    """Score a run as rule ``score_run`` does (trec_eval's measures through pytrec_eval).

    ``qrels``: {qid: {docid: grade}} or a path (``read_qrels``); ``run``: {qid: {docid: score}} or a TREC run
    path; ``queries``: the task's query ids (to count unjudged ones), optional. ``metrics``: measure names in
    ir_measures' notation (``nDCG@10``, ``R@100``, ``P@10``, ``AP@100``, ``RR``, ``RR@10``, ...) or trec_eval's
    (``ndcg_cut_10``, ``recall_100``, ``P_10``, ``map_cut_100``, ``recip_rank``), keyed by the names given;
    without it, the pipeline's (``ndcg_at_10``, ``map_at_10``, ``recall_at_100``, ``mrr``, ... for ``k_values``).
    ``ignore_identical_ids``: drop a retrieved document whose id is the query id (BEIR's option, R2MED's dense
    code). trec_eval's options: ``level`` (``-l``: grades below it are not relevant), ``depth`` (``-M``: each
    query's first documents only), ``complete`` (``-c``, the default: every judged query counts, one the run misses
    scoring 0; False: only the judged queries the run retrieved for, as trec_eval 9 without ``-c``, pytrec_eval and
    ir_measures). Returns {"metrics": means over the judged queries, "per_query": {qid: {metric: value}}, "counts":
    which queries were scored, "run_depth": the run's most documents for one query}."""
    qrels = _qrels(qrels)
    table = runs.as_table(run, duplicates=False)  # a path is read as columns, never as dicts; duplicates: in rank
    if not qrels:
        raise InputError("the judgments are empty: every metric would be undefined.", fix="pass the task's qrels.")
    if isinstance(metrics, str):
        metrics = [metrics]
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InputError(f"depth {depth!r} is not a whole number of 1 or more.", fix="pass depth=N, N >= 1 (-M N).")
    if isinstance(level, bool) or not isinstance(level, int):
        raise InputError(f"level {level!r} is not a whole number.", fix="pass level=N (-l N), e.g. 2.")
    return _metrics.evaluate(table, qrels, queries, k_values, measures=metrics, level=level, depth=depth,
                             complete=complete, ignore_identical_ids=ignore_identical_ids)


def _named_runs(runs_) -> dict:
    """{name: run}: a mapping as given, or paths named after their files (``bm25.trec`` -> ``bm25``)."""
    if isinstance(runs_, dict):
        return {str(name): runs.as_table(run) for name, run in runs_.items()}
    named = {}
    for path in runs_:
        name = Path(path).name.split(".")[0]
        if name in named:
            raise InputError(f"two runs are named {name!r}.", path=path, fix="pass {name: run} instead of a list.")
        named[name] = runs.as_table(path)
    return named


def compare(runs, qrels, *, baseline: str, metric: str = "ndcg_at_10", ignore_identical_ids: bool = False,
            permutations: int = 10000, resamples: int = 10000, seed: int = 0, alpha: float = 0.05,
            benchmark: str = "", task: str = "") -> list[dict]:
    """The pipeline's significance table for runs of one task: each run against ``baseline``, as rule
    ``significance`` computes it (paired t-test and randomization test over the queries both runs judged, Holm
    over the comparisons, 95% bootstrap interval of each mean), from the same per-query values (6 decimals, as
    ``score_run`` stores them). ``runs``: {name: run or path}, or a list of paths named after their files;
    ``metric``: any name ``evaluate`` takes. Rows as ``results/significance.csv`` (``significance.FIELDS``);
    ``significance.to_csv`` / ``to_markdown`` write them."""
    from .report import significance

    named = _named_runs(runs)
    if baseline not in named:
        from .errors import did_you_mean

        hint = did_you_mean(baseline, named)
        raise InputError(f"the baseline {baseline!r} is not among the runs ({', '.join(named)})"
                         + (f"; {hint}" if hint else "."), fix="name one of the runs as the baseline.")
    qrels = _qrels(qrels)
    values = {}
    for name, run in named.items():
        per_query = evaluate(qrels, run, metrics=[metric], ignore_identical_ids=ignore_identical_ids)["per_query"]
        values[name] = {q: significance.stored(row[metric]) for q, row in per_query.items()}
    return significance.compute_values({(benchmark, task): values}, baseline, metric, permutations, resamples, seed,
                                       alpha)


def fuse(runs, method: str = "rrf", *, k: int = 60, weights=None, depth: int | None = None,
         convention: str = "floor") -> dict:
    """The fused run of rule ``fuse_runs``: ``rrf`` (reciprocal rank fusion, constant ``k``) or ``minmax`` /
    ``zscore`` (linear fusion of per-query normalised scores, ``weights`` equal by default); ``depth``: only the
    top ``depth`` of each run; ``convention``: ``floor`` or ``ranx`` (``scoring.fusion``). ``runs``: runs or
    paths, in the order the fusion sums them; a mapping's values are taken in its order.
    ``write_run(fused, path, tag=..., decimals=8)`` writes what the pipeline writes."""
    from .scoring import fusion

    inputs = [_run(r) for r in (runs.values() if isinstance(runs, dict) else runs)]
    return fusion.fuse(inputs, method, k=k, weights=weights, depth=depth, convention=convention)


def evaluate_cliniq(run, judgments, query_types: dict, chunk_ids, tie_order: str = "evalpy") -> dict:
    """CliniQ's measures for one run, as rule ``score_cliniq`` does (the formulas of CliniQ's ``eval.py``).

    ``run``: {qid: {chunk_id: score}} or a run file (TREC text or the pipeline's ``.run.npz``); ``judgments``:
    (qid, chunk_id, match type) rows, a match type ``irrelevant`` marking a chunk judged not relevant, or the
    pipeline's ``cliniq_qrels.tsv``; ``query_types``: {qid: disease | drug | procedure} or the pipeline's
    ``query_types.tsv``; ``chunk_ids``: every chunk id of the corpus (``{HADM_ID}_{i}``) or the pipeline's
    ``chunk_ids.txt``. ``tie_order``: how equal scores are ranked, as ``score_cliniq``'s: ``evalpy`` (the default:
    in the run's own order, a file's lines or a dict's order; for a dense run the pipeline wrote, or a dict in
    ``np.argsort(-similarities)`` order, that is eval.py's, as ``score_cliniq`` ranks dense runs), ``corpus`` (corpus
    order: how ``score_cliniq`` ranks every other run under the benchmark's default ``tie_order``) or ``doc_id``.
    Returns {"multi": ..., "single": ..., "condensed": ..., "judged_at_10": ..., "counts": ..., "per_query": ...}."""
    from .cliniq import metrics as cliniq
    from .cliniq.corpus import IRRELEVANT
    from .cliniq.files import read_cliniq_qrels, read_query_types
    from .io import read_lines

    if isinstance(judgments, (str, Path)):
        rows, irrelevant = read_cliniq_qrels(judgments)
    else:
        rows = [(q, c, t) for q, c, t in judgments if t != IRRELEVANT]
        irrelevant = {(q, c) for q, c, t in judgments if t == IRRELEVANT}
    types = read_query_types(query_types) if isinstance(query_types, (str, Path)) else dict(query_types)
    ids = read_lines(chunk_ids) if isinstance(chunk_ids, (str, Path)) else list(chunk_ids)
    if isinstance(run, (str, Path)):  # as score_cliniq reads it: the file's rankings as arrays
        return cliniq.evaluate_ranked(cliniq.read_ranked_run(run, ids, tie_order), rows, types, ids, irrelevant)
    return cliniq.evaluate(run, rows, types, ids, irrelevant, tie_order=tie_order)


__all__ = ["compare", "evaluate", "evaluate_cliniq", "fuse", "load_task", "read_qrels", "read_run", "write_run"]

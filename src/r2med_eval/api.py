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
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    return qrels if isinstance(qrels, dict) else _records(qrels, "relevance", "judgments")


def _run(run) -> dict:
    if isinstance(run, (str, Path)):
        return read_run(run)
    return run if isinstance(run, dict) or not _is_records(run) else _records(run, "score", "run")


def _is_records(x) -> bool:
    return hasattr(x, "columns") or (not isinstance(x, (dict, str, bytes, Path)) and hasattr(x, "__iter__"))


def _records(data, value: str, what: str) -> dict:
    """ir_measures' other inputs as {qid: {docid: value}}: a pandas DataFrame with columns ``query_id``, ``doc_id``
    and ``relevance`` (judgments) or ``score`` (a run), or an iterable of such records (ir_measures' ``Qrel`` and
    ``ScoredDoc`` named tuples, or plain (query_id, doc_id, value) tuples)."""
    if hasattr(data, "columns"):
        missing = [c for c in ("query_id", "doc_id", value) if c not in data.columns]
        if missing:
            raise InputError(f"the {what} DataFrame has no column {', '.join(missing)}.",
                             fix=f"name its columns query_id, doc_id and {value} (ir_measures' names).")
        rows = zip(data["query_id"].tolist(), data["doc_id"].tolist(), data[value].tolist())
    else:
        rows = ((getattr(r, "query_id", None), getattr(r, "doc_id", None), getattr(r, value, None))
                if hasattr(r, "query_id") else tuple(r)[:3] for r in data)
    out: dict = {}
    for n, (qid, did, v) in enumerate(rows, start=1):
        if qid is None or did is None or v is None:
            raise InputError(f"{what} record {n} lacks its query_id, doc_id or {value}.",
                             fix=f"give records of (query_id, doc_id, {value}).")
        docs = out.setdefault(str(qid), {})
        if str(did) in docs:
            raise InputError(f"{what} record {n}: document {str(did)[:80]!r} appears twice for query "
                             f"{str(qid)[:80]!r}.", fix="keep one record per (query, document).")
        docs[str(did)] = int(v) if value == "relevance" else float(v)
    return out


def evaluate(qrels, run, queries=None, *, metrics=None, ignore_identical_ids: bool = False,
             k_values=_metrics.K_VALUES, level: int = 1, depth: int | None = None, complete: bool | None = None,
             judged_only: bool = False, num_docs: int = 0, zscores=None, judgment_groups=None,
             preferences=None) -> dict:
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
    which queries were scored, "run_depth": the run's most documents for one query}. ``preferences``: trec_eval's
    ``-R prefs`` or ``-R qrels_prefs`` judgments (``scoring.trec_prefs.read(path, "prefs")``, or {qid: [(jg, jsg,
    docno, level), ...]}) for its preference measures (``prefs``, ``all_prefs``, ``prefs_simp``, ...); ``qrels`` is
    then not read (None)."""
    qrels = _qrels(qrels) if preferences is None else {}
    run = _run(run) if _is_records(run) and not isinstance(run, runs.RunTable) else run
    table = runs.as_table(run, duplicates=False)  # a path is read as columns, never as dicts; duplicates: in rank
    if not qrels and preferences is None:
        raise InputError("the judgments are empty: every metric would be undefined.", fix="pass the task's qrels.")
    if isinstance(metrics, str):
        metrics = [metrics]
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InputError(f"depth {depth!r} is not a whole number of 1 or more.", fix="pass depth=N, N >= 1 (-M N).")
    if isinstance(level, bool) or not isinstance(level, int):
        raise InputError(f"level {level!r} is not a whole number.", fix="pass level=N (-l N), e.g. 2.")
    if isinstance(zscores, (str, Path)):
        from .scoring import zscores as _zscores

        zscores = _zscores.read(zscores)
    return _metrics.evaluate(table, qrels, queries, k_values, measures=metrics, level=level, depth=depth,
                             complete=complete, ignore_identical_ids=ignore_identical_ids, judged_only=judged_only,
                             num_docs=num_docs, zscores=zscores, groups=judgment_groups, prefs=preferences)


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
         convention: str = "floor", norm: str = "min-max", params: dict | None = None) -> dict:
    """The fused run of rule ``fuse_runs``: ``rrf`` (reciprocal rank fusion, constant ``k``) or ``minmax`` /
    ``zscore`` (linear fusion of per-query normalised scores, ``weights`` equal by default; ``convention``: ``floor``
    or ``ranx``, ``scoring.fusion``), or any other of ranx's fusion methods (``wsum``, ``mnz``, ``isr``,
    ``bordafuse``, ``condorcet``, ...) through ranx with its normalisation ``norm`` and ``params``
    (``scoring.ranx_fusion``); ``depth``: only the top ``depth`` of each run. ``runs``: runs or paths, in the order
    the fusion sums them; a mapping's values are taken in its order. ``write_run(fused, path, tag=..., decimals=8)``
    writes what the pipeline writes."""
    from .scoring import fusion, ranx_fusion

    inputs = [_run(r) for r in (runs.values() if isinstance(runs, dict) else runs)]
    if method in fusion.METHODS:
        if params or norm != "min-max":
            raise InputError(f"norm and params apply to ranx's methods, not to {method} (its options: k, weights, "
                             "convention).", fix="drop norm and params, or name one of ranx's methods.")
        return fusion.fuse(inputs, method, k=k, weights=weights, depth=depth, convention=convention)
    fusion.check_options("rrf", len(inputs), 60, None, depth)  # the depth's check
    return ranx_fusion.fuse(fusion.cut(inputs, depth), method, norm, params)


def optimize_fusion(qrels_train, runs, method: str = "wsum", *, norm: str = "min-max", metric: str = "ndcg@10",
                    depth: int | None = None, **options) -> tuple[dict, dict]:
    """ranx's ``optimize_fusion`` on the training queries only (the queries of ``qrels_train``: judgments or a path),
    then ranx's fusion of the runs with the learned parameters on the other queries: (the fused run of the queries
    that are not training queries, the parameters). ``metric`` is ranx's name (``ndcg@10``, ``map@100``, ``mrr``);
    ``options`` go to ranx (``step``, ``n_segments``, ...). Evaluate the fused run on the held-out queries."""
    from .scoring import fusion, ranx_fusion

    inputs = [_run(r) for r in (runs.values() if isinstance(runs, dict) else runs)]
    return ranx_fusion.fuse_trained(_qrels(qrels_train), fusion.cut(inputs, depth), method, norm, metric, **options)


def compare_pairs(runs, qrels, *, metrics=("nDCG@10",), test: str = "student", alpha: float = 0.05,
                  correction: str = "holm", permutations: int = 1000, seed: int = 42,
                  ignore_identical_ids: bool = False) -> list[dict]:
    """Every pair of the runs on every measure of ``metrics`` (any name ``evaluate`` takes), tested with ranx's
    ``test`` (``student``, ``fisher`` or ``tukey``) on the per-query values over the judged queries, Holm's
    correction over the whole family (``correction="none"``: ranx's p-values): one row per (pair, measure) with
    ``p``, ``p_adjusted`` and ``significant`` (``scoring.comparison``; ``comparison.report(rows, ...)`` is ranx's
    report of them, ``.to_latex()`` its LaTeX table)."""
    from .scoring import comparison

    named = _named_runs(runs)
    qrels = _qrels(qrels)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    values = {}
    for name, run in named.items():
        per_query = evaluate(qrels, run, metrics=metrics, ignore_identical_ids=ignore_identical_ids)["per_query"]
        qids = sorted(per_query)
        values[name] = {m: [per_query[q][m] for q in qids] for m in metrics}
    return comparison.pairs(values, metrics, test=test, alpha=alpha, correction=correction,
                            permutations=permutations, seed=seed)


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


__all__ = ["compare", "compare_pairs", "evaluate", "evaluate_cliniq", "fuse", "load_task", "optimize_fusion",
           "read_qrels", "read_run", "write_run"]

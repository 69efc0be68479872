"""The library without Snakemake: load a task, read or write a run, score it as the pipeline does.

``r2med_eval.evaluate``, ``r2med_eval.load_task`` and the rest are these functions (``r2med_eval/__init__.py``
forwards them lazily). Documented, with examples the tests execute, in docs/api.md.
"""

from __future__ import annotations

from pathlib import Path

from . import datasets, metrics, runs
from .errors import InputError


def load_task(path, layout: str = "r2med", *, split: str = "test", empty_text: str = "error",
              unknown_qrels: str = "error", duplicate_qrels: str = "error") -> datasets.Dataset:
    """One task from disk (``r2med``: corpus.jsonl, query.jsonl, qrels.jsonl; ``beir``: corpus.jsonl,
    queries.jsonl, qrels/<split>.tsv), validated as the pipeline's ``prepare_task`` does: ``.corpus`` {id: {title,
    text}}, ``.queries`` {id: text}, ``.qrels`` {qid: {docid: grade}}, ``.stats``."""
    return datasets.load(layout, path, split=split, empty_text=empty_text, unknown_qrels=unknown_qrels,
                         duplicate_qrels=duplicate_qrels)


def read_run(path) -> dict:
    """A TREC run file as {qid: {docid: score}}."""
    return runs.read_run(path)


def write_run(run: dict, path, tag: str = "run", decimals: int = 6) -> int:
    """Write {qid: {docid: score}} as a TREC run (score descending, ties by document id); returns the lines."""
    return runs.write_run(run, path, tag=tag, decimals=decimals)


def read_qrels(path) -> dict:
    """Judgments from a TREC qrels file (``qid 0 docid grade``, the pipeline's qrels.tsv) or R2MED's
    qrels.jsonl ({q_id, p_id, score})."""
    path = Path(path)
    if path.suffix == ".jsonl":
        from .io import iter_jsonl

        out: dict = {}
        for _, obj in iter_jsonl(path):
            out.setdefault(str(obj["q_id"]), {})[str(obj["p_id"])] = int(obj["score"])
        return out
    return datasets.read_qrels(path)


def evaluate(qrels, run, queries=None, *, ignore_identical_ids: bool = False, k_values=metrics.K_VALUES) -> dict:
    """Score a run as rule ``score_run`` does (trec_eval's measures through pytrec_eval, under R2MED's names).

    ``qrels``: {qid: {docid: grade}} or a path (``read_qrels``); ``run``: {qid: {docid: score}} or a TREC run
    path; ``queries``: the task's query ids (to count unjudged ones), optional. ``ignore_identical_ids``: drop a
    retrieved document whose id is the query id (BEIR's option, R2MED's dense code). Returns {"metrics": means
    over the judged queries (``ndcg_at_10``, ``map_at_10``, ``recall_at_100``, ``mrr``, ...), "per_query":
    {qid: {metric: value}}, "counts": which queries were scored}. A judged query the run misses scores 0."""
    qrels = read_qrels(qrels) if isinstance(qrels, (str, Path)) else qrels
    run = read_run(run) if isinstance(run, (str, Path)) else run
    if not qrels:
        raise InputError("the judgments are empty: every metric would be undefined.", fix="pass the task's qrels.")
    dropped = None
    if ignore_identical_ids:
        run, dropped = runs.drop_identical_ids(run)
    result = metrics.evaluate(run, qrels, queries, k_values)
    if dropped is not None:
        result["counts"]["identical_ids_dropped"] = dropped
    return result


def evaluate_cliniq(run, judgments, query_types: dict, chunk_ids) -> dict:
    """CliniQ's measures for one run, as rule ``score_cliniq`` does (the formulas of CliniQ's ``eval.py``).

    ``run``: {qid: {chunk_id: score}} or a TREC run path; ``judgments``: (qid, chunk_id, match type) rows, a
    match type ``irrelevant`` marking a chunk judged not relevant, or the pipeline's ``cliniq_qrels.tsv``;
    ``query_types``: {qid: disease | drug | procedure} or the pipeline's ``query_types.tsv``; ``chunk_ids``: every
    chunk id of the corpus (``{HADM_ID}_{i}``) or the pipeline's ``chunk_ids.txt``. Returns {"multi": ...,
    "single": ..., "condensed": ..., "judged_at_10": ..., "counts": ..., "per_query": ...}."""
    from . import cliniq
    from .cliniq_corpus import IRRELEVANT
    from .cliniq_files import read_cliniq_qrels, read_query_types
    from .io import read_lines

    run = read_run(run) if isinstance(run, (str, Path)) else run
    if isinstance(judgments, (str, Path)):
        rows, irrelevant = read_cliniq_qrels(judgments)
    else:
        rows = [(q, c, t) for q, c, t in judgments if t != IRRELEVANT]
        irrelevant = {(q, c) for q, c, t in judgments if t == IRRELEVANT}
    types = read_query_types(query_types) if isinstance(query_types, (str, Path)) else dict(query_types)
    ids = read_lines(chunk_ids) if isinstance(chunk_ids, (str, Path)) else list(chunk_ids)
    return cliniq.evaluate(run, rows, types, ids, irrelevant)


__all__ = ["evaluate", "evaluate_cliniq", "load_task", "read_qrels", "read_run", "write_run"]

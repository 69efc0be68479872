"""Generation-augmented retrieval: query variants from LLM-written hypothetical documents.

R2MED's dataset repos ship ``<method>/<llm>/query_with_hydoc.jsonl`` ({id, text, hy_doc}) per task.
A (method, llm) pair is a query variant that any retriever can take, combined with the query as the
official code does (src/eval_BM25.py and src/eval_retrieval.py at R2MED commit 62b7074):

=========== ======================================== ==============================================
method      lexical (BM25) query                      dense query embedding
=========== ======================================== ==============================================
query2doc   ``text * 2 + " " + hy_doc`` (the text     encode(prompt + text + "[SEP]" + hy_doc)
            repeated twice, with no space between)
hyde        ``hy_doc``                                (encode(prompt + text) + encode(hy_doc)) / 2
lamer       ``text + " " + hy_doc``                   (encode(prompt + text) + encode(hy_doc)) / 2
=========== ======================================== ==============================================

The hypothetical document is encoded without the query prompt, as the official FlagDRES wrapper does;
with the model key ``variant_doc_prompt: true`` it gets the query prompt, as R2MED's InstructorModel,
GritModel and NVEmbedModel do (they encode the rewrite with the query instruction).
The averaged vector is re-normalised when the model normalises (ranking is unchanged by that).
"""

from __future__ import annotations

import logging

from .errors import InputError
from .io import iter_jsonl

log = logging.getLogger(__name__)

METHODS = ("hyde", "query2doc", "lamer")


def read_variant(path, queries: dict[str, str]) -> dict[str, str]:
    """{query id: hypothetical document} for every query; stops if any query is missing."""
    hy: dict[str, str] = {}
    mismatched = 0
    for lineno, obj in iter_jsonl(path):
        qid = obj.get("id")
        if qid is None or "hy_doc" not in obj:
            raise InputError("expansion line lacks 'id' or 'hy_doc'.", path=path, line=lineno,
                             fix="use R2MED's layout {id, text, hy_doc}.")
        qid = str(qid)
        if qid in hy:
            raise InputError(f"query {qid!r} appears twice.", path=path, line=lineno,
                             fix="keep one expansion per query.")
        if qid not in queries:
            raise InputError(f"query {qid!r} is not in the task's queries.", path=path, line=lineno,
                             fix="use the expansion file that belongs to this task.")
        if not isinstance(obj["hy_doc"], str):
            raise InputError("'hy_doc' is not a string.", path=path, line=lineno, fix="write it as a string.")
        if "text" in obj and obj["text"] != queries[qid]:
            mismatched += 1
        hy[qid] = obj["hy_doc"]
    missing = [q for q in queries if q not in hy]
    if missing:
        raise InputError(f"the expansion file misses {len(missing)} of {len(queries)} queries "
                         f"(first: {', '.join(missing[:5])}).", path=path,
                         fix="generate expansions for every query, or drop this query variant from config.yaml.")
    empty = sum(1 for v in hy.values() if not v.strip())
    if empty:
        log.warning("%s: %d empty hypothetical documents (the query alone is used where the method adds it)",
                    path, empty)
    if mismatched:
        log.warning("%s: %d lines carry a query text that differs from the task's query; the task's is used",
                    path, mismatched)
    return hy


def lexical_query(method: str, text: str, hy_doc: str) -> str:
    if method == "query2doc":
        return text * 2 + " " + hy_doc
    if method == "lamer":
        return text + " " + hy_doc
    if method == "hyde":
        return hy_doc if hy_doc.strip() else text
    raise ValueError(f"unknown method {method!r}")


def variant_path(task_path, method: str, llm: str):
    from pathlib import Path

    return Path(task_path) / method / llm / "query_with_hydoc.jsonl"

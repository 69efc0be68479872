"""Generation-augmented retrieval: query variants from LLM-written hypothetical documents.

R2MED's dataset repos ship ``<method>/<llm>/query_with_hydoc.jsonl`` ({id, text, hy_doc}) per task.
A (method, llm) pair is a query variant that any retriever can take, combined with the query as the
official code does (src/eval_BM25.py, src/eval_retrieval.py, src/utils.py and src/base.py at R2MED commit
62b7074). ``text`` is the file's own ``text`` field (as R2MED reads it), not the task's query.

An LLM that writes its reasoning before the answer (R2MED's ``r1_model_list``) is a *reasoning* LLM: its
``hy_doc`` is first cut to the answer (``llm.reasoning.split_reasoning``, per LLM family), and the combination changes:

=========== ============================ =================================== ===================================
method      BM25 query                   dense query (plain LLM)             dense query (reasoning LLM)
=========== ============================ =================================== ===================================
query2doc   ``text * 2 + " " + hy_doc``  encode(P + text + "[SEP]" + hy_doc) (encode(P + text) + encode(D + ans))/2
hyde        ``hy_doc`` ("" stays "")     (encode(P + text) + encode(D + hy_doc)) / 2   same, with ``ans``
lamer       ``text + " " + hy_doc``      (encode(P + text) + encode(D + hy_doc)) / 2   same, with ``ans``
=========== ============================ =================================== ===================================

For a reasoning LLM BM25's query is the answer ``ans`` alone, whatever the method. ``P`` is the model's query
prompt; ``D``, the prompt of the hypothetical document, is empty for R2MED's FlagDRES/HighScale/BiEncoder
wrappers and the query prompt for its Instructor, GritLM and NV-Embed wrappers (a model's ``hydoc_prompt``).
The two vectors are averaged as R2MED's wrapper returns them (a model's ``hydoc_average``): L2-normalised for
bge, e5, SFR, INSTRUCTOR, GritLM and NV-Embed, raw for contriever (``normalize_embeddings=False``), BMRetriever
(its "BMR" path never normalises) and MedCPT (BiEncoderModel returns the CLS vector). The average is
re-normalised when the model normalises (R2MED's cosine scoring normalises it; the ranking is the same).
"""

from __future__ import annotations

import logging

from ..errors import InputError
from ..io import iter_jsonl
from ..llm.reasoning import split_reasoning

log = logging.getLogger(__name__)

METHODS = ("hyde", "query2doc", "lamer")

# R2MED's retriever names (a model's paper_name) whose wrapper encodes the hypothetical document with the query
# instruction (utils.py InstructorModel, GritModel, NVEmbedModel); every other wrapper encodes it bare.
R2MED_HYDOC_PROMPT = dict.fromkeys(("inst-l", "inst-xl", "grit", "nv"), "query")
# R2MED's retriever names whose wrapper returns unnormalised vectors, which encode_queries averages as they are
# (utils.py: FlagDRESModel with normalize_embeddings=False, its and HighScaleModel's "BMR" path, BiEncoderModel);
# every other wrapper returns L2-normalised vectors.
R2MED_HYDOC_AVERAGE = dict.fromkeys(("contriever", "bmr-410m", "bmr-2b", "bmr-7b", "medcpt"), "raw")
# R2MED's retriever names whose encode gives NaN for an empty hypothetical document (GritModel: gritlm's
# GritLM.encode leaves the instruction's tokens out of the mean, and nothing is left), which BEIR's exact search
# then scores -1 for every document of the query. This pipeline does not copy that (docs/models.md).
R2MED_EMPTY_HYDOC_NAN = ("grit",)


def read_variant(path, queries: dict[str, str]) -> dict[str, dict]:
    """{query id: {"text", "hy_doc"}} for every query; stops if any query is missing. ``text`` is the line's own
    ``text`` field (R2MED's code reads it); a line without one takes the task's query text."""
    rows: dict[str, dict] = {}
    mismatched = no_text = 0
    for lineno, obj in iter_jsonl(path):
        qid = obj.get("id")
        if qid is None or "hy_doc" not in obj:
            raise InputError("expansion line lacks 'id' or 'hy_doc'.", path=path, line=lineno,
                             fix="use R2MED's layout {id, text, hy_doc}.")
        qid = str(qid)
        if qid in rows:
            raise InputError(f"query {qid!r} appears twice.", path=path, line=lineno,
                             fix="keep one expansion per query.")
        if qid not in queries:
            raise InputError(f"query {qid!r} is not in the task's queries.", path=path, line=lineno,
                             fix="use the expansion file that belongs to this task.")
        for key in ("hy_doc", "text"):
            if key in obj and not isinstance(obj[key], str):
                raise InputError(f"{key!r} is not a string.", path=path, line=lineno, fix="write it as a string.")
        if "text" not in obj:
            no_text += 1
        elif obj["text"] != queries[qid]:
            mismatched += 1
        rows[qid] = {"text": obj.get("text", queries[qid]), "hy_doc": obj["hy_doc"]}
    missing = [q for q in queries if q not in rows]
    if missing:
        raise InputError(f"the expansion file misses {len(missing)} of {len(queries)} queries "
                         f"(first: {', '.join(missing[:5])}).", path=path,
                         fix="generate expansions for every query, or drop this query variant from config.yaml.")
    empty = sum(1 for v in rows.values() if not v["hy_doc"].strip())
    if empty:
        log.warning("%s: %d empty hypothetical documents (kept empty, as R2MED's code does: a HyDE BM25 query is "
                    "then empty)", path, empty)
    if mismatched:
        log.warning("%s: %d lines carry a query text that differs from the task's query; the line's text is used, "
                    "as R2MED's code does", path, mismatched)
    if no_text:
        log.warning("%s: %d lines have no 'text'; the task's query text is used for them", path, no_text)
    return rows


def lexical_query(method: str, text: str, hy_doc: str, reasoning: str = "none") -> str:
    """R2MED's BM25 query (eval_BM25.py load_retrieval_data)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if reasoning != "none":
        return split_reasoning(reasoning, hy_doc)
    if method == "query2doc":
        return text * 2 + " " + hy_doc
    if method == "lamer":
        return text + " " + hy_doc
    return hy_doc


def dense_inputs(method: str, text: str, hy_doc: str, reasoning: str = "none") -> tuple[str, str | None]:
    """What R2MED's dense code encodes for one query (eval_retrieval.py load_retrieval_data): (query text, None)
    for one string that is encoded as a query, or (query text, hypothetical document) for the two that are
    averaged."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if reasoning != "none":
        return text, split_reasoning(reasoning, hy_doc)
    if method == "query2doc":
        return text + "[SEP]" + hy_doc, None
    return text, hy_doc


def count_empty_hydocs(path, method: str, reasoning: str = "none") -> tuple[int, int]:
    """(queries whose dense hypothetical document is the empty string, queries) of an expansion file."""
    empty = total = 0
    for _, obj in iter_jsonl(path):
        total += 1
        empty += dense_inputs(method, obj["text"], obj["hy_doc"], reasoning)[1] == ""
    return empty, total


def variant_path(task_path, method: str, llm: str):
    from pathlib import Path

    return Path(task_path) / method / llm / "query_with_hydoc.jsonl"

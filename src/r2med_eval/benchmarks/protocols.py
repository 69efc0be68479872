"""The evaluation protocols, those a dense entry can declare (``protocol:``, ``DECLARABLE``) and a reranking one: how
the official code that published a number searched (or reranked) and scored, so that a run made under one is compared
with the numbers published under the same one.

* ``r2med`` (R2MED's ``src/eval_retrieval.py`` at 62b7074): BEIR's ``DenseRetrievalExactSearch`` over the
  documents' title and text, the top 100 per query with a document whose id equals the query's id dropped
  (BEIR searches top_k + 1 and skips it), and ``EvaluateRetrieval.evaluate(ignore_identical_ids=True)``.
* ``reasonembed`` (ReasonEmbed's ``evaluation_r2med/`` at b2f2e40 of github.com/VectorSpaceLab/agentic-search, on
  FlagEmbedding 1.4.2): ``EvalDenseRetriever`` over the documents' text alone (``R2MEDEvalDataLoader`` keeps no
  title), FAISS inner-product search of the top 2000 (``--search_top_k 2000``), identical ids kept
  (``AbsEvalArgs.ignore_identical_ids`` defaults to False).
* ``reasonrank`` (ReasonRank's ``run_rank_llm.py`` and ``trec_eval.py`` at 06721fd of github.com/8421BCD/ReasonRank): a
  reranking protocol. It reranks the top 100 of a first stage as R2MED's protocol leaves it (the only R2MED first
  stage the repository ships is e5-mistral-7b-instruct's, ``runs/r2med_<Task>/e5-mistral-7b-instruct_top100.txt``:
  100 documents per query, none with the query's id; the README names no first stage for its R2MED figure) and scores
  the reranked run with pytrec_eval's ``ndcg_cut.10`` over the authors' copy of R2MED's judgments (its ``Eval``),
  identical ids kept, which changes nothing on such a run. No entry declares it: a rerank run inherits its first
  stage's protocol, and a run under ``r2med`` reranked is compared with numbers published under ``reasonrank``
  (``compatible``); the first stage and depth a published row reranked are the row's (``report.r2med_paper``).

A protocol decides what an entry's settings cannot: the documents' text (``doc_text``, a parameter of the corpus
encoding), the depth (the entry's ``top_k``, which defaults to the protocol's and may not contradict it) and
whether a document with the query's id is dropped (in the search, as BEIR does, and again when scoring). The
model's own settings (checkpoint, prompts, pooling, lengths, dtype) stay the entry's. The run's info file and its
metrics record the protocol's name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    name: str
    title: str  # who published under it, for the report
    code: str  # the code that defines it
    doc_text: str  # "title_text": title and text joined by a space (as everywhere else); "text": the text alone
    depth: int  # documents kept per query
    drop_identical_ids: bool  # a retrieved document whose id equals the query's id is dropped
    first_stage: str | None = None  # a reranking protocol: the protocol of the first stage it reranks (depth: its top)


PROTOCOLS = {
    "r2med": Protocol(
        "r2med", "R2MED's", "R2MED src/eval_retrieval.py @62b7074 (BEIR's exact search, cos_sim)",
        doc_text="title_text", depth=100, drop_identical_ids=True),
    "reasonembed": Protocol(
        "reasonembed", "ReasonEmbed's",
        "agentic-search ReasonEmbed/evaluation_r2med @b2f2e40 (FlagEmbedding 1.4.2 EvalDenseRetriever, FAISS)",
        doc_text="text", depth=2000, drop_identical_ids=False),
    "reasonrank": Protocol(
        "reasonrank", "ReasonRank's",
        "ReasonRank run_rank_llm.py and trec_eval.py @06721fd: a reranking of the top 100 of a first stage as R2MED's "
        "protocol leaves it, scored by pytrec_eval's ndcg_cut.10",
        doc_text="title_text", depth=100, drop_identical_ids=False, first_stage="r2med"),
}
DECLARABLE = ("r2med", "reasonembed")  # the protocols a dense entry may declare (the schema's enum); the rest rerank


def get(name: str | None) -> Protocol | None:
    return PROTOCOLS[name] if name else None


def compatible(run: str | None, published: str, reranked: bool = False) -> bool:
    """Whether a run under protocol ``run`` is set against a number published under ``published``: the same protocol;
    none declared (its published names alone decide); or, for a rerank run, a reranking protocol whose first stage's
    protocol is the run's (the run's first stage was made as the published one's was)."""
    return run is None or run == published or (reranked and PROTOCOLS[published].first_stage == run)


def label(name: str | None) -> str:
    """The protocol's name for tables: ``r2med``, ``reasonembed``, ``reasonrank``, or ``-`` for a run without one."""
    return name or "-"


def top_k_problem(spec: dict) -> tuple[str, str] | None:
    """(what is wrong, after the entry's name; the fix, ``{name}`` for it) when an entry's top_k contradicts its
    protocol's depth, else None."""
    protocol = get(spec.get("protocol"))
    if protocol and spec.get("top_k") != protocol.depth:
        return (f": top_k {spec.get('top_k')} contradicts protocol: {protocol.name}, which keeps the top "
                f"{protocol.depth} documents per query",
                f"remove models.{{name}}.top_k (it defaults to {protocol.depth}), or the protocol")
    return None

"""LLM rerankers behind an OpenAI-compatible server: listwise (RankGPT's or ReasonRank's prompt) and pointwise
(yes/no).

Both ask through the pipeline's one LLM client (``r2med_eval.llm``: cache, server policy, bounds, retries,
concurrency, accounting); a reasoning LLM's output is cut to its answer first (``llm.reasoning.split_reasoning``, per
``llms.<llm>.reasoning``).

The listwise reranker (``type: llm_listwise``: RankGPT, or ReasonRank's reasoning prompt from ``rerank.reasonrank``)
is ``rerank.listwise``, the pointwise one (``type: llm_pointwise``, yes/no) ``rerank.pointwise``; ``rerank`` runs an
entry of either type.
"""

from __future__ import annotations

import logging

from ..llm.requests import Usage
from . import reasonrank
from .listwise import listwise, permutation_tokens, reasoning_listwise
from .pointwise import pointwise, scoring_used

log = logging.getLogger(__name__)


def prompt_mode(spec: dict) -> str | None:
    """A listwise entry's prompt mode (``rankgpt``, ``rank_GPT_reasoning``, ``rank_GPT_qwen3``); None for others."""
    return spec.get("prompt_mode", "rankgpt") if spec["type"] == "llm_listwise" else None


def sampling_overrides(spec: dict, reasoning: str) -> dict:
    """What a reranker entry changes of its LLM's sampling: ``temperature`` and ``max_tokens`` when set; a ReasonRank
    mode asks with ReasonRank's sampling and its reasoning budget (``reasonrank.sampling``: max_tokens =
    ``reasoning_tokens`` + 100); for a plain LLM (no reasoning first) a pointwise reranker asks 2 tokens by default
    (RankGPT's relevance generation does), a RankGPT listwise one a permutation of its window
    (``listwise.permutation_tokens``); a reasoning LLM keeps the LLM's ``max_tokens`` (its reasoning comes first)."""
    out = {k: spec[k] for k in ("temperature", "max_tokens") if spec.get(k) is not None}
    if prompt_mode(spec) in reasonrank.MODES:
        return {**reasonrank.sampling(spec["prompt_mode"], spec["reasoning_tokens"]), **out}
    if reasoning == "none":
        if spec["type"] == "llm_pointwise":
            out.setdefault("max_tokens", 2)
        elif spec["type"] == "llm_listwise":
            out.setdefault("max_tokens", permutation_tokens(spec["window"]))
    return out


def unusable(spec: dict, info: dict) -> tuple[int, int]:
    """(unusable answers, answers) of a reranking: pointwise, the pairs whose every answer named neither word (scored
    0.5); listwise, the windows whose answer named no passage (left in their order); a ReasonRank mode, the windows
    whose every answer lacked a readable ranking (no ``<answer>``, no passage named, an unreadable digit)."""
    if spec["type"] == "llm_pointwise":
        counts = info["scored_by"]
        return counts.get("unparsed", 0), sum(counts.values())
    parsing = info["parsing"]
    if "unusable_windows" in parsing:
        return parsing["unusable_windows"], parsing["windows"]
    return parsing["answers_naming_no_passage"], parsing["windows"]


def positional(order: list[str]) -> dict[str, float]:
    """Scores that rank ``order`` as it stands: n for the first of n documents, 1 for the last."""
    return {d: float(len(order) - i) for i, d in enumerate(order)}


def rerank(spec: dict, client, queries: dict[str, str], tops: dict[str, list[str]], texts: dict[str, str], *,
           reasoning: str = "none", template: str | None = None,
           count_tokens=None) -> tuple[dict, dict, dict, Usage, list[dict]]:
    """A reranker entry (``llm_listwise`` or ``llm_pointwise``, schema defaults filled) over each query's top
    documents: (new orders, the reranker's own scores -- a listwise reranker's are positions --, what its metadata
    records: the algorithm's parameters and the parsing or scoring counts, the usage, and a ReasonRank mode's record
    of every window: ``listwise.reasoning_listwise``; ``count_tokens`` counts its reasoning's tokens)."""
    sampling = sampling_overrides(spec, reasoning)
    mode = prompt_mode(spec)
    if mode in reasonrank.MODES:
        orders, counts, usage, records = reasoning_listwise(
            client, queries, tops, texts, mode=mode, window=spec["window"], step=spec["step"], reasks=spec["reasks"],
            count_tokens=count_tokens, **sampling)
        return (orders, {q: positional(o) for q, o in orders.items()},
                {"prompt_mode": mode, "window": spec["window"], "step": spec["step"],
                 "passage_tokens": spec["passage_tokens"], "reasoning_tokens": spec["reasoning_tokens"],
                 "reasks": spec["reasks"], "parsing": counts}, usage, records)
    if spec["type"] == "llm_listwise":
        orders, counts, usage = listwise(client, queries, tops, texts, window=spec["window"], step=spec["step"],
                                         words=spec["passage_words"], reasoning=reasoning, **sampling)
        return (orders, {q: positional(o) for q, o in orders.items()},
                {"window": spec["window"], "step": spec["step"], "parsing": counts}, usage, [])
    orders, scores, counts, usage = pointwise(
        client, queries, tops, texts, template=template, words=tuple(spec["answers"]),
        passage_words=spec["passage_words"], top_logprobs=spec["top_logprobs"] if spec["logprobs"] else None,
        system_prompt=spec.get("system_prompt"), reasoning=reasoning, reasks=spec["reasks"], **sampling)
    return orders, scores, {"prompt_sha256": spec.get("prompt_sha256"), "answers": list(spec["answers"]),
                            "scoring": scoring_used(counts), "scored_by": counts}, usage, []

"""The listwise reranker (``type: llm_listwise``): a sliding window of passages per request, each answer a
permutation of its window, in one of two prompt modes.

**RankGPT** (``prompt_mode: rankgpt``, the default) is RankGPT's permutation generation with its sliding window
(github.com/sunnweiwei/RankGPT, ``rank_gpt.py``: ``sliding_windows``, ``permutation_pipeline``,
``create_permutation_instruction``, ``get_prefix_prompt``, ``get_post_prompt``, ``receive_permutation``,
``clean_response``, ``remove_duplicate``):

* windows of ``window`` documents from the bottom of the top n to the top, each ``step`` higher than the last,
  as long as the window's start is not above the top (``rankgpt_windows``; a top n whose length is not
  ``window`` plus a multiple of ``step`` leaves its first documents out of every window, as in RankGPT);
* each window is one chat: RankGPT's system message, its instruction, "Okay, please provide the passages.",
  then per passage a user turn ``[i] <passage cut to passage_words words>`` and the assistant turn
  ``Received passage [i].``, then the closing instruction (``rankgpt_messages``);
* the answer's digit runs are the passage numbers; repeats (counted once, where first seen) and numbers out
  of the window are dropped, the window's passages the answer did not name follow in their previous order
  (``parse_permutation``).

Ours: the window is cut to the query's top n when that is shorter (RankGPT's loop asks nothing then; a top n of
one document asks nothing either), the windows of all queries are asked together (each query's windows in
RankGPT's order), and a digit run that Python cannot read as a number (superscripts), where RankGPT's
``int()`` would raise, is dropped and counted.

**ReasonRank** (``prompt_mode: rank_GPT_reasoning`` or ``rank_GPT_qwen3``, ``reasoning_listwise``): ReasonRank's
windows, reasoning prompt and answer (``rerank.reasonrank``), the same parsing of the answer's ranking, through the
same client; an answer without a readable ranking is asked again (``llm.client.ask_parsed``), then counted.
"""

from __future__ import annotations

import logging

from ..llm.client import ask_parsed
from ..llm.reasoning import split_reasoning
from ..llm.requests import Usage
from . import reasonrank

log = logging.getLogger(__name__)

RANKGPT_SYSTEM = ("You are RankGPT, an intelligent assistant that can rank passages based on their relevancy to the "
                  "query.")


def _rankgpt_opening(query: str, num: int) -> str:
    return (f"I will provide you with {num} passages, each indicated by number identifier []. \nRank the passages "
            f"based on their relevance to query: {query}.")


def _rankgpt_closing(query: str, num: int) -> str:
    return (f"Search Query: {query}. \nRank the {num} passages above based on their relevance to the search query. "
            "The passages should be listed in descending order using identifiers. The most relevant passages should "
            "be listed first. The output format should be [] > [], e.g., [1] > [2]. Only response the ranking "
            "results, do not say any word or explain.")


def permutation_tokens(window: int) -> int:
    """A ``max_tokens`` that holds the permutation of a window and no prose: the characters of
    ``[1] > [2] > ... > [window]`` (a tokenizer makes at most one token per ASCII character) and 16 more. RankGPT asks
    for the ranking only ("Only response the ranking results"); a small-context server refuses a request whose
    prompt and ``max_tokens`` together exceed its context, which the LLM's generation default (10,240) often does."""
    return sum(len(str(i)) + 5 for i in range(1, window + 1)) + 16


def rankgpt_content(doc: dict) -> str:
    """A document's text as RankGPT builds it from a pyserini document (``run_retriever``): ``Title: <title>
    Content: <text>`` when the document has a title field, else its text; white space collapsed; an empty title
    leaves "Title: Content: ", which the prompt then drops (``create_permutation_instruction``)."""
    if "title" in doc and doc["title"] is not None:
        content = "Title: " + doc["title"] + " " + "Content: " + doc["text"]
    else:
        content = doc["text"]
    return " ".join(content.split()).replace("Title: Content: ", "").strip()


def cut_words(text: str, words: int) -> str:
    """White space collapsed, the first ``words`` words."""
    return " ".join(text.split()[:words])


def rankgpt_messages(query: str, passages: list[str], words: int) -> list[dict]:
    """The chat of one window: RankGPT's create_permutation_instruction."""
    num = len(passages)
    out = [{"role": "system", "content": RANKGPT_SYSTEM},
           {"role": "user", "content": _rankgpt_opening(query, num)},
           {"role": "assistant", "content": "Okay, please provide the passages."}]
    for i, text in enumerate(passages, start=1):
        out.append({"role": "user", "content": f"[{i}] {cut_words(text, words)}"})
        out.append({"role": "assistant", "content": f"Received passage [{i}]."})
    out.append({"role": "user", "content": _rankgpt_closing(query, num)})
    return out


def rankgpt_windows(n: int, window: int, step: int) -> list[tuple[int, int]]:
    """(start, end) of the windows over a top n, in the order they are asked (bottom first); the window cut to n."""
    if n <= 1:
        return []
    size = min(window, n)
    out = []
    start, end = n - size, n
    while start >= 0:
        out.append((start, end))
        start, end = start - step, end - step
    return out


def parse_permutation(answer: str, n: int) -> tuple[list[int], dict]:
    """The window's new order (0-based positions) from an answer, and what the parsing dropped or added:
    {named, repeated, out_of_range, unreadable, missing}."""
    runs = "".join(c if c.isdigit() else " " for c in answer).split()
    counts = {"named": 0, "repeated": 0, "out_of_range": 0, "unreadable": 0, "missing": 0}
    seen: set[int] = set()
    order: list[int] = []
    for run in runs:
        try:
            i = int(run) - 1
        except ValueError:  # a digit Python cannot read as a number (a superscript): RankGPT's int() raises
            counts["unreadable"] += 1
            continue
        if i in seen:
            counts["repeated"] += 1
            continue
        seen.add(i)
        if 0 <= i < n:
            order.append(i)
        else:
            counts["out_of_range"] += 1
    counts["named"] = len(order)
    named = set(order)
    rest = [i for i in range(n) if i not in named]
    counts["missing"] = len(rest)
    return order + rest, counts


def listwise(client, queries: dict[str, str], tops: dict[str, list[str]], texts: dict[str, str], *, window: int,
             step: int, words: int, reasoning: str = "none", **sampling) -> tuple[dict[str, list[str]], dict, Usage]:
    """RankGPT's sliding window over each query's top documents (``tops``, first-stage order). ``client``: an
    ``llm.Client`` (``request``, ``ask``); ``sampling`` overrides the LLM's. Returns the new order of each top, the
    parsing counts and the usage."""
    orders = {q: list(docs) for q, docs in tops.items()}
    plans = {q: rankgpt_windows(len(docs), window, step) for q, docs in orders.items()}
    counts = {"windows": 0, "answers_naming_no_passage": 0, "truncated_answers": 0, "repeated": 0,
              "out_of_range": 0, "unreadable": 0, "missing": 0,
              "queries_with_uncovered_top": sum(1 for p in plans.values() if p and p[-1][0] > 0)}
    usage = Usage()
    for r in range(max((len(p) for p in plans.values()), default=0)):
        asked = {q: plans[q][r] for q in sorted(orders) if r < len(plans[q])}
        requests = {f"{q} (window {r + 1} of {len(plans[q])})": client.request(rankgpt_messages(
            queries[q], [texts[d] for d in orders[q][s:e]], words), **sampling) for q, (s, e) in asked.items()}
        answers, used = client.ask(requests)
        usage += used
        for (q, (s, e)), rid in zip(asked.items(), requests):
            answer = answers[rid]
            perm, c = parse_permutation(split_reasoning(reasoning, answer.content), e - s)
            cut = orders[q][s:e]
            orders[q][s:e] = [cut[i] for i in perm]
            counts["windows"] += 1
            counts["answers_naming_no_passage"] += c["named"] == 0
            counts["truncated_answers"] += answer.finish_reason == "length"
            for key in ("repeated", "out_of_range", "unreadable", "missing"):
                counts[key] += c[key]
    if counts["queries_with_uncovered_top"]:
        log.warning("%d queries: the top documents of their top n are in no window (the top n is not window + a "
                    "multiple of step, as RankGPT's sliding window leaves them)", counts["queries_with_uncovered_top"])
    return orders, counts, usage


def windows_for(spec: dict, n: int) -> list[tuple[int, int]]:
    """The windows a listwise entry (schema defaults filled) asks over a top n, by its prompt mode."""
    if spec.get("prompt_mode", "rankgpt") == "rankgpt":
        return rankgpt_windows(n, spec["window"], spec["step"])
    return reasonrank.windows(n, spec["window"], spec["step"])


def reasoning_parser(n: int):
    """``ask_parsed``'s parser of a ReasonRank answer for a window of n passages: (new order, RankGPT's parsing
    counts, how the answer was found: ``pattern`` or ``answer_tag``); ``reasonrank.Unusable`` when the answer has no
    ``<answer>``, names no passage of the window, or holds a digit Python cannot read as a number."""

    def parse(answer) -> tuple[list[int], dict, str]:
        part, how = reasonrank.extract(reasonrank.full_text(answer.content, answer.reasoning))
        if part is None:
            raise reasonrank.Unusable("missing_answer")
        order, counts = parse_permutation(part, n)
        if counts["unreadable"]:
            raise reasonrank.Unusable("unreadable")
        if not counts["named"]:
            raise reasonrank.Unusable("no_passage")
        return order, counts, how

    return parse


def reasoning_listwise(client, queries: dict[str, str], tops: dict[str, list[str]], texts: dict[str, str], *,
                       mode: str, window: int, step: int, reasks: int, count_tokens=None,
                       **sampling) -> tuple[dict[str, list[str]], dict, Usage, list[dict]]:
    """ReasonRank's sliding window over each query's top documents (``tops``, first-stage order; ``texts``: each
    document as ``reasonrank.passage_content`` gives it). Each round asks the next window of every query; an answer
    without a readable ranking is asked again ``reasks`` times (a new attempt each, cached apart), then leaves its
    window as it was, counted. ``count_tokens``: the served model's token count of a text (the reasoning's
    length), or None. Returns the new order of each top, the counts, the usage of every attempt and one record per
    window: {query, window (its number in the query's asking order), start, end, attempts, found (``pattern``,
    ``answer_tag``, or why it is unusable), finish_reason, prompt_tokens, completion_tokens, reasoning_tokens} of
    the answer used."""
    orders = {q: list(docs) for q, docs in tops.items()}
    plans = {q: reasonrank.windows(len(docs), window, step) for q, docs in orders.items()}
    counts = {"windows": 0, "unusable_windows": 0, "truncated_answers": 0, "reasked_windows": 0, "repeated": 0,
              "out_of_range": 0, "missing": 0, "found_by": {"pattern": 0, "answer_tag": 0},
              "unusable_by": {"missing_answer": 0, "no_passage": 0, "unreadable": 0}}
    usage, records = Usage(), []
    for r in range(max((len(p) for p in plans.values()), default=0)):
        asked = {f"{q} (window {r + 1} of {len(plans[q])})": (q, *plans[q][r]) for q in sorted(orders)
                 if r < len(plans[q])}
        for n in sorted({e - s for _, s, e in asked.values()}, reverse=True):  # one parser per window size
            group = {rid: w for rid, w in asked.items() if w[2] - w[1] == n}
            messages = {rid: reasonrank.messages(mode, queries[q], [texts[d] for d in orders[q][s:e]])
                        for rid, (q, s, e) in group.items()}
            parse = reasoning_parser(n)
            parsed, used, _ = ask_parsed(client, messages, parse, retries=reasks, **sampling)
            usage = usage + used
            for rid, (q, s, e) in group.items():
                got = parsed[rid]
                answer = got.answer
                if got.value is None:
                    try:
                        parse(answer)
                    except reasonrank.Unusable as exc:
                        found = exc.kind
                    counts["unusable_windows"] += 1
                    counts["unusable_by"][found] += 1
                else:
                    perm, c, found = got.value
                    cut = orders[q][s:e]
                    orders[q][s:e] = [cut[i] for i in perm]
                    counts["found_by"][found] += 1
                    for key in ("repeated", "out_of_range", "missing"):
                        counts[key] += c[key]
                counts["windows"] += 1
                counts["truncated_answers"] += answer.finish_reason == "length"
                counts["reasked_windows"] += got.attempts > 1
                text = reasonrank.full_text(answer.content, answer.reasoning)
                records.append({"query": q, "window": r + 1, "start": s, "end": e, "attempts": got.attempts,
                                "found": found, "finish_reason": answer.finish_reason,
                                "prompt_tokens": int(answer.usage.get("prompt_tokens", 0)),
                                "completion_tokens": int(answer.usage.get("completion_tokens", 0)),
                                "reasoning_tokens": count_tokens(reasonrank.reasoning_part(text))
                                if count_tokens else None})
    return orders, counts, usage, records

"""RankGPT's listwise reranker (``type: llm_listwise``) is RankGPT's permutation generation with its sliding window
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
"""

from __future__ import annotations

import logging

from ..llm.reasoning import split_reasoning
from ..llm.requests import Usage

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

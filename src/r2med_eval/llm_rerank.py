"""LLM rerankers behind an OpenAI-compatible server: listwise (RankGPT) and pointwise (yes/no).

Both ask through the pipeline's one LLM client (``r2med_eval.llm``: cache, server policy, bounds, retries,
concurrency, accounting); a reasoning LLM's output is cut to its answer first (``gar.split_reasoning``, per
``llms.<llm>.reasoning``).

**Listwise** (``type: llm_listwise``) is RankGPT's permutation generation with its sliding window
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

**Pointwise** (``type: llm_pointwise``): one request per (query, document) from a prompt template file
(``{query}``, ``{passage}``); the score is the probability of the positive answer among the two the prompt
allows (``answers``, default yes/no): ``p = e^y / (e^y + e^n)`` over the log probabilities the server returns
for the answer token (``top_logprobs``; the variants of one word -- "Yes", " yes" -- summed), i.e. the softmax
over the two answers as monoT5, Rank1 and Qwen3-Reranker score: probability mass on any other token is format
noise, not evidence of relevance. When only one of the two words is among the returned alternatives, the other
takes the lowest returned log probability (an upper bound of its own). Without log probabilities (a server that
returns none, ``logprobs: false``, or an answer token that is neither word) the parsed answer scores 1 (positive)
or 0 (negative), and an answer that names neither, after ``reasks`` further askings, 0.5. Within a query equal
scores keep the first-stage order.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

from .errors import InputError
from .gar import split_reasoning
from .llm import Answer, Usage, ask_parsed

log = logging.getLogger(__name__)

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_POINTWISE_PROMPT = PROMPTS_DIR / "relevance_yes_no.txt"
PLACEHOLDERS = ("{query}", "{passage}")

# ------------------------------------------------------------------ RankGPT's prompt, window and parsing

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


def sampling_overrides(spec: dict, reasoning: str) -> dict:
    """What a reranker entry changes of its LLM's sampling: ``temperature`` and ``max_tokens`` when set; a
    pointwise reranker of a plain LLM asks 2 tokens by default (RankGPT's relevance generation does), one of a
    reasoning LLM the LLM's ``max_tokens`` (its reasoning comes first)."""
    out = {k: spec[k] for k in ("temperature", "max_tokens") if spec.get(k) is not None}
    if spec["type"] == "llm_pointwise" and reasoning == "none":
        out.setdefault("max_tokens", 2)
    return out


# ------------------------------------------------------------------ pointwise: prompt, answer token, score


def read_template(path) -> str:
    """A pointwise prompt template: the user message with {query} and {passage} (a final line break dropped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        text = text[:-1] if text.endswith("\n") else text
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the prompt template ({type(exc).__name__}).", path=path,
                         fix="point models.<reranker>.prompt at a UTF-8 text file.") from None
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise InputError(f"the prompt template lacks {' and '.join(missing)}.", path=path,
                         fix="write {query} where the query goes and {passage} where the document goes.")
    return text


def fill_template(template: str, query: str, passage: str) -> str:
    """One pass, so a query holding "{passage}" stays as it is."""
    values = {"query": query, "passage": passage}
    return re.sub(r"\{(query|passage)\}", lambda m: values[m.group(1)], template)


def _word(token: str) -> str:
    return token.strip().strip("Ġ▁ \t\r\n\"'`*.,:;!?()[]{}<>").lower()


def _answer_offset(text: str, reasoning: str) -> int:
    """Where the answer starts in ``text`` (after a reasoning LLM's reasoning)."""
    answer = split_reasoning(reasoning, text)
    at = text.rfind(answer) if answer else len(text)
    return max(at, 0)


def answer_token(answer: Answer, words: tuple[str, str], reasoning: str) -> int | None:
    """The position, in the answer's log probabilities, of the first token after the reasoning that is one of the
    two answer words; None when there is none."""
    if not answer.logprobs:
        return None
    tokens = [t["token"] for t in answer.logprobs]
    text, content = "".join(tokens), answer.content
    if content and text.endswith(content):  # the tokens may also cover reasoning the server split off
        start = len(text) - len(content) + _answer_offset(content, reasoning)
    else:
        start = _answer_offset(text, reasoning)
    pos = 0
    for i, token in enumerate(tokens):
        pos += len(token)
        if pos > start and _word(token) in words:
            return i
    return None


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def positive_probability(alternatives: dict[str, float], words: tuple[str, str]) -> tuple[float, str] | None:
    """(p, kind) from {token: logprob} at the answer token: kind ``logprobs`` (both words among them) or
    ``logprobs_bound`` (one; the other at the lowest returned log probability); None when neither or nothing to
    bound with."""
    pos = [lp for t, lp in alternatives.items() if _word(t) == words[0]]
    neg = [lp for t, lp in alternatives.items() if _word(t) == words[1]]
    if not pos and not neg:
        return None
    kind = "logprobs"
    if not pos or not neg:
        if len(alternatives) < 2:
            return None
        floor = [min(alternatives.values())]
        pos, neg, kind = pos or floor, neg or floor, "logprobs_bound"
    y, n = _logsumexp(pos), _logsumexp(neg)
    return 1.0 / (1.0 + math.exp(n - y)), kind


def parse_label(text: str, words: tuple[str, str]) -> float | None:
    """1.0 or 0.0 for the first of the two answer words in the answer (whole word, any case); None for neither."""
    found = re.search(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", text, re.IGNORECASE)
    if not found:
        return None
    return 1.0 if found.group(1).lower() == words[0] else 0.0


def judge(answer: Answer, words: tuple[str, str], reasoning: str) -> tuple[float | None, str]:
    """(score, kind): the positive answer's probability from the log probabilities when they name the answer
    token, else the parsed label (``label``), else (None, ``unparsed``)."""
    at = answer_token(answer, words, reasoning)
    if at is not None:
        found = positive_probability(answer.top_logprobs(at) or {}, words)
        if found is not None:
            return found
    label = parse_label(split_reasoning(reasoning, answer.content), words)
    return (label, "label") if label is not None else (None, "unparsed")


def pointwise(client, queries: dict[str, str], tops: dict[str, list[str]], texts: dict[str, str], *,
              template: str, words: tuple[str, str], passage_words: int, top_logprobs: int | None,
              system_prompt: str | None = None, reasoning: str = "none", reasks: int = 1,
              **sampling) -> tuple[dict[str, list[str]], dict[str, dict[str, float]], dict, Usage]:
    """One request per (query, document); an answer that yields no score is asked again (a new attempt) up to
    ``reasks`` times. Returns each top's new order, the scores, the counts per kind of scoring and the usage."""
    words = (words[0].lower(), words[1].lower())
    pairs = {f"({q}, {d})": (q, d) for q in sorted(tops) for d in tops[q]}
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages = {rid: head + [{"role": "user", "content": fill_template(
        template, queries[q], cut_words(texts[d], passage_words))}] for rid, (q, d) in pairs.items()}

    def parse(answer):
        score, kind = judge(answer, words, reasoning)
        if kind == "unparsed":
            raise ValueError(kind)
        return score, kind

    parsed, usage, _ = ask_parsed(client, messages, parse, retries=reasks, top_logprobs=top_logprobs, **sampling)
    results = {rid: (None, "unparsed") if p.value is None else p.value for rid, p in parsed.items()}
    counts = dict.fromkeys(("logprobs", "logprobs_bound", "label", "unparsed"), 0)
    scores: dict[str, dict[str, float]] = {q: {} for q in tops}
    for rid, (q, d) in pairs.items():
        score, kind = results[rid]
        counts[kind] += 1
        scores[q][d] = 0.5 if score is None else score
    orders = {q: [d for _, d in sorted(((-scores[q][d], i), d) for i, d in enumerate(docs))]
              for q, docs in tops.items()}
    return orders, scores, counts, usage


def scoring_used(counts: dict) -> str:
    """How a run's scores came about, from the counts per kind: ``logprobs``, ``label``, ``unparsed`` (every answer
    named neither word: the first-stage order stands) or ``mixed``."""
    kinds = {"logprobs" if k.startswith("logprobs") else k for k, n in counts.items() if n}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def positional(order: list[str]) -> dict[str, float]:
    """Scores that rank ``order`` as it stands: n for the first of n documents, 1 for the last."""
    return {d: float(len(order) - i) for i, d in enumerate(order)}


def rerank(spec: dict, client, queries: dict[str, str], tops: dict[str, list[str]], texts: dict[str, str], *,
           reasoning: str = "none", template: str | None = None) -> tuple[dict, dict, dict, Usage]:
    """A reranker entry (``llm_listwise`` or ``llm_pointwise``, schema defaults filled) over each query's top
    documents: (new orders, the reranker's own scores -- a listwise reranker's are positions --, what its metadata
    records: the algorithm's parameters and the parsing or scoring counts, the usage)."""
    sampling = sampling_overrides(spec, reasoning)
    if spec["type"] == "llm_listwise":
        orders, counts, usage = listwise(client, queries, tops, texts, window=spec["window"], step=spec["step"],
                                         words=spec["passage_words"], reasoning=reasoning, **sampling)
        return (orders, {q: positional(o) for q, o in orders.items()},
                {"window": spec["window"], "step": spec["step"], "parsing": counts}, usage)
    orders, scores, counts, usage = pointwise(
        client, queries, tops, texts, template=template, words=tuple(spec["answers"]),
        passage_words=spec["passage_words"], top_logprobs=spec["top_logprobs"] if spec["logprobs"] else None,
        system_prompt=spec.get("system_prompt"), reasoning=reasoning, reasks=spec["reasks"], **sampling)
    return orders, scores, {"prompt_sha256": spec.get("prompt_sha256"), "answers": list(spec["answers"]),
                            "scoring": scoring_used(counts), "scored_by": counts}, usage

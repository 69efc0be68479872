"""The pointwise yes/no LLM reranker (``type: llm_pointwise``): one request per (query, document) from a prompt
template file (``{query}``, ``{passage}``); the score is the probability of the positive answer among the two the prompt
allows (``answers``, default yes/no): ``p = e^y / (e^y + e^n)`` over the log probabilities the server returns
for the answer token (``top_logprobs``; the variants of one word -- "Yes", " yes" -- summed), i.e. the softmax
over the two answers as monoT5, Rank1 and Qwen3-Reranker score: probability mass on any other token is format
noise, not evidence of relevance. When only one of the two words is among the returned alternatives, the other
takes the lowest returned log probability (an upper bound of its own). When no answer token is either word ("Sure",
"**"), the two words are read from the alternatives of the answer's first position, whatever token was chosen there
(kind ``alternatives``). Without log probabilities (a server that returns none, ``logprobs: false``, or neither word
among the first position's alternatives) the parsed answer scores 1 (positive) or 0 (negative), and an answer that
names neither, after ``reasks`` further askings, 0.5: unusable, counted (``unusable_answers``), and a job whose share
of unusable answers exceeds the entry's ``max_unusable`` stops. Within a query equal scores keep the first-stage
order.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

from ..errors import InputError
from ..llm.client import ask_parsed
from ..llm.reasoning import split_reasoning
from ..llm.requests import Answer, Usage
from .listwise import cut_words

log = logging.getLogger(__name__)

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


DEFAULT_POINTWISE_PROMPT = PROMPTS_DIR / "relevance_yes_no.txt"


PLACEHOLDERS = ("{query}", "{passage}")
# how a pair was scored: log probabilities at the answer token (both words among the alternatives, or one, bounded),
# at the first answer position though another token was chosen there, the parsed label, or nothing (score 0.5)
KINDS = ("logprobs", "logprobs_bound", "alternatives", "label", "unparsed")


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


def _answer_tokens(answer: Answer, reasoning: str) -> list[tuple[int, str]]:
    """(position, token) of the answer's tokens after the reasoning, in order (none without log probabilities)."""
    if not answer.logprobs:
        return []
    tokens = [t["token"] for t in answer.logprobs]
    text, content = "".join(tokens), answer.content
    if content and text.endswith(content):  # the tokens may also cover reasoning the server split off
        start = len(text) - len(content) + _answer_offset(content, reasoning)
    else:
        start = _answer_offset(text, reasoning)
    out, pos = [], 0
    for i, token in enumerate(tokens):
        pos += len(token)
        if pos > start:
            out.append((i, token))
    return out


def answer_token(answer: Answer, words: tuple[str, str], reasoning: str) -> int | None:
    """The position, in the answer's log probabilities, of the first token after the reasoning that is one of the
    two answer words; None when there is none."""
    return next((i for i, token in _answer_tokens(answer, reasoning) if _word(token) in words), None)


def first_answer_position(answer: Answer, reasoning: str) -> int | None:
    """The position of the answer's first token after the reasoning (white space skipped), whatever it is."""
    return next((i for i, token in _answer_tokens(answer, reasoning) if token.strip()), None)


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
    """(score, kind): the positive answer's probability from the log probabilities at the first answer token that is
    one of the two words (kind ``logprobs`` or ``logprobs_bound``); when no token is, at the answer's first position,
    whatever token was chosen there, from its alternatives (``alternatives``: the model began otherwise, "Sure" or
    "**", but weighed the two words there); else the parsed label (``label``); else (None, ``unparsed``)."""
    at = answer_token(answer, words, reasoning)
    if at is not None:
        found = positive_probability(answer.top_logprobs(at) or {}, words)
        if found is not None:
            return found
    else:
        first = first_answer_position(answer, reasoning)
        if first is not None:
            found = positive_probability(answer.top_logprobs(first) or {}, words)
            if found is not None:
                return found[0], "alternatives"
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
    counts = dict.fromkeys(KINDS, 0)
    scores: dict[str, dict[str, float]] = {q: {} for q in tops}
    for rid, (q, d) in pairs.items():
        score, kind = results[rid]
        counts[kind] += 1
        scores[q][d] = 0.5 if score is None else score
    orders = {q: [d for _, d in sorted(((-scores[q][d], i), d) for i, d in enumerate(docs))]
              for q, docs in tops.items()}
    return orders, scores, counts, usage


def scoring_used(counts: dict) -> str:
    """How a run's scores came about, from the counts per kind: ``logprobs`` (at the answer token or among the
    first position's alternatives), ``label``, ``unparsed`` (every answer named neither word: the first-stage order
    stands) or ``mixed``."""
    kinds = {"logprobs" if k.startswith("logprobs") or k == "alternatives" else k for k, n in counts.items() if n}
    return kinds.pop() if len(kinds) == 1 else "mixed"

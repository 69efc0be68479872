"""What one asks an LLM and what comes back: ``Request`` (chat messages, sampling parameters, the log
probabilities asked for, the attempt), ``Answer`` (content, reasoning, log probabilities, finish reason, the model
name the server reported), ``Usage`` (what a batch cost), and the bounds an answer must keep for its
``max_tokens``: ``max_answer_chars`` (content and reasoning) and ``max_response_bytes`` (the response read)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

# An answer may hold up to this many characters per token of max_tokens (tokens of the usual vocabularies average
# about 4 characters; the longest are runs of spaces or punctuation), plus a fixed allowance.
CHARS_PER_TOKEN = 32
ANSWER_ALLOWANCE_CHARS = 1024
# The response may hold up to this many bytes per answer character (JSON escapes of non-ASCII text: \uXXXX, a
# surrogate pair 12 bytes for two characters), per returned log probability, plus a fixed allowance for the rest
# of the response (ids, usage).
BYTES_PER_CHAR = 6
BYTES_PER_LOGPROB = 512
RESPONSE_ALLOWANCE_BYTES = 64 * 1024


def sampling_params(settings: dict) -> dict:
    """The sampling parameters of an ``llms.<llm>.generate`` entry, as sent (top_p only when set)."""
    out = {"temperature": settings["temperature"], "max_tokens": settings["max_tokens"], "seed": settings["seed"]}
    if settings.get("top_p") is not None:
        out["top_p"] = settings["top_p"]
    return out


def max_answer_chars(max_tokens: int) -> int:
    """The longest answer (content and reasoning, in characters) accepted for ``max_tokens``."""
    return int(max_tokens) * CHARS_PER_TOKEN + ANSWER_ALLOWANCE_CHARS


def max_response_bytes(max_tokens: int, top_logprobs: int | None = None) -> int:
    """The most bytes read of one response for ``max_tokens`` (and log probabilities, when asked)."""
    per_token = CHARS_PER_TOKEN * BYTES_PER_CHAR
    if top_logprobs is not None:
        per_token += (top_logprobs + 1) * BYTES_PER_LOGPROB
    return int(max_tokens) * per_token + ANSWER_ALLOWANCE_CHARS * BYTES_PER_CHAR + RESPONSE_ALLOWANCE_BYTES



@dataclass
class Request:
    """One chat completion: ``messages`` ([{role, content}], several turns allowed), ``sampling`` (sent as is:
    temperature, max_tokens, seed, top_p), ``top_logprobs`` (None: no log probabilities; 0: those of the answer's
    tokens; k: also the k likeliest alternatives at each position) and ``attempt`` (0 for the first asking; n > 0
    asks again, as a separate cache entry)."""

    messages: list[dict]
    sampling: dict
    top_logprobs: int | None = None
    attempt: int = 0

    def key(self, model: str) -> str:
        """The cache key. A first attempt without log probabilities keeps the key of (model, messages, sampling)
        alone, so caches written before log probabilities and attempts existed stay valid."""
        blob = {"model": model, "messages": self.messages, "sampling": self.sampling}
        if self.top_logprobs is not None:
            blob["logprobs"] = self.top_logprobs
        if self.attempt:
            blob["attempt"] = self.attempt
        return hashlib.sha256(json.dumps(blob, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()

    def body(self, model: str) -> dict:
        out = {"model": model, "messages": self.messages, **self.sampling}
        if self.top_logprobs is not None:
            out["logprobs"] = True
            if self.top_logprobs > 0:
                out["top_logprobs"] = self.top_logprobs
        return out


@dataclass
class Answer:
    """A server's answer: ``content``; ``reasoning`` (a reasoning model's separate ``reasoning_content``, when the
    server splits it off); ``logprobs`` (when asked and returned: per generated token {token, logprob,
    top_logprobs: [{token, logprob}]}; None when the server sent none); ``finish_reason`` ("stop", "length", ...);
    ``usage`` {prompt_tokens, completion_tokens}; ``served_model``: the model name the server reported (None when
    it reported none); ``cached``: whether it came from the cache."""

    content: str
    usage: dict
    reasoning: str | None = None
    logprobs: list[dict] | None = None
    finish_reason: str | None = None
    served_model: str | None = None
    cached: bool = False

    def top_logprobs(self, position: int = 0) -> dict[str, float] | None:
        """{token: logprob} at one position of the answer (the chosen token and its alternatives), or None when
        the server returned no log probabilities."""
        if not self.logprobs or position >= len(self.logprobs):
            return None
        entry = self.logprobs[position]
        out = {alt["token"]: alt["logprob"] for alt in entry.get("top_logprobs") or []}
        out.setdefault(entry["token"], entry["logprob"])
        return out

    def entry(self) -> dict:
        """What the cache stores besides the key."""
        out = {"content": self.content, "usage": self.usage}
        for name in ("reasoning", "logprobs", "finish_reason", "served_model"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_entry(cls, obj: dict) -> Answer:
        return cls(content=obj["content"], usage=obj.get("usage") or {}, reasoning=obj.get("reasoning"),
                   logprobs=obj.get("logprobs"), finish_reason=obj.get("finish_reason"),
                   served_model=obj.get("served_model"), cached=True)


@dataclass
class Usage:
    """What a batch cost: requests sent now, answers taken from the cache, the tokens of every answer returned
    (cached ones included: the cost of the whole output) and their price, and the model names the server reported
    for them ({name: answers}; answers cached before names were recorded are not counted). ``+`` adds batches
    (e.g. re-asks)."""

    requested: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    served_models: dict = field(default_factory=dict)

    def __add__(self, other: Usage) -> Usage:
        models = dict(self.served_models)
        for name, n in other.served_models.items():
            models[name] = models.get(name, 0) + n
        return Usage(self.requested + other.requested, self.cached + other.cached,
                     self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     round(self.cost + other.cost, 6), dict(sorted(models.items())))

    def as_dict(self) -> dict:
        return {"requested": self.requested, "cached": self.cached, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost": self.cost,
                "served_models": dict(sorted(self.served_models.items()))}

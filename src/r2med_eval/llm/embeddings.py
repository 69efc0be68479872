"""Embeddings through the one LLM client: ``POST <base>/embeddings`` of an OpenAI-compatible server (vLLM serving a
pooling model, text-embeddings-inference's OpenAI route, OpenAI's API).

``EmbeddingClient`` is a ``client.Client``: the same server from the environment (canonical host, no redirects,
proxies only where allowed), the same server policy for MIMIC-derived text (checked before the first byte is sent),
the same retries (timeouts, broken connections, 408, 429 with its Retry-After, 5xx; exponential backoff) within the
same per-request deadline, and ``concurrency`` requests in flight, the first failure stopping the rest. What differs
is the request (a batch of inputs: token id lists or texts, ``dimensions`` when set) and the cache
(``vectors.VectorCache``: arrays, not answers).

The cache key of a batch holds what its vectors depend on: the served model's name asked for, the model id the
server reports, the instruction, the truncation (input kind and lengths), ``dimensions`` and any extra request
fields (``base``, given by the caller), and the batch's inputs. The model id the server reports is known only from
an answer, so a job first looks its batches up under the id its cache holds; when some are missing it asks the first
of them alone, and if the server now reports another id the cached vectors of the old one are not mixed in (every
batch is asked again under the new id, with a warning). Nothing of a response but its vectors, token count and
model id is kept; an error response's body is never read (it may echo the texts)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import LLMError
from .client import Client, first_failure
from .policy import ServerPolicy
from .vectors import VectorCache

log = logging.getLogger(__name__)

MAX_DIM = 16384               # the widest embedding a response may carry (Qwen3-Embedding-8B: 4,096)
BYTES_PER_VALUE = 32          # a float in JSON: "-1.2345678901234567e-05, "
RESPONSE_ALLOWANCE_BYTES = 64 * 1024


def max_embedding_bytes(rows: int) -> int:
    """The most bytes read of one response for a batch of ``rows`` inputs."""
    return int(rows) * MAX_DIM * BYTES_PER_VALUE + RESPONSE_ALLOWANCE_BYTES


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


@dataclass
class EmbedUsage:
    """What a job's embedding requests cost: requests answered now, batches from the cache, texts, tokens the server
    reported (None when it reported none), the seconds spent, and the model ids the server reported ({id: batches})."""

    requested: int = 0
    cached: int = 0
    texts: int = 0
    prompt_tokens: int | None = None
    seconds: float = 0.0
    served_models: dict = field(default_factory=dict)

    def add_tokens(self, tokens: int | None) -> None:
        if tokens is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + int(tokens)

    def __add__(self, other: EmbedUsage) -> EmbedUsage:
        models = Counter(self.served_models) + Counter(other.served_models)
        tokens = None if self.prompt_tokens is None and other.prompt_tokens is None else \
            (self.prompt_tokens or 0) + (other.prompt_tokens or 0)
        return EmbedUsage(self.requested + other.requested, self.cached + other.cached, self.texts + other.texts,
                          tokens, round(self.seconds + other.seconds, 3), dict(sorted(models.items())))

    def as_dict(self) -> dict:
        rate = round(self.texts / self.seconds, 1) if self.seconds > 0 and self.requested else None
        return {"requests": self.requested, "cached_batches": self.cached, "texts": self.texts,
                "prompt_tokens": self.prompt_tokens, "seconds": round(self.seconds, 3), "texts_per_second": rate,
                "served_models": dict(sorted(self.served_models.items()))}


class EmbeddingClient(Client):
    """Asks a ``models.<name>.server`` entry's model (``settings``, schema defaults filled) for embeddings, through
    the vector cache at ``cache_stem``. ``private``: the cache is owner-only. ``policy``: the inputs carry
    MIMIC-derived text, so the server must pass ``policy.check``."""

    def __init__(self, settings: dict, cache_stem, *, private: bool = False, policy: ServerPolicy | None = None,
                 where: str = "models.<model>.server"):
        self.settings = settings
        self.model = settings["model"]
        self.cache = VectorCache(cache_stem, private=private)
        self.policy = policy
        self.unit = "batch"
        self.where = where
        self._warned_model = False

    def body(self, inputs: list) -> dict:
        out = {"model": self.model, "input": inputs, "encoding_format": "float", **self.settings.get("extra_body", {})}
        if self.settings.get("dimensions"):
            out["dimensions"] = int(self.settings["dimensions"])
        return out

    def embed(self, batches: dict[str, list], base: dict, label: str = "") -> tuple[dict[str, np.ndarray], EmbedUsage]:
        """The vectors of every batch (``batches``: id -> inputs, each a token id list or a text) and the usage.
        ``base``: what else the vectors depend on (the cache key's instruction, truncation, dimensions, ...)."""
        started = time.perf_counter()
        content = {bid: _digest({"base": base, "served": self.model, "input": inputs})
                   for bid, inputs in batches.items()}
        wanted = set(content.values())
        known = Counter(obj.get("served_model") or "" for obj in self.cache.entries.values()
                        if obj.get("content") in wanted)
        current = known.most_common(1)[0][0] if known else None
        usage = EmbedUsage(texts=sum(len(v) for v in batches.values()))
        total, done = len(batches), [0]
        lock = threading.Lock()
        servers = []

        def key(bid, served):
            return _digest([content[bid], served])

        def one(bid):
            if not servers:
                with lock:
                    if not servers:
                        servers.append(self._server())
            t0 = time.perf_counter()
            vectors, served, tokens = self._ask_batch(servers[0], bid, batches[bid])
            self.cache.add(key(bid, served), vectors, content=content[bid], served_model=served, tokens=tokens)
            with lock:
                usage.requested += 1
                done[0] += 1
                log.info("%sbatch %s: %d texts, %s tokens, %.2f s (%d of %d to ask)", label and label + " ", bid,
                         len(batches[bid]), "?" if tokens is None else tokens, time.perf_counter() - t0, done[0],
                         len(missing))
            return served

        missing = [bid for bid in batches if current is None or key(bid, current) not in self.cache.entries]
        log.info("%s%d batches (%d texts) for %s: %d in the cache, %d to ask", label and label + " ", total,
                 usage.texts, self.model, total - len(missing), len(missing))
        if missing:
            first = one(missing[0])  # the model id the server reports now
            if current is not None and first != current:
                log.warning("the embeddings server now reports the model %r where the cache holds vectors of %r "
                            "(%s): those are not mixed in; every batch is asked under the new model",
                            first, current, self.where)
            current = first
            self._ask_all(one, [bid for bid in batches if key(bid, current) not in self.cache.entries], current)
        out = {}
        for bid in batches:
            vectors = self.cache.get(key(bid, current))
            if vectors is None:  # damaged on disk: asked again
                self._ask_all(one, [bid], current)
                vectors = self.cache.get(key(bid, current))
            out[bid] = vectors
            usage.add_tokens(self.cache.entries[key(bid, current)].get("tokens"))
        usage.cached = total - usage.requested
        usage.served_models = {current or "": total} if batches else {}
        usage.seconds = time.perf_counter() - started
        if current and current != self.model and not self._warned_model:
            self._warned_model = True
            log.warning("the embeddings server reports the model %r where %r was asked (%s.model): the vectors are "
                        "recorded as they came; check that the server serves the model you meant", current,
                        self.model, self.where)
        return out, usage

    def _ask_all(self, one, bids: list, current) -> None:
        """Ask ``bids`` ``concurrency`` at a time; the first failure stops the rest (queued ones are not sent)."""
        if not bids:
            return
        stop = threading.Event()
        changed = []

        def guarded(bid):
            if stop.is_set():
                return
            try:
                served = one(bid)
            except BaseException:
                stop.set()
                raise
            if served != current:
                changed.append(served)
                stop.set()

        failure = first_failure(guarded, bids, int(self.settings["concurrency"]))
        if failure is not None:
            log.error("stopped; the batches answered so far are in the cache %s", self.cache.index)
            raise failure
        if changed:
            raise LLMError(f"the embeddings server changed the model it reports while the job asked it ({current!r}, "
                           f"then {changed[0]!r}); the vectors of one job must come from one model.",
                           fix="serve one model under the name, then rerun (the batches answered so far are cached).")

    def _ask_batch(self, server, bid: str, inputs: list) -> tuple[np.ndarray, str, int | None]:
        what = f"batch {bid}"
        payload = json.dumps(self.body(inputs), ensure_ascii=False).encode("utf-8")
        limit = max_embedding_bytes(len(inputs))
        return self.post(server, payload, what, limit, lambda b: self._vectors(b, what, len(inputs)),
                         (f"more than {MAX_DIM} dimensions a text allow", "check the server and the model"),
                         endpoint="/embeddings")

    def _vectors(self, body: bytes, what: str, n: int) -> tuple[np.ndarray, str, int | None]:
        """(vectors in input order, the model id reported, prompt tokens or None) of a response."""
        def malformed(why: str):
            return LLMError(f"the embeddings server sent a malformed response for {what} ({why}).",
                            fix="check that the server speaks the OpenAI embeddings API (POST /v1/embeddings).")

        try:
            obj = json.loads(body)
            data = obj["data"]
            rows = [None] * n
            for item in data:
                i = int(item["index"])
                if not 0 <= i < n or rows[i] is not None:
                    raise malformed(f"index {i} out of place")
                emb = item["embedding"]
                rows[i] = (np.frombuffer(base64.b64decode(emb), dtype="<f4") if isinstance(emb, str)
                           else np.asarray(emb, dtype=np.float64))
            usage = obj.get("usage") or {}
            tokens = usage.get("prompt_tokens")
            tokens = int(tokens) if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) else None
            served = obj.get("model")
        except LLMError:
            raise
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise malformed("no data[].embedding list with an index per input") from None
        if any(r is None for r in rows):
            raise malformed(f"{sum(r is None for r in rows)} of {n} inputs without an embedding")
        dims = {r.shape for r in rows}
        if len(dims) != 1 or len(next(iter(dims))) != 1 or next(iter(dims))[0] == 0:
            raise malformed("embeddings of different or no dimensions")
        vectors = np.stack(rows)
        if not np.isfinite(vectors).all() or (np.abs(vectors) > np.finfo(np.float32).max).any():
            raise malformed("values that are not finite float32 numbers")
        want = self.settings.get("dimensions")
        if want and vectors.shape[1] != int(want):
            raise LLMError(f"the embeddings server returned {vectors.shape[1]} dimensions for {what} where "
                           f"dimensions: {want} was asked.",
                           fix=f"use a server that supports dimensions, or remove {self.where}.dimensions.")
        served = served[:200] if isinstance(served, str) and served.isprintable() else ""
        return vectors.astype(np.float32), served, tokens

"""The one LLM client: every job that asks an LLM behind an OpenAI-compatible chat/completions server goes
through ``Client`` (query expansions, the LLM rerankers and the CliniQ judge).

``Client.ask`` takes a batch of ``Request`` (``requests``) under caller-chosen ids and returns an ``Answer`` per id
and the ``Usage`` of the batch (requests sent, cache hits, tokens, cost, the model names the server reported):

* **Cache** (``cache``): a crash or a rerun asks only what the cache lacks.
* **Server policy** (``policy``): when the requests carry MIMIC-derived text, the server must be a loopback or a
  declared host, checked before any connection, on the host the connection uses.
* **Bounds** (``transport``, ``requests``). Each request has a total deadline (``deadline_seconds``, its retries
  and their waits included; ``timeout_seconds`` bounds each silent wait); reading stops past what ``max_tokens``
  allows; an answer longer than ``max_tokens`` allows is an error.
* **Retries** are for timeouts, broken connections (a body shorter than its Content-Length among them), HTTP 408,
  429 and 5xx only, with exponential backoff (``backoff_seconds``, doubling; a 429's Retry-After is honoured)
  within the deadline. A refused connection, an unknown host, another HTTP status or a malformed response stops at
  once with one message (``LLMError``).
* **Parsed answers.** ``ask_parsed`` asks a batch, parses every answer and re-asks the malformed ones (the next
  ``attempt``, optionally with a repair turn), then returns every result, malformed ones included and counted.
* **Concurrency.** ``concurrency`` requests in flight; the first failure stops the batch (queued requests are
  not sent; the answers that arrive are cached).

The server's address and key come from the environment variables the settings name and are written nowhere:
not in the cache, the log, a message or the job's info files. ``server.local_server`` starts ``vllm serve`` on
127.0.0.1 inside the job and points those variables at it.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import ssl
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass

from ..errors import LLMError
from .cache import Cache
from .policy import ServerPolicy, base_url, connect_host
from .requests import CHARS_PER_TOKEN, Answer, Request, Usage, max_answer_chars, max_response_bytes, sampling_params
from .server import started
from .transport import Compressed, Expired, Server, TooLarge, env_proxy, exchange

log = logging.getLogger(__name__)

RETRY_STATUSES = (408, 429)


def _read_env(name: str, what: str, setting: str, where: str = "llms.<llm>.generate") -> str:
    value = os.environ.get(name, "")
    if not value:
        raise LLMError(f"the environment variable {name} ({what}) is not set.",
                       fix=f"export {name}=... before running ({where}.{setting} names the variable).")
    return value


def first_failure(one, ids: list, concurrency: int) -> BaseException | None:
    """``one(id)`` for every id, ``concurrency`` at a time; at the first exception the queued calls are not made
    (those in flight finish). Returns that exception, or None."""
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(one, i) for i in ids]
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
    for f in futures:
        if f.done() and not f.cancelled() and f.exception() is not None:
            return f.exception()
    return None


# ------------------------------------------------------------------ the client


class Client:
    """Asks one ``llms.<llm>.generate`` entry's model (``settings``, schema defaults filled) through the cache at
    ``cache_path``. ``private``: the cache is owner-only (a MIMIC-derived benchmark). ``policy``: the requests
    carry MIMIC-derived text, so the server must pass ``policy.check``. ``unit`` names what an id is, in
    messages ("query q1")."""

    def __init__(self, settings: dict, cache_path, *, private: bool = False, policy: ServerPolicy | None = None,
                 unit: str = "request"):
        self.settings = settings
        self.model = settings["model"]
        self.cache = Cache(cache_path, private=private)
        self.policy = policy
        self.unit = unit
        self.where = "llms.<llm>.generate"  # where the settings are, in messages
        self._warned_model = False
        self._started = None

    def request(self, messages: list[dict], *, top_logprobs: int | None = None, attempt: int = 0,
                **sampling) -> Request:
        """A request with the entry's sampling parameters, ``sampling`` overriding them (e.g. max_tokens=1)."""
        return Request(messages, {**sampling_params(self.settings), **sampling}, top_logprobs, attempt)

    def ask(self, requests: dict[str, Request]) -> tuple[dict[str, Answer], Usage]:
        """An answer for every id (from the cache, else from the server) and the batch's usage."""
        keys = {rid: r.key(self.model) for rid, r in requests.items()}
        missing = [rid for rid in requests if keys[rid] not in self.cache.entries]
        usage = Usage(cached=len(requests) - len(missing))
        log.info("%d requests to %s: %d answers in the cache, %d to ask", len(requests), self.model, usage.cached,
                 len(missing))
        if missing:
            server = self._server()
            lock = threading.Lock()
            stop = threading.Event()  # set by the first failure: queued requests are not sent

            def one(rid):
                if stop.is_set():
                    return
                try:
                    answer = self._ask_one(server, rid, requests[rid])
                except BaseException:
                    stop.set()
                    raise
                self.cache.add(keys[rid], answer)
                with lock:
                    usage.requested += 1

            failure = first_failure(one, missing, int(self.settings["concurrency"]))
            if failure is not None:
                log.error("stopped; %d answers of this batch are in the cache %s", usage.requested, self.cache.path)
                raise failure
        answers, asked = {}, set(missing)
        for rid in requests:
            answers[rid] = self.cache.get(keys[rid])
            answers[rid].cached = rid not in asked
            usage.prompt_tokens += int(answers[rid].usage.get("prompt_tokens", 0))
            usage.completion_tokens += int(answers[rid].usage.get("completion_tokens", 0))
            served = answers[rid].served_model
            if served is not None:
                usage.served_models[served] = usage.served_models.get(served, 0) + 1
        usage.served_models = dict(sorted(usage.served_models.items()))
        other = sorted(name for name in usage.served_models if name != self.model)
        if other and not self._warned_model:
            self._warned_model = True  # once per job
            log.warning("the LLM server answered as model %s where %s was asked (llms.<llm>.generate.model): the "
                        "answers are recorded as they came; check that the server serves the model you meant",
                        ", ".join(map(repr, other)), repr(self.model))
        usage.cost = round(usage.prompt_tokens * self.settings["price_per_million_input"] / 1e6
                           + usage.completion_tokens * self.settings["price_per_million_output"] / 1e6, 6)
        return answers, usage

    # ------------------------------------------------------------ the server

    def _server(self) -> Server:
        """The server named by the environment, checked against the policy before anything is connected."""
        s = self.settings
        url = _read_env(s["base_url_env"], "the server's base URL, e.g. http://127.0.0.1:8000/v1", "base_url_env",
                        self.where)
        key = _read_env(s["api_key_env"], "API key", "api_key_env", self.where)
        if self.policy is not None:
            self.policy.check(url, s["base_url_env"])
        self._started = started(url)  # a server this job started: its end is named, not "nothing listens"
        scheme, host, port, path = base_url(url, s["base_url_env"])
        context = ssl.create_default_context() if scheme == "https" else None
        proxy = None if self.policy is not None else env_proxy(scheme, host)
        return Server(scheme, connect_host(host), port, path, key, s["base_url_env"], s["api_key_env"], context,
                       proxy)

    def _ask_one(self, server: Server, rid: str, request: Request) -> Answer:
        what = f"{self.unit} {rid}"
        payload = json.dumps(request.body(self.model), ensure_ascii=False).encode("utf-8")
        max_tokens = int(request.sampling["max_tokens"])
        limit = max_response_bytes(max_tokens, request.top_logprobs)
        too_large = (f"more than max_tokens ({max_tokens}) allows", "check that the server honours max_tokens")
        return self.post(server, payload, what, limit, lambda body: self._parse(body, what, request), too_large)

    def post(self, server: Server, payload: bytes, what: str, limit: int, parse, too_large: tuple[str, str],
             endpoint: str = "/chat/completions"):
        """POST ``payload`` to ``endpoint`` under the settings' deadline, retrying what may pass (timeouts, broken
        connections, 408, 429 with its Retry-After, 5xx) with exponential backoff; ``parse(body)`` of the first 2xx
        answer. ``limit``: the most bytes read of a response (``too_large``: why, and the fix, for the message)."""
        s = self.settings
        retries, backoff = int(s["retries"]), float(s["backoff_seconds"])
        deadline = time.monotonic() + float(s["deadline_seconds"])
        expired = LLMError(f"the LLM server gave no complete answer for {what} within deadline_seconds "
                           f"({s['deadline_seconds']} s, retries included).",
                           fix="check the server (a stalled or trickling server is cut off at the deadline); raise "
                               f"{self.where}.deadline_seconds if it is merely slow.")
        for attempt in range(retries + 1):
            retry_after = None
            self._check_started(what)
            try:
                status, retry_after, body = exchange(server, payload, read_timeout=float(s["timeout_seconds"]),
                                                      deadline=deadline, max_bytes=limit, endpoint=endpoint)
            except Expired:
                raise expired from None
            except TooLarge:
                raise LLMError(f"the LLM server sent more than {limit} bytes for {what}, {too_large[0]}; reading "
                               "stopped there.", fix=f"{too_large[1]} (nothing was cached).") from None
            except Compressed:
                raise LLMError(f"the LLM server sent a compressed response for {what} although the request asked "
                               "for none (Accept-Encoding: identity).",
                               fix="turn compression off on the server or its proxy.") from None
            except TimeoutError:
                problem = "timed out"
            except ConnectionRefusedError:
                self._check_started(what, wait=5.0)
                raise LLMError(f"cannot connect to the server for {what}: the connection was refused (nothing listens "
                               f"at the address in {server.url_env}).", fix=_fix("connect", server)) from None
            except socket.gaierror:
                raise LLMError(f"cannot connect to the server for {what}: the host name in {server.url_env} does not "
                               "resolve.", fix=_fix("connect", server)) from None
            except ssl.SSLError as exc:
                raise LLMError(f"cannot connect to the server for {what}: TLS failed ({type(exc).__name__}).",
                               fix=_fix("connect", server)) from None
            except (OSError, http.client.HTTPException) as exc:
                self._check_started(what, wait=1.0)
                problem = f"the connection broke before the answer was complete ({type(exc).__name__})"
            except (ValueError, UnicodeError) as exc:  # base_url refuses what could cause these; never a traceback
                raise LLMError(f"cannot use the server's address in {server.url_env} for {what} "
                               f"({type(exc).__name__}).", fix=_fix("connect", server)) from None
            else:
                if 200 <= status < 300:
                    return parse(body)
                if status not in RETRY_STATUSES and status < 500:
                    raise LLMError(f"the LLM server refused the request for {what}: HTTP {status}.",
                                   fix=_fix(status, server, self.where))
                problem = f"HTTP {status}"
            if attempt == retries:
                raise LLMError(f"the LLM server failed for {what} after {retries + 1} attempts: {problem}.",
                               fix=_fix("transient", server))
            pause = max(backoff * (2 ** attempt), retry_after or 0.0)
            if time.monotonic() + pause >= deadline:
                raise expired
            log.warning("%s: %s; retry %d of %d in %.1f s", what, problem, attempt + 1, retries, pause)
            time.sleep(pause)
        raise AssertionError("unreachable")

    def _check_started(self, what: str, wait: float = 0.0) -> None:
        """Stop with one message naming the server this job started and how it ended, once it has ended (waiting up
        to ``wait`` seconds for a dying process): the job set the address variable itself, so "start the server"
        would mislead."""
        gone = self._started.gone(wait) if self._started is not None else None
        if gone:
            raise LLMError(f"{gone} (at {what}).", fix="read its output (out of GPU memory? killed by the scheduler "
                                                       "or the OOM killer?), then rerun: the answers so far are "
                                                       "cached.")

    def _parse(self, body: bytes, what: str, request: Request) -> Answer:
        malformed = LLMError(f"the LLM server sent a malformed response for {what} (no choices[0].message.content "
                             "string).", fix="check that the server speaks the OpenAI chat/completions API.")
        try:
            obj = json.loads(body)
            choice = obj["choices"][0]
            message = choice["message"]
            content = message["content"]
            usage = obj.get("usage") or {}
            tokens = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                      "completion_tokens": int(usage.get("completion_tokens") or 0)}
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            finish = choice.get("finish_reason")
            served = obj.get("model")
            logprobs = _logprobs(choice.get("logprobs")) if request.top_logprobs is not None else None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise malformed from None
        if not isinstance(content, str) or not (reasoning is None or isinstance(reasoning, str)):
            raise malformed
        chars = len(content) + len(reasoning or "")
        limit = max_answer_chars(request.sampling["max_tokens"])
        if chars > limit:
            raise LLMError(f"the LLM server sent an answer of {chars} characters for {what}, more than max_tokens "
                           f"({request.sampling['max_tokens']}) allows ({limit}: {CHARS_PER_TOKEN} a token).",
                           fix="check that the server honours max_tokens (nothing was cached).")
        return Answer(content, tokens, reasoning, logprobs, finish if isinstance(finish, str) else None,
                      served[:200] if isinstance(served, str) else None)


@dataclass
class Parsed:
    """What ``ask_parsed`` got for one id: ``value`` (the parser's result, None when every attempt was malformed),
    ``answer`` (the last answer), ``attempts`` (how many were asked: 1 + the re-asks)."""

    value: object
    answer: Answer
    attempts: int


def ask_parsed(client: Client, messages: dict[str, list[dict]], parse, *, retries: int, repair: str | None = None,
               **sampling) -> tuple[dict[str, Parsed], Usage, list[int]]:
    """Ask every id's messages (attempt 0) and ``parse`` each answer (``parse(answer)`` returns the value, or raises
    ValueError when the answer is malformed); re-ask the malformed ones with attempt + 1 (a new cache entry: at
    temperature 0 the same request would bring the same answer back), up to ``retries`` times. With ``repair``, a
    re-ask continues the conversation: the malformed answer, then ``repair`` as a new user turn. Returns the result
    of every id (malformed ones included, with value None: nothing is dropped), the usage of every round added up,
    and how many answers were malformed after each round."""
    current = {rid: client.request(msgs, **sampling) for rid, msgs in messages.items()}
    out: dict[str, Parsed] = {}
    usage, malformed = Usage(), []
    for attempt in range(retries + 1):
        answers, used = client.ask(current)
        usage = usage + used
        bad = {}
        for rid, answer in answers.items():
            try:
                out[rid] = Parsed(parse(answer), answer, attempt + 1)
            except ValueError:
                out[rid] = Parsed(None, answer, attempt + 1)
                bad[rid] = answer
        malformed.append(len(bad))
        if not bad or attempt == retries:
            break
        log.warning("%d of %d answers malformed; asking them again (attempt %d of %d)", len(bad), len(answers),
                    attempt + 2, retries + 1)
        nxt = {}
        for rid, answer in bad.items():
            msgs = messages[rid]
            if repair is not None:
                msgs = msgs + [{"role": "assistant", "content": answer.content}, {"role": "user", "content": repair}]
            nxt[rid] = client.request(msgs, attempt=attempt + 1, **sampling)
        current = nxt
    return out, usage, malformed


def _logprobs(raw) -> list[dict] | None:
    """The server's choices[0].logprobs.content as [{token, logprob, top_logprobs: [{token, logprob}]}] (bytes
    dropped); None when it sent none."""
    if not raw or not isinstance(raw.get("content"), list):
        return None
    return [{"token": str(t["token"]), "logprob": float(t["logprob"]),
             "top_logprobs": [{"token": str(a["token"]), "logprob": float(a["logprob"])}
                              for a in t.get("top_logprobs") or []]} for t in raw["content"]]


def _fix(problem, server: Server, where: str = "llms.<llm>.generate") -> str:
    if problem in (401, 403):
        return f"check the API key in the environment variable {server.key_env}."
    if problem == 404:
        return f"check {where}.model (the name the server serves) and the base URL (it ends in /v1)."
    if problem == "connect":
        return f"start the server, or check the base URL in the environment variable {server.url_env}."
    return "check the server's log; rerun to retry (answers so far are cached)."

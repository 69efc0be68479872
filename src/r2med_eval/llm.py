"""The one LLM client: every job that asks an LLM behind an OpenAI-compatible chat/completions server goes
through ``Client`` (query expansions now; judging and reranking use the same requests, cache and accounting).

A request is a list of chat messages, the sampling parameters and, optionally, a request for the log
probabilities of the answer's tokens (``Request``). ``Client.ask`` takes a batch of them under caller-chosen ids
and returns an ``Answer`` per id and the ``Usage`` of the batch (requests sent, cache hits, tokens, cost):

* **Cache.** Every answer is appended (flushed and fsynced) to a JSON-lines file under
  sha256(model, messages, sampling[, logprobs][, attempt]): a crash or a rerun asks only what the cache lacks; a
  torn last line (a crash while writing) is ignored. ``Request.attempt`` re-asks a request whose cached answer
  the caller could not use (a malformed answer at temperature 0 would come back the same) as a new entry; the
  earlier entries stay, so a rerun replays the same attempts without asking.
* **Server policy.** When the requests carry MIMIC-derived text (``ServerPolicy``), the server's address, read
  from the environment at job time, must be a loopback address or a host the user declared in ``phi_servers``;
  the check runs before any connection is attempted (``check_server``). Names are not resolved: ``localhost`` is
  the only name taken as loopback. The host checked is the host connected to: one canonical spelling
  (``canonical_host``: ``localhost.`` is ``localhost``; what has none is refused), and a loopback host is
  connected to by its address (``localhost`` is 127.0.0.1), so no name lookup ever happens for it. Such requests
  go straight to the named host (proxy variables are ignored) and redirects are never followed.
* **Bounds.** Each request has a total deadline (``deadline_seconds``, its retries and their waits included;
  ``timeout_seconds`` bounds each silent wait); the answer's bytes are counted as they arrive and reading stops
  past what ``max_tokens`` allows (``max_response_bytes``); an answer longer than ``max_tokens`` allows
  (``max_answer_chars``) is an error.
* **Retries** are for timeouts, broken connections (a body shorter than its Content-Length among them), HTTP 408,
  429 and 5xx only, with exponential backoff (``backoff_seconds``, doubling; a 429's Retry-After is honoured)
  within the deadline. A refused connection, an unknown host, another HTTP status or a malformed response stops at
  once with one message (``LLMError``).
* **Parsed answers.** ``ask_parsed`` asks a batch, parses every answer and re-asks the malformed ones (the next
  ``attempt``, optionally with a repair turn), then returns every result, malformed ones included and counted.
* **Concurrency.** ``concurrency`` requests in flight; the first failure stops the batch (queued requests are
  not sent; the answers that arrive are cached).
* **Files.** ``private=True`` (a MIMIC-derived benchmark): the cache is owner-only (0600, folder 0700).

The server's address and key come from the environment variables the settings name and are written nowhere:
not in the cache, the log, a message or the job's info files. ``local_server`` starts ``vllm serve`` on
127.0.0.1 inside the job (a GPU node on SLURM) and points those variables at it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import json
import logging
import os
import re
import socket
import ssl
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .errors import InputError

log = logging.getLogger(__name__)

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
RETRY_STATUSES = (408, 429)
LOOPBACK_NAMES = ("localhost",)
PHYSIONET_TERMS = ("PhysioNet's credentialed data use agreement for MIMIC-III lets you share the notes with no one "
                   "it does not cover, and a server that receives a prompt receives the notes")
POLICY_DOCS = "docs/cliniq.md#llm-servers"


class LLMError(InputError):
    """The server could not give a usable answer, or may not be asked: one message, the job stops."""


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


# ------------------------------------------------------------------ requests, answers, usage


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
    def from_entry(cls, obj: dict) -> "Answer":
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

    def __add__(self, other: "Usage") -> "Usage":
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


# ------------------------------------------------------------------ the cache


def _private_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)


class Cache:
    """Append-only JSON lines {key, content, usage[, reasoning, logprobs, finish_reason]}; safe against a crash at
    any point. ``private``: the file is 0600 and its folder 0700."""

    def __init__(self, path, private: bool = False):
        self.path = Path(path)
        self.private = private
        self.entries: dict[str, dict] = {}
        self.torn = 0
        self._lock = threading.Lock()
        if self.path.is_file():
            if private:
                os.chmod(self.path, 0o600)
            with open(self.path, "rb") as handle:
                for raw in handle:
                    try:
                        obj = json.loads(raw.decode("utf-8"))
                        if not isinstance(obj["content"], str):
                            raise TypeError
                        self.entries[obj["key"]] = obj
                    except (ValueError, KeyError, TypeError):
                        self.torn += 1
            if self.torn:
                log.warning("%s: %d unreadable cache lines (a crash while writing) ignored", self.path, self.torn)

    def get(self, key: str) -> Answer | None:
        obj = self.entries.get(key)
        return None if obj is None else Answer.from_entry(obj)

    def add(self, key: str, answer: Answer) -> None:
        obj = {"key": key, **answer.entry()}
        line = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self.private:
                _private_folder(self.path.parent)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600 if self.private else 0o666)
            with open(fd, "ab") as handle:
                if handle.tell() and self.torn:
                    handle.write(b"\n")  # a torn last line must not swallow this one
                    self.torn = 0
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self.entries[key] = obj


# ------------------------------------------------------------------ the server policy


_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def canonical_host(host: str) -> str:
    """The one spelling of a URL's host that the policy checks and the connection uses: lower case, without
    brackets; an IP address in its standard form (``ipaddress``); a name without its one trailing dot (the root of
    DNS: ``localhost.`` is ``localhost``). ValueError for what has no such spelling: an empty label (``a..b``,
    ``localhost..``), a label of other characters than ASCII letters, digits, ``-`` and ``_`` (an international
    name is written in its ``xn--`` form), an address in a form that only the C library reads (``127.1``,
    ``2130706433``, ``0x7f000001``), a zone index (``%eth0``)."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if "%" in host:
        raise ValueError("a zone index")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("not a host name")
    try:
        socket.inet_aton(name)  # parsing only: no lookup
    except OSError:
        return name
    raise ValueError("an IP address in a non-standard form")


def _bare_host(host: str) -> str:
    """``canonical_host``, or the host lower-cased where it has no canonical spelling (it then matches nothing)."""
    try:
        return canonical_host(host)
    except ValueError:
        return host.strip().lower()


def connect_host(host: str) -> str:
    """The address a connection to the canonical ``host`` opens: the loopback address itself for ``localhost``
    (no name lookup ever happens for a loopback host), the host as it is otherwise."""
    return "127.0.0.1" if host in LOOPBACK_NAMES else host


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 (also as ::ffff:127.x.y.z) and the name ``localhost``. Other names are not resolved: one
    that resolves to a loopback address (an /etc/hosts alias, a wildcard DNS name) is not loopback here."""
    host = _bare_host(host)
    if host in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


@dataclass(frozen=True)
class ServerPolicy:
    """The requests carry MIMIC-derived text (``what`` names them, for the message): only a loopback server, or a
    host the user declared in ``phi_servers`` as covered by their data use agreement, may receive them."""

    what: str
    phi_servers: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: dict, what: str) -> "ServerPolicy":
        """The declaration as the workflow's configuration holds it (the job reads it from there, not from its
        params: a declaration changes no output, so it must rerun nothing)."""
        return cls(what, tuple(str(h) for h in (config or {}).get("phi_servers") or ()))

    def allows(self, host: str) -> bool:
        return is_loopback(host) or _bare_host(host) in {_bare_host(h) for h in self.phi_servers}

    def check(self, url: str, variable: str) -> None:
        """Stop unless ``url`` (from the environment variable ``variable``) names an allowed host. Nothing is
        resolved or connected; the URL is not repeated in the message (it is never written anywhere)."""
        host = _url_parts(url, variable)[1]
        if self.allows(host):
            if not is_loopback(host) and url.lower().startswith("http:"):
                log.warning("%s go to a declared server over plain http (unencrypted)", self.what)
            return
        raise LLMError(f"{self.what} quote MIMIC-III notes, and the LLM server that {variable} names is neither a "
                       "loopback address (127.0.0.0/8, ::1, localhost) nor declared in phi_servers: "
                       f"{PHYSIONET_TERMS}. Nothing was sent.",
                       fix=f"serve the LLM on this machine (127.0.0.1), or, if your data use agreement covers that "
                           f"server, add its host name (the host of ${variable}) to phi_servers in the configuration "
                           f"({POLICY_DOCS}).")


def _url_parts(url: str, variable: str) -> tuple[str, str, int, str]:
    """(scheme, canonical host, port, path) of a base URL: the host the policy checks is the host the connection
    uses (``canonical_host``). LLMError for a URL that is not printable ASCII (control characters such as CR/LF,
    spaces, non-ASCII letters), has no http(s) scheme or no host, a host without a canonical spelling, or port 0."""
    fix = f"export {variable}=http://127.0.0.1:8000/v1 (the server's base URL, ending in /v1)."
    url = url.strip()
    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        raise LLMError(f"the environment variable {variable} holds a character that is not printable ASCII (a control "
                       "character such as a line break, a space, or a non-ASCII letter).",
                       fix=fix + " Write an international host name in its xn-- form.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise LLMError(f"the environment variable {variable} does not hold an http(s) URL with a host.", fix=fix)
    try:
        host = canonical_host(parts.hostname)
    except ValueError as exc:
        raise LLMError(f"the host in the environment variable {variable} has no canonical spelling ({exc}): it is "
                       "neither a host name of ASCII letters, digits and hyphens nor an IP address in standard form.",
                       fix=fix) from None
    if port == 0:
        raise LLMError(f"the environment variable {variable} names port 0, which no server listens on.", fix=fix)
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80), parts.path.rstrip("/")


# ------------------------------------------------------------------ one exchange with the server


class _Expired(Exception):
    """The request's deadline passed."""


class _TooLarge(Exception):
    pass


class _Compressed(Exception):
    pass


@dataclass
class _Server:
    scheme: str
    host: str
    port: int
    path: str
    key: str
    url_env: str
    key_env: str
    context: ssl.SSLContext | None = field(default=None, repr=False)
    proxy: tuple[str, int] | None = None  # an http proxy from the environment (never under a ServerPolicy)


def _env_proxy(scheme: str, host: str) -> tuple[str, int] | None:
    """The http proxy the environment names for this scheme and host (http_proxy, https_proxy, no_proxy); none for
    a loopback host."""
    import urllib.request

    url = urllib.request.getproxies().get(scheme)
    if not url or is_loopback(host) or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    return parts.hostname, parts.port or 80


def _exchange(server: _Server, payload: bytes, *, read_timeout: float, deadline: float, max_bytes: int) -> tuple:
    """POST one request; (status, Retry-After seconds or None, body bytes; empty unless 2xx). A watchdog shuts the
    socket down at the deadline, whatever phase the exchange is in; the body is read in blocks and counted."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _Expired
    timeout = min(read_timeout, remaining)
    target = server.path + "/chat/completions"
    host, port = server.proxy or (server.host, server.port)
    if server.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=server.context)
        if server.proxy:
            conn.set_tunnel(server.host, server.port)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        if server.proxy:
            target = f"http://{server.host}:{server.port}{target}"
    expired = threading.Event()
    connected = {}  # the socket, kept here: http.client lets go of it once a response that closes arrives

    def expire():
        expired.set()
        with contextlib.suppress(KeyError, OSError):
            connected["socket"].shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(remaining, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        connected["socket"] = conn.sock
        if expired.is_set():
            raise _Expired
        conn.request("POST", target, body=payload, headers={
            "Content-Type": "application/json", "Accept": "application/json", "Accept-Encoding": "identity",
            "Authorization": f"Bearer {server.key}", "User-Agent": "r2med-eval"})
        resp = conn.getresponse()
        if not 200 <= resp.status < 300:  # the body is not read: an error page may echo the prompt
            retry_after = resp.getheader("Retry-After")
            return resp.status, (float(retry_after) if (retry_after or "").strip().isdigit() else None), b""
        length = resp.getheader("Content-Length")
        if length and length.strip().isdigit() and int(length) > max_bytes:
            raise _TooLarge
        body = bytearray()
        while True:
            block = resp.read1(1 << 16)
            if not block:
                break
            body += block
            if len(body) > max_bytes:
                raise _TooLarge
        if expired.is_set():
            raise _Expired
        if length and length.strip().isdigit() and len(body) < int(length):  # the server closed mid-body
            raise http.client.IncompleteRead(bytes(body), int(length) - len(body))
        if (resp.getheader("Content-Encoding") or "identity").strip().lower() not in ("identity", ""):
            raise _Compressed
        return resp.status, None, bytes(body)
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise _Expired from None
        raise
    finally:
        timer.cancel()
        conn.close()


def _read_env(name: str, what: str, setting: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise LLMError(f"the environment variable {name} ({what}) is not set.",
                       fix=f"export {name}=... before running (llms.<llm>.generate.{setting} names the variable).")
    return value


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
        self._warned_model = False

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

            with ThreadPoolExecutor(max_workers=int(self.settings["concurrency"])) as pool:
                futures = [pool.submit(one, rid) for rid in missing]
                _, pending = wait(futures, return_when=FIRST_EXCEPTION)
                for f in pending:
                    f.cancel()
            for f in futures:
                if f.done() and not f.cancelled() and f.exception() is not None:
                    log.error("stopped; %d answers of this batch are in the cache %s", usage.requested,
                              self.cache.path)
                    raise f.exception()
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

    def _server(self) -> _Server:
        """The server named by the environment, checked against the policy before anything is connected."""
        s = self.settings
        url = _read_env(s["base_url_env"], "the server's base URL, e.g. http://127.0.0.1:8000/v1", "base_url_env")
        key = _read_env(s["api_key_env"], "API key", "api_key_env")
        if self.policy is not None:
            self.policy.check(url, s["base_url_env"])
        scheme, host, port, path = _url_parts(url, s["base_url_env"])
        context = ssl.create_default_context() if scheme == "https" else None
        proxy = None if self.policy is not None else _env_proxy(scheme, host)
        return _Server(scheme, connect_host(host), port, path, key, s["base_url_env"], s["api_key_env"], context,
                       proxy)

    def _ask_one(self, server: _Server, rid: str, request: Request) -> Answer:
        s = self.settings
        what = f"{self.unit} {rid}"
        retries, backoff = int(s["retries"]), float(s["backoff_seconds"])
        payload = json.dumps(request.body(self.model), ensure_ascii=False).encode("utf-8")
        max_tokens = int(request.sampling["max_tokens"])
        limit = max_response_bytes(max_tokens, request.top_logprobs)
        deadline = time.monotonic() + float(s["deadline_seconds"])
        expired = LLMError(f"the LLM server gave no complete answer for {what} within deadline_seconds "
                           f"({s['deadline_seconds']} s, retries included).",
                           fix="check the server (a stalled or trickling server is cut off at the deadline); raise "
                               "llms.<llm>.generate.deadline_seconds if it is merely slow.")
        for attempt in range(retries + 1):
            retry_after = None
            try:
                status, retry_after, body = _exchange(server, payload, read_timeout=float(s["timeout_seconds"]),
                                                      deadline=deadline, max_bytes=limit)
            except _Expired:
                raise expired from None
            except _TooLarge:
                raise LLMError(f"the LLM server sent more than {limit} bytes for {what}, more than max_tokens "
                               f"({max_tokens}) allows; reading stopped there.",
                               fix="check that the server honours max_tokens (nothing was cached).") from None
            except _Compressed:
                raise LLMError(f"the LLM server sent a compressed response for {what} although the request asked "
                               "for none (Accept-Encoding: identity).",
                               fix="turn compression off on the server or its proxy.") from None
            except TimeoutError:
                problem = "timed out"
            except ConnectionRefusedError:
                raise LLMError(f"cannot connect to the server for {what}: the connection was refused (nothing listens "
                               f"at the address in {server.url_env}).", fix=_fix("connect", server)) from None
            except socket.gaierror:
                raise LLMError(f"cannot connect to the server for {what}: the host name in {server.url_env} does not "
                               "resolve.", fix=_fix("connect", server)) from None
            except ssl.SSLError as exc:
                raise LLMError(f"cannot connect to the server for {what}: TLS failed ({type(exc).__name__}).",
                               fix=_fix("connect", server)) from None
            except (OSError, http.client.HTTPException) as exc:
                problem = f"the connection broke before the answer was complete ({type(exc).__name__})"
            except (ValueError, UnicodeError) as exc:  # _url_parts refuses what could cause these; never a traceback
                raise LLMError(f"cannot use the server's address in {server.url_env} for {what} "
                               f"({type(exc).__name__}).", fix=_fix("connect", server)) from None
            else:
                if 200 <= status < 300:
                    return self._parse(body, what, request)
                if status not in RETRY_STATUSES and status < 500:
                    raise LLMError(f"the LLM server refused the request for {what}: HTTP {status}.",
                                   fix=_fix(status, server))
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


def _fix(problem, server: _Server) -> str:
    if problem in (401, 403):
        return f"check the API key in the environment variable {server.key_env}."
    if problem == 404:
        return "check llms.<llm>.generate.model (the name the server serves) and the base URL (it ends in /v1)."
    if problem == "connect":
        return f"start the server, or check the base URL in the environment variable {server.url_env}."
    return "check the server's log; rerun to retry (answers so far are cached)."


# ------------------------------------------------------------------ a server inside the job (vLLM on a GPU node)

# the arguments of `vllm serve` the job sets itself: the address, the key, the name it checks
JOB_OWNED_ARGS = ("--host", "--port", "--api-key", "--served-model-name")


def job_owned_args(args) -> list[str]:
    """The arguments of ``vllm.args`` that the job owns (``--host``, ``--port``, ``--api-key``,
    ``--served-model-name``, also written ``--host=...``): an entry may not set them."""
    return [a for a in args if str(a).split("=", 1)[0] in JOB_OWNED_ARGS]


@contextlib.contextmanager
def serving(settings: dict, server_log=None):
    """The job's server: ``local_server`` when ``vllm.enabled`` (its output to the job's log, or, with
    ``server_log``, to that owner-only file: on a MIMIC-derived benchmark it may log prompts), else nothing (the
    server the environment names)."""
    with contextlib.ExitStack() as stack:
        if settings["vllm"]["enabled"]:
            import sys

            handle = sys.stderr
            if server_log:
                from .cliniq_files import open_private

                handle = stack.enter_context(open_private(server_log))
                log.info("the LLM server's output goes to %s (owner-only: it may log prompts)", server_log)
            stack.enter_context(local_server(settings, handle, server_log))
        yield


def _port_taken(port: int) -> bool:
    """Whether a socket is already bound to 127.0.0.1:``port`` (listening there or on every address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection in TIME_WAIT is no owner
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _models(port: int, key: str) -> tuple[int, list[str]] | None:
    """GET /v1/models on 127.0.0.1:``port`` with ``key``: (HTTP status, the served model ids), or None while
    nothing answers. Never through a proxy; the body is read only on 200 and at most 1 MB of it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/v1/models", headers={"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, []
        try:
            data = json.loads(resp.read(1 << 20)).get("data") or []
            return 200, [str(m.get("id")) for m in data if isinstance(m, dict)]
        except (ValueError, AttributeError):
            return 200, []
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


@contextlib.contextmanager
def local_server(settings: dict, log_handle=None, log_path=None):
    """Start ``vllm serve`` (``vllm.command``) on 127.0.0.1 for the length of the block and point the client's
    environment variables at it, in this process only. The job talks to the server it started, and only to it:

    * the port must be free before the start (a server already there, another user's on a shared node, is never
      asked);
    * the server gets a fresh random key (through VLLM_API_KEY, never on a command line) that every request must
      carry, and it must refuse a request with a wrong key (a decoy key is tried first: a server that answers
      without the job's key is not asked anything);
    * the child must stay alive while it starts (its exit status and ``log_path`` are named when it dies), and
      ``/v1/models`` must list the served model;
    * ``vllm.args`` may not set ``--host``, ``--port``, ``--api-key`` or ``--served-model-name``.

    The server's output goes to ``log_handle`` (an owner-only file on a MIMIC-derived benchmark: it may log
    prompts)."""
    import secrets
    import subprocess
    import sys

    v = settings["vllm"]
    port = int(v["port"])
    owned = job_owned_args(v["args"])
    if owned:
        raise LLMError(f"llms.<llm>.generate.vllm.args sets {', '.join(owned)}, which the job sets itself (the server "
                       "listens on 127.0.0.1 only, under a fresh key and the model's name).",
                       fix="remove them from vllm.args; choose the port with vllm.port.")
    if _port_taken(port):
        raise LLMError(f"port {port} on 127.0.0.1 is already taken by another process, so the LLM server this job "
                       "would start cannot listen there; nothing was sent to the process that holds it.",
                       fix=f"set llms.<llm>.generate.vllm.port to a free port (not {port}).")
    key, decoy = secrets.token_hex(24), secrets.token_hex(24)
    env = dict(os.environ)
    env["VLLM_API_KEY"] = key
    cmd = [*v["command"], v.get("model_path") or settings["model"], "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", settings["model"], *v["args"]]
    where = f"its output is in {log_path}" if log_path else "its output is in the job's log"
    log.info("starting the LLM server: %s (port %d, up to %d s)", " ".join(cmd[:2]), port, v["startup_seconds"])
    proc = subprocess.Popen(cmd, env=env, stdout=log_handle or sys.stderr, stderr=subprocess.STDOUT)
    saved = {n: os.environ.get(n) for n in (settings["base_url_env"], settings["api_key_env"])}
    try:
        _wait_ready(proc, port, key, decoy, settings["model"], float(v["startup_seconds"]), cmd[0], where)
        os.environ[settings["base_url_env"]] = f"http://127.0.0.1:{port}/v1"
        os.environ[settings["api_key_env"]] = key
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(proc, port: int, key: str, decoy: str, model: str, seconds: float, name: str, where: str) -> None:
    """Until the started server answers as it must (``local_server``), checking that the child lives."""
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise LLMError(f"the LLM server ({name}) exited with status {proc.returncode} before it was ready; "
                           f"{where}.", fix="read its output; fix the model path, the GPUs or vllm.args.")
        probe = _models(port, decoy)
        if probe is not None:
            if probe[0] == 200:
                raise LLMError(f"the server on 127.0.0.1:{port} answers without the job's key: it is not the server "
                               "this job started (or that server ignores VLLM_API_KEY); nothing was sent to it.",
                               fix=f"stop whatever else listens on port {port}, or set llms.<llm>.generate.vllm.port "
                                   "to a free port.")
            answer = _models(port, key)
            if answer is not None and answer[0] == 200:
                if model not in answer[1]:
                    raise LLMError(f"the server on 127.0.0.1:{port} does not list the model {model!r} on /v1/models "
                                   f"(it lists {len(answer[1])} others); nothing was sent to it.",
                                   fix=f"check vllm.command and vllm.model_path; {where}.")
                log.info("the LLM server is up after %.0f s", time.monotonic() - started)
                return
        if time.monotonic() - started > seconds:
            raise LLMError(f"the LLM server did not answer within {seconds:g} s; {where}.",
                           fix="raise llms.<llm>.generate.vllm.startup_seconds, or read its output.")
        time.sleep(1.0)

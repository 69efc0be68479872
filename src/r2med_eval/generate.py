"""Writing expansion files (``query_with_hydoc.jsonl``) with an LLM behind an OpenAI-compatible server.

R2MED's prompts (src/instrcution.py and src/generate_hypothetical_doc.py at commit 62b7074), written out here
from a table of how each task names its query: a system message "You are a helpful assistant." and one user
message per query, for HyDE, query2doc (few-shot: the examples come from a file, ``examples``) and LameR
(the top passages of a first retrieval run, each cut to 512 words, numbered ``\\n[1]. ...``).

Every answer is appended to a cache (JSON lines, one per request, flushed and fsynced) under the key
sha256(model, messages, sampling parameters): a crash or a rerun asks the server only for what the cache
lacks; a torn last line (a crash while writing) is ignored. Failed requests are retried with exponential
backoff; any failure that remains stops with one message, and the expansion file is written (atomically)
only when every query has its answer. The server's address and key come from the environment and are
written nowhere: not in the cache, the log (httpx's request log is silenced) or the info file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from .errors import InputError
from .progress import Progress

log = logging.getLogger(__name__)

# R2MED task -> (what the query is, its label in the prompt, what the answer helps with, similar-case task)
TASKS = {
    "Biology": ("Biology post", "Post", "post", False),
    "Bioinformatics": ("Bioinformatics post", "Post", "post", False),
    "Medical-Sciences": ("Medical Science post", "Post", "post", False),
    "MedXpertQA-Exam": ("Medical Exam", "Exam", "exam", False),
    "MedQA-Diag": ("Medical Exam", "Exam", "exam", False),
    "PMC-Treatment": ("Clinical Case", "Case", "case", False),
    "PMC-Clinical": ("Clinical Case", "Case", "case", True),
    "IIYi-Clinical": ("Clinical Case", "Case", "case", True),
}
SYSTEM_PROMPT = "You are a helpful assistant."


def prompt_template(method: str, task: str) -> str:
    """R2MED's user prompt for a method and task, with ``{TEXT}`` (the query), ``{EXAMPLE}`` (query2doc) and
    ``{PASSAGE}`` (LameR) left to fill."""
    if task not in TASKS:
        raise InputError(f"no R2MED prompt for task {task!r} (R2MED's tasks: {', '.join(TASKS)}).",
                         fix="set prompt_task in the query_variants entry to the R2MED task whose prompt fits.")
    noun, label, goal, similar = TASKS[task]
    if method == "hyde":
        if similar:
            return f"Please write a similar case to help diagnose the {noun}.\n{label}: {{TEXT}}\nSimilar Case: "
        return f"Please write a passage to help answer the {noun}.\n{label}: {{TEXT}}\nPassage: "
    if method == "query2doc":
        head = "Write a similar case to help diagnose" if similar else \
            ("Write a passage that help answer" if task == "Biology" else "Write a passage to help answer")
        tail = "Similar Case: " if similar else "Passage: "
        return (f"{head} the {noun}.\n\n###Examples:###\n{{EXAMPLE}}\n\n###Real Test:###\n"
                f"{label}: {{TEXT}}\n{tail}")
    if method == "lamer":
        if similar:
            return (f"Give a {noun} and its possible similar cases (most of these cases are non-similar). Please "
                    f"write a correct similar case that help diagnose the {goal}.\nJust output the correct case, "
                    f"don't explanation.\n\n{label}: {{TEXT}}\n\nPossible Similar Cases: {{PASSAGE}}")
        return (f"Give a {noun} and its possible relevant passages (most of these passages are wrong). Please write "
                f"a correct passage that help answer the {goal}.\nJust output the correct passage, don't "
                f"explanation.\n\n{label}: {{TEXT}}\n\nPossible Relevant Passages: {{PASSAGE}}")
    raise ValueError(f"unknown method {method!r}")


def template_sha256(method: str, task: str, examples: str | None = None) -> str:
    text = prompt_template(method, task)
    if examples is not None:
        text = text.replace("{EXAMPLE}", examples)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lamer_passages(doc_ids: list[str], corpus: dict[str, str], words: int = 512) -> str:
    """The top documents as R2MED's LameR prompt lists them: newlines to spaces, cut to ``words`` words."""
    out = ""
    for i, d in enumerate(doc_ids, start=1):
        text = " ".join(corpus[d].replace("\n", " ").split()[:words])
        out += f"\n[{i}]. {text}"
    return out


def build_prompts(method: str, task: str, queries: dict[str, str], *, examples: str | None = None,
                  passages: dict[str, str] | None = None) -> dict[str, str]:
    """{query id: user prompt}."""
    template = prompt_template(method, task)
    if method == "query2doc":
        if examples is None:
            raise InputError("query2doc needs few-shot examples, and none are configured.",
                             fix="set llms.<llm>.generate.examples to a JSON file {R2MED task: examples text}.")
        template = template.replace("{EXAMPLE}", examples)
    out = {}
    for q, text in queries.items():
        prompt = template.replace("{PASSAGE}", passages[q]) if method == "lamer" else template
        out[q] = prompt.replace("{TEXT}", text)
    return out


def read_examples(path, task: str) -> str:
    from .io import read_json

    try:
        data = read_json(path)
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the query2doc examples ({exc}).", path=path,
                         fix="give a JSON file {R2MED task: examples text}.") from None
    if not isinstance(data, dict) or not isinstance(data.get(task), str):
        raise InputError(f"no examples text for task {task!r}.", path=path,
                         fix=f"add a key {task!r} with the few-shot examples as one string.")
    return data[task]


# ------------------------------------------------------------------ the cache


def request_key(model: str, messages: list[dict], sampling: dict) -> str:
    blob = json.dumps({"model": model, "messages": messages, "sampling": sampling}, sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Cache:
    """Append-only JSON lines {key, content, usage}; safe against a crash at any point."""

    def __init__(self, path):
        self.path = Path(path)
        self.entries: dict[str, dict] = {}
        self.torn = 0
        self._lock = threading.Lock()
        if self.path.is_file():
            with open(self.path, "rb") as handle:
                for raw in handle:
                    try:
                        obj = json.loads(raw.decode("utf-8"))
                        self.entries[obj["key"]] = obj
                    except (ValueError, KeyError, TypeError):
                        self.torn += 1
            if self.torn:
                log.warning("%s: %d unreadable cache lines (a crash while writing) ignored", self.path, self.torn)

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def add(self, key: str, content: str, usage: dict) -> None:
        obj = {"key": key, "content": content, "usage": usage}
        line = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as handle:
                if handle.tell() and self.torn:
                    handle.write(b"\n")  # a torn last line must not swallow this one
                    self.torn = 0
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self.entries[key] = obj


# ------------------------------------------------------------------ the client


def _env(name: str, what: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise InputError(f"the environment variable {name} ({what}) is not set.",
                         fix=f"export {name}=... before running (llms.<llm>.generate.{'api_key_env' if what == 'API key' else 'base_url_env'} names the variable).")
    return value


def make_client(settings: dict):
    """An ``openai.OpenAI`` client for the server named by the environment (no retries of its own)."""
    import openai

    for name in ("httpx", "httpcore", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)  # their INFO lines carry the server's URL
    base_url = _env(settings["base_url_env"], "the server's base URL, e.g. http://127.0.0.1:8000/v1")
    key = _env(settings["api_key_env"], "API key")
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=float(settings["timeout_seconds"]))


def sampling_params(settings: dict) -> dict:
    out = {"temperature": settings["temperature"], "max_tokens": settings["max_tokens"], "seed": settings["seed"]}
    if settings.get("top_p") is not None:
        out["top_p"] = settings["top_p"]
    return out


class GenerationError(InputError):
    """The server could not give an answer: unreachable, an error status, or a malformed response."""


def _ask(client, model: str, messages: list[dict], sampling: dict, retries: int, backoff: float, qid: str):
    import openai

    transient = (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
                 openai.InternalServerError)
    for attempt in range(retries + 1):
        try:
            resp = client.chat.completions.create(model=model, messages=messages, **sampling)
        except transient as exc:
            if attempt < retries:
                wait_s = backoff * (2 ** attempt)
                log.warning("query %s: %s; retry %d of %d in %.1f s", qid, _describe(exc), attempt + 1, retries,
                            wait_s)
                time.sleep(wait_s)
                continue
            raise GenerationError(f"the LLM server failed for query {qid} after {retries + 1} attempts: "
                                  f"{_describe(exc)}.", fix=_fix(exc)) from None
        except openai.APIStatusError as exc:
            raise GenerationError(f"the LLM server refused the request for query {qid}: {_describe(exc)}.",
                                  fix=_fix(exc)) from None
        except (openai.APIResponseValidationError, ValueError, TypeError, AttributeError) as exc:
            raise GenerationError(f"the LLM server sent a malformed response for query {qid} "
                                  f"({type(exc).__name__}).",
                                  fix="check that the server speaks the OpenAI chat/completions API.") from None
        return _content(resp, qid)
    raise AssertionError("unreachable")


def _content(resp, qid: str) -> tuple[str, dict]:
    try:
        content = resp.choices[0].message.content
        usage = getattr(resp, "usage", None)
        tokens = {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                  "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}
    except (AttributeError, IndexError, TypeError, ValueError):
        content = None
    if not isinstance(content, str):
        raise GenerationError(f"the LLM server sent a malformed response for query {qid} (no choices[0].message."
                              "content string).", fix="check that the server speaks the OpenAI chat/completions API.")
    return content, tokens


def _describe(exc) -> str:
    import openai

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "cannot connect to the server"
    return type(exc).__name__


def _fix(exc) -> str:
    import openai

    if isinstance(exc, openai.AuthenticationError):
        return "check the API key in the environment variable that llms.<llm>.generate.api_key_env names."
    if isinstance(exc, openai.NotFoundError):
        return "check llms.<llm>.generate.model (the name the server serves) and the base URL (it ends in /v1)."
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        return "start the server, or check the base URL in the environment variable that base_url_env names."
    return "check the server's log; rerun to retry (answers so far are cached)."


def generate(prompts: dict[str, str], settings: dict, cache_path) -> tuple[dict[str, str], dict]:
    """{query id: answer} for every prompt, and the counts (requests, cached, tokens, cost)."""
    model = settings["model"]
    sampling = sampling_params(settings)
    cache = Cache(cache_path)
    messages = {q: [{"role": "system", "content": settings["system_prompt"]}, {"role": "user", "content": p}]
                for q, p in prompts.items()}
    keys = {q: request_key(model, m, sampling) for q, m in messages.items()}
    missing = [q for q in prompts if cache.get(keys[q]) is None]
    stats = {"queries": len(prompts), "cached": len(prompts) - len(missing), "requested": 0,
             "prompt_tokens": 0, "completion_tokens": 0}
    log.info("%d queries: %d answers in the cache, %d to ask %s", len(prompts), stats["cached"], len(missing), model)
    if missing:
        client = make_client(settings)
        lock = threading.Lock()
        stop = threading.Event()  # set by the first failure: queued requests are not sent

        def one(q):
            if stop.is_set():
                return q
            try:
                content, usage = _ask(client, model, messages[q], sampling, int(settings["retries"]),
                                      float(settings["backoff_seconds"]), q)
            except BaseException:
                stop.set()
                raise
            cache.add(keys[q], content, usage)
            with lock:
                stats["requested"] += 1
                progress.update()
            return q

        with Progress("generation", len(missing), "queries", log) as progress, \
                ThreadPoolExecutor(max_workers=int(settings["concurrency"])) as pool:
            futures = [pool.submit(one, q) for q in missing]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for f in pending:
                f.cancel()
            for f in futures:
                if f.done() and not f.cancelled() and f.exception() is not None:
                    log.error("stopped; %d answers of this run are in the cache %s", stats["requested"], cache_path)
                    raise f.exception()
    answers = {}
    for q in prompts:
        entry = cache.get(keys[q])
        answers[q] = entry["content"]
        stats["prompt_tokens"] += entry["usage"].get("prompt_tokens", 0)
        stats["completion_tokens"] += entry["usage"].get("completion_tokens", 0)
    stats["cost"] = round(stats["prompt_tokens"] * settings["price_per_million_input"] / 1e6
                          + stats["completion_tokens"] * settings["price_per_million_output"] / 1e6, 6)
    return answers, stats


# ------------------------------------------------------------------ a server inside the job (vLLM on a GPU node)


@contextlib.contextmanager
def local_server(settings: dict, log_handle=None):
    """Start ``vllm serve`` (``vllm.command``) on 127.0.0.1 for the length of the block and point the client's
    environment variables at it, in this process only. The key is a fresh random token handed to the server
    through VLLM_API_KEY (never on its command line) unless the key variable is already set."""
    import secrets
    import subprocess
    import sys
    import urllib.request

    v = settings["vllm"]
    port = int(v["port"])
    env = dict(os.environ)
    key = env.get(settings["api_key_env"]) or secrets.token_hex(16)
    env["VLLM_API_KEY"] = key
    cmd = [*v["command"], v.get("model_path") or settings["model"], "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", settings["model"], *v["args"]]
    log.info("starting the LLM server: %s (port %d, up to %d s)", " ".join(cmd[:2]), port, v["startup_seconds"])
    proc = subprocess.Popen(cmd, env=env, stdout=log_handle or sys.stderr, stderr=subprocess.STDOUT)
    saved = {n: os.environ.get(n) for n in (settings["base_url_env"], settings["api_key_env"])}
    try:
        deadline = time.monotonic() + float(v["startup_seconds"])
        while True:
            if proc.poll() is not None:
                raise GenerationError(f"the LLM server ({cmd[0]}) exited with status {proc.returncode} while "
                                      "starting.", fix="read its output in this job's log.")
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                             headers={"Authorization": f"Bearer {key}"})
                with urllib.request.urlopen(req, timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise GenerationError(f"the LLM server did not answer within {v['startup_seconds']} s.",
                                          fix="raise llms.<llm>.generate.vllm.startup_seconds, or read its "
                                              "output in this job's log.") from None
                time.sleep(1.0)
        log.info("the LLM server is up after %.0f s", float(v["startup_seconds"]) - (deadline - time.monotonic()))
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

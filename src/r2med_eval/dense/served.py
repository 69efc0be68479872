"""A dense entry served by an OpenAI-compatible embeddings server (``server:``): vLLM serving a pooling model,
text-embeddings-inference's OpenAI route, or OpenAI's API, asked through the one LLM client
(``llm.embeddings.EmbeddingClient``).

The served twin of an in-process entry differs from it only in where the vectors come from. The encoding functions
of ``dense.encode`` run unchanged (the batch plan, ``prompt_for``'s per-task instruction, no instruction on
documents unless the entry gives one, the GAR averaging, the stored files); ``load_encoder`` hands them a
``ServedEncoder`` whose ``encode_plan`` asks the server for a job's batches at once, ``concurrency`` in flight.
What the server is sent:

* ``input: tokens`` (default): the token ids the in-process entry's model would read, from that model's own
  tokenization (``load_encoder(..., weights=False)``: the same SentenceTransformer on PyTorch's meta device, nothing
  loaded; ``preprocess`` with the prompt, truncation to ``max_length`` / ``query_max_length``, ``append_eos``), so
  the server embeds exactly the in-process tokens. vLLM and OpenAI's API take token ids.
* ``input: text``: the prompt and the text as one string; the server tokenizes and truncates it (vLLM:
  ``truncate_prompt_tokens`` in ``extra_body``; TEI: ``--auto-truncate`` at the model's maximum length; OpenAI:
  refuses more than its limit). For a server that takes no token ids, or an entry without a local tokenizer.

Pooling and normalisation are the server's (docs/models.md names the server options that give the entry's);
``normalize: true`` also L2-normalises what comes back, as the in-process entry's Normalize module does.

A job (``job``) sets where its vectors are cached (owner-only on a MIMIC-derived benchmark, where the server must
also pass the server policy before the first byte is sent), starts a vLLM server when ``server.vllm.enabled``,
and at its end writes its figures (requests, batches cached, texts, tokens, seconds) beside its Snakemake
benchmark file."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..llm.embeddings import EmbeddingClient, EmbedUsage
from ..llm.policy import ServerPolicy

log = logging.getLogger(__name__)

# what a served entry cannot do as its in-process twin does (the key, why); the configuration check stops on them
UNSERVABLE = (
    ("bidirectional", "the attention mask is the server's"),
    ("doc_as_pair", "a text pair needs token type ids, which the embeddings API does not carry"),
    ("query_source", "one served model encodes both sides"),
)


def served_problem(spec: dict) -> tuple[str, str] | None:
    """Why a dense entry with ``server`` cannot run as its in-process twin would, and the fix (None when it can)."""
    server = spec.get("server")
    if not server:
        return None
    for key, why in UNSERVABLE:
        if spec.get(key):
            return f"{key} is not served ({why})", f"remove {key} or server"
    if not spec.get("pool_prompt", True):
        return ("pool_prompt: false is not served (the server pools every token it is sent)",
                "set pool_prompt: true or remove server")
    if spec.get("encode_with", "sentence_transformers") != "sentence_transformers":
        return "encode_with: checkpoint is not served (it runs the checkpoint's own code)", "remove server"
    if spec.get("backend", "torch") != "torch":
        return f"backend: {spec['backend']} is not served (the server runs the model)", "set backend: torch"
    if server["input"] == "tokens" and "source" not in spec:
        return ("server.input: tokens needs the entry's source (its tokenizer gives the token ids)",
                "set source, or server.input: text")
    if server["input"] == "text" and spec.get("append_eos"):
        return ("append_eos needs server.input: tokens (the EOS is appended to the truncated token ids)",
                "set server.input: tokens")
    return None


@dataclass
class Job:
    """One encoding job's served context: its cache, privacy, policy and figures."""

    cache_stem: Path
    private: bool
    policy: ServerPolicy | None
    usage: EmbedUsage = field(default_factory=EmbedUsage)
    batches: int = 0
    encoders: list = field(default_factory=list)


_JOB: contextvars.ContextVar[Job | None] = contextvars.ContextVar("served_job", default=None)


def server_settings(server: dict) -> dict:
    """The ``server`` entry as ``llm.server.serving`` reads an LLM's (model, address variables, vllm)."""
    return {"model": server["model"], "base_url_env": server["base_url_env"], "api_key_env": server["api_key_env"],
            "vllm": server["vllm"]}


@contextlib.contextmanager
def job(spec: dict, model_name: str, cache_stem, *, private: bool, config: dict | None, what: str,
        figures=None, server_log=None):
    """The served context of an encoding job of ``model_name``: vectors cached at ``cache_stem``; ``private``: the
    cache owner-only and the server held to the policy (``phi_servers`` from the workflow's ``config``), named
    ``what`` in its message; a vLLM server started for the block when ``server.vllm.enabled`` (its output to
    ``server_log`` when given); ``figures``: where the job's figures go (JSON) when it ends well."""
    from ..llm.server import serving

    policy = ServerPolicy.from_config(config or {}, what) if private else None
    state = Job(Path(cache_stem), private, policy)
    token = _JOB.set(state)
    try:
        with serving(server_settings(spec["server"]), server_log):
            yield state
    finally:
        _JOB.reset(token)
    figures_out = {"model": model_name, "served_model_asked": spec["server"]["model"],
                   "input": spec["server"]["input"], "concurrency": spec["server"]["concurrency"],
                   "batches": state.batches, **state.usage.as_dict()}
    log.info("served encoding: %s", figures_out)
    if figures:
        from ..io import write_json

        Path(figures).parent.mkdir(parents=True, exist_ok=True)
        write_json(figures, figures_out)


def load(spec: dict, model_name: str, side: str, task: str | None, tokenizer) -> ServedEncoder:
    """The served encoder of one side; ``tokenizer()`` gives the in-process entry's model without weights
    (``models.load_encoder(..., weights=False)``, passed in so that this module does not import models)."""
    state = _JOB.get()
    if state is None:
        raise RuntimeError("a served encoder is loaded inside dense.served.job (the stage sets it)")
    return ServedEncoder(spec, model_name, side, state, tokenizer)


class ServedEncoder:
    """``encode_plan`` for ``dense.encode.encode_batches``: a job's batches asked of the server, in plan order."""

    def __init__(self, spec: dict, model_name: str, side: str, state: Job, tokenizer):
        self.spec = spec
        self.server = spec["server"]
        self.model_name = model_name
        self.state = state
        self.length = int(spec.get("query_max_length") or spec["max_length"]) if side == "query" \
            else int(spec["max_length"])
        self.tokenizer = None
        if self.server["input"] == "tokens":
            self.tokenizer = tokenizer()
        self.client = EmbeddingClient(self.server, state.cache_stem, private=state.private, policy=state.policy,
                                      where=f"models.{model_name}.server")
        state.encoders.append(self)
        log.info("model %s (%s side): served by %s (input %s, max_length %d)", model_name, side, self.server["model"],
                 self.server["input"], self.length)

    def eval(self):
        return self

    def inputs(self, texts: list[str], prompt: str) -> list:
        """What the server is sent for ``texts``: the in-process model's token ids (prompt included, truncated as
        it truncates), or prompt + text."""
        if self.tokenizer is None:
            return [prompt + t for t in texts]
        features = self.tokenizer.preprocess(list(texts), prompt=prompt or None)
        ids, mask = features["input_ids"], features["attention_mask"].bool()
        return [ids[i][mask[i]].tolist() for i in range(len(texts))]

    def key_base(self, prompt: str) -> dict:
        """What the vectors depend on besides the inputs and the model (the cache key)."""
        return {"instruction": prompt, "truncation": {"input": self.server["input"], "max_length": self.length,
                                                      "append_eos": bool(self.spec.get("append_eos"))},
                "dimensions": self.server.get("dimensions"), "extra_body": self.server.get("extra_body", {})}

    def encode_plan(self, texts: list[str], batches: list[list[int]], *, normalize: bool, label: str = "",
                    prompt: str = "") -> np.ndarray:
        if not batches:
            return np.zeros((0, 0), dtype=np.float32)
        asked = {str(i): self.inputs([texts[j] for j in batch], prompt) for i, batch in enumerate(batches)}
        vectors, usage = self.client.embed(asked, self.key_base(prompt), label=label.rstrip(":"))
        self.state.usage = self.state.usage + usage
        self.state.batches += len(batches)
        emb = np.concatenate([vectors[str(i)] for i in range(len(batches))], axis=0)
        if normalize:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = emb / np.where(norms > 0, norms, 1.0)
        return emb.astype(np.float32)

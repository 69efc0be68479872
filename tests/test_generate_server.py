"""Done-when test of the generate stage against a real OpenAI-compatible server: `transformers serve` on
127.0.0.1 with a tiny Llama built here (random weights, a tokenizer trained here, a chat template). The
pipeline generates HyDE, query2doc and LameR expansions for the demo; the server is killed mid-way, the run
stops at once with one message and no expansion file; after a restart only the missing queries are asked again
(counted in the server's access log and in the cache); the files then flow through BM25 and MiniLM to the
leaderboard. In the same run BM25 is reranked by both LLM rerankers asking that server (RankGPT's listwise window
at depth 20, pointwise yes/no labels at depth 10: `transformers serve` refuses log probabilities), and both reach the
leaderboard, the significance table and the rerank-depth plot; and CliniQ's multi-patient judgments are completed
on the CliniQ demo with the tiny model as the judge (issue 24): its answers are malformed (random weights),
re-asked, counted, and every output of the completion is written. The server's address and key appear in no file
the pipeline writes."""
import csv
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, demo_config, snakemake

pytestmark = pytest.mark.slow

METHODS = ("hyde", "query2doc", "lamer")
RERANKED = {"tiny-listwise": 20, "tiny-pointwise": 10}  # reranker -> depth
KEY = "sk-local-test-key-4242"


def _missing() -> str | None:
    for mod in ("accelerate", "fastapi", "uvicorn"):
        if importlib.util.find_spec(mod) is None:
            return mod
    return None


def build_tiny_llm(out: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    texts = [json.loads(x)["text"]
             for x in (Path(__file__).parents[1] / "data/demo/query.jsonl").read_text().splitlines()]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant: {% endif %}")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192, bos_token_id=1,
                      eos_token_id=2, pad_token_id=3)
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


class Server:
    """`transformers serve` on 127.0.0.1:port; kill() is a crash (SIGKILL)."""

    def __init__(self, model: Path, port: int, log: Path):
        exe = Path(sys.executable).parent / "transformers"
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        self.log = log
        self.handle = open(log, "w")
        self.proc = subprocess.Popen([str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                                      "--device", "cpu", "--log-level", "info"], stdout=self.handle,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise AssertionError("transformers serve did not start:\n" + log.read_text()[-3000:]) from None
                time.sleep(0.5)

    def requests(self) -> int:
        return sum(1 for line in self.log.read_text().splitlines() if "POST /v1/chat/completions" in line)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.handle.close()


def cached(work: Path) -> int:
    """Answers in the generation caches (resources/llm_cache/<benchmark>/<task>/<method>--<llm>.jsonl; the LLM
    rerankers' caches lie under .../rerank/)."""
    root = work / "resources" / "llm_cache"
    return sum(len(p.read_text().splitlines()) for p in root.glob("*/*/*--*.jsonl")) if root.exists() else 0


@pytest.mark.skipif(_missing() is not None, reason=f"transformers serve needs {_missing()} "
                    "(pip install -r requirements.lock)")
def test_generate_against_a_real_server_resumes_and_reaches_the_leaderboard(tmp_path):
    model = build_tiny_llm(tmp_path / "tiny-llm")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    (tmp_path / "examples.json").write_text(json.dumps({"Biology": (
        "Post: Why do we get fever?\nPassage:\nFever is a raised set point of the hypothalamus, driven by "
        "pyrogens such as interleukin-1.\n")}))
    work = tmp_path / "work"
    work.mkdir()
    cliniq = REPO / "data" / "cliniq-demo"
    config = demo_config().replace("models:\n", f"""  cliniq-demo:
    layout: cliniq
    noteevents: {cliniq / 'NOTEEVENTS.csv'}
    expected_chunks: 203
    tasks:
      cliniq: {{path: {cliniq}}}
models:
""", 1) + """
  tiny-listwise: {type: llm_listwise, llm: tiny, passage_words: 30, max_tokens: 6, max_unusable: 1.0}
  tiny-pointwise: {type: llm_pointwise, llm: tiny, logprobs: false, reasks: 0, passage_words: 30, max_unusable: 1.0}
rerank:
""" + "".join(f"  - {{run: bm25, reranker: {r}, depths: [{k}]}}\n" for r, k in RERANKED.items()) + f"""
cliniq_completion: {{benchmark: cliniq-demo, llm: tiny, queries: 3, sample_per_query: 2, pool_depth: 1,
                    malformed_retries: 1}}
llms:
  tiny:
    reasoning: none
    generate:
      model: {model}
      base_url_env: R2MED_TEST_LLM_URL
      api_key_env: R2MED_TEST_LLM_KEY
      max_tokens: 6
      concurrency: 2
      retries: 0
      timeout_seconds: 120
      examples: {tmp_path / 'examples.json'}
      lamer_retriever: bm25
query_variants:
""" + "".join(f"  - {{benchmark: demo, method: {m}, llm: tiny, models: [bm25, minilm], prompt_task: Biology}}\n"
              for m in METHODS)
    (work / "config.yaml").write_text(config)
    env = {**os.environ, "R2MED_TEST_LLM_URL": url, "R2MED_TEST_LLM_KEY": KEY}
    targets = [f"results/generated/demo/demo/{m}/tiny/query_with_hydoc.jsonl" for m in METHODS]
    queries = len((Path(__file__).parents[1] / "data/demo/query.jsonl").read_text().splitlines())
    total = queries * len(METHODS)

    # 1. the server dies mid-way
    server = Server(model, port, tmp_path / "serve1.log")
    stop_at = queries + queries // 2  # in the middle of the second expansion file

    def killer():
        deadline = time.monotonic() + 900
        while cached(work) < stop_at and server.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()

    watcher = threading.Thread(target=killer)
    watcher.start()
    proc = snakemake(work, "--cores", "1", *targets, check=False, env=env)
    watcher.join()
    assert proc.returncode != 0
    # the first failure stops the job: a request cut off by the kill (retries: 0), or one refused after it (never
    # retried)
    assert ("cannot connect to the server" in proc.stdout
            or "the connection broke before the answer was complete" in proc.stdout), proc.stdout[-3000:]
    first = cached(work)
    assert stop_at <= first < total
    assert not all((work / t).exists() for t in targets)
    for t in targets:  # no half-written expansion file
        assert not (work / t).exists() or len((work / t).read_text().splitlines()) == queries

    # 2. after a restart only the missing answers are asked for
    server = Server(model, port, tmp_path / "serve2.log")
    try:
        snakemake(work, "--cores", "1", *targets, env=env)
        assert cached(work) == total
        assert server.requests() == total - first
        print(f"answers cached before the kill: {first} of {total}; asked after the restart: {server.requests()}")
        # 3. the generated files flow through BM25 and MiniLM to the leaderboard (nothing asked again); the LLM
        # rerankers ask for their answers, and the judge of the CliniQ completion its own questions
        snakemake(work, "--cores", "2", "all", env=env)
        assert cached(work) == total
        reranked = [f"bm25--{r}@{k}" for r, k in RERANKED.items()]
        lineage = {r: json.loads((work / f"results/runs/demo/demo/{r}.lineage.json").read_text()) for r in reranked}
        # on the CliniQ demo too (bm25 runs there; the loopback server passes the policy)
        lineage_cliniq = [json.loads((work / f"results/runs/cliniq-demo/cliniq/{r}.lineage.json").read_text())
                          for r in reranked]
        judging = json.loads((work / "results/cliniq/cliniq-demo/completion/judging.json").read_text())
        assert judging["requested"] > 0
        assert server.requests() == (total - first + sum(info["requested"] for info in lineage.values())
                                     + sum(info["requested"] for info in lineage_cliniq) + judging["requested"])
    finally:
        server.kill()
    with open(work / "results/leaderboard.csv") as handle:
        board = {row["model"] for row in csv.DictReader(handle)}
    assert {f"{m}+{g}-tiny" for m in ("bm25", "minilm") for g in METHODS} <= board
    assert set(reranked) <= board
    with open(work / "results/significance.csv") as handle:
        assert set(reranked) <= {row["model"] for row in csv.DictReader(handle)}
    plotted = (work / "logs/plot_rerank_depth/demo.log").read_text()
    assert all(r in plotted.split("reranking depth: ")[1] for r in reranked)
    first_stage = {}
    for line in (work / "results/runs/demo/demo/bm25.trec").read_text().splitlines():
        first_stage[line.split()[0]] = first_stage.get(line.split()[0], 0) + 1
    listwise, pointwise = (lineage[r] for r in reranked)
    assert listwise["requested"] == listwise["parsing"]["windows"] == sum(n > 1 for n in first_stage.values())
    assert pointwise["requested"] == sum(min(10, n) for n in first_stage.values()) == sum(
        pointwise["scored_by"].values()) and pointwise["scored_by"]["logprobs"] == 0  # labels (of a random model)
    for t in targets:
        rows = [json.loads(x) for x in (work / t).read_text().splitlines()]
        assert len(rows) == queries and all(isinstance(r["hy_doc"], str) for r in rows)
    info = json.loads((work / "results/generated/demo/demo/lamer/tiny/generation.json").read_text())
    assert info["queries"] == queries and info["completion_tokens"] > 0
    # the judgment completion: every output of its estimates, re-scoring and report, malformed answers counted
    done = work / "results/cliniq/cliniq-demo/completion"
    for name in ("estimates.csv", "estimates.md", "estimates.tex", "per_query.csv", "agreement.md", "rescored.csv",
                 "rescored.md", "rescored.tex", "ranking.csv", "ranking.tex", "verdict.md", "verdict.json"):
        assert (done / name).stat().st_size > 0, name
    assert (work / "results/plots/cliniq-demo/cliniq_completion.png").is_file()
    assert judging["judged"] == len((done / "labels.tsv").read_text().splitlines()) - 1
    assert judging["requested"] == judging["judged"] + judging["malformed_after_round"][0]
    assert 'id="completion-cliniq-demo"' in (work / "results/index.html").read_text()
    prov = json.loads((work / "results/provenance.json").read_text())
    assert set(prov["generation"]) == {f"demo/demo/{m}/tiny" for m in METHODS}
    assert set(prov["llm_rerank"]) == {f"{where}/{r}" for r in reranked
                                       for where in ("demo/demo", "cliniq-demo/cliniq")}
    assert prov["judging"]["cliniq-demo"]["requested"] == judging["requested"]
    for folder in ("results", "logs", "resources", ".snakemake"):
        for path in (work / folder).rglob("*"):
            if path.is_file() and path.stat().st_size < 50_000_000:
                data = path.read_bytes()
                assert KEY.encode() not in data and f":{port}".encode() not in data, path
    shutil.rmtree(model)

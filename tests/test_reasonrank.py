"""ReasonRank's reasoning listwise mode (``llm_listwise`` with ``prompt_mode: rank_GPT_reasoning`` / ``rank_GPT_qwen3``)
against ReasonRank's own code:

* prompts: ``tests/reasonrank_ref.py`` (a transcription of ReasonRank's create_prompt and its helpers, importing
  nothing of ours) and ours give the same chat messages and, through a tiny tokenizer built here with Qwen2.5's chat
  template, the same final prompt string, on passages built to move ftfy, the token cut and the [n] rewrite;
* answers: ReasonRank's ``pattern`` and ranking parse and ours give the same permutation on designed answers
  (brackets in the reasoning, a missing </think>, repeats, omissions, ...), and the same windows;
* the sliding window: 150 random cases (lists shorter and longer than the window) give the same rankings;
* the stage on the demo against a loopback server answering in ReasonRank's format: the reranked run equals the
  permutation applied window by window as ReasonRank's code applies it; answers without <answer> are re-asked, then
  counted, and above max_unusable stop the job with one message and no run;
* with R2MED_EVAL_REASONRANK_SRC naming a checkout of github.com/8421BCD/ReasonRank, its own modules run (their
  imports that cannot run here stubbed: vllm, pyserini.search's JVM, toml and dacite) beside ours.
"""
import copy
import hashlib
import json
import os
import random
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import reasonrank_ref as ref
import yaml
from conftest import REPO, write_jsonl
from test_llm_rerank import read_order

from r2med_eval.errors import ConfigError, InputError
from r2med_eval.llm.requests import Answer, Request, Usage
from r2med_eval.rerank import listwise, reasonrank
from r2med_eval.scoring import identity, runs
from r2med_eval.stages import rerank as rerank_stage
from r2med_eval.workflow import config, paths
from r2med_eval.workflow.control import Workflow

MODES = ("rank_GPT_reasoning", "rank_GPT_qwen3")
DEMO = REPO / "data" / "demo"
QWEN25_TEMPLATE = (REPO / "tests" / "data" / "qwen2.5_chat_template.jinja").read_text()
# Qwen2's pre-tokenizer split (its tokenizer.json), before the byte-level mapping
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")


def qwen_tokenizer(folder: Path, texts):
    """A tiny byte-level BPE tokenizer of Qwen2's kind (its split, byte-level mapping, NFC, <|im_start|> and
    <|im_end|>), trained on ``texts``, with Qwen2.5-Instruct's chat template; saved and loaded by AutoTokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(list(texts), trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = QWEN25_TEMPLATE
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def demo_docs() -> dict[str, dict]:
    return {d["id"]: {"title": "", "text": d["text"]} for d in map(json.loads, (DEMO / "corpus.jsonl").open())}


def demo_queries() -> dict[str, str]:
    return {q["id"]: q["text"] for q in map(json.loads, (DEMO / "query.jsonl").open())}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen")
    qwen_tokenizer(folder, [d["text"] for d in demo_docs().values()])
    return folder


@pytest.fixture(scope="module")
def tok(tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tok_dir)


# ------------------------------------------------------------------ the prompt

DESIGNED = [  # (title, text): what moves ftfy, the token cut and the [n] rewrite
    ("", "Metformin &amp; insulin: the usual &lt;first-line&gt; drugs [3] and [12]."),
    ("", "  Leading and trailing space, then a line break\r\nand a carriage return\ralone.  "),
    ("", "Mojibake: cafÃ© and naÃ¯ve, curly \u201cquotes\u201d and \u2018single\u2019 ones, a ligature \ufb01ne."),
    ("Aspirin", "Aspirin inhibits COX-1 [1]; see [2a] and [ 3 ] (not identifiers)."),
    ("", "A passage with <b>markup</b>, an emoji \U0001f600, a non-breaking\u00a0space and <|im_end|> inside."),
    ("", "\u0663 Arabic-Indic digit [\u0663] and a superscript [2\u00b2]."),
    ("", ""),
    ("", " ".join(f"word{i} glucose" for i in range(400))),  # cut at the token limit
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("max_tokens", [512, 7])
def test_messages_and_prompt_equal_reasonranks(tok, mode, max_tokens):
    query = "Which [2] drug \u201clowers\u201d glucose &amp; weight?  "
    docs = [{"title": t, "text": x} for t, x in DESIGNED]
    ours = reasonrank.messages(mode, query, [reasonrank.passage_content(d, tok, max_tokens) for d in docs])
    request = {"query": {"qid": "q", "text": query},
               "candidates": [{"docid": str(i), "score": 1.0, "doc": d} for i, d in enumerate(docs)]}
    theirs = ref.create_messages(request, 0, len(docs), tokenizer=tok, prompt_mode=mode, max_length=max_tokens)
    final = ref.create_prompt(request, 0, len(docs), tokenizer=tok, prompt_mode=mode, max_length=max_tokens)
    assert tok.apply_chat_template(ours, tokenize=False, add_generation_prompt=True) == final
    assert [m["role"] for m in ours] == [m["role"] for m in theirs] == ["system", "user"]
    # the messages are theirs, fixed as ReasonRank fixes the whole prompt (its system prompt and passages unchanged)
    assert ours[0] == theirs[0]
    assert [line for line in ours[1]["content"].split("\n") if line.startswith("[")] == \
        [line for line in theirs[1]["content"].split("\n") if line.startswith("[")]
    assert ours[1]["content"] != theirs[1]["content"]  # the query's curly quotes: ftfy straightens them in both
    assert "(2) drug \"lowers\" glucose &amp; weight?" in final  # [n] rewritten, no HTML unescaping in the prompt


def test_passage_content_is_reasonranks_on_the_demo(tok):
    for d, doc in list(demo_docs().items())[:60]:
        for n in (512, 30):
            assert reasonrank.passage_content(doc, tok, n) == ref.convert_doc_to_prompt_content(
                tok, {"text": doc["text"]}, n, truncate_by_word=False), d


def test_prompt_texts_are_reasonranks():
    assert reasonrank.SYSTEM_PROMPT == ref.PROMPT_INFO["system_prompt"]
    assert reasonrank.SYSTEM_PROMPT_REASONING == ref.PROMPT_INFO["system_prompt_reasoning"]
    assert reasonrank.PATTERN == ref.PROMPT_INFO["pattern"]
    for mode in MODES:
        assert reasonrank.post(mode, "q", 3) == ref.add_post_prompt(mode, "q", 3)
        assert reasonrank.prefix("q", 3) == ref.add_prefix_prompt(mode, "q", 3)
    assert reasonrank.sampling("rank_GPT_reasoning", 3072) == {"temperature": 0, "max_tokens": 3172}
    assert reasonrank.sampling("rank_GPT_qwen3", 3072) == {"temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                                           "min_p": 0, "max_tokens": 3172}


# ------------------------------------------------------------------ the answer

ANSWERS = {  # name -> (answer, window size)
    "brackets in the reasoning": ("<think>Passage [3] is close, [1] less; [5] > [2]?</think>\n<answer>[2] > [1] > "
                                  "[3]</answer>", 3),
    "missing </think>": ("<think>Passage [4] first... <answer>[3] > [1] > [2]</answer>", 4),
    "no <think> at all": ("<answer>[2] > [3]</answer>", 3),
    "digits after </answer> without </think>": ("<think>hm <answer>[2] > [1]</answer> and maybe [3]", 3),
    "repeats": ("<think>ok</think> <answer>[2] > [2] > [1] > [2]</answer>", 3),
    "omissions": ("<think>ok</think>\n\n<answer>[4] > [1]</answer>", 5),
    "out of range": ("<think>ok</think><answer>[7] > [0] > [2] > [1]</answer>", 3),
    "upper-case tags": ("<THINK>[1]?</THINK> <ANSWER>[3] > [1] > [2]</ANSWER>", 3),
    "an answer inside the reasoning": ("<think>I could say <answer>[1]</answer>, no.</think>\n<answer>[3] > [2]"
                                       "</answer>", 3),
    "two answers after the reasoning": ("<think>x</think><answer>[2] > [1]</answer><answer>[1] > [2]</answer>", 2),
    "answer cut at max_tokens": ("<think>long</think>\n<answer>[3] > [1] > [", 4),
    "prose around the ranking": ("<think>x</think> <answer>Ranking: [2] > [1], then 3.</answer>", 3),
}


def their_order(answer: str, n: int, mode: str) -> list[int]:
    result = {"candidates": [{"docid": i, "score": float(n - i), "doc": {}} for i in range(n)]}
    return [c["docid"] for c in ref.receive_permutation(result, answer, 0, n, mode)["candidates"]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_designed_answers_give_reasonranks_permutation(name, mode):
    text, n = ANSWERS[name]
    order, counts, found = listwise.reasoning_parser(n)(Answer(text, {}))
    assert order == their_order(text, n, mode)
    assert found == ("pattern" if name in ("brackets in the reasoning", "repeats", "omissions", "out of range",
                                           "upper-case tags", "an answer inside the reasoning",
                                           "two answers after the reasoning", "prose around the ranking")
                     else "answer_tag")


def test_reasoning_split_off_by_the_server_is_put_back():
    text, n = ANSWERS["brackets in the reasoning"]
    split = Answer("\n<answer>[2] > [1] > [3]</answer>", {}, reasoning="Passage [3] is close, [1] less; [5] > [2]?")
    assert listwise.reasoning_parser(n)(split)[0] == their_order(text, n, "rank_GPT_reasoning") == [1, 0, 2]


UNUSABLE = [  # (answer of a 3-passage window, our kind, ReasonRank's order)
    ("<think>[3] is best, then [1]; I ran out of", "missing_answer", [2, 0, 1]),  # theirs: the reasoning's numbers
    ("<think>none fits</think> <answer>none</answer>", "no_passage", [0, 1, 2]),
    ("<think>x</think> <answer>[9] > [0]</answer>", "no_passage", [0, 1, 2]),
    ("<think>x</think> <answer>[2\u00b2] > [1]</answer>", "unreadable", [0, 1, 2]),  # their int() raises
]


@pytest.mark.parametrize("text,kind,theirs", UNUSABLE)
def test_unusable_answers_are_named_where_reasonrank_reads_on(text, kind, theirs):
    with pytest.raises(reasonrank.Unusable) as err:
        listwise.reasoning_parser(3)(Answer(text, {}))
    assert err.value.kind == kind
    assert their_order(text, 3, "rank_GPT_reasoning") == theirs


def passage_lines(text: str) -> list[str]:
    return re.findall(r"^\[\d+\] (.*)$", text, flags=re.M)


def test_windows_are_reasonranks():
    for n in [*range(0, 46), 59, 60, 99, 100, 101, 129]:
        for window, step in ((20, 10), (20, 20), (5, 2), (3, 7), (2, 1)):
            asked = []

            def run(prompts):
                for p in prompts:
                    lines = passage_lines(p)
                    asked.append((int(lines[0]) if lines else None, len(lines)))
                return [""] * len(prompts)

            if n:
                request = {"query": {"qid": "q", "text": "q"},
                           "candidates": [{"docid": i, "score": 1.0, "doc": {"text": str(i)}} for i in range(n)]}
                ref.rerank_batch([request], 0, 100, window, step, run_llm_batched=run, tokenizer=NO_CUT,
                                 prompt_mode="rank_GPT_reasoning")
            ours = reasonrank.windows(min(n, 100), window, step)
            assert [(s, e - s) for s, e in ours] == [(a, k) for a, k in asked if k], (n, window, step)
            assert len(ours) == sum(1 for _, k in asked if k)  # their loop asks no empty window either
    assert reasonrank.windows(100, 20, 10) == listwise.rankgpt_windows(100, 20, 10)  # 9 windows, as RankGPT's
    assert reasonrank.windows(25, 20, 10) == [(5, 25), (0, 15)]  # the top is still reached (RankGPT: 5-25 only)


class _NoCut:
    """A tokenizer stand-in that keeps a text whole (windows only)."""

    def tokenize(self, text):
        return [text]

    def convert_tokens_to_string(self, tokens):
        return "".join(tokens)

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "\n".join(m["content"] for m in messages)


NO_CUT = _NoCut()


# ------------------------------------------------------------------ the sliding window, random cases

def reasonrank_answer(passages: list[str], seed: str, usable: bool = False) -> str:
    """A model's answer in ReasonRank's format for a window, a function of its passages: the passages ordered by a
    hidden grade (ties in window order), in one of several shapes; the reasoning quotes identifiers; an answer without
    <answer> has no digits in its reasoning (ReasonRank's code would read them as the ranking: see the test above).
    ``usable``: every answer names a passage."""
    rng = random.Random(hashlib.sha256((seed + "\0" + "\0".join(passages)).encode()).hexdigest())
    grade = [int(hashlib.sha256(p.encode()).hexdigest()[:4], 16) % 5 for p in passages]
    ids = [i + 1 for i in sorted(range(len(passages)), key=lambda i: (-grade[i], i))]
    kinds = ["clean", "clean", "repeats", "missing", "prose", "no_think_close", "out_of_range"]
    kind = rng.choice(kinds if usable else kinds + ["no_answer"])
    if kind == "repeats":
        ids = ids + ids[:2]
    elif kind == "missing":
        ids = ids[:rng.randint(1 if usable else 0, len(ids))]
    elif kind == "out_of_range":
        ids = ids[:3] + [0, len(passages) + 4] + ids[3:]
    reasoning = f"<think>Passage [{ids[0] if ids else 1}] answers it; [{len(passages)}] does not.</think>\n"
    ranking = " > ".join(f"[{i}]" for i in ids)
    if kind == "no_answer":
        return "<think>I cannot decide between these passages"
    if kind == "no_think_close":
        return reasoning.replace("</think>", "") + f"<answer>{ranking}</answer>"
    if kind == "prose":
        return reasoning + f"<answer>The ranking is {ranking}.</answer>"
    return reasoning + f"<answer>{ranking}</answer>"


class StubClient:
    """The client's interface (request, ask) answering from a function of the messages; records the messages."""

    def __init__(self, answer):
        self.answer = answer
        self.asked: list[list[dict]] = []

    def request(self, messages, *, attempt=0, **sampling):
        return Request(messages, {"max_tokens": 3172, **sampling}, None, attempt)

    def ask(self, requests):
        out = {}
        for rid, r in requests.items():
            self.asked.append(r.messages)
            out[rid] = Answer(self.answer(r.messages), {"prompt_tokens": 10, "completion_tokens": 5})
        return out, Usage(requested=len(requests))


def test_reasoning_listwise_equals_reasonrank_on_150_random_cases(tok):
    rng = random.Random(46)
    words = ["insulin", "fever", "renal", "lactic", "acid", "biopsy", "dose", "12", "mg", "[3]", "caf\u00e9"]
    compared = windows = 0
    for case in range(150):
        window, step = rng.choice([(20, 10), (20, 10), (5, 2), (4, 4), (6, 3), (3, 5)])
        mode = rng.choice(MODES)
        queries = {f"q{case}-{j}": f"query {case} {j} about [1] renal dose?" for j in range(rng.randint(1, 3))}
        tops, texts, requests = {}, {}, []
        for q in queries:
            n = rng.choice([0, 1, 2, 7, 19, 20, 21, 25, 37, 60, 100, 130])
            docs = [f"{q}-d{i}" for i in range(n)]
            for d in docs:
                texts[d] = f"{d} " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
            tops[q] = docs[:100]
            requests.append({"query": {"qid": q, "text": queries[q]},
                             "candidates": [{"docid": d, "score": float(n - i), "doc": {"text": texts[d]}}
                                            for i, d in enumerate(docs[:100])]})
        contents = {d: reasonrank.passage_content({"text": t}, tok, 512) for d, t in texts.items()}
        client = StubClient(lambda m: reasonrank_answer(passage_lines(m[1]["content"]), "s"))
        ours, counts, _, records = listwise.reasoning_listwise(client, queries, tops, contents, mode=mode,
                                                               window=window, step=step, reasks=1)
        theirs = ref.rerank([r for r in requests if r["candidates"]], 100, window, step,
                            run_llm_batched=lambda ps: [reasonrank_answer(passage_lines(p), "s") for p in ps],
                            tokenizer=tok, prompt_mode=mode)
        for result in theirs:
            q = result["query"]["qid"]
            assert ours[q] == [c["docid"] for c in result["candidates"]], (case, q)
            compared += 1
        assert counts["windows"] == len(records) == sum(len(reasonrank.windows(len(t), window, step))
                                                        for t in tops.values())
        windows += counts["windows"]
    assert compared >= 250 and windows >= 1500
    print(f"{compared} rankings over {windows} windows equal ReasonRank's")


# ------------------------------------------------------------------ the stage on the demo against a loopback server

def demo_tops() -> dict[str, list[str]]:
    """A first-stage run over the demo: each query's documents in a fixed pseudo-random order, the top 100, and
    shorter lists for three queries (37, 15 and 1 documents)."""
    docs = sorted(demo_docs())
    out = {}
    for q in sorted(demo_queries()):
        ranked = sorted(docs, key=lambda d: hashlib.sha256(f"{q}\0{d}".encode()).hexdigest())
        out[q] = ranked[:{"demo-q02": 37, "demo-q05": 15, "demo-q09": 1}.get(q, 100)]
    return out


def reasonrank_config(tmp_path: Path, tok_dir: Path, **reranker) -> dict:
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["benchmarks"] = {"demo": {"layout": "r2med", "tasks": {"demo": {"path": str(tmp_path / "task")}}}}
    raw["benchmarks_to_run"] = ["demo"]
    raw["llms"] = {"rr": {"reasoning": "none", "generate": {
        "model": "reasonrank-stand-in", "base_url_env": "T_RR_URL", "api_key_env": "T_RR_KEY", "concurrency": 4,
        "retries": 0}}}
    raw["models"]["rr"] = {"type": "llm_listwise", "llm": "rr", "prompt_mode": "rank_GPT_reasoning",
                           "tokenizer": {"path": str(tok_dir)}, **reranker}
    raw["rerank"] = [{"run": "bm25", "reranker": "rr", "depths": [100]}]
    raw.pop("fusion", None)
    raw["query_variants"] = []
    raw["report"] = {"baseline": "bm25"}
    return raw


def demo_sm(tmp_path: Path, raw: dict, depth: int = 100) -> SimpleNamespace:
    """The stage's snakemake object over the demo's documents and queries and ``demo_tops``' run."""
    task = tmp_path / "task"
    write_jsonl(task / "corpus.jsonl", [{"id": d, "title": "", "text": doc["text"]} for d, doc in demo_docs().items()])
    write_jsonl(task / "queries.jsonl", [{"id": q, "text": t} for q, t in demo_queries().items()])
    runs.write_run({q: {d: float(100 - i) for i, d in enumerate(docs)} for q, docs in demo_tops().items()},
                   task / "bm25.trec", "bm25", identity=identity.make("bm25", "demo", "demo",
                                                                      identity.fingerprint(demo_docs())))
    w = Workflow(config.validate(raw))
    name = f"bm25--rr@{depth}"
    wc = SimpleNamespace(benchmark="demo", task="demo", model=name)
    out = tmp_path / "out" / name
    return SimpleNamespace(input=SimpleNamespace(run=str(task / "bm25.trec"), queries=str(task / "queries.jsonl"),
                                                 corpus=str(task / "corpus.jsonl")),
                           params=SimpleNamespace(spec=w.params.of("llm_rerank_run")(wc)), wildcards=wc,
                           output=SimpleNamespace(run=f"{out}.trec", scores=f"{out}.rescored.tsv",
                                                  info=f"{out}.lineage.json"), config=w.cfg)


def theirs_on_the_demo(tok, answer, mode="rank_GPT_reasoning") -> dict[str, list[str]]:
    docs, queries = demo_docs(), demo_queries()
    requests = [{"query": {"qid": q, "text": queries[q]},
                 "candidates": [{"docid": d, "score": float(100 - i), "doc": {"text": docs[d]["text"]}}
                                for i, d in enumerate(top)]} for q, top in demo_tops().items()]
    out = ref.rerank(requests, 100, 20, 10, run_llm_batched=lambda ps: [answer(passage_lines(p)) for p in ps],
                     tokenizer=tok, prompt_mode=mode)
    return {r["query"]["qid"]: [c["docid"] for c in r["candidates"]] for r in out}


def server_answer(body) -> str:
    """The loopback server: ReasonRank's format for the window it was sent (reasoning quoting identifiers, then the
    ranking in <answer>), every answer naming a passage."""
    return reasonrank_answer(passage_lines(body["messages"][1]["content"]), "server", usable=True)


def test_demo_run_equals_reasonranks_window_by_window(fake, tmp_path, tok, tok_dir):
    fake.script = server_answer
    sm = demo_sm(tmp_path, reasonrank_config(tmp_path, tok_dir))
    rerank_stage.llm_rerank_run(sm)
    expected = theirs_on_the_demo(tok, lambda ps: server_answer({"messages": [{}, {"content": "".join(
        f"[{i}] {p}\n" for i, p in enumerate(ps, 1))}]}))
    assert read_order(sm.output.run) == expected
    windows = sum(len(reasonrank.windows(len(t), 20, 10)) for t in demo_tops().values())
    assert windows == 23 * 9 + 3 + 1 + 1  # 100 documents (23 queries), 37, 15 and 1
    assert len(fake.requests) == windows
    body = fake.requests[0]
    assert body["temperature"] == 0 and body["max_tokens"] == 3172 and [m["role"] for m in body["messages"]] == [
        "system", "user"] and body["messages"][0]["content"] == reasonrank.SYSTEM_PROMPT_REASONING
    info = json.loads(Path(sm.output.info).read_text())
    assert info["prompt_mode"] == "rank_GPT_reasoning" and info["passage_tokens"] == 512
    assert info["parsing"]["windows"] == windows and info["unusable_answers"] == 0
    assert "passage_words" not in info and info["tokens"]["windows"] == windows
    side = tmp_path / paths.fill(paths.benchmark_side_file("llm_rerank_run", "tokens"), benchmark="demo",
                                 task="demo", model="bm25--rr@100")
    rows = side.read_text().splitlines()
    assert rows[0].split("\t") == list(reasonrank.RECORD_COLUMNS) and len(rows) == windows + 1
    table = [dict(zip(rows[0].split("\t"), row.split("\t"))) for row in rows[1:]]
    assert {r["completion_tokens"] for r in table} == {"2"} and {r["found"] for r in table} <= {"pattern", "answer_tag"}
    assert sorted(int(r["reasoning_tokens"]) for r in table) == sorted(len(tok.encode(
        reasonrank.reasoning_part(server_answer(body)), add_special_tokens=False)) for body in fake.requests)
    per_query = info["tokens"]["reasoning_tokens"]["per_query"]
    assert per_query["count"] == 26 and per_query["total"] == info["tokens"]["reasoning_tokens"]["per_window"]["total"]
    # the provenance reads them with Snakemake's benchmark file of the job
    from r2med_eval.report import provenance

    bench = side.with_name("bm25--rr@100.tsv")
    bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n3.5\t0:00:03\t120.0\t2.0\n")
    assert provenance.read_benchmark(bench)["tokens"] == {
        "windows": windows, "prompt_tokens": info["tokens"]["prompt_tokens"]["per_window"]["total"],
        "completion_tokens": 2 * windows, "reasoning_tokens": per_query["total"]}
    rerank_stage.llm_rerank_run(sm)  # a rerun asks nothing
    assert len(fake.requests) == windows


def test_answers_without_answer_are_reasked_then_stop_the_job(fake, tmp_path, tok_dir, monkeypatch):
    fake.script = lambda body: "<think>Passage [2] and passage [1] are close; I need more tokens to"
    sm = demo_sm(tmp_path, reasonrank_config(tmp_path, tok_dir, reasks=1))
    n = sum(len(reasonrank.windows(len(t), 20, 10)) for t in demo_tops().values())
    with pytest.raises(InputError, match=rf"reranker rr over bm25: {n} of {n} windows had no readable ranking after 1 "
                                         rf"re-asks \(no <answer>: {n}, no passage named: 0, an unreadable digit: 0\) "
                                         r"\(100.0%, above max_unusable 5.0%\)") as err:
        rerank_stage.llm_rerank_run(sm)
    assert "\n" not in str(err.value)
    assert len(fake.requests) == 2 * n  # every window asked again once
    assert not Path(sm.output.run).exists() and not Path(sm.output.info).exists()
    # within the share: counted, and the windows keep their order
    answers = {}

    def some_missing(body):
        key = json.dumps(body["messages"])
        answers.setdefault(key, server_answer(body) if len(answers) % 50 else "<think>out of tokens")
        return answers[key]

    fake.script = some_missing
    (tmp_path / "second").mkdir()
    monkeypatch.chdir(tmp_path / "second")  # a cache of its own
    sm = demo_sm(tmp_path, reasonrank_config(tmp_path, tok_dir, reasks=0, max_unusable=0.5))
    rerank_stage.llm_rerank_run(sm)
    info = json.loads(Path(sm.output.info).read_text())
    assert 0 < info["unusable_answers"] == info["parsing"]["unusable_by"]["missing_answer"] < 10
    assert info["unusable_share"] == round(info["unusable_answers"] / n, 6)


# ------------------------------------------------------------------ the control layer

def test_params_hold_each_modes_keys_only(tmp_path, tok_dir):
    def params(**reranker):
        raw = reasonrank_config(tmp_path, tok_dir, **reranker)
        return Workflow(config.validate(raw)).params.of("llm_rerank_run")(
            SimpleNamespace(benchmark="demo", task="demo", model="bm25--rr@100"))["reranker_spec"]

    rr = params()
    assert rr == {"type": "llm_listwise", "llm": "rr", "prompt_mode": "rank_GPT_reasoning",
                  "tokenizer": {"path": str(tok_dir)}, "passage_tokens": 512, "reasoning_tokens": 3072, "reasks": 1,
                  "window": 20, "step": 10, "truncate": False, "max_unusable": 0.05}
    assert params(description="x", passage_words=3) == rr and params(reasoning_tokens=100) != rr
    rankgpt = params(prompt_mode="rankgpt")
    assert set(rankgpt) == {"type", "llm", "window", "step", "passage_words", "passage_format", "truncate",
                            "max_unusable"}  # as before ReasonRank's modes: existing runs keep their params


def test_config_needs_a_tokenizer_and_its_folder(tmp_path, tok_dir):
    raw = reasonrank_config(tmp_path, tok_dir)
    del raw["models"]["rr"]["tokenizer"]
    with pytest.raises(ConfigError, match="models.rr: prompt_mode rank_GPT_reasoning cuts passages in tokens"):
        config.validate(raw)
    raw = reasonrank_config(tmp_path, tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="models.rr.tokenizer.path: folder .* does not exist"):
        config.check_paths(config.validate(raw), base=tmp_path)


def test_shipped_entries_and_the_r2med_setup():
    raw = {}
    for name in ("config.yaml", "config/r2med.yaml", "config/r2med_models.yaml", "config/reasonrank.yaml",
                 "config/r2med-reasonrank.yaml"):
        merge(raw, yaml.safe_load((REPO / name).read_text()))
    cfg = config.validate(raw)
    modes = {m: cfg["models"][m]["prompt_mode"] for m in ("reasonrank-7B", "reasonrank-32B", "reasonrank-8B")}
    assert modes == {"reasonrank-7B": "rank_GPT_reasoning", "reasonrank-32B": "rank_GPT_reasoning",
                     "reasonrank-8B": "rank_GPT_qwen3"}
    for m in modes:
        spec = cfg["models"][m]
        assert (spec["window"], spec["step"], spec["passage_tokens"], spec["reasoning_tokens"]) == (20, 10, 512, 3072)
        assert cfg["llms"][spec["llm"]]["generate"]["model"] == m
    w = Workflow(cfg)
    jobs = {name: job for name, job in w.registry.derived.items() if job["kind"] == "rerank"}
    assert set(jobs) == {"e5-mistral-7b-instruct--reasonrank-7B@100"}
    assert sorted(t for _, t in w.registry.tasks) == sorted(["Biology", "Bioinformatics", "Medical-Sciences",
                                                             "MedXpertQA-Exam", "MedQA-Diag", "PMC-Treatment",
                                                             "PMC-Clinical", "IIYi-Clinical"])
    assert "reasonrank-7B" in w.registry.hub_models()  # its tokenizer files are prefetched


def merge(base: dict, extra: dict) -> dict:
    """Snakemake's merge of config files: mappings merged key by key, anything else replaced."""
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


# ------------------------------------------------------------------ ReasonRank's own code, where a checkout is given

@pytest.fixture(scope="module")
def official():
    """ReasonRank's modules from the checkout R2MED_EVAL_REASONRANK_SRC names, imported as they are. Their imports
    that cannot run here are stubbed for the import alone: vllm (no CPU wheel; create_prompt does not use it),
    pyserini.search (utils.py imports a name from it; importing it starts Anserini's JVM), toml (read with tomllib)
    and dacite (unused by these functions)."""
    src = os.environ.get("R2MED_EVAL_REASONRANK_SRC")
    if not src:
        pytest.skip("R2MED_EVAL_REASONRANK_SRC is not set (a checkout of github.com/8421BCD/ReasonRank, e.g. at "
                    "06721fd); the transcription in tests/reasonrank_ref.py runs in its place")
    import logging
    import tomllib

    src = Path(src)
    stub_names = ("vllm", "vllm.lora", "vllm.lora.request", "pyserini.search", "toml", "dacite")
    theirs = ("data", "utils", "config", "rerank", "rerank.rankllm", "rerank.rank_listwise_os_llm", "rerank.reranker",
              "rerank.rank_gpt", "rerank.api_keys")
    saved = {n: sys.modules.get(n) for n in stub_names + theirs}
    handlers = list(logging.getLogger().handlers)
    stubs = {n: types.ModuleType(n) for n in stub_names}
    stubs["vllm.lora.request"].LoRARequest = type("LoRARequest", (), {})
    stubs["pyserini.search"].JLuceneSearcherResult = object
    stubs["toml"].load = lambda path: tomllib.loads(Path(path).read_text())
    stubs["dacite"].from_dict = None
    for n in theirs:
        sys.modules.pop(n, None)
    sys.modules.update(stubs)
    sys.path.insert(0, str(src))
    try:
        from rerank import rank_listwise_os_llm, rankllm, reranker

        import data

        yield SimpleNamespace(data=data, os_llm=rank_listwise_os_llm, rankllm=rankllm, reranker=reranker,
                              prompt_info=tomllib.loads((src / "listwise_prompt_r1.toml").read_text()))
    finally:
        sys.path.remove(str(src))
        for n, module in saved.items():
            if module is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = module
        logging.getLogger().handlers[:] = handlers


def their_agent(official, tok, mode, answer=None, max_length=512):
    agent = official.os_llm.RankListwiseOSLLM.__new__(official.os_llm.RankListwiseOSLLM)
    agent.args = SimpleNamespace(prompt_mode=mode, reasoning_maxlen=3072, lora_path=None)
    agent.prompt_mode, agent.prompt_info, agent.max_passage_length = mode, official.prompt_info, max_length
    agent._tokenizer, agent._window_size, agent._output_token_estimate = tok, 20, None
    agent._model, agent._context_size, agent._num_few_shot_examples, agent.processed_queries = "m", 32768, 0, 0
    if answer is not None:
        agent.run_llm_batched = lambda prompts, output_passages_num=None: [(answer(p), 1) for p in prompts]
    return agent


@pytest.mark.parametrize("mode", MODES)
def test_their_create_prompt_and_parse_as_is(official, tok, mode):
    assert official.prompt_info["system_prompt"] == reasonrank.SYSTEM_PROMPT
    assert official.prompt_info["system_prompt_reasoning"] == reasonrank.SYSTEM_PROMPT_REASONING
    assert official.prompt_info["pattern"] == reasonrank.PATTERN
    d = official.data
    docs = [{"title": t, "text": x} for t, x in DESIGNED]
    query = "Which [2] drug \u201clowers\u201d glucose &amp; weight?  "
    for max_length in (512, 7):
        agent = their_agent(official, tok, mode, max_length=max_length)
        result = d.Result(query=d.Query(qid="q", text=query),
                          candidates=[d.Candidate(docid=str(i), score=1.0, doc=doc) for i, doc in enumerate(docs)],
                          ranking_exec_summary=[])
        prompt, _ = agent.create_prompt(result, 0, len(docs))
        ours = reasonrank.messages(mode, query, [reasonrank.passage_content(doc, tok, max_length) for doc in docs])
        assert tok.apply_chat_template(ours, tokenize=False, add_generation_prompt=True) == prompt
        assert prompt == ref.create_prompt({"query": {"qid": "q", "text": query},
                                            "candidates": [{"docid": str(i), "score": 1.0, "doc": doc}
                                                           for i, doc in enumerate(docs)]}, 0, len(docs),
                                           tokenizer=tok, prompt_mode=mode, max_length=max_length)
    agent = their_agent(official, tok, mode)
    for name, (text, n) in sorted(ANSWERS.items()):
        result = d.Result(query=d.Query(qid="q", text="q"),
                          candidates=[d.Candidate(docid=i, score=float(n - i), doc={}) for i in range(n)],
                          ranking_exec_summary=[])
        theirs = [c.docid for c in agent.receive_permutation(result, text, 0, n).candidates]
        assert listwise.reasoning_parser(n)(Answer(text, {}))[0] == theirs == their_order(text, n, mode), name
    for text, _, expected in UNUSABLE:  # where we re-ask, their code reads on
        result = d.Result(query=d.Query(qid="q", text="q"),
                          candidates=[d.Candidate(docid=i, score=float(3 - i), doc={}) for i in range(3)],
                          ranking_exec_summary=[])
        assert [c.docid for c in agent.receive_permutation(result, text, 0, 3).candidates] == expected


def test_their_rerank_batch_as_is_on_the_demo(official, tok):
    """Their Reranker.rerank_batch (sliding_windows_batched, create_prompt_batched, receive_permutation) over the demo's
    first stage, answered as the loopback server answers: the same rankings as ours and as the transcription's."""
    d = official.data
    docs, queries = demo_docs(), demo_queries()

    def answer(prompt):
        return server_answer({"messages": [{}, {"content": "".join(
            f"[{i}] {p}\n" for i, p in enumerate(passage_lines(prompt), 1))}]})

    agent = their_agent(official, tok, "rank_GPT_reasoning", answer)
    rr = official.reranker.Reranker(agent)
    tops = demo_tops()
    full = [q for q, t in tops.items() if len(t) >= 100]
    batches = [full] + [[q] for q in tops if q not in full]
    theirs = {}
    for batch in batches:
        requests = [d.Request(query=d.Query(qid=q, text=queries[q]),
                              candidates=[d.Candidate(docid=x, score=float(100 - i), doc={"contents": docs[x]["text"]})
                                          for i, x in enumerate(tops[q])]) for q in batch]
        results, _, _ = rr.rerank_batch(requests, rank_start=0, rank_end=100, window_size=20, step=10,
                                        vllm_batched=True)
        theirs.update({r.query.qid: [c.docid for c in r.candidates] for r in results})
    contents = {x: reasonrank.passage_content(docs[x], tok, 512) for t in tops.values() for x in t}
    client = StubClient(lambda m: server_answer({"messages": m}))
    ours, _, _, _ = listwise.reasoning_listwise(client, queries, tops, contents, mode="rank_GPT_reasoning", window=20,
                                                step=10, reasks=1)
    assert ours == theirs == theirs_on_the_demo(tok, lambda ps: answer("".join(
        f"[{i}] {p}\n" for i, p in enumerate(ps, 1))))


# ------------------------------------------------------------------ end to end: Snakemake on the demo

@pytest.mark.slow
def test_snakemake_reranks_an_imported_first_stage_on_the_demo(fake, tmp_path, tok, tok_dir):
    """The demo through Snakemake: a first stage imported as a type: run model (as ReasonRank's published runs are),
    reranked at depth 100 by a ReasonRank entry asking the loopback server: the run equals ReasonRank's, the tokens
    of every window lie beside the job's benchmark file."""
    from conftest import snakemake, workflow_dir

    fake.script = server_answer
    cfg = {"benchmarks": {"demo": {"layout": "r2med", "tasks": {"demo": {"path": str(DEMO)}}}},
           "benchmarks_to_run": ["demo"],
           "llms": reasonrank_config(tmp_path, tok_dir)["llms"],
           "models": {"first": {"type": "run", "path": "first/{benchmark}/{task}.trec",
                                "description": "a first stage written elsewhere"},
                      "rr": reasonrank_config(tmp_path, tok_dir)["models"]["rr"]},
           "rerank": [{"run": "first", "reranker": "rr", "depths": [100]}], "query_variants": [],
           "report": {"baseline": "first"}}
    work = workflow_dir(tmp_path, yaml.safe_dump(cfg))
    runs.write_run({q: {d: float(100 - i) for i, d in enumerate(docs)} for q, docs in demo_tops().items()},
                   work / "first" / "demo" / "demo.trec", "first")
    target = "results/runs/demo/demo/first--rr@100.trec"
    snakemake(work, "--cores", "1", target)
    expected = theirs_on_the_demo(tok, lambda ps: server_answer({"messages": [{}, {"content": "".join(
        f"[{i}] {p}\n" for i, p in enumerate(ps, 1))}]}))
    assert read_order(work / target) == expected
    assert (work / "benchmarks/llm_rerank_run/demo/demo/first--rr@100.tsv").is_file()
    tokens = (work / "benchmarks/llm_rerank_run/demo/demo/first--rr@100.tokens.tsv").read_text().splitlines()
    assert len(tokens) == 1 + len(fake.requests) == 1 + sum(len(reasonrank.windows(len(t), 20, 10))
                                                            for t in demo_tops().values())
    lineage = json.loads((work / "results/runs/demo/demo/first--rr@100.lineage.json").read_text())
    assert lineage["input_run"] == "first" and lineage["prompt_mode"] == "rank_GPT_reasoning"
    log = (work / "logs/llm_rerank_run/demo/demo/first--rr@100.log").read_text()
    assert "reasoning tokens per window" in log and "reasoning tokens per query" in log


# ------------------------------------------------------------------ ReasonRank's published figure

def _shipped(models_to_run: list[str]) -> dict:
    raw = {}
    for name in ("config.yaml", "config/r2med.yaml", "config/r2med_models.yaml", "config/reasonrank.yaml",
                 "config/r2med-reasonrank.yaml"):
        merge(raw, yaml.safe_load((REPO / name).read_text()))
    return config.validate({**raw, "models_to_run": models_to_run})


def test_reasonranks_published_mean_is_a_source_set_against_the_runs_mean_naming_its_first_stage(tmp_path):
    """ReasonRank's figure is the source ``reasonrank`` (ReasonRank's protocol, an average-only row over e5's top 100
    at depth 100): a reasonrank-32B run's mean over the eight tasks is set against it, naming its first stage (ours
    under R2MED's protocol, or the authors' imported); fewer tasks, another first stage or depth, another protocol or no
    published_as: not compared, each said."""
    from r2med_eval.hub.datasets import R2MED_TASKS
    from r2med_eval.report import r2med_paper

    pub = r2med_paper.read_sources()["reasonrank"]
    assert pub == {("ReasonRank-32B", "average"): {"ndcg_at_10": 0.4285, "first_stage": "e5", "depth": "100",
                                                   "where": "README.md@06721fd, Latest News (Aug 16, 2025): the "
                                                            "R2MED leaderboard"}}
    keys = Workflow(_shipped(["e5-mistral-7b-instruct", "e5-mistral-reasonrank-runs", "reasonrank-32B",
                              "reasonrank-7B"])).registry.paper_key
    ours, theirs = "e5-mistral-7b-instruct--reasonrank-32B@100", "e5-mistral-reasonrank-runs--reasonrank-32B@100"
    other = "e5-mistral-7b-instruct--reasonrank-7B@100"
    info = {r: keys(r) for r in (ours, theirs, other)}
    assert info[ours] == {"key": None, "type": "llm_listwise", "protocol": "r2med",
                          "published_as": {"reasonrank": "ReasonRank-32B"},
                          "first_stage": {"run": "e5-mistral-7b-instruct", "type": "dense", "paper_name": "e5",
                                          "depth": 100}}
    assert info[theirs]["protocol"] is None and info[theirs]["first_stage"]["type"] == "run"
    assert "published_as" not in info[other]
    info["bm25--rr32@100"] = {**info[ours], "first_stage": {**info[ours]["first_stage"], "paper_name": "bm25"}}
    info["e5--rr32@50"] = {**info[ours], "first_stage": {**info[ours]["first_stage"], "depth": 50}}
    info["e5-re--rr32@100"] = info[ours]
    files, tasks = [], {f"r2med/{t}": t for t in R2MED_TASKS}
    for i, t in enumerate(R2MED_TASKS):
        for run, score, protocol in ((ours, 0.40 + 0.01 * i, "r2med"), (theirs, 0.4285, None), (other, 0.3, "r2med"),
                                     ("bm25--rr32@100", 0.3, "r2med"), ("e5--rr32@50", 0.3, "r2med"),
                                     ("e5-re--rr32@100", 0.3, "reasonembed")):
            path = tmp_path / f"{run}-{t}.json"
            path.write_text(json.dumps({"benchmark": "r2med", "task": t, "model": run, "metrics": {"ndcg_at_10": score},
                                        **({"protocol": protocol} if protocol else {})}))
            files.append(path)
    partial = tmp_path / "partial.json"  # a benchmark holding one task: listed, not compared
    partial.write_text(json.dumps({"benchmark": "one", "task": "Biology", "model": ours, "protocol": "r2med",
                                   "metrics": {"ndcg_at_10": 0.5}}))
    result = r2med_paper.compare(files + [partial], [], info, {**tasks, "one/Biology": "Biology"})
    means = {(r["benchmark"], r["model"]): r for r in result["rows"] if r["paper_task"] == "average"}
    assert set(means) == {("r2med", ours), ("r2med", theirs), ("one", ours)}
    row = means[("r2med", ours)]
    assert (row["source"], row["published_protocol"], row["protocol"]) == ("reasonrank", "reasonrank", "r2med")
    assert row["ours"] == pytest.approx(0.435) and row["diff"] == pytest.approx(0.0065) and row["flag"]
    assert row["note"] == ("the mean of the 8 R2MED tasks; reranks `e5-mistral-7b-instruct`, run here (dense); "
                           + r2med_paper.KNOWN_BY_SOURCE["reasonrank"])
    assert means[("r2med", theirs)]["diff"] == pytest.approx(0.0) and not means[("r2med", theirs)]["flag"]
    assert means[("one", ours)]["theirs"] is None and means[("one", ours)]["note"].startswith(
        "no mean to compare: 1 of the 8 R2MED tasks on one (reasonrank publishes the mean of the eight only; without "
        "Bioinformatics, ")
    per_task = {(r["model"], r["task"]): r for r in result["rows"] if r["benchmark"] == "r2med"}
    assert per_task[(ours, "Biology")]["theirs"] is None and per_task[(ours, "Biology")]["note"] == (
        "published as the mean of the eight tasks only (reasonrank): the run's mean is compared")
    assert per_task[(other, "Biology")]["note"] == "no paper_name or published_as (or not a published configuration)"
    assert per_task[("bm25--rr32@100", "Biology")]["note"] == (
        "not compared, the published row reranks another first stage: bm25--rr32@100 reranks e5-mistral-7b-instruct "
        "(paper_name bm25) at depth 100; reasonrank's ReasonRank-32B, e5 at depth 100")
    assert "e5--rr32@50 reranks e5-mistral-7b-instruct (paper_name e5) at depth 50" in \
        per_task[("e5--rr32@50", "Biology")]["note"]
    assert per_task[("e5-re--rr32@100", "Biology")]["note"] == (
        "not compared, published under another protocol: e5-re--rr32@100 (reasonembed) against reasonrank's "
        "ReasonRank-32B (reasonrank)")
    md = r2med_paper.to_markdown(result)
    assert ("- `reasonrank`: ReasonRank (Liu et al. 2025, arXiv 2508.07050), its README at 06721fd: ReasonRank-32B's "
            "R2MED leaderboard figure of 2025-08-16, the mean of the eight tasks over e5-mistral-7b-instruct's top "
            "100, "
            "`data/reference/reasonrank_r2med_ndcg10.tsv`, numbers under ReasonRank's protocol (ReasonRank "
            "run_rank_llm.py and trec_eval.py @06721fd") in md
    assert (f"| r2med: 8 tasks | mean of the 8 | {theirs} | - | 42.85 | 42.85 | reasonrank | reasonrank | +0.00 |  | "
            "the mean of the 8 R2MED tasks; reranks `e5-mistral-reasonrank-runs`, imported (type: run, a run file made "
            "elsewhere) |") in md
    assert (f"| r2med: 8 tasks | mean of the 8 | {ours} | r2med | 43.50 | 42.85 | reasonrank | reasonrank | +0.65 | "
            "**> 0.5** | the mean of the 8 R2MED tasks; reranks `e5-mistral-7b-instruct`, run here (dense); the "
            "published figure") in md
    assert "- 17 (run, task) pairs: published as the mean of the eight tasks only (reasonrank): the run's mean is " \
        f"compared: {ours}, {theirs}." in md
    assert "- reasonrank: `README.md@06721fd, Latest News (Aug 16, 2025): the R2MED leaderboard`" in md
    tex = r2med_paper.to_latex(result)
    assert (r"Mean of the 8 & e5-mistral-7b-instruct-{}-reasonrank-32B@100 & reasonrank & reasonrank & 43.50 & "
            r"42.85 & +0.65 \\") in tex
    assert ("Mean of the 8: the run's mean over the eight R2MED tasks against a published mean "
            "(e5-mistral-7b-instruct-{}-reasonrank-32B@100 reranks e5-mistral-7b-instruct, run here (dense); ") in tex
    assert "Sources: reasonrank, ReasonRank (Liu et al. 2025, arXiv 2508.07050)" in tex


@pytest.mark.parametrize("entry, published, message", [
    ({"type": "dense", "source": {"path": "/m"}}, {"reasonrank": "ReasonRank-32B"},
     "names 'reasonrank', whose rows are rerankers', not a retriever's"),
    ("listwise", {"reasonembed": "general/BM25"}, "names 'reasonembed', whose rows are retrievers', not a reranker's"),
    ("listwise", {"reasonrank": "ReasonRank-33B"}, "'ReasonRank-33B' is not a row of "
                                                   "data/reference/reasonrank_r2med_ndcg10.tsv; did you mean "
                                                   "'ReasonRank-32B'"),
])
def test_published_as_names_a_source_of_the_entrys_kind(tmp_path, tok_dir, entry, published, message):
    raw = reasonrank_config(tmp_path, tok_dir)
    raw["models"]["rr"] = {**(raw["models"]["rr"] if entry == "listwise" else entry), "published_as": published}
    raw["rerank"] = raw["rerank"] if entry == "listwise" else []
    with pytest.raises(ConfigError, match="models.rr.published_as") as e:
        config.validate(raw)
    assert message in str(e.value)

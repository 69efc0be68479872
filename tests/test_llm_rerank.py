"""LLM rerankers (r2med_eval.llm_rerank, rule llm_rerank_run) without Snakemake:

* RankGPT fidelity: a transcription of RankGPT's sliding window, prompt and parsing (tests/rankgpt_ref.py, importing
  nothing of ours) and our listwise reranker give the same messages and the same permutation for the same model
  answers on 200 random cases, malformed answers included;
* pointwise scoring: the softmax over the two answers' log probabilities, the answer token after a reasoning
  model's reasoning, the parsed label when there are no log probabilities, re-asks;
* the stage against a fake server returning scripted permutations or yes/no log probabilities: the reranked runs
  equal the expected ones exactly; a kill -9 mid-job, then a rerun asks only for the missing answers; on a
  MIMIC-derived benchmark the cache is owner-only under resources/ and an undeclared server is refused;
* the control layer: params, config checks, resources."""
import copy
import hashlib
import json
import math
import os
import random
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import rankgpt_ref as ref
import yaml
from conftest import LLM_KEY, REPO, write_jsonl

from r2med_eval.errors import ConfigError, InputError, LLMError
from r2med_eval.llm.requests import Answer, Request, Usage
from r2med_eval.rerank import listwise, llm_rerank, pointwise
from r2med_eval.scoring import identity, runs
from r2med_eval.stages import rerank as rerank_stage
from r2med_eval.workflow import config, paths
from r2med_eval.workflow.control import Workflow

KEY = LLM_KEY  # the fixture `fake` (conftest) serves under this key

# ------------------------------------------------------------------ RankGPT fidelity


class StubClient:
    """The client's interface (request, ask) answering from a function of the messages; records the messages."""

    def __init__(self, answer):
        self.answer = answer
        self.asked: list[list[dict]] = []

    def request(self, messages, **sampling):
        return Request(messages, {"max_tokens": 64, **sampling})

    def ask(self, requests):
        out = {}
        for rid, r in requests.items():
            self.asked.append(r.messages)
            out[rid] = Answer(self.answer(r.messages), {})
        return out, Usage(requested=len(requests))


def model_answer(messages) -> str:
    """A model's answer to a window, random but a function of the messages: a clean permutation, or one with
    repeats, missing ids, prose around it, ids out of range, other digits, or no ids at all."""
    seed = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    rng = random.Random(seed)
    num = sum(1 for m in messages if m["role"] == "user" and m["content"].startswith("["))
    ids = list(range(1, num + 1))
    rng.shuffle(ids)
    kind = rng.choice(["clean", "repeats", "missing", "prose", "out_of_range", "mixed", "none", "formats"])
    if kind == "repeats":
        ids = ids + [rng.choice(ids or [1]) for _ in range(3)]
        rng.shuffle(ids)
    elif kind == "missing":
        ids = ids[:rng.randint(0, len(ids))]
    elif kind == "out_of_range":
        ids = ids + [0, num + 1, num + 7, 100, 12345]
        rng.shuffle(ids)
    elif kind == "mixed":
        ids = ids[:rng.randint(0, len(ids))] + [0, num + 3] + ids[:2]
        rng.shuffle(ids)
    if kind == "none":
        return "I cannot rank these passages without more context."
    ranking = " > ".join(f"[{i}]" for i in ids)
    if kind == "prose":
        return f"Sure! Considering 2 criteria, the ranking is:\n{ranking}\nThe top 3 are clearly relevant."
    if kind == "formats":
        return ", ".join(rng.choice([f"{i}", f"[0{i}]", f"({i})", f"#{i}", f"passage {i}"]) for i in ids) + \
            ("  \u0663" if num >= 3 else "")  # an Arabic-Indic 3: a digit both read as 3
    return ranking


def random_text(rng: random.Random, i: int) -> str:
    words = ["insulin", "fever", "cough", "renal", "lactic", "acid", "biopsy", "  ", "\n", "dose", "12", "mg"]
    return f"p{i} " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 40)))


def test_listwise_equals_rankgpt_on_200_random_cases():
    rng = random.Random(25)
    compared = windows = 0
    for case in range(200):
        window = rng.randint(2, 25)
        step = rng.randint(1, window)
        k = rng.choice([5, 10, 20, 25, 30, 50, 100])
        words = rng.choice([3, 20, 300])
        queries = {f"q{case}-{j}": f"query {case} {j} about renal dose?" for j in range(rng.randint(1, 3))}
        tops, texts, item = {}, {}, {}
        for q in queries:
            n = rng.randint(0, 45)
            docs = [f"{q}-d{i}" for i in range(n)]
            for i, d in enumerate(docs):
                texts[d] = random_text(rng, i)
            tops[q] = docs[:k]
            item[q] = {"query": queries[q], "hits": [{"content": texts[d], "docid": d, "rank": i + 1,
                                                      "score": float(n - i)} for i, d in enumerate(docs)]}
        client = StubClient(model_answer)
        ours, counts, _ = listwise.listwise(client, queries, tops, texts, window=window, step=step, words=words)
        for q in queries:
            end = min(k, len(item[q]["hits"]))
            asked: list = []

            def run_llm(messages):
                asked.append(messages)
                return model_answer(messages)

            theirs = ref.sliding_windows(item[q], rank_start=0, rank_end=end, window_size=min(window, end), step=step,
                                         run_llm=run_llm, max_length=words)
            assert ours[q] == [h["docid"] for h in theirs["hits"][:end]], (case, q)
            assert [h["rank"] for h in theirs["hits"]] == list(range(1, len(theirs["hits"]) + 1))
            mine = [m for m in client.asked if m[-1]["content"].startswith(f"Search Query: {queries[q]}.")]
            assert mine == (asked if end > 1 else []), (case, q)  # a top of one document asks nothing
            compared += 1
            windows += len(mine)
    assert compared >= 300 and windows >= 300
    print(f"{compared} rankings over {windows} windows equal RankGPT's")


@pytest.mark.parametrize("answer,n", [
    ("[2] > [2] > [1]", 3), ("[5] > [0] > [1] > [99]", 3), ("nothing", 4), ("Ranking: 3, 1. Done in 2 steps.", 4),
    ("[1] > [3] > [2] > [4] > [3] > [1]", 4), ("[10] > [1] > [2]", 12), ("[007] > [1]", 9), ("", 1),
    ("\u0662 > \u0661", 2)])
def test_parse_permutation_as_receive_permutation(answer, n):
    item = {"query": "x", "hits": [{"content": str(i), "docid": i} for i in range(n)]}
    theirs = [h["docid"] for h in ref.receive_permutation(copy.deepcopy(item), answer, 0, n)["hits"]]
    order, counts = listwise.parse_permutation(answer, n)
    assert order == theirs
    assert counts["named"] + counts["missing"] == n


def test_unreadable_digits_are_dropped_where_rankgpt_raises():
    with pytest.raises(ValueError):
        ref.receive_permutation({"query": "x", "hits": [{"docid": 0}, {"docid": 1}]}, "[2\u00b2] > [1]", 0, 2)
    assert listwise.parse_permutation("[2\u00b2] > [1]", 2) == ([0, 1], {"named": 1, "repeated": 0,
                                                                           "out_of_range": 0, "unreadable": 1,
                                                                           "missing": 1})


def test_windows_and_uncovered_top_are_counted():
    assert listwise.rankgpt_windows(100, 20, 10) == [(80, 100), (70, 90), (60, 80), (50, 70), (40, 60), (30, 50),
                                                       (20, 40), (10, 30), (0, 20)]
    assert listwise.rankgpt_windows(10, 20, 10) == [(0, 10)]
    assert listwise.rankgpt_windows(25, 20, 10) == [(5, 25)]  # RankGPT's loop stops above the top
    assert listwise.rankgpt_windows(1, 20, 10) == [] and listwise.rankgpt_windows(0, 20, 10) == []
    client = StubClient(lambda m: "[1]")
    _, counts, _ = listwise.listwise(client, {"a": "x", "b": "y"}, {"a": list("abcdefghijklmnopqrstuvwxy"),
                                                                      "b": list("ab")},
                                       {c: c for c in "abcdefghijklmnopqrstuvwxy"}, window=20, step=10, words=300)
    assert counts["queries_with_uncovered_top"] == 1 and counts["windows"] == 2


def test_a_reasoning_models_reasoning_is_cut_before_the_permutation_is_read():
    client = StubClient(lambda m: "<think>[1] is weak, [3] > [2]?</think>\n[2] > [1] > [3]")
    orders, _, _ = listwise.listwise(client, {"q": "x"}, {"q": ["a", "b", "c"]}, {"a": "a", "b": "b", "c": "c"},
                                       window=20, step=10, words=300, reasoning="think")
    assert orders["q"] == ["b", "a", "c"]


# ------------------------------------------------------------------ pointwise scoring


def lp(token, logprob, alts):
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]}


def test_probability_is_the_softmax_over_the_two_answers():
    words = ("yes", "no")
    p, kind = pointwise.positive_probability({"Yes": -0.2, "No": -1.9, "The": -3.0}, words)
    assert kind == "logprobs" and p == pytest.approx(math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.9)))
    # the variants of one word add up
    p, _ = pointwise.positive_probability({"Yes": -0.7, " yes": -1.2, "No": -1.5, "no": -2.5}, words)
    y, n = math.exp(-0.7) + math.exp(-1.2), math.exp(-1.5) + math.exp(-2.5)
    assert p == pytest.approx(y / (y + n))
    # one word missing: bounded by the lowest returned log probability
    p, kind = pointwise.positive_probability({"Yes": -0.01, "Sure": -5.0, "The": -7.5}, words)
    assert kind == "logprobs_bound" and p == pytest.approx(1 / (1 + math.exp(-7.5 + 0.01)))
    assert pointwise.positive_probability({"Maybe": -0.1, "The": -3.0}, words) is None
    assert pointwise.positive_probability({"Yes": -0.1}, words) is None


def test_judge_reads_the_answer_token_after_the_reasoning():
    tokens = [lp("<think>", -0.1, []), lp("No", -0.3, [("No", -0.3), ("Yes", -1.4)]), lp(" idea", -0.2, []),
              lp("</think>", -0.1, []), lp("\n\n", -0.1, []), lp("Yes", -0.05, [("Yes", -0.05), ("No", -3.0)])]
    answer = Answer("<think>No idea</think>\n\nYes", {}, logprobs=tokens)
    p, kind = pointwise.judge(answer, ("yes", "no"), "think")
    assert kind == "logprobs" and p == pytest.approx(1 / (1 + math.exp(-3.0 + 0.05)))
    # a plain model would take the first answer token
    p, _ = pointwise.judge(answer, ("yes", "no"), "none")
    assert p == pytest.approx(1 / (1 + math.exp(-0.3 + 1.4)))
    # the server split the reasoning off and the tokens cover reasoning and answer
    split = Answer("Yes", {}, reasoning="No idea", logprobs=tokens[1:3] + [tokens[5]])
    assert pointwise.judge(split, ("yes", "no"), "think")[0] == pytest.approx(1 / (1 + math.exp(-3.0 + 0.05)))
    # no log probabilities: the parsed label; nothing to parse: unparsed
    assert pointwise.judge(Answer("<think>yes?</think> No.", {}), ("yes", "no"), "think") == (0.0, "label")
    assert pointwise.judge(Answer("**True**", {}), ("true", "false"), "none") == (1.0, "label")
    assert pointwise.judge(Answer("Perhaps.", {}), ("yes", "no"), "none") == (None, "unparsed")


def test_scoring_used_names_the_kinds():
    assert pointwise.scoring_used({"logprobs": 3, "logprobs_bound": 1, "label": 0, "unparsed": 0}) == "logprobs"
    assert pointwise.scoring_used({"logprobs": 0, "logprobs_bound": 0, "label": 4, "unparsed": 0}) == "label"
    assert pointwise.scoring_used({"logprobs": 0, "logprobs_bound": 0, "label": 0, "unparsed": 4}) == "unparsed"
    assert pointwise.scoring_used({"logprobs": 1, "logprobs_bound": 0, "label": 4, "unparsed": 0}) == "mixed"


def test_template_fill_is_one_pass_and_checked(tmp_path):
    assert pointwise.fill_template("Q: {query}\nP: {passage}", "a {passage} b", "doc") == "Q: a {passage} b\nP: doc"
    (tmp_path / "t.txt").write_text("Q: {query}\n")
    with pytest.raises(InputError, match=r"lacks \{passage\}"):
        pointwise.read_template(tmp_path / "t.txt")
    shipped = pointwise.read_template(pointwise.DEFAULT_POINTWISE_PROMPT)
    assert shipped.endswith("Does the passage answer the query?\nAnswer:")  # RankGPT's relevance generation
    assert pointwise.read_template(pointwise.PROMPTS_DIR / "rank1_true_false.txt").startswith(
        "Determine if the following passage is relevant to the query. Answer only with 'true' or 'false'.")


# ------------------------------------------------------------------ the stage against a fake server

GRADE = {f"d{i:02d}": (i * 7) % 5 for i in range(40)}  # a hidden relevance grade per document
FIRST = [f"d{i:02d}" for i in range(40)]  # every query's first-stage order: d00, d01, ...


def permutation_script(body) -> str:
    """RankGPT-style answer: the window's passages by grade, best first (ties in the window's order)."""
    docs = [m["content"].split()[1] for m in body["messages"] if m["role"] == "user" and m["content"].startswith("[")]
    order = sorted(range(len(docs)), key=lambda i: (-GRADE[docs[i]], i))
    return "Here you go: " + " > ".join(f"[{i + 1}]" for i in order)


def yes_no_logprobs(d: str) -> tuple[float, float]:
    return -0.1 - 0.3 * (4 - GRADE[d]), -0.2 - 0.4 * GRADE[d]


def pointwise_script(body):
    d = body["messages"][-1]["content"].split("Passage: ")[1].split()[0]
    y, n = yes_no_logprobs(d)
    word = "Yes" if y > n else "No"
    return word, [lp(word, max(y, n), [("Yes", y), ("No", n), (" yes", y - 4.0), ("Maybe", -9.0)])]


def base_config(tmp_path: Path, private: bool = False, **reranker) -> dict:
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    bench = "cliniq-demo" if private else "b"
    if not private:
        raw["benchmarks"] = {"b": {"layout": "r2med", "tasks": {"t": {"path": str(tmp_path / "task")}}}}
    else:
        raw["benchmarks"]["cliniq-demo"]["noteevents"] = str(REPO / "data/cliniq-demo/NOTEEVENTS.csv")
        raw["benchmarks"]["cliniq-demo"]["tasks"]["cliniq"]["path"] = str(REPO / "data/cliniq-demo")
    raw["benchmarks_to_run"] = [bench]
    raw["llms"] = {"fake": {"reasoning": "none", "generate": {
        "model": "fake", "base_url_env": "T_RR_URL", "api_key_env": "T_RR_KEY", "temperature": 0, "concurrency": 3,
        "retries": 0, "price_per_million_input": 1.0, "price_per_million_output": 2.0}}}
    raw["models"]["rr"] = {"type": "llm_listwise", "llm": "fake", **reranker}
    raw["rerank"] = [{"run": "bm25", "reranker": "rr", "depths": [10, 20, 30]}]
    raw.pop("fusion", None)
    raw["query_variants"] = []
    raw["report"] = {"baseline": "bm25"}
    return raw


def stage_sm(tmp_path: Path, raw: dict, depth: int, queries=("q1", "q2")) -> SimpleNamespace:
    """The stage's snakemake object, its params from the control layer."""
    task = tmp_path / "task"
    bench = raw["benchmarks_to_run"][0]
    tname = next(iter(raw["benchmarks"][bench]["tasks"]))
    write_jsonl(task / "corpus.jsonl", [{"id": d, "text": f"{d} is a passage about topic {GRADE[d]}"} for d in FIRST])
    write_jsonl(task / "queries.jsonl", [{"id": q, "text": f"question {q}"} for q in queries])
    run_path = task / "bm25.trec"
    runs.write_run({q: {d: float(100 - i) for i, d in enumerate(FIRST)} for q in queries}, run_path, "bm25",
                   identity=identity.make("bm25", bench, tname, identity.fingerprint(FIRST)))
    w = Workflow(config.validate(raw))
    name = f"bm25--rr@{depth}"
    wc = SimpleNamespace(benchmark=bench, task=tname, model=name)
    spec = w.params.of("llm_rerank_run")(wc)
    inputs = {"run": str(run_path), "queries": str(task / "queries.jsonl"), "corpus": str(task / "corpus.jsonl")}
    inputs.update({k: v for k, v in w.inputs.llm_rerank_run(wc).items() if k == "prompt"})
    out = tmp_path / "out" / name
    return SimpleNamespace(input=SimpleNamespace(**inputs), params=SimpleNamespace(spec=spec), wildcards=wc,
                           output=SimpleNamespace(run=f"{out}.trec", scores=f"{out}.rescored.tsv",
                                                  info=f"{out}.lineage.json"), config=w.cfg)


def read_order(path) -> dict[str, list[str]]:
    return {q: [d for d, _ in runs.ranked(docs)] for q, docs in runs.read_run(path).items()}


def by_grade(docs):
    return sorted(docs, key=lambda d: -GRADE[d])  # stable: ties keep their order


@pytest.mark.parametrize("depth", [20, 30])
def test_listwise_run_equals_the_expected_one(fake, tmp_path, depth):
    fake.script = permutation_script
    sm = stage_sm(tmp_path, base_config(tmp_path), depth)
    rerank_stage.llm_rerank_run(sm)
    if depth == 20:  # one window: the top 20 by grade
        top = by_grade(FIRST[:20])
    else:  # windows 10-30 then 0-20: the best 10 of the bottom 20 climb into the second window
        bottom = by_grade(FIRST[10:30])
        top = by_grade(FIRST[:10] + bottom[:10]) + bottom[10:]
    expected = top + FIRST[depth:]
    assert read_order(sm.output.run) == {"q1": expected, "q2": expected}
    info = json.loads(Path(sm.output.info).read_text())
    windows = 2 * (1 if depth == 20 else 2)
    assert info["requested"] == windows == len(fake.requests) and info["cached"] == 0
    assert info["parsing"]["windows"] == windows and info["parsing"]["missing"] == 0
    assert info["window"] == 20 and info["step"] == 10 and info["sampling"]["temperature"] == 0
    assert info["cost"] == pytest.approx((info["prompt_tokens"] * 1.0 + info["completion_tokens"] * 2.0) / 1e6)
    body = fake.requests[0]
    assert body["messages"][0]["content"].startswith("You are RankGPT") and len(body["messages"]) == 3 + 2 * 20 + 1
    # a rerun asks nothing; another window asks again
    rerank_stage.llm_rerank_run(sm)
    assert len(fake.requests) == windows
    sm2 = stage_sm(tmp_path, base_config(tmp_path, window=15, step=5), depth)
    rerank_stage.llm_rerank_run(sm2)
    assert len(fake.requests) > windows
    for path in Path(tmp_path).rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes() and fake.url.encode() not in path.read_bytes(), path


def test_listwise_truncate_keeps_only_the_reranked_top(fake, tmp_path):
    fake.script = permutation_script
    sm = stage_sm(tmp_path, base_config(tmp_path, truncate=True), 10)
    rerank_stage.llm_rerank_run(sm)
    assert read_order(sm.output.run)["q1"] == by_grade(FIRST[:10])


def pointwise_config(tmp_path, private=False, **reranker):
    raw = base_config(tmp_path, private)
    raw["models"]["rr"] = {"type": "llm_pointwise", "llm": "fake", **reranker}
    return raw


def test_pointwise_run_from_logprobs_equals_the_expected_one(fake, tmp_path):
    fake.script = pointwise_script
    sm = stage_sm(tmp_path, pointwise_config(tmp_path), 20)
    rerank_stage.llm_rerank_run(sm)

    def p(d):
        y, n = yes_no_logprobs(d)
        y = math.log(math.exp(y) + math.exp(y - 4.0))
        return 1 / (1 + math.exp(n - y))

    expected = sorted(FIRST[:20], key=lambda d: (-p(d), FIRST.index(d))) + FIRST[20:]
    assert read_order(sm.output.run)["q1"] == expected
    rescored = [line.split("\t") for line in Path(sm.output.scores).read_text().splitlines()[1:]]
    assert [d for q, d, _ in rescored if q == "q1"] == expected[:20]
    assert all(float(s) == pytest.approx(p(d), abs=1e-6) for _, d, s in rescored)
    info = json.loads(Path(sm.output.info).read_text())
    assert info["scoring"] == "logprobs" and info["scored_by"]["logprobs"] == 40 and info["requested"] == 40
    body = fake.requests[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 2
    assert body["messages"][0]["content"].startswith("Given a passage and a question")


def test_pointwise_without_logprobs_scores_the_label_and_keeps_the_first_stage_order(fake, tmp_path):
    fake.script = pointwise_script
    fake.logprobs = False
    sm = stage_sm(tmp_path, pointwise_config(tmp_path), 10)
    rerank_stage.llm_rerank_run(sm)
    yes = [d for d in FIRST[:10] if pointwise_script({"messages": [{"content": f"Passage: {d}"}]})[0] == "Yes"]
    assert read_order(sm.output.run)["q1"] == yes + [d for d in FIRST[:10] if d not in yes] + FIRST[10:]
    info = json.loads(Path(sm.output.info).read_text())
    assert info["scoring"] == "label" and info["scored_by"] == {"logprobs": 0, "logprobs_bound": 0,
                                                                "alternatives": 0, "label": 20, "unparsed": 0}
    assert info["unusable_answers"] == 0 and info["unusable_share"] == 0.0


def test_pointwise_reasks_unparsed_answers_then_counts_them(fake, tmp_path):
    answers = iter(["Hmm."] * 3 + ["No"] * 100)
    lock = threading.Lock()

    def script(body):
        with lock:
            return next(answers)

    fake.script = script
    raw = pointwise_config(tmp_path, logprobs=False, reasks=1)
    raw["llms"]["fake"]["generate"]["concurrency"] = 1
    sm = stage_sm(tmp_path, raw, 10, queries=("q1",))
    rerank_stage.llm_rerank_run(sm)
    info = json.loads(Path(sm.output.info).read_text())
    assert info["requested"] == 13 and info["scored_by"]["unparsed"] == 0 and info["scored_by"]["label"] == 10
    assert sum(1 for r in fake.requests if "attempt" in json.dumps(r)) == 0  # the attempt is in the key, not sent
    rerank_stage.llm_rerank_run(sm)  # a rerun replays both attempts from the cache
    assert len(fake.requests) == 13


def test_an_edited_prompt_asks_again(fake, tmp_path):
    fake.script = pointwise_script
    prompt = tmp_path / "my_prompt.txt"
    prompt.write_text("Is this relevant?\nQuery: {query}\nPassage: {passage}\nAnswer yes or no.\n")
    sm = stage_sm(tmp_path, pointwise_config(tmp_path, prompt=str(prompt)), 10)
    rerank_stage.llm_rerank_run(sm)
    assert len(fake.requests) == 20 and fake.requests[0]["messages"][-1]["content"].endswith("Answer yes or no.")
    prompt.write_text("Relevant?\nQuery: {query}\nPassage: {passage}\n")
    sm2 = stage_sm(tmp_path, pointwise_config(tmp_path, prompt=str(prompt)), 10)
    assert sm2.params.spec["reranker_spec"]["prompt_sha256"] != sm.params.spec["reranker_spec"]["prompt_sha256"]
    rerank_stage.llm_rerank_run(sm2)
    assert len(fake.requests) == 40


DRIVER = """
import json, sys
from types import SimpleNamespace
sys.path.insert(0, {src!r})
from r2med_eval.stages import rerank
d = json.load(open(sys.argv[1]))
ns = lambda x: SimpleNamespace(**x)
rerank.llm_rerank_run(SimpleNamespace(input=ns(d["input"]), output=ns(d["output"]), params=ns(d["params"]),
                                      wildcards=ns(d["wildcards"]), config=d["config"]))
"""


@pytest.mark.parametrize("kind", ["llm_listwise", "llm_pointwise"])
def test_kill_9_mid_job_then_a_rerun_asks_only_for_the_missing_answers(fake, tmp_path, monkeypatch, kind):
    raw = base_config(tmp_path, window=4, step=2) if kind == "llm_listwise" else pointwise_config(tmp_path)
    queries = tuple(f"q{i}" for i in range(6))
    sm = stage_sm(tmp_path, raw, 10, queries=queries)
    total = 6 * (4 if kind == "llm_listwise" else 10)  # windows 6-10, 4-8, 2-6, 0-4 per query
    gate, served = threading.Event(), []
    script = permutation_script if kind == "llm_listwise" else pointwise_script

    def slow(body):
        served.append(1)
        if len(served) > total // 2:
            gate.wait(60)  # the rest hangs until the job is killed
        return script(body)

    fake.script = slow
    job = tmp_path / "job.json"
    job.write_text(json.dumps({k: vars(getattr(sm, k)) for k in ("input", "output", "params", "wildcards")}
                              | {"config": sm.config}))
    proc = subprocess.Popen([sys.executable, "-c", DRIVER.format(src=str(REPO / "src")), str(job)], cwd=tmp_path,
                            env={**os.environ}, start_new_session=True)
    cache = tmp_path / paths.fill(paths.RERANK_CACHE, benchmark="b", task="t", model="bm25--rr@10")
    deadline = time.monotonic() + 120
    while (not cache.exists() or len(cache.read_text().splitlines()) < total // 2) and time.monotonic() < deadline:
        assert proc.poll() is None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    gate.set()
    kept = len(cache.read_text().splitlines())
    assert total // 2 <= kept < total and not Path(sm.output.run).exists()
    before = len(fake.requests)
    fake.script = script
    rerank_stage.llm_rerank_run(sm)
    assert len(fake.requests) - before == total - kept
    info = json.loads(Path(sm.output.info).read_text())
    assert (info["requested"], info["cached"]) == (total - kept, kept)
    # the same run as a job that was never killed
    fresh = stage_sm(tmp_path / "fresh", raw, 10, queries=queries)
    monkeypatch.chdir(tmp_path / "fresh")
    rerank_stage.llm_rerank_run(fresh)
    assert Path(fresh.output.run).read_bytes() == Path(sm.output.run).read_bytes()


def test_private_benchmark_cache_is_owner_only_and_policy_applies(fake, tmp_path, monkeypatch):
    fake.mode = "echo"
    old = os.umask(0o022)
    try:
        raw = pointwise_config(tmp_path, private=True, max_tokens=4000)
        sm = stage_sm(tmp_path, raw, 10, queries=("q1",))
        assert sm.params.spec["private"] is True
        rerank_stage.llm_rerank_run(sm)
    finally:
        os.umask(old)
    cache = tmp_path / paths.fill(paths.PRIVATE_RERANK_CACHE, benchmark="cliniq-demo", task="cliniq",
                                  model="bm25--rr@10")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600 and stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.parent.parent.stat().st_mode) == 0o700
    assert not (tmp_path / "resources" / "llm_cache").exists()
    assert "topic" not in Path(sm.output.scores).read_text() + Path(sm.output.info).read_text()
    monkeypatch.setenv("T_RR_URL", "http://llm.example.invalid/v1")
    sm = stage_sm(tmp_path, pointwise_config(tmp_path, private=True, max_tokens=4000, passage_words=5), 10,
                  queries=("q1",))
    with pytest.raises(LLMError, match="the llm_pointwise prompts of benchmark cliniq-demo quote MIMIC-III notes"):
        rerank_stage.llm_rerank_run(sm)


# ------------------------------------------------------------------ the control layer


def test_params_hold_what_changes_the_output(tmp_path):
    def params(**reranker):
        raw = pointwise_config(tmp_path, **reranker)
        w = Workflow(config.validate(raw))
        return w.params.of("llm_rerank_run")(SimpleNamespace(benchmark="b", task="t", model="bm25--rr@10"))

    base = params()
    assert base["reranker_spec"] == {"type": "llm_pointwise", "llm": "fake", "answers": ["yes", "no"],
                                     "logprobs": True, "top_logprobs": 20, "passage_words": 300, "reasks": 1,
                                     "truncate": False, "prompt_sha256": base["reranker_spec"]["prompt_sha256"],
                                     "passage_format": "plain", "max_unusable": 0.05}
    assert base["reasoning"] == "none" and base["generate"]["model"] == "fake" and base["private"] is False
    assert "lamer_depth" not in base["generate"] and str(REPO) not in repr(base)
    assert params(description="x") == base
    assert params(passage_words=100) != base and params(answers=["true", "false"]) != base


def test_config_checks(tmp_path):
    raw = pointwise_config(tmp_path)
    raw["models"]["rr"]["llm"] = "nowhere"
    with pytest.raises(ConfigError, match="models.rr.llm names 'nowhere', which is not an llms entry with generate"):
        config.validate(raw)
    raw = pointwise_config(tmp_path, prompt=str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="models.rr.prompt: file .* does not exist"):
        config.check_paths(config.validate(raw), base=tmp_path)
    (tmp_path / "bad.txt").write_text("{query} only")
    raw = pointwise_config(tmp_path, prompt=str(tmp_path / "bad.txt"))
    with pytest.raises(ConfigError, match=r"models.rr.prompt: the prompt template lacks \{passage\}"):
        config.check_paths(config.validate(raw), base=tmp_path)
    raw = pointwise_config(tmp_path, top_logprobs=50)
    with pytest.raises(ConfigError, match="top_logprobs"):
        config.validate(raw)


def test_rules_and_resources(tmp_path):
    raw = base_config(tmp_path)
    raw["models"]["yn"] = {"type": "llm_pointwise", "llm": "fake"}
    raw["rerank"].append({"run": "bm25", "reranker": "yn", "depths": [10]})
    raw["llms"]["fake"]["generate"]["vllm"] = {"enabled": True, "gpus": 2, "startup_seconds": 600}
    w = Workflow(config.validate(raw))
    assert re.fullmatch(w.constraint("llm_rerank"), "bm25--rr@20") and re.fullmatch(w.constraint("llm_rerank"),
                                                                                    "bm25--yn@10")
    assert not re.fullmatch(w.constraint("rerank"), "bm25--rr@20")
    (tmp_path / "q.jsonl").write_text("{}\n" * 100)
    inp = SimpleNamespace(queries=str(tmp_path / "q.jsonl"))
    # 100 queries: at depth 30 two windows each, 200 requests, 3 at a time, and vLLM's 10 minutes to start
    assert w.resources.llm_rerank_runtime(SimpleNamespace(model="bm25--rr@30"), inp, 1) == round(
        10 + 200 * 0.25 / 3 + 10)
    assert w.resources.llm_rerank_runtime(SimpleNamespace(model="bm25--yn@10"), inp, 2) == round(
        2 * (10 + 1000 * 0.25 / 3 + 10))
    assert w.resources.llm_rerank_gpu(SimpleNamespace(model="bm25--yn@10")) == 2
    from r2med_eval.workflow.registry import job_benchmark_files
    rules = [r for r, _ in job_benchmark_files(w.registry, "b", "t", "bm25--yn@10")]
    assert "llm_rerank_run" in rules and "rerank_run" not in rules


def test_vllm_inside_the_job_logs_owner_only_on_a_private_benchmark(tmp_path, monkeypatch):
    """llms.<llm>.generate.vllm: the job starts the server (here the stand-in for `vllm serve` of
    tests/llm_fake_server.py) and, on a MIMIC-derived benchmark, its output goes to an owner-only file under
    resources/logs/, not to the job's log."""
    import socket

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("T_RR_URL", raising=False)
    monkeypatch.delenv("T_RR_KEY", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    raw = pointwise_config(tmp_path, private=True)
    raw["llms"]["fake"]["generate"]["vllm"] = {"enabled": True, "port": port, "startup_seconds": 60,
                                               "command": [sys.executable, str(REPO / "tests/llm_fake_server.py")]}
    sm = stage_sm(tmp_path, raw, 10, queries=("q1",))
    rerank_stage.llm_rerank_run(sm)
    server_log = tmp_path / "resources/logs/llm_rerank_run/cliniq-demo/cliniq/bm25--rr@10.server.log"
    assert "fake vllm serving fake" in server_log.read_text()
    assert stat.S_IMODE(server_log.stat().st_mode) == 0o600
    assert json.loads(Path(sm.output.info).read_text())["requested"] == 10
    assert "T_RR_URL" not in os.environ


# ------------------------------------------------------------------ issue 37: the rerankers' last differences

def test_pointwise_reads_the_first_positions_alternatives_when_the_first_token_is_neither_word():
    words = ("yes", "no")
    sure = Answer("Sure", {}, logprobs=[lp("Sure", -0.3, [("Sure", -0.3), ("Yes", -1.2), ("No", -2.0)])])
    p, kind = pointwise.judge(sure, words, "none")
    assert kind == "alternatives" and p == pytest.approx(math.exp(-1.2) / (math.exp(-1.2) + math.exp(-2.0)))
    # after the reasoning and white space: the first answer position, not a token inside the reasoning
    tokens = [lp("<think>", -0.1, []), lp("Yes", -0.2, [("Yes", -0.2), ("No", -1.0)]), lp("</think>", -0.1, []),
              lp("\n", -0.1, []), lp("**", -0.4, [("**", -0.4), ("No", -0.9), ("Yes", -2.9)]), lp("Rel", -0.1, [])]
    p, kind = pointwise.judge(Answer("<think>Yes</think>\n**Rel", {}, logprobs=tokens), words, "think")
    assert kind == "alternatives" and p == pytest.approx(1 / (1 + math.exp(-0.9 + 2.9)))
    # neither word among the alternatives: the label, parsed from the text
    maybe = Answer("Sure, yes.", {}, logprobs=[lp("Sure", -0.3, [("Sure", -0.3), ("Maybe", -1.0)])])
    assert pointwise.judge(maybe, words, "none") == (1.0, "label")
    assert pointwise.scoring_used({"logprobs": 0, "alternatives": 3, "label": 0, "unparsed": 0}) == "logprobs"


def test_pointwise_stage_scores_answers_that_begin_with_another_token(fake, tmp_path):
    def script(body):
        d = body["messages"][-1]["content"].split("Passage: ")[1].split()[0]
        y, n = yes_no_logprobs(d)
        return "Sure", [lp("Sure", -0.05, [("Sure", -0.05), ("Yes", y), ("No", n)])]

    fake.script = script
    sm = stage_sm(tmp_path, pointwise_config(tmp_path), 10)
    rerank_stage.llm_rerank_run(sm)

    def p(d):
        y, n = yes_no_logprobs(d)
        return 1 / (1 + math.exp(n - y))

    assert read_order(sm.output.run)["q1"][:10] == sorted(FIRST[:10], key=lambda d: (-p(d), FIRST.index(d)))
    info = json.loads(Path(sm.output.info).read_text())
    assert info["scored_by"]["alternatives"] == 20 and info["scoring"] == "logprobs" and info["unusable_answers"] == 0


def test_unusable_answers_above_the_threshold_stop_the_job_with_one_message(fake, tmp_path):
    fake.script = lambda body: "I cannot tell."
    fake.logprobs = False
    sm = stage_sm(tmp_path, pointwise_config(tmp_path, reasks=0), 10)
    with pytest.raises(InputError, match=r"20 of 20 answers named neither answer word \(100.0%, above max_unusable "
                                         r"5.0%\)"):
        rerank_stage.llm_rerank_run(sm)
    assert not Path(sm.output.run).exists() and not Path(sm.output.info).exists()
    sm = stage_sm(tmp_path, pointwise_config(tmp_path, reasks=0, max_unusable=1.0), 10)
    rerank_stage.llm_rerank_run(sm)  # accepted: counted in the lineage for the leaderboard
    info = json.loads(Path(sm.output.info).read_text())
    assert info["unusable_answers"] == 20 and info["unusable_share"] == 1.0 and info["scoring"] == "unparsed"
    # listwise: windows whose answer names no passage
    fake.script = lambda body: "These passages are all relevant."
    sm = stage_sm(tmp_path, base_config(tmp_path), 20)
    with pytest.raises(InputError, match=r"2 of 2 answers named no passage"):
        rerank_stage.llm_rerank_run(sm)


def test_answers_must_name_two_different_words(tmp_path):
    with pytest.raises(ConfigError, match="answers names the same word twice"):
        config.validate(pointwise_config(tmp_path, answers=["yes", "YES"]))


def test_listwise_asks_a_permutation_sized_max_tokens_unless_set(fake, tmp_path):
    from r2med_eval.rerank.listwise import permutation_tokens

    perm = " > ".join(f"[{i}]" for i in range(1, 21))
    assert permutation_tokens(20) == len(perm) + 3 + 16  # the characters of "[1] > ... > [20] > " and 16 more
    assert permutation_tokens(2) == len("[1] > [2] > ") + 16
    fake.script = permutation_script
    rerank_stage.llm_rerank_run(stage_sm(tmp_path, base_config(tmp_path), 20))
    assert {r["max_tokens"] for r in fake.requests} == {permutation_tokens(20)}
    fake.requests.clear()
    rerank_stage.llm_rerank_run(stage_sm(tmp_path, base_config(tmp_path, window=5, step=5), 10))
    assert {r["max_tokens"] for r in fake.requests} == {permutation_tokens(5)}
    fake.requests.clear()
    rerank_stage.llm_rerank_run(stage_sm(tmp_path, base_config(tmp_path, max_tokens=77), 20))
    assert {r["max_tokens"] for r in fake.requests} == {77}
    assert llm_rerank.sampling_overrides({"type": "llm_listwise", "window": 20}, "think") == {}


def test_rankgpt_passage_format_equals_rankgpt_on_titled_and_untitled_documents():
    from r2med_eval.rerank.listwise import rankgpt_content, rankgpt_messages

    docs = [{"title": "Aspirin", "text": "Aspirin  inhibits\nCOX."}, {"title": "", "text": "No title here."},
            {"title": "  Spaced ", "text": " text "}]
    for doc in docs:
        ours = rankgpt_messages("q", [rankgpt_content(doc)], 300)
        theirs = ref.create_permutation_instruction({"query": "q", "hits": [{"content": ref.run_retriever_content(
            doc)}]}, 0, 1, 300)
        assert ours == theirs
    assert rankgpt_content({"text": "plain  text"}) == "plain text"
    assert rankgpt_content(docs[0]) == "Title: Aspirin Content: Aspirin inhibits COX."

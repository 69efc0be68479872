"""The generate stage: R2MED's prompts (against a transcription of src/instrcution.py and
src/generate_hypothetical_doc.py at commit 62b7074), the response cache, retries and the failures that stop
it (unreachable server, HTTP 500, malformed response, missing API key), with a local fake server."""
import json
import logging
from types import SimpleNamespace

import pytest
from conftest import write_jsonl
from llm_fake_server import FakeLLM

from r2med_eval.errors import InputError
from r2med_eval.expansion import generate
from r2med_eval.stages import data as data_stage
from r2med_eval.workflow.config import with_defaults

# ------------------------------------------------------------------ transcription of R2MED's prompt strings
# keyed by instrcution.py's dataset names; mapped to R2MED's task names as config/r2med_models.yaml says
KEYS = {"Biology": "Stack-Biology", "Medical-Sciences": "Stack-Medical", "Bioinformatics": "Stack-Bioinformatics",
        "MedXpertQA-Exam": "MedXpertQA-Exam", "MedQA-Diag": "MedQA-Diag", "PMC-Treatment": "PMC-Treat",
        "PMC-Clinical": "PMCPatients", "IIYi-Clinical": "IIYiPatients-EN"}
REF_HYDE = {
    "Stack-Biology": "Please write a passage to help answer the Biology post.\nPost: {TEXT}\nPassage: ",
    "Stack-Medical": "Please write a passage to help answer the Medical Science post.\nPost: {TEXT}\nPassage: ",
    "Stack-Bioinformatics": "Please write a passage to help answer the Bioinformatics post.\nPost: {TEXT}\nPassage: ",
    "MedXpertQA-Exam": "Please write a passage to help answer the Medical Exam.\nExam: {TEXT}\nPassage: ",
    "MedQA-Diag": "Please write a passage to help answer the Medical Exam.\nExam: {TEXT}\nPassage: ",
    "PMC-Treat": "Please write a passage to help answer the Clinical Case.\nCase: {TEXT}\nPassage: ",
    "PMCPatients": "Please write a similar case to help diagnose the Clinical Case.\nCase: {TEXT}\nSimilar Case: ",
    "IIYiPatients-EN": "Please write a similar case to help diagnose the Clinical Case.\nCase: {TEXT}\nSimilar Case: ",
}
_Q2D = "\n\n###Examples:###\n{EXAMPLE}\n\n###Real Test:###\n"
REF_QUERY2DOC = {
    "Stack-Biology": "Write a passage that help answer the Biology post." + _Q2D + "Post: {TEXT}\nPassage: ",
    "Stack-Medical": "Write a passage to help answer the Medical Science post." + _Q2D + "Post: {TEXT}\nPassage: ",
    "Stack-Bioinformatics": "Write a passage to help answer the Bioinformatics post." + _Q2D
                            + "Post: {TEXT}\nPassage: ",
    "MedXpertQA-Exam": "Write a passage to help answer the Medical Exam." + _Q2D + "Exam: {TEXT}\nPassage: ",
    "MedQA-Diag": "Write a passage to help answer the Medical Exam." + _Q2D + "Exam: {TEXT}\nPassage: ",
    "PMC-Treat": "Write a passage to help answer the Clinical Case." + _Q2D + "Case: {TEXT}\nPassage: ",
    "PMCPatients": "Write a similar case to help diagnose the Clinical Case." + _Q2D + "Case: {TEXT}\nSimilar Case: ",
    "IIYiPatients-EN": "Write a similar case to help diagnose the Clinical Case." + _Q2D
                       + "Case: {TEXT}\nSimilar Case: ",
}
_JUST = "Just output the correct passage, don't explanation.\n\n"


def _lamer_passage(noun, goal, label):
    return (f"Give a {noun} and its possible relevant passages (most of these passages are wrong). Please write a "
            f"correct passage that help answer the {goal}.\n" + _JUST + label + ": {TEXT}\n\nPossible Relevant "
            "Passages: {PASSAGE}")


_LAMER_CASE = ("Give a Clinical Case and its possible similar cases (most of these cases are non-similar). Please "
               "write a correct similar case that help diagnose the case.\nJust output the correct case, don't "
               "explanation.\n\nCase: {TEXT}\n\nPossible Similar Cases: {PASSAGE}")
REF_LAMER = {
    "Stack-Biology": _lamer_passage("Biology post", "post", "Post"),
    "Stack-Medical": _lamer_passage("Medical Science post", "post", "Post"),
    "Stack-Bioinformatics": _lamer_passage("Bioinformatics post", "post", "Post"),
    "MedXpertQA-Exam": _lamer_passage("Medical Exam", "exam", "Exam"),
    "MedQA-Diag": _lamer_passage("Medical Exam", "exam", "Exam"),
    "PMC-Treat": _lamer_passage("Clinical Case", "case", "Case"),
    "PMCPatients": _LAMER_CASE,
    "IIYiPatients-EN": _LAMER_CASE,
}
REF = {"hyde": REF_HYDE, "query2doc": REF_QUERY2DOC, "lamer": REF_LAMER}


def ref_cut_text(text, threshold=512):
    words = text.split()
    return " ".join(words[:threshold] if len(words) > threshold else words)


def ref_passages(pids, id2doc):
    passages = ""
    for num, pid in enumerate(pids[:10]):
        passages = passages + f"\n[{num + 1}]. {ref_cut_text(id2doc[pid].replace(chr(10), ' '))}"
    return passages


@pytest.mark.parametrize("method", sorted(REF))
@pytest.mark.parametrize("task", sorted(KEYS))
def test_prompts_are_r2meds(method, task):
    assert generate.prompt_template(method, task) == REF[method][KEYS[task]]
    ref = REF[method][KEYS[task]]
    if method == "query2doc":
        ref = ref.replace("{EXAMPLE}", "EX {TEXT}?")  # R2MED formats the examples in first, then the query
    want = ref.replace("{PASSAGE}", "\n[1]. p").format(TEXT="a {b} query") if method == "lamer" else None
    got = generate.build_prompts(method, task, {"q": "a {b} query"}, examples="EX {TEXT}?",
                                 passages={"q": "\n[1]. p"})["q"]
    if method == "hyde":
        assert got == ref.replace("{TEXT}", "a {b} query")
    elif method == "lamer":
        assert got == want
    else:
        assert got.startswith(ref.split("###Real Test:###")[0].replace("{TEXT}", "a {b} query"))
        assert got.endswith("###Real Test:###\n" + ref.split("###Real Test:###\n")[1].replace("{TEXT}", "a {b} query"))


def test_lamer_passages_as_r2med_cuts_them():
    id2doc = {"d1": "one\ntwo  three", "d2": " ".join(f"w{i}" for i in range(600)), "d3": "x"}
    assert generate.lamer_passages(["d2", "d1", "d3"], id2doc, 512) == ref_passages(["d2", "d1", "d3"], id2doc)


def test_unknown_prompt_task_and_missing_examples_stop():
    with pytest.raises(InputError, match="no R2MED prompt for task 'demo'"):
        generate.prompt_template("hyde", "demo")
    with pytest.raises(InputError, match="query2doc needs few-shot examples"):
        generate.build_prompts("query2doc", "Biology", {"q": "x"})


# ------------------------------------------------------------------ the client, the cache and the failures

SECRET = "sk-test-never-written-0123"


def settings(**over):
    gen = with_defaults("llm", {"generate": {"model": "tiny", "base_url_env": "T_LLM_URL", "api_key_env": "T_LLM_KEY",
                                             "retries": 1, "backoff_seconds": 0.0, "timeout_seconds": 10,
                                             "concurrency": 3, "price_per_million_input": 2.0,
                                             "price_per_million_output": 10.0, **over}})["generate"]
    return gen


PROMPTS = {f"q{i}": f"Please write a passage about topic {i}" for i in range(6)}


def test_generate_caches_and_asks_only_what_is_missing(tmp_path, monkeypatch):
    with FakeLLM() as llm:
        monkeypatch.setenv("T_LLM_URL", llm.url)
        monkeypatch.setenv("T_LLM_KEY", SECRET)
        cache = tmp_path / "cache.jsonl"
        answers, stats = generate.generate(PROMPTS, settings(), cache)
        assert answers == {q: FakeLLM.answer_for(p) for q, p in PROMPTS.items()}
        assert (stats["requested"], stats["cached"]) == (6, 0) and len(llm.requests) == 6
        assert stats["completion_tokens"] == 12 and stats["cost"] == pytest.approx(
            (stats["prompt_tokens"] * 2.0 + 12 * 10.0) / 1e6)
        body = llm.requests[0]
        assert body["model"] == "tiny" and body["temperature"] == 0.7 and body["seed"] == 42
        assert body["max_tokens"] == 10240 and "top_p" not in body
        assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
        assert llm.headers[0]["Authorization"] == f"Bearer {SECRET}"
        # a rerun asks nothing; a crash that lost two answers and tore the last line asks for those two only
        again, stats = generate.generate(PROMPTS, settings(), cache)
        assert again == answers and stats["requested"] == 0 and len(llm.requests) == 6
        lines = cache.read_text().splitlines()
        cache.write_text("\n".join(lines[:4]) + "\n" + lines[4][:20])
        again, stats = generate.generate(PROMPTS, settings(), cache)
        assert again == answers and (stats["requested"], stats["cached"]) == (2, 4) and len(llm.requests) == 8
        # other sampling parameters are other requests
        _, stats = generate.generate(PROMPTS, settings(temperature=0.0, top_p=0.8), cache)
        assert stats["requested"] == 6 and llm.requests[-1]["top_p"] == 0.8
        assert SECRET not in cache.read_text() and llm.url not in cache.read_text()


def test_retries_then_succeeds(tmp_path, monkeypatch):
    with FakeLLM() as llm:
        monkeypatch.setenv("T_LLM_URL", llm.url)
        monkeypatch.setenv("T_LLM_KEY", SECRET)
        llm.fail_first = 2
        answers, stats = generate.generate({"q": "x"}, settings(retries=2, concurrency=1), tmp_path / "c.jsonl")
        assert answers == {"q": FakeLLM.answer_for("x")} and len(llm.requests) == 3


def stage_sm(tmp_path, llm_settings, method="hyde"):
    write_jsonl(tmp_path / "queries.jsonl", [{"id": q, "text": t} for q, t in
                                            {"q1": "sugar", "q2": "fever", "q3": "cough"}.items()])
    out = tmp_path / "out"
    spec = {"method": method, "llm": "tiny-llm", "prompt_task": "Biology", **llm_settings}
    return SimpleNamespace(input=SimpleNamespace(queries=str(tmp_path / "queries.jsonl")),
                           output=SimpleNamespace(variant=str(out / "query_with_hydoc.jsonl"),
                                                  info=str(out / "generation.json")),
                           params=SimpleNamespace(spec=spec),
                           wildcards=SimpleNamespace(benchmark="b", task="t", method=method, llm="tiny-llm")), out


@pytest.mark.parametrize("failure", ["missing key", "missing url", "unreachable", "http 500", "malformed",
                                     "not json", "http 401", "trickle", "endless", "too long"])
def test_failures_stop_with_one_message_and_no_output(tmp_path, monkeypatch, caplog, failure):
    monkeypatch.chdir(tmp_path)
    expected = {"missing key": r"environment variable T_LLM_KEY \(API key\) is not set",
                "missing url": r"environment variable T_LLM_URL \(the server's base URL",
                "unreachable": r"cannot connect to the server for query q\d: the connection was refused",
                "http 500": r"failed for query q\d after 2 attempts: HTTP 500",
                "malformed": r"malformed response for query q\d",
                "not json": r"malformed response for query q\d",
                "http 401": r"refused the request for query q\d: HTTP 401",
                "trickle": r"no complete answer for query q\d within deadline_seconds \(1.0 s, retries included\)",
                "endless": r"sent more than \d+ bytes for query q\d, more than max_tokens \(50\) allows",
                "too long": r"an answer of 5000 characters for query q\d, more than max_tokens \(50\) allows"}[failure]
    with FakeLLM() as llm:
        monkeypatch.setenv("T_LLM_URL", llm.url)
        monkeypatch.setenv("T_LLM_KEY", SECRET)
        if failure == "missing key":
            monkeypatch.delenv("T_LLM_KEY")
        if failure == "missing url":
            monkeypatch.delenv("T_LLM_URL")
        if failure == "unreachable":
            import socket

            with socket.socket() as s:  # a port nobody listens on
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            monkeypatch.setenv("T_LLM_URL", f"http://127.0.0.1:{port}/v1")
        llm.mode = {"http 500": "status", "http 401": "status", "malformed": "malformed", "not json": "not-json",
                    "trickle": "trickle", "endless": "huge", "too long": "long"}.get(failure, "ok")
        llm.status = 401 if failure == "http 401" else 500
        llm.interval, llm.long_chars = 0.05, 5000
        sm, out = stage_sm(tmp_path, settings(concurrency=1, deadline_seconds=1.0, max_tokens=50))
        with caplog.at_level(logging.INFO), pytest.raises(InputError, match=expected) as err:
            data_stage.generate_query_variant(sm)
        assert "\n" not in str(err.value) and "Fix:" in str(err.value)
        assert not out.exists() or not any(out.iterdir())  # nothing half-written
        cache = tmp_path / "resources/llm_cache/b/t/hyde--tiny-llm.jsonl"
        assert not cache.exists()  # the first request failed: nothing in the cache either
        text = caplog.text + str(err.value)
        assert SECRET not in text and llm.url not in text
        if failure in ("http 401", "malformed", "not json", "too long", "unreachable"):
            assert len(llm.requests) <= 1  # not retried


def test_stage_writes_the_file_and_the_info_without_secrets(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    with FakeLLM() as llm:
        monkeypatch.setenv("T_LLM_URL", llm.url)
        monkeypatch.setenv("T_LLM_KEY", SECRET)
        sm, out = stage_sm(tmp_path, settings())
        with caplog.at_level(logging.DEBUG):
            data_stage.generate_query_variant(sm)
        rows = [json.loads(x) for x in (out / "query_with_hydoc.jsonl").read_text().splitlines()]
        prompt = generate.prompt_template("hyde", "Biology").replace("{TEXT}", "sugar")
        assert rows[0] == {"id": "q1", "text": "sugar", "hy_doc": FakeLLM.answer_for(prompt)}
        info = json.loads((out / "generation.json").read_text())
        assert info["requested"] == 3 and info["model"] == "tiny" and info["completion_tokens"] == 6
        cache = tmp_path / "resources/llm_cache/b/t/hyde--tiny-llm.jsonl"
        assert len(cache.read_text().splitlines()) == 3
        for text in (caplog.text, (out / "generation.json").read_text(), cache.read_text()):
            assert SECRET not in text and llm.url not in text and "127.0.0.1" not in text


def test_vllm_option_starts_the_server_inside_the_job(tmp_path, monkeypatch):
    """llms.<llm>.generate.vllm: the job starts the server command on 127.0.0.1 with a fresh key, asks it, and
    stops it; the environment is restored (here a stand-in for `vllm serve` answers)."""
    import socket

    monkeypatch.chdir(tmp_path)
    vllm = fake_vllm(monkeypatch)
    sm, out = stage_sm(tmp_path, {**settings(), "vllm": vllm})
    log = tmp_path / "server.log"
    run_with_stderr(monkeypatch, data_stage.generate_query_variant, sm, log)
    rows = [json.loads(x) for x in (out / "query_with_hydoc.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2", "q3"] and all(r["hy_doc"].startswith("hypothetical") for r in rows)
    assert "fake vllm serving tiny" in log.read_text()
    import os

    assert "T_LLM_URL" not in os.environ and "T_LLM_KEY" not in os.environ
    with socket.socket() as s:  # the server is gone
        assert s.connect_ex(("127.0.0.1", vllm["port"])) != 0


def fake_vllm(monkeypatch) -> dict:
    """llms.<llm>.generate.vllm starting tests/llm_fake_server.py (a stand-in for `vllm serve`) on a free port;
    the client's variables unset (the job sets them)."""
    import socket
    import sys

    from conftest import REPO

    monkeypatch.delenv("T_LLM_URL", raising=False)
    monkeypatch.delenv("T_LLM_KEY", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {"enabled": True, "command": [sys.executable, str(REPO / "tests" / "llm_fake_server.py")],
            "port": port, "startup_seconds": 60, "args": [], "gpus": 1}


def run_with_stderr(monkeypatch, job, sm, path) -> None:
    """A stage with sys.stderr sent to ``path`` (as smk.run sends it to the job's log); the monkeypatches undone."""
    import sys

    with open(path, "w") as handle:
        monkeypatch.setattr(sys, "stderr", handle)
        job(sm)
    monkeypatch.undo()


def test_workflow_wires_generated_expansions_and_checks_the_config(tmp_path):
    from r2med_eval.errors import ConfigError
    from r2med_eval.workflow.config import validate
    from r2med_eval.workflow.inputs import Inputs
    from r2med_eval.workflow.params import Params
    from r2med_eval.workflow.registry import Registry

    raw = {"benchmarks": {"demo": {"layout": "r2med", "tasks": {"demo": {"path": "data/demo"}}}},
           "models": {"bm25": {"type": "bm25_lucene"}},
           "llms": {"mine": {"generate": {"model": "m", "examples": "ex.json"}}},
           "query_variants": [{"benchmark": "demo", "method": m, "llm": "mine", "models": ["bm25"],
                               "prompt_task": "PMC-Clinical"} for m in ("hyde", "query2doc", "lamer")]}
    class Wildcards(dict):  # Snakemake's wildcards: attributes and a mapping
        __getattr__ = dict.__getitem__

    reg = Registry(validate(raw))
    w = Wildcards(benchmark="demo", task="demo", method="lamer", llm="mine")
    assert Inputs(reg).prepare_query_variant(w)["variant"] == \
        "results/generated/demo/demo/lamer/mine/query_with_hydoc.jsonl"
    assert Inputs(reg).generate_query_variant(w) == {
        "queries": "results/data/demo/demo/queries.jsonl", "corpus": "results/data/demo/demo/corpus.jsonl",
        "run": "results/runs/demo/demo/bm25.trec"}
    spec = Params(reg).generate_query_variant(w)
    assert spec["prompt_task"] == "PMC-Clinical" and spec["model"] == "m" and spec["lamer_depth"] == 10
    assert spec["base_url_env"] == "OPENAI_BASE_URL" and "examples" not in spec
    assert reg.paper_key("bm25+hyde-mine")["key"] is None  # generated here: not R2MED's row
    assert len(Inputs(reg).provenance()["generation"]) == 3
    from r2med_eval.workflow.resources import Resources

    assert Resources(reg).generate_gpu(w) == 0
    gpu = {**raw, "llms": {"mine": {"generate": {"model": "m", "examples": "x", "vllm": {"enabled": True, "gpus": 2}}}}}
    assert Resources(Registry(validate(gpu))).generate_gpu(w) == 2
    with pytest.raises(ConfigError, match="lamer_retriever names 'nope'"):
        validate({**raw, "llms": {"mine": {"generate": {"model": "m", "examples": "x", "lamer_retriever": "nope"}}}})
    with pytest.raises(ConfigError, match="llms.mine.generate.examples is not set"):
        validate({**raw, "llms": {"mine": {"generate": {"model": "m"}}}})


# ------------------------------------------------------------------ a MIMIC-derived benchmark (issue 23)

NOTE_WORD = "Zyxwquartzplanted"  # stands for note text: it must stay in owner-only files under resources/


def private_sm(tmp_path, llm_settings, config=None):
    """generate_private_query_variant's job: LameR over a corpus whose every chunk holds NOTE_WORD."""
    from r2med_eval.workflow import paths

    write_jsonl(tmp_path / "queries.jsonl", [{"id": q, "text": t} for q, t in {"q1": "sepsis", "q2": "stroke"}.items()])
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"c{i}", "title": "", "text": f"chunk {i} {NOTE_WORD} sepsis"}
                                            for i in range(4)])
    from r2med_eval.scoring import identity, runs

    runs.write_run({q: {f"c{i}": 5.0 - i for i in range(4)} for q in ("q1", "q2")}, tmp_path / "bm25.trec", "bm25",
                   identity=identity.make("bm25", "b", "t", identity.fingerprint([f"c{i}" for i in range(4)])))
    w = {"benchmark": "b", "task": "t", "method": "lamer", "llm": "tiny-llm"}
    spec = {"method": "lamer", "llm": "tiny-llm", "prompt_task": "PMC-Treatment", **llm_settings}
    sm = SimpleNamespace(input=SimpleNamespace(queries=str(tmp_path / "queries.jsonl"),
                                               corpus=str(tmp_path / "corpus.jsonl"), run=str(tmp_path / "bm25.trec")),
                         output=SimpleNamespace(variant=paths.fill(paths.PRIVATE_GENERATED, **w),
                                                info=paths.fill(paths.GENERATED_INFO, **w)),
                         params=SimpleNamespace(spec=spec), wildcards=SimpleNamespace(**w), config=config or {})
    return sm, w


@pytest.fixture
def umask_022():
    import os

    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path):
    import os
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


def test_private_generation_stays_owner_only_under_resources(tmp_path, monkeypatch, caplog, umask_022):
    """LameR on a MIMIC-derived benchmark against a loopback server that echoes its prompt: the expansion file, the
    cache and the variant file are 0600 in 0700 folders under resources/cliniq/<benchmark>/<task>/; the info file
    and the log hold ids and numbers; copies an earlier version left readable are retired (the old cache reused)."""
    from r2med_eval.workflow import paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "resources/cliniq/b/t").mkdir(parents=True)
    with FakeLLM() as llm:
        llm.mode = "echo"
        monkeypatch.setenv("T_LLM_URL", llm.url)
        monkeypatch.setenv("T_LLM_KEY", SECRET)
        sm, w = private_sm(tmp_path, settings(lamer_depth=3))
        # what an earlier version left: the expansion file in results/ and the cache, both 0644
        old_cache = tmp_path / paths.fill(paths.GENERATE_CACHE, **w)
        generate.generate({"q1": "old"}, settings(), old_cache)
        stale = tmp_path / paths.fill(paths.GENERATED, **w)
        stale.parent.mkdir(parents=True)
        stale.write_text(NOTE_WORD)
        with caplog.at_level(logging.DEBUG):
            data_stage.generate_private_query_variant(sm)
        assert any(NOTE_WORD in m["content"] for r in llm.requests for m in r["messages"])
    variant = tmp_path / sm.output.variant
    rows = [json.loads(x) for x in variant.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2"] and NOTE_WORD in rows[0]["hy_doc"]
    cache = tmp_path / paths.fill(paths.PRIVATE_GENERATE_CACHE, **w)
    assert "old" in cache.read_text() and not old_cache.exists() and not stale.exists()  # moved, removed
    for path in (variant, cache):
        assert _mode(path) == 0o600 and NOTE_WORD in path.read_text()
        folder = path.parent
        while folder != tmp_path / "resources/cliniq/b":
            assert _mode(folder) == 0o700, folder
            folder = folder.parent
    info = (tmp_path / sm.output.info).read_text()
    assert _mode(tmp_path / sm.output.info) == 0o644 and json.loads(info)["requested"] == 2
    assert NOTE_WORD not in info and NOTE_WORD not in caplog.text
    assert "removed results/generated/b/t/lamer/tiny-llm/query_with_hydoc.jsonl" in caplog.text
    # the variant file: owner-only under resources/, a copy an earlier version left in results/ removed
    old_variant = tmp_path / paths.fill(paths.VARIANT, **w)
    old_variant.parent.mkdir(parents=True)
    old_variant.write_text(NOTE_WORD)
    out = tmp_path / paths.fill(paths.PRIVATE_VARIANT, **w)
    data_stage.prepare_private_query_variant(SimpleNamespace(
        input=SimpleNamespace(queries=str(tmp_path / "queries.jsonl"), variant=str(variant)), output=[str(out)],
        wildcards=SimpleNamespace(**w), params=SimpleNamespace(spec={})))
    assert (_mode(out), _mode(out.parent)) == (0o600, 0o700) and out.read_text() == variant.read_text()
    assert not old_variant.exists()


def test_private_lamer_goes_only_to_loopback_or_declared_servers(tmp_path, monkeypatch, no_network):
    """http://llm.example.invalid/v1: refused before any lookup or connection unless phi_servers (read from the
    workflow's configuration) declares it; declared, the job goes on to connect (and stops there: no traffic)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("T_LLM_URL", "http://llm.example.invalid/v1")
    monkeypatch.setenv("T_LLM_KEY", SECRET)
    sm, _ = private_sm(tmp_path, settings())
    with pytest.raises(InputError) as err:
        data_stage.generate_private_query_variant(sm)
    assert str(err.value).startswith("the lamer prompts of benchmark b quote MIMIC-III notes, and the LLM server that "
                                     "T_LLM_URL names is neither a loopback address")
    assert "phi_servers" in str(err.value) and "PhysioNet" in str(err.value) and no_network == []
    sm, _ = private_sm(tmp_path, settings(), config={"phi_servers": ["llm.example.invalid"]})
    with pytest.raises(InputError, match="the connection was refused"):
        data_stage.generate_private_query_variant(sm)
    assert no_network and set(no_network) == {("connect", ("llm.example.invalid", 80))}  # no lookup: refused here
    assert not (tmp_path / sm.output.variant).exists() and not (tmp_path / sm.output.info).exists()


def test_private_hyde_is_not_under_the_policy(tmp_path, monkeypatch, no_network):
    """HyDE's prompts hold the (public) queries only: no note text goes out, so the policy does not apply; its
    files still stay owner-only under resources/ (the connection here is refused by the test)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("T_LLM_URL", "http://llm.example.invalid/v1")
    monkeypatch.setenv("T_LLM_KEY", SECRET)
    sm, _ = private_sm(tmp_path, settings())
    sm.params.spec["method"] = sm.wildcards.method = "hyde"
    with pytest.raises(InputError, match="the connection was refused"):
        data_stage.generate_private_query_variant(sm)


def test_private_vllm_output_goes_to_an_owner_only_file(tmp_path, monkeypatch, umask_022):
    """A server started in the job may log prompts: on a MIMIC-derived benchmark its output goes to
    resources/logs/<rule>/<key>.server.log (0600), which the job's log names, not to the job's log."""
    monkeypatch.chdir(tmp_path)
    sm, _ = private_sm(tmp_path, {**settings(), "vllm": fake_vllm(monkeypatch)})
    job_log = tmp_path / "job.log"
    run_with_stderr(monkeypatch, data_stage.generate_private_query_variant, sm, job_log)
    server_log = tmp_path / "resources/logs/generate_private_query_variant/b/t/lamer--tiny-llm.server.log"
    assert "fake vllm serving tiny" in server_log.read_text() and "fake vllm" not in job_log.read_text()
    assert (_mode(server_log), _mode(server_log.parent)) == (0o600, 0o700)

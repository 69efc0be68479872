"""Issue 35: the address the server policy checks is the address the client connects to, and the server a job
starts is the one it talks to.

* One canonical host (``canonical_host``): ``localhost.`` is ``localhost`` and is reached at 127.0.0.1 with no
  name lookup (checked in-process and, end to end, under strace: nothing goes to port 53); what has no canonical
  spelling, port 0 and control characters are refused at the check; no other exception than ``LLMError`` leaves
  the client for any URL.
* The started vLLM server: a taken port is refused before anything starts (the process holding it gets no
  request), a server that answers without the job's key or does not list the model is never asked, a child that
  dies is reported with its status and its log, and ``vllm.args`` may not set what the job owns.
* Edges: the served model's name recorded and warned about once, a body cut short retried as a broken connection,
  bounded retry counts."""
import ipaddress
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys

import pytest
from conftest import REPO, demo_config, snakemake, workflow_dir
from llm_fake_server import FakeLLM

from r2med_eval.errors import ConfigError, LLMError
from r2med_eval.llm.client import Client
from r2med_eval.llm.policy import ServerPolicy, canonical_host
from r2med_eval.llm.server import serving
from r2med_eval.workflow.config import validate, with_defaults

STAND_IN = [sys.executable, str(REPO / "tests" / "llm_fake_server.py")]  # `vllm serve`'s stand-in
POLICY = ServerPolicy("the judge prompts of benchmark b")


def settings(**over):
    return with_defaults("llm", {"generate": {"model": "tiny", "base_url_env": "T_LLM_URL", "api_key_env": "T_LLM_KEY",
                                              "retries": 2, "backoff_seconds": 0.0, "timeout_seconds": 10,
                                              **over}})["generate"]


def ask(client, prompts):
    return client.ask({q: client.request([{"role": "user", "content": p}]) for q, p in prompts.items()})


@pytest.fixture
def names_looked_up(monkeypatch):
    """Every name lookup of a host that is not an IP literal is recorded and fails (an IP literal is parsed by the C
    library without asking any resolver)."""
    real = socket.getaddrinfo
    names = []

    def lookup(host, *args, **kwargs):
        try:
            ipaddress.ip_address(host if isinstance(host, str) else host.decode())
        except ValueError:
            names.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "no lookups in this test") from None
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return names


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ one address, checked and used

@pytest.mark.parametrize("host,canonical", [
    ("localhost.", "localhost"), ("LocalHost", "localhost"), ("[::1]", "::1"), ("127.0.0.1", "127.0.0.1"),
    ("::FFFF:127.0.0.1", "::ffff:7f00:1"), ("llm.mylab.internal.", "llm.mylab.internal"),
    ("xn--bcher-kva.de", "xn--bcher-kva.de"), ("a_b.example", "a_b.example")])
def test_canonical_host(host, canonical, no_network):
    assert canonical_host(host) == canonical
    assert not no_network


@pytest.mark.parametrize("host", ["localhost..", "a..b", ".localhost", "", ".", "127.1", "2130706433", "0x7f000001",
                                  "0x7f.1", "017700000001", "fe80::1%eth0", "bücher.de", "-a.example", "a" * 64 + ".x"])
def test_a_host_without_a_canonical_spelling_is_refused(host, no_network):
    with pytest.raises(ValueError):
        canonical_host(host)
    assert not no_network


@pytest.mark.parametrize("url,problem", [
    ("http://localhost../v1", "has no canonical spelling"),
    ("http://127.1:8000/v1", "has no canonical spelling"),
    ("http://0x7f000001/v1", "has no canonical spelling"),
    ("http://127.0.0.1:0/v1", "names port 0"),
    ("http://localhost:0/v1", "names port 0"),
    ("http://127.0.0.1:8000/v1\r\nX-Injected: 1", "not printable ASCII"),
    ("http://127.0.0.1:80\n00/v1", "not printable ASCII"),
    ("http://127.0.0.1:8000/v\x7f1", "not printable ASCII"),
    ("http://127.0.0.1:8000/v\t1", "not printable ASCII"),
    ("http://127.0.0.1:8000/v 1", "not printable ASCII"),
    ("http://ｌｏｃａｌｈｏｓｔ:8000/v1", "not printable ASCII"),
    ("http://127.0.0.1:99999/v1", "does not hold an http(s) URL"),
])
def test_the_check_refuses_non_canonical_urls_before_anything_is_connected(url, problem, tmp_path, monkeypatch,
                                                                            no_network):
    """At the policy's check and, without a policy, at the client: one LLMError, no lookup, no connection, no
    cache file."""
    with pytest.raises(LLMError, match=re.escape(problem)) as err:
        POLICY.check(url, "T_LLM_URL")
    assert "T_LLM_URL" in str(err.value) and url.strip() not in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv("T_LLM_URL", url)
    monkeypatch.setenv("T_LLM_KEY", "k")
    with pytest.raises(LLMError, match=re.escape(problem)):
        ask(Client(settings(), tmp_path / "c" / "cache.jsonl"), {"q": "x"})
    assert not no_network and not (tmp_path / "c").exists()


def test_a_trailing_dot_localhost_reaches_the_loopback_server_without_a_lookup(tmp_path, monkeypatch,
                                                                                names_looked_up):
    with FakeLLM() as server:
        port = server.url.split(":")[2].split("/")[0]
        monkeypatch.setenv("T_LLM_URL", f"http://localhost.:{port}/v1")
        monkeypatch.setenv("T_LLM_KEY", "k")
        answers, _ = ask(Client(settings(), tmp_path / "c.jsonl", private=True, policy=POLICY), {"q": "note"})
        assert answers["q"].content == FakeLLM.answer_for("note") and len(server.requests) == 1
        assert server.headers[0]["Host"] == f"127.0.0.1:{port}"  # connected to the address itself
    assert names_looked_up == []


def test_no_other_exception_than_llmerror_leaves_the_client_for_any_url(tmp_path, monkeypatch, no_network):
    """Seeded random URLs built from the parts that break parsers (brackets, percent signs, dots, at signs,
    colons, control and non-ASCII characters), and a fixed list of known breakers."""
    rng = random.Random(35)
    pieces = ["http://", "https://", "ftp://", "localhost", "127.0.0.1", "[", "]", "::1", "%", "%25", ".", "..", "@",
              ":", ":0", ":65536", ":-1", "/v1", "#", "?", "\r", "\n", "\t", "\x7f", " ", "é", "ｌ", "\u3002", "xn--",
              "a" * 70, "0x7f", "[::ffff:127.0.0.1]", "user:pass@"]
    urls = ["http://localhost../v1", "http://[::1/v1", "http://[fe80::1%25eth0]/v1", "http://:80/v1", "http://@/v1",
            "http://a@b@c/v1", "http://[]:80/v1", "http:///v1", "http://\u3002/v1", "http://a\u3002b/v1",
            "https://[::1]:99999999999999999999/v1", "http://127.0.0.1:+80/v1"]
    urls += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))) for _ in range(400)]
    monkeypatch.setenv("T_LLM_KEY", "k")
    for i, url in enumerate(urls):
        monkeypatch.setenv("T_LLM_URL", url)
        for policy in (None, POLICY):
            try:
                ask(Client(settings(retries=0), tmp_path / f"{i}.jsonl", policy=policy), {"q": "x"})
            except LLMError:
                pass
    assert all(kind == "connect" for kind, _ in no_network)  # a name may be resolved only where no policy applies
    assert not list(tmp_path.glob("*.jsonl"))


@pytest.mark.skipif(shutil.which("strace") is None and os.environ.get("CI") != "true",
                    reason="strace is not installed (Debian's strace; .ci/run installs it in CI)")
def test_the_cliniq_judge_at_localhost_dot_sends_no_dns_query_under_strace(tmp_path):
    """The judging stage of CliniQ's completion in its own process, traced with strace -f: with the base URL
    http://localhost.:PORT/v1 and the fake judge on 127.0.0.1:PORT, the judge is answered by the loopback server
    and no connect or sendto of the process goes to port 53."""
    with FakeLLM() as server:
        server.mode = "judge"
        port = server.url.split(":")[2].split("/")[0]
        driver = tmp_path / "judge.py"
        driver.write_text(f"""import sys
sys.path[:0] = [{str(REPO / 'tests')!r}, {str(REPO / 'src')!r}]
from pathlib import Path
import completion_fixture as fx
fx.prepare(Path("."))
w = fx.workflow(queries=2, sample_per_query=3, pool_depth=1, malformed_retries=0)
fx.run_stage(w, "cliniq_completion_sample")
fx.run_stage(w, "cliniq_completion_judge")
""")
        trace = tmp_path / "trace.txt"
        env = {**os.environ, "R2MED_TEST_JUDGE_URL": f"http://localhost.:{port}/v1", "R2MED_TEST_JUDGE_KEY": "k"}
        proc = subprocess.run(["strace", "-f", "-e", "trace=connect,sendto", "-o", str(trace), sys.executable,
                               str(driver)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        judged = len(server.requests)
    text = trace.read_text()
    assert "htons(53)" not in text, [line for line in text.splitlines() if "htons(53)" in line][:5]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert judged > 0 and f"sin_port=htons({port})" in text  # the trace saw the job's connections
    info = json.loads((tmp_path / "results/cliniq/cliniq-demo/completion/judging.json").read_text())
    assert info["judged"] == judged and info["requested"] == judged


# ------------------------------------------------------------------ the started server, and only it

def started(tmp_path, port, *extra, **over):
    """llms.<llm>.generate settings whose vLLM is the stand-in on ``port``, with ``extra`` arguments."""
    return settings(vllm={"enabled": True, "command": STAND_IN, "port": port, "startup_seconds": 30,
                          "args": list(extra)}, **over)


def test_a_taken_port_is_refused_and_its_holder_gets_no_request(tmp_path, monkeypatch):
    with FakeLLM() as other:
        port = int(other.url.split(":")[2].split("/")[0])
        with pytest.raises(LLMError) as err:
            with serving(started(tmp_path, port), tmp_path / "server.log"):
                raise AssertionError("never reached")
        assert str(err.value) == (
            f"port {port} on 127.0.0.1 is already taken by another process, so the LLM server this job would start "
            f"cannot listen there; nothing was sent to the process that holds it. Fix: set "
            f"llms.<llm>.generate.vllm.port to a free port (not {port}).")
        assert other.requests == [] and other.gets == []
    assert "T_LLM_URL" not in os.environ


def test_a_borrowed_port_stops_the_snakemake_job_with_one_line(tmp_path):
    """Through Snakemake: another process answers on the configured port and the started server never comes up
    (it exits at once): that process receives no request and the job stops with one `r2med-eval:` line."""
    with FakeLLM() as other:
        port = int(other.url.split(":")[2].split("/")[0])
        work = workflow_dir(tmp_path, demo_config() + f"""llms:
  tiny:
    reasoning: none
    generate:
      model: tiny
      base_url_env: T_UNUSED_URL
      api_key_env: T_UNUSED_KEY
      vllm: {{enabled: true, port: {port}, startup_seconds: 20, command: {json.dumps(STAND_IN)}, """
                                                      f"""args: [--fake-exit, '1']}}
query_variants:
  - {{benchmark: demo, method: hyde, llm: tiny, models: [bm25], prompt_task: Biology}}
""")
        target = "results/generated/demo/demo/hyde/tiny/query_with_hydoc.jsonl"
        proc = snakemake(work, "--cores", "1", target, check=False)
        assert other.requests == [] and other.gets == []
    assert proc.returncode != 0
    lines = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
    assert lines == [f"r2med-eval: port {port} on 127.0.0.1 is already taken by another process, so the LLM server "
                     "this job would start cannot listen there; nothing was sent to the process that holds it. Fix: "
                     f"set llms.<llm>.generate.vllm.port to a free port (not {port})."], proc.stdout[-3000:]
    assert not (work / target).exists() and not (work / "resources/llm_cache").exists()


@pytest.mark.parametrize("misbehaviour,expected", [
    ("--fake-ignore-key", r"^the server on 127\.0\.0\.1:\d+ answers without the job's key: it is not the server this "
                          r"job started \(or that server ignores VLLM_API_KEY\); nothing was sent to it\."),
    ("--fake-list-nothing", r"^the server on 127\.0\.0\.1:\d+ does not list the model 'tiny' on /v1/models \(it lists "
                            r"0 others\); nothing was sent to it\."),
])
def test_a_started_server_that_fails_its_checks_is_never_asked(tmp_path, misbehaviour, expected):
    port = free_port()
    sent = []
    with pytest.raises(LLMError, match=expected):
        with serving(started(tmp_path, port, misbehaviour), tmp_path / "server.log"):
            sent.append("asked")
    assert sent == [] and "T_LLM_URL" not in os.environ
    with socket.socket() as s:  # the child was stopped
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_a_started_server_that_dies_is_named_with_its_status_and_log(tmp_path):
    log = tmp_path / "logs" / "server.log"
    with pytest.raises(LLMError) as err:
        with serving(started(tmp_path, free_port(), "--fake-exit", "3"), log):
            raise AssertionError("never reached")
    assert str(err.value).startswith(f"the LLM server ({sys.executable}) exited with status 3 before it was ready; "
                                     f"its output is in {log}.")
    assert "fake vllm failing to start" in log.read_text() and (log.stat().st_mode & 0o777) == 0o600


def test_the_started_server_answers_under_a_fresh_key(tmp_path, monkeypatch):
    monkeypatch.setenv("T_LLM_KEY", "a-key-the-job-must-not-reuse")
    with serving(started(tmp_path, free_port()), tmp_path / "server.log"):
        key = os.environ["T_LLM_KEY"]
        answers, usage = ask(Client(settings(), tmp_path / "c.jsonl"), {"q": "x"})
    assert key != "a-key-the-job-must-not-reuse" and len(key) >= 32
    assert os.environ["T_LLM_KEY"] == "a-key-the-job-must-not-reuse" and "T_LLM_URL" not in os.environ
    assert answers["q"].content == FakeLLM.answer_for("x") and usage.served_models == {"tiny": 1}


@pytest.mark.parametrize("args", [["--host", "0.0.0.0"], ["--host=0.0.0.0"], ["--port", "9"], ["--api-key", "x"],
                                  ["--dtype", "bfloat16", "--served-model-name", "other"],
                                  # as vLLM's parser also reads them: argparse's prefixes, `_` for `-`, `=` forms
                                  ["--hos", "0.0.0.0"], ["--api_key", "X"], ["--served_model_name", "X"], ["--port=1"],
                                  ["--api-k=x"], ["--served-model", "x"], ["--model", "/other"], ["--config", "c.yaml"],
                                  ["--po", "1"]])
def test_vllm_args_may_not_set_what_the_job_owns(tmp_path, args):
    raw = {"benchmarks": {"demo": {"layout": "r2med", "tasks": {"demo": {"path": str(REPO / "data/demo")}}}},
           "models": {"bm25": {"type": "bm25_lucene"}},
           "llms": {"big": {"generate": {"model": "m", "vllm": {"enabled": True, "args": args}}}}}
    with pytest.raises(ConfigError) as err:
        validate(raw)
    assert f"llms.big.generate.vllm.args sets '{args[-2] if '=' not in args[0] else args[0]}'" in str(err.value)
    assert "Fix: remove them; choose the port with llms.big.generate.vllm.port." in str(err.value)
    with pytest.raises(LLMError, match="which the job sets itself"):  # and the job itself refuses them
        with serving(started(tmp_path, free_port(), *args)):
            raise AssertionError("never reached")


def test_vllm_args_of_other_options_pass():
    from r2med_eval.llm.server import job_owned_args

    fine = ["--dtype", "bfloat16", "--max-model-len=16384", "--max_num_seqs", "8", "--seed", "42", "--config-format",
            "hf", "--model-impl", "vllm", "--tensor-parallel-size", "2", "-tp", "2", "0.0.0.0"]
    assert job_owned_args(fine) == []
    assert job_owned_args(["--hos", "x", "--api_key=1", "--served_model_name", "m"]) == ["--hos", "--api_key=1",
                                                                                       "--served_model_name"]


# ------------------------------------------------------------------ edges

@pytest.fixture
def server(monkeypatch):
    with FakeLLM() as fake:
        monkeypatch.setenv("T_LLM_URL", fake.url)
        monkeypatch.setenv("T_LLM_KEY", "k")
        yield fake


def test_another_served_model_is_recorded_and_warned_about_once(server, tmp_path, caplog):
    server.served_model = "tiny-2025-01-01"
    client = Client(settings(), tmp_path / "c.jsonl")
    _, first = ask(client, {"a": "x", "b": "y"})
    _, second = ask(client, {"c": "z"})
    assert first.served_models == {"tiny-2025-01-01": 2} and (first + second).served_models == {"tiny-2025-01-01": 3}
    warnings = [r.getMessage() for r in caplog.records if "answered as model" in r.getMessage()]
    assert warnings == ["the LLM server answered as model 'tiny-2025-01-01' where 'tiny' was asked "
                        "(llms.<llm>.generate.model): the answers are recorded as they came; check that the server "
                        "serves the model you meant"]
    entries = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert {e["served_model"] for e in entries} == {"tiny-2025-01-01"}
    _, replay = ask(Client(settings(), tmp_path / "c.jsonl"), {"a": "x"})  # from the cache: the same record
    assert replay.cached == 1 and replay.served_models == {"tiny-2025-01-01": 1}


def test_a_body_cut_short_is_a_broken_connection_retried_within_the_deadline(server, tmp_path, caplog):
    server.short_first = 2
    answers, usage = ask(Client(settings(retries=2), tmp_path / "c.jsonl"), {"q": "x"})
    assert answers["q"].content == FakeLLM.answer_for("x") and len(server.requests) == 3 and usage.requested == 1
    assert caplog.text.count("the connection broke before the answer was complete (IncompleteRead)") == 2
    server.short_first = 5
    with pytest.raises(LLMError) as err:
        ask(Client(settings(retries=1), tmp_path / "d.jsonl"), {"q": "x"})
    assert str(err.value) == ("the LLM server failed for request q after 2 attempts: the connection broke before the "
                              "answer was complete (IncompleteRead). Fix: check the server's log; rerun to retry "
                              "(answers so far are cached).")
    assert not (tmp_path / "d.jsonl").exists()  # nothing half-written


@pytest.mark.parametrize("key,value", [("malformed_retries", 11), ("malformed_retries", 10 ** 9)])
def test_retry_counts_are_bounded(key, value):
    raw = {"benchmarks": {"demo": {"layout": "r2med", "tasks": {"demo": {"path": str(REPO / "data/demo")}}}},
           "models": {"bm25": {"type": "bm25_lucene"}}, "llms": {"j": {"generate": {"model": "m"}}},
           "cliniq_completion": {"benchmark": "demo", "llm": "j", key: value}}
    with pytest.raises(ConfigError, match=f"cliniq_completion.{key}: {value} is more than 10"):
        validate(raw)


@pytest.mark.parametrize("where,bound", [("retries", 20), ("reasks", 10)])
def test_the_other_retry_counts_are_bounded(where, bound):
    raw = {"benchmarks": {"demo": {"layout": "r2med", "tasks": {"demo": {"path": str(REPO / "data/demo")}}}},
           "models": {"bm25": {"type": "bm25_lucene"}}, "llms": {"j": {"generate": {"model": "m"}}}}
    if where == "retries":
        raw["llms"]["j"]["generate"]["retries"] = bound + 1
        match = f"llms.j.generate.retries: {bound + 1} is more than {bound}"
    else:
        raw["models"]["p"] = {"type": "llm_pointwise", "llm": "j", "reasks": bound + 1}
        match = f"models.p.reasks: {bound + 1} is more than {bound}"
    with pytest.raises(ConfigError, match=re.escape(match)):
        validate(raw)

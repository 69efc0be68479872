"""The LLM client (r2med_eval.llm) against a local fake server: the server policy (loopback or declared hosts,
checked before any connection), the bounds (a total deadline against a trickling server, the bytes read of an
endless answer, an answer longer than max_tokens allows), which failures are retried, the cache (keys with log
probabilities and re-asks, owner-only on a MIMIC-derived benchmark) and the accounting."""
import hashlib
import json
import os
import socket
import stat
import time

import pytest
from llm_fake_server import FakeLLM

from r2med_eval.errors import LLMError
from r2med_eval.llm.client import Client
from r2med_eval.llm.policy import ServerPolicy, is_loopback
from r2med_eval.llm.requests import max_answer_chars, max_response_bytes
from r2med_eval.workflow.config import with_defaults

SECRET = "sk-test-never-written-0123"
INVALID = "http://llm.example.invalid/v1"


def settings(**over):
    return with_defaults("llm", {"generate": {"model": "tiny", "base_url_env": "T_LLM_URL", "api_key_env": "T_LLM_KEY",
                                              "retries": 1, "backoff_seconds": 0.0, "timeout_seconds": 10,
                                              "concurrency": 2, "price_per_million_input": 2.0,
                                              "price_per_million_output": 10.0, **over}})["generate"]


def ask(client, prompts, **request):
    return client.ask({q: client.request([{"role": "user", "content": p}], **request) for q, p in prompts.items()})


@pytest.fixture
def server(monkeypatch):
    with FakeLLM() as fake:
        monkeypatch.setenv("T_LLM_URL", fake.url)
        monkeypatch.setenv("T_LLM_KEY", SECRET)
        yield fake


# ------------------------------------------------------------------ the server policy

@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
    ("localhost", True), ("LocalHost.", True), ("0.0.0.0", False), ("10.0.0.1", False), ("::", False),
    ("128.0.0.1", False), ("127.0.0.1.nip.io", False), ("localhost.example.org", False), ("myalias", False),
    ("llm.example.invalid", False)])
def test_loopback_is_read_from_the_url_without_resolving(host, loopback, no_network):
    assert is_loopback(host) is loopback
    assert not no_network  # names are never resolved: an /etc/hosts alias of 127.0.0.1 is not loopback here


def test_policy_allows_loopback_and_declared_hosts_only(no_network, caplog):
    policy = ServerPolicy("the lamer prompts of benchmark b", ("LLM.Mylab.Internal.", "10.1.2.3", "[fd00::5]"))
    for url in ("http://127.0.0.1:8000/v1", "http://localhost/v1", "http://[::1]:9/v1",
                "https://llm.mylab.internal/v1", "http://llm.mylab.internal:8000/v1", "http://10.1.2.3/v1",
                "http://[fd00:0::5]/v1"):
        policy.check(url, "URL_VAR")
    assert "plain http" in caplog.text  # a declared host over http is allowed, with a warning
    for url in (INVALID, "http://llm.mylab.internal.evil.org/v1", "http://10.1.2.4/v1", "http://127.0.0.1.nip.io/v1"):
        with pytest.raises(LLMError) as err:
            policy.check(url, "URL_VAR")
        message = str(err.value)
        assert message.startswith("the lamer prompts of benchmark b quote MIMIC-III notes, and the LLM server that "
                                  "URL_VAR names is neither a loopback address")
        assert "PhysioNet's credentialed data use agreement" in message and "Nothing was sent" in message
        assert "add its host name (the host of $URL_VAR) to phi_servers" in message and "docs/cliniq.md" in message
        assert url not in message and "example.invalid" not in message and "\n" not in message
    with pytest.raises(LLMError, match="URL_VAR does not hold an http"):
        policy.check("llm.mylab.internal:8000", "URL_VAR")
    assert not no_network
    assert ServerPolicy.from_config({"phi_servers": ["a.b"]}, "x").phi_servers == ("a.b",)
    assert ServerPolicy.from_config({}, "x").phi_servers == ()


def test_an_undeclared_host_is_refused_before_any_connection(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("T_LLM_URL", INVALID)
    monkeypatch.setenv("T_LLM_KEY", SECRET)
    client = Client(settings(), tmp_path / "c" / "cache.jsonl", private=True,
                        policy=ServerPolicy("the lamer prompts of benchmark b"))
    with pytest.raises(LLMError, match="neither a loopback address .* nor declared in phi_servers"):
        ask(client, {"q": "note text"})
    assert no_network == [] and not (tmp_path / "c").exists()


def test_the_same_host_declared_passes_the_check_and_stops_at_the_connection(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("T_LLM_URL", INVALID)
    monkeypatch.setenv("T_LLM_KEY", SECRET)
    client = Client(settings(retries=3), tmp_path / "cache.jsonl", private=True,
                        policy=ServerPolicy("the lamer prompts of benchmark b", ("llm.example.invalid",)))
    with pytest.raises(LLMError, match="cannot connect to the server for request q: the connection was refused"):
        ask(client, {"q": "note text"})
    assert no_network == [("connect", ("llm.example.invalid", 80))]  # once: a refused connection is not retried


def test_proxies_carry_public_requests_only(server, tmp_path, monkeypatch):
    """A proxy from the environment carries requests without a policy (a hosted API behind a proxy); requests
    under a policy go straight to the host the policy checked, and a loopback host never goes through a proxy."""
    with FakeLLM() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url.rsplit("/v1", 1)[0])
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        policy = ServerPolicy("the lamer prompts of benchmark b")
        ask(Client(settings(), tmp_path / "a.jsonl", policy=policy), {"q": "x"})
        ask(Client(settings(), tmp_path / "b.jsonl"), {"q": "y"})
        assert len(server.requests) == 2 and not proxy.requests
        monkeypatch.setenv("T_LLM_URL", INVALID)
        answers, _ = ask(Client(settings(), tmp_path / "c.jsonl"), {"q": "z"})
        assert len(proxy.requests) == 1 and answers["q"].content == FakeLLM.answer_for("z")
        monkeypatch.setenv("T_LLM_URL", INVALID)
        policy = ServerPolicy("the lamer prompts of benchmark b", ("llm.example.invalid",))
        with monkeypatch.context() as m:
            attempts = []
            m.setattr(socket, "create_connection", lambda a, *x, **k: attempts.append(a) or (_ for _ in ()).throw(
                ConnectionRefusedError(111, "refused")))
            with pytest.raises(LLMError, match="refused"):
                ask(Client(settings(), tmp_path / "d.jsonl", policy=policy), {"q": "w"})
        assert attempts == [("llm.example.invalid", 80)] and len(proxy.requests) == 1


def test_a_redirect_is_not_followed(server, tmp_path):
    with FakeLLM() as other:
        server.mode, server.redirect_to = "redirect", other.url + "/chat/completions"
        with pytest.raises(LLMError, match="refused the request for request q: HTTP 307"):
            ask(Client(settings(), tmp_path / "c.jsonl"), {"q": "x"})
        assert not other.requests


# ------------------------------------------------------------------ bounds and retries

@pytest.mark.parametrize("mode", ["trickle", "trickle-head"])
def test_a_trickling_server_is_cut_off_at_the_deadline(server, tmp_path, mode):
    server.mode, server.interval = mode, 0.05  # a byte every 50 ms: each read is quick, the answer never ends
    start = time.monotonic()
    with pytest.raises(LLMError) as err:
        ask(Client(settings(deadline_seconds=1.0, timeout_seconds=30, retries=3), tmp_path / "c.jsonl"),
            {"q": "x"})
    elapsed = time.monotonic() - start
    assert str(err.value).startswith("the LLM server gave no complete answer for request q within deadline_seconds "
                                     "(1.0 s, retries included).")
    assert 0.9 < elapsed < 5 and server.sent > 5 and len(server.requests) <= 1
    assert not (tmp_path / "c.jsonl").exists()


def test_an_endless_answer_is_refused_without_reading_it_all(server, tmp_path):
    server.mode = "huge"  # 60 MB, no Content-Length
    limit = max_response_bytes(100)
    with pytest.raises(LLMError, match=f"sent more than {limit} bytes for request q, more than max_tokens "
                                           r"\(100\)"):
        ask(Client(settings(max_tokens=100), tmp_path / "c.jsonl"), {"q": "x"})
    time.sleep(0.5)
    assert server.sent < 16_000_000  # the client stopped reading: what was sent is the limit plus socket buffers
    assert not (tmp_path / "c.jsonl").exists()


def test_an_answer_longer_than_max_tokens_allows_is_an_error(server, tmp_path):
    server.mode, server.long_chars = "long", max_answer_chars(10) + 1
    with pytest.raises(LLMError, match=f"an answer of {server.long_chars} characters for request q, more than "
                                           r"max_tokens \(10\) allows"):
        ask(Client(settings(max_tokens=10), tmp_path / "c.jsonl"), {"q": "x"})
    assert len(server.requests) == 1 and not (tmp_path / "c.jsonl").exists()  # not retried, nothing cached
    server.long_chars -= 1  # the limit itself is accepted
    answers, _ = ask(Client(settings(max_tokens=10), tmp_path / "c.jsonl"), {"q": "x"})
    assert len(answers["q"].content) == max_answer_chars(10)


def test_a_refused_connection_fails_at_once(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("T_LLM_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("T_LLM_KEY", SECRET)
    start = time.monotonic()
    with pytest.raises(LLMError, match="the connection was refused .nothing listens at the address in T_LLM_URL"):
        ask(Client(settings(retries=5, backoff_seconds=2.0), tmp_path / "c.jsonl"), {"q": "x"})
    assert time.monotonic() - start < 1.5


def test_timeouts_429_and_5xx_are_retried_other_statuses_are_not(server, tmp_path):
    server.mode, server.interval = "trickle", 2.0  # silent longer than timeout_seconds
    with pytest.raises(LLMError, match="failed for request q after 2 attempts: timed out"):
        ask(Client(settings(timeout_seconds=0.3), tmp_path / "a.jsonl"), {"q": "x"})
    assert len(server.requests) == 2
    server.mode = "ok"
    for status in (429, 503, 408):
        server.requests.clear()
        server.fail_first, server.status = 1, status
        answers, usage = ask(Client(settings(), tmp_path / f"{status}.jsonl"), {"q": "x"})
        assert len(server.requests) == 2 and usage.requested == 1
    for status in (400, 401, 404, 422):
        server.requests.clear()
        server.fail_first, server.status = 1, status
        with pytest.raises(LLMError, match=f"refused the request for request q: HTTP {status}"):
            ask(Client(settings(retries=3), tmp_path / f"{status}.jsonl"), {"q": "x"})
        assert len(server.requests) == 1


# ------------------------------------------------------------------ the cache, log probabilities, re-asks, usage

def test_cache_keys_log_probabilities_and_re_asks(server, tmp_path):
    cache = tmp_path / "cache.jsonl"
    client = Client(settings(temperature=0.0), cache)
    messages = [{"role": "system", "content": "judge"}, {"role": "user", "content": "q?"},
                {"role": "assistant", "content": "maybe"}, {"role": "user", "content": "yes or no?"}]
    plain = client.request(messages)
    # a first attempt without log probabilities keeps the key caches were written under before
    legacy = hashlib.sha256(json.dumps({"model": "tiny", "messages": messages, "sampling": plain.sampling},
                                       sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert plain.key("tiny") == legacy
    requests = {"plain": plain, "lp": client.request(messages, top_logprobs=2, max_tokens=1),
                "lp0": client.request(messages, top_logprobs=0, max_tokens=1),
                "again": client.request(messages, attempt=1)}
    assert len({r.key("tiny") for r in requests.values()}) == 4
    answers, usage = client.ask(requests)
    assert usage.requested == 4 and usage.cached == 0 and server.requests[0]["messages"] == messages
    bodies = {json.dumps(b["messages"]) + str(b.get("top_logprobs")) + str(b.get("logprobs")) + str(b["max_tokens"])
              for b in server.requests}
    assert len(bodies) == 3  # the re-ask sends the same body: its answer is a new cache entry
    assert answers["lp"].top_logprobs(0) == {"yes": -0.25, "no": -1.5}
    assert answers["lp0"].top_logprobs(0) == {"yes": -0.25} and answers["plain"].logprobs is None
    assert any(b.get("logprobs") is True and b.get("top_logprobs") == 2 and b["max_tokens"] == 1
               for b in server.requests)
    assert answers["lp"].finish_reason == "stop" and not answers["lp"].cached
    # a rerun asks nothing and gives the same answers, log probabilities included
    again, usage = Client(settings(temperature=0.0), cache).ask(requests)
    assert usage.requested == 0 and usage.cached == 4 and len(server.requests) == 4
    assert again["lp"].top_logprobs(0) == {"yes": -0.25, "no": -1.5} and again["lp"].cached
    assert {k: a.content for k, a in again.items()} == {k: a.content for k, a in answers.items()}
    # a server that sends no log probabilities: None, for the caller to fall back on
    server.logprobs = False
    answers, _ = client.ask({"x": client.request([{"role": "user", "content": "z"}], top_logprobs=5)})
    assert answers["x"].logprobs is None and answers["x"].top_logprobs(0) is None
    assert SECRET not in cache.read_text() and server.url not in cache.read_text()


def test_usage_counts_and_adds(server, tmp_path):
    client = Client(settings(), tmp_path / "c.jsonl")
    _, first = ask(client, {"a": "one two three", "b": "four"})
    _, second = ask(client, {"a": "one two three", "c": "five six"})
    assert (first.requested, first.cached, first.prompt_tokens, first.completion_tokens) == (2, 0, 4, 4)
    assert (second.requested, second.cached, second.prompt_tokens) == (1, 1, 5)
    total = first + second
    assert total.as_dict() == {"requested": 3, "cached": 1, "prompt_tokens": 9, "completion_tokens": 8,
                               "cost": round((9 * 2.0 + 8 * 10.0) / 1e6, 6), "served_models": {"tiny": 4}}


def test_private_cache_is_owner_only(server, tmp_path):
    old = os.umask(0o022)
    try:
        ask(Client(settings(), tmp_path / "private" / "c.jsonl", private=True), {"q": "x"})
        ask(Client(settings(), tmp_path / "public" / "c.jsonl"), {"q": "x"})
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    assert (mode(tmp_path / "private" / "c.jsonl"), mode(tmp_path / "private")) == (0o600, 0o700)
    assert (mode(tmp_path / "public" / "c.jsonl"), mode(tmp_path / "public")) == (0o644, 0o755)

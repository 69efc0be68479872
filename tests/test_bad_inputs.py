"""One line for each bad input still left (issue 48.5), through ``smk.run`` as a job meets it: MIMIC's code tables
that are not well-formed CSV, a vLLM command that is not there, a server the job started that dies mid-job, a full
disk under the judge's cache. Each ends in one ``r2med-eval:`` line naming the file or the child process and how
it ended, quoting nothing of a note-bearing file, and leaves no output and no temporary behind."""
from __future__ import annotations

import gzip
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import completion_fixture as fx
import pytest
from conftest import REPO
from llm_fake_server import FakeLLM

from r2med_eval import smk
from r2med_eval.errors import InputError
from r2med_eval.stages import score

WORD = "ZQXPLANTEDWORD"  # planted in the inputs: it must reach neither the terminal nor the public log


def job(w, rule: str, **inputs) -> SimpleNamespace:
    """The snakemake object of a completion rule (the CliniQ demo, a MIMIC-derived benchmark), ``inputs`` replacing
    some of the control layer's."""
    wc = SimpleNamespace(benchmark=fx.BENCH)
    log = Path(f"logs/{rule}/{fx.BENCH}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(input=SimpleNamespace(**{**getattr(w.inputs, rule)(wc), **inputs}),
                           output=fx.outputs(rule), params=SimpleNamespace(spec=w.params.of(rule)(wc)),
                           wildcards=wc, log=[str(log)], rule=rule, threads=1,
                           config={"phi_servers": [], "benchmarks": {fx.BENCH: {"layout": "cliniq"}}})


def one_line(sm, capfd, monkeypatch, *words) -> str:
    """Run ``sm``'s stage through smk.run: it fails with exactly one ``r2med-eval:`` line on the terminal holding
    ``words`` and not the planted word; none of its outputs, and no temporary, is left."""
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    with pytest.raises(SystemExit) as stop:
        smk.run(sm, getattr(score, sm.rule))
    assert stop.value.code == 1
    out = capfd.readouterr()
    lines = [x for x in (out.out + out.err).splitlines() if x.strip() and not x.startswith(f"r2med-eval [{sm.rule}")]
    assert len(lines) == 1 and lines[0].startswith("r2med-eval: ") and " Fix: " in lines[0], lines
    assert "Traceback" not in lines[0] and "withheld" not in lines[0], lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert WORD not in out.out + out.err + Path(sm.log[0]).read_text()
    assert not [p for p in vars(sm.output).values() if Path(p).exists()], "an output was left"
    assert not [p for p in Path(".").rglob(".*") if p.is_file() and p.name.endswith(".tmp")], "a temporary was left"
    return lines[0]


@pytest.fixture
def completion(tmp_path, monkeypatch):
    """The CliniQ demo prepared for the completion rules in ``tmp_path`` (the working directory)."""
    monkeypatch.chdir(tmp_path)
    fx.prepare(Path("."))
    return tmp_path


# ------------------------------------------------------------------ MIMIC's code tables


def _bad_table(folder: Path, case: str) -> Path:
    """DIAGNOSES_ICD of the demo with one defect at its data line 5 (line 6 of the file)."""
    lines = (fx.DEMO / "DIAGNOSES_ICD.csv").read_bytes().splitlines(keepends=True)
    assert len(lines) > 8
    row = lines[5].rstrip(b"\r\n").split(b",")
    if case == "stray quotes":  # a quote opened in one code and closed in another: pandas joins the lines between
        row[-1] = b'"' + WORD.encode() + b"4019"
        later = lines[7].rstrip(b"\r\n").split(b",")
        lines[7] = b",".join(later[:-1] + [later[-1].strip(b'"') + b'"']) + b"\n"
    elif case == "quote never closed":
        lines = lines[:6]
        row[-1] = b'"' + WORD.encode()
    elif case == "not UTF-8":
        row[-1] = b'"40\xe9' + WORD.encode() + b'"'
    lines[5] = b",".join(row) + b"\n"
    data = b"".join(lines)
    if case == "truncated gzip":
        path = folder / "DIAGNOSES_ICD.csv.gz"
        packed = gzip.compress(data * 50)
        path.write_bytes(packed[:len(packed) // 2])
        return path
    path = folder / "DIAGNOSES_ICD.csv"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case, words", [
    ("stray quotes", ["line 6", "a quoted field runs from this line to line 8"]),
    ("quote never closed", ["line 6", "a double quote that is never closed"]),
    ("not UTF-8", ["line 6", "not UTF-8 at column"]),
    ("truncated gzip", ["the compressed file ends early after line"]),
])
def test_a_malformed_code_table_is_one_line_naming_file_and_line(completion, capfd, monkeypatch, case, words):
    w = fx.workflow(coded_from="codes", queries=4, sample_per_query=4)
    folder = completion / "mimic"
    folder.mkdir()
    bad = _bad_table(folder, case)
    sm = job(w, "cliniq_completion_sample")
    tables = [bad if Path(t).name.startswith("DIAGNOSES_ICD") else t for t in sm.input.code_tables]
    sm.input.code_tables = [str(t) for t in tables]
    line = one_line(sm, capfd, monkeypatch, str(bad), "cannot read MIMIC-III's DIAGNOSES_ICD table", *words)
    assert "ParserError" not in line and "EOFError" not in line


def test_the_code_table_reader_names_the_line_of_each_defect(tmp_path):
    from r2med_eval.cliniq import codes

    for case, line in (("stray quotes", 6), ("quote never closed", 6), ("not UTF-8", 6)):
        folder = tmp_path / case.replace(" ", "-")
        folder.mkdir()
        with pytest.raises(InputError) as err:
            codes.read_table(_bad_table(folder, case), "DIAGNOSES_ICD")
        assert err.value.line == line and WORD not in str(err.value), (case, str(err.value))
    good = codes.read_table(fx.DEMO / "DIAGNOSES_ICD.csv", "DIAGNOSES_ICD")
    assert len(good) == len((fx.DEMO / "DIAGNOSES_ICD.csv").read_text().splitlines()) - 1


# ------------------------------------------------------------------ the judge's server and its cache


def _judge_ready(w):
    """The sample drawn (the judge's inputs), with the fake judge for a server."""
    fx.run_stage(w, "cliniq_completion_sample")


def _vllm(**extra) -> dict:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {"enabled": True, "command": [sys.executable, str(REPO / "tests" / "llm_fake_server.py")], "port": port,
            "startup_seconds": 60, "args": [], "gpus": 1, **extra}


def test_a_missing_vllm_command_is_one_line_naming_it(completion, capfd, monkeypatch):
    monkeypatch.delenv(fx.URL_ENV, raising=False)
    w = fx.workflow(judge_settings={"vllm": _vllm(command=["/nonexistent/bin/vllm"])}, queries=3,
                    sample_per_query=4)
    _judge_ready(w)
    one_line(job(w, "cliniq_completion_judge"), capfd, monkeypatch, "cannot start the LLM server",
             "'/nonexistent/bin/vllm'", "is not found", "vllm.command")


def test_a_started_server_that_dies_mid_job_is_named_with_its_exit(completion, capfd, monkeypatch):
    """The job set the server's address itself: the message names the child and its exit status, not "nothing
    listens at the address in <variable>. Fix: start the server"."""
    monkeypatch.delenv(fx.URL_ENV, raising=False)
    monkeypatch.delenv(fx.KEY_ENV, raising=False)
    w = fx.workflow(judge_settings={"vllm": _vllm(args=["--fake-die-after", "3"]), "retries": 2,
                                    "backoff_seconds": 0.1}, queries=3, sample_per_query=6)
    _judge_ready(w)
    line = one_line(job(w, "cliniq_completion_judge"), capfd, monkeypatch,
                    f"the LLM server this job started ({sys.executable}) exited with status 3 while the job was "
                    "asking it", "server.log")
    assert "nothing listens" not in line and "start the server" not in line and fx.URL_ENV not in line
    server_log = next(Path("resources").rglob("*.server.log"))
    assert "fake vllm dying mid-job" in server_log.read_text()


def test_a_full_disk_under_the_judges_cache_is_one_line_naming_the_cache(completion, capfd, monkeypatch):
    """The cache on a full disk (/dev/full answers every write with ENOSPC): one line naming the cache and the
    system's reason; no output, the cache not half-written."""
    from r2med_eval.workflow import paths

    w = fx.workflow(queries=3, sample_per_query=4)
    _judge_ready(w)
    cache = Path(paths.fill(paths.PRIVATE_JUDGE_CACHE, benchmark=fx.BENCH, llm="judge"))
    cache.parent.mkdir(parents=True, exist_ok=True)
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    cache.symlink_to("/dev/full")
    with FakeLLM() as server:
        server.mode = "judge"
        monkeypatch.setenv(fx.URL_ENV, server.url)
        monkeypatch.setenv(fx.KEY_ENV, "fake-key")
        one_line(job(w, "cliniq_completion_judge"), capfd, monkeypatch, str(cache),
                 "cannot add an answer to the LLM answers' cache (No space left on device)")


def test_an_answer_that_fails_to_reach_the_cache_is_taken_back(tmp_path, monkeypatch):
    """A write cut short by a full disk leaves the cache as it was (no torn line); the next answer is kept."""
    from r2med_eval.errors import LLMError
    from r2med_eval.llm.cache import Cache
    from r2med_eval.llm.requests import Answer

    cache = Cache(tmp_path / "c.jsonl")
    cache.add("a", Answer("first", {}))
    before = (tmp_path / "c.jsonl").read_bytes()
    real = os.write

    def half(fd, data):
        real(fd, bytes(data[:len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(LLMError, match="No space left on device"):
        cache.add("b", Answer("second", {}))
    monkeypatch.setattr(os, "write", real)
    assert (tmp_path / "c.jsonl").read_bytes() == before
    cache.add("c", Answer("third", {}))
    again = Cache(tmp_path / "c.jsonl")
    assert set(again.entries) == {"a", "c"} and again.torn == 0


def test_an_output_on_a_full_disk_is_one_error_and_no_temporary(tmp_path):
    from r2med_eval import io

    target = tmp_path / "out" / "x.txt"
    with pytest.raises(InputError, match="No space left on device") as err:
        with io.atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise OSError(28, "No space left on device")
    assert err.value.path == str(target) and not list((tmp_path / "out").iterdir())
    shutil.rmtree(tmp_path / "out")

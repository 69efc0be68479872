"""Issue 14.11: long stages report progress with rate and ETA while they run (time-based), and Anserini's
output is streamed to the log line by line. Issue 26: the ETA comes from a moving rate, and every job prints a
line on the terminal at least every interval."""
import io
import logging
import re
import sys
import time

from r2med_eval import progress
from r2med_eval.lexical import lucene


def test_progress_lines_carry_count_rate_and_eta(caplog):
    caplog.set_level("INFO")
    log = logging.getLogger("test-progress")
    p = progress.Progress("encoding", 100, "texts", log, every=0.05)
    p.update(10)  # within the interval: no line
    assert not caplog.records
    time.sleep(0.06)
    p.update(15)
    line = caplog.records[-1].getMessage()
    assert line.startswith("encoding: 25/100 texts (25.0%), ") and " texts/s, elapsed " in line and ", ETA " in line
    assert "ETA unknown" not in line
    p.update(75)
    p.finish()
    assert caplog.records[-1].getMessage().endswith("(done)")
    assert caplog.records[-1].getMessage().startswith("encoding: 100 texts in ")


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.setenv("R2MED_EVAL_PROGRESS_SECONDS", "5")
    assert progress.interval() == 5.0
    monkeypatch.setenv("R2MED_EVAL_PROGRESS_SECONDS", "soon")
    assert progress.interval() == progress.DEFAULT_SECONDS
    assert progress.duration(3725) == "1h02m" and progress.duration(75) == "1m15s" and progress.duration(4) == "4s"


def test_anserini_output_is_logged_while_it_runs(caplog):
    caplog.set_level("INFO")
    script = "import sys, time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.4)\n"
    out = lucene._run_streamed([sys.executable, "-c", script])
    assert out.splitlines() == ["line 0", "line 1", "line 2"]
    records = [r for r in caplog.records if "anserini" in r.getMessage()]
    assert [r.getMessage().split(": ", 1)[1] for r in records] == ["line 0", "line 1", "line 2"]
    # logged as printed (0.4 s apart), not all at once when the process ended
    assert records[-1].created - records[0].created >= 0.6


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_eta_follows_the_moving_rate_not_the_average_since_the_start():
    """Issue 26: encoding sorts the longest texts first, so the average since the start underestimates the rate
    (the first ETA said 30 minutes for a 16-minute job). The moving rate covers the last four intervals."""
    clock = FakeClock()
    p = progress.Progress("encoding", 10_000, "texts", logging.getLogger("t"), every=30, clock=clock)
    for _ in range(300):  # 5 minutes at 1 text/s (the long texts)
        clock.now += 1
        p.update(1)
    for _ in range(300):  # then 5 minutes at 10 texts/s
        clock.now += 1
        p.update(10)
    assert p.done == 3300
    assert abs(p.rate() - 10.0) < 1e-9  # the last 120 s, not 3300 / 600 = 5.5
    assert p.line().endswith("ETA 11m10s") and "10.0 texts/s" in p.line()  # 6700 texts left at 10/s
    # younger than the window: the rate since the start
    q = progress.Progress("x", 100, "items", logging.getLogger("t"), every=30, clock=clock)
    clock.now += 10
    q.update(20)
    assert q.rate() == 2.0 and q.line().endswith("ETA 40s")
    # no count known: count, rate and elapsed time
    r = progress.Progress("reading", None, "rows", logging.getLogger("t"), every=30, clock=clock)
    clock.now += 4
    r.update(1000)
    assert r.line() == "reading: 1000 rows, 250.0 rows/s, elapsed 4s"
    for each in (p, q, r):
        each.finish()


def test_heartbeat_prints_the_running_progress_or_the_phase_to_the_terminal():
    stream = io.StringIO()
    beat = progress.Heartbeat("encode_corpus demo/demo/minilm", stream=stream, every=0.05).start()
    progress.phase("loading the doc encoder of minilm")
    time.sleep(0.18)
    with progress.Progress("shard 1/1: encoding", 40, "texts", logging.getLogger("t"), every=30) as p:
        p.update(10)
        time.sleep(0.18)
    beat.stop()
    lines = stream.getvalue().splitlines()
    assert all(line.startswith("r2med-eval [encode_corpus demo/demo/minilm] ") for line in lines)
    assert any(re.search(r"\] loading the doc encoder of minilm, elapsed \d+s$", line) for line in lines), lines
    assert any(re.search(r"\] shard 1/1: encoding: 10/40 texts \(25\.0%\), [\d.]+ texts/s, elapsed \d+s, ETA \d+s$",
                         line) for line in lines), lines
    assert re.fullmatch(r"r2med-eval \[encode_corpus demo/demo/minilm\] finished after (\d+h\d\dm|(\d+m)?\d+s)",
                        lines[-1])
    assert not progress._ACTIVE  # the finished Progress left the stack
    # a job shorter than the interval prints nothing
    quiet = io.StringIO()
    progress.Heartbeat("score_run demo/demo/bm25", stream=quiet, every=30).start().stop()
    assert quiet.getvalue() == ""


def test_job_label_and_code_hash():
    assert progress.job_label("encode_corpus", ["demo", "demo", "minilm"]) == "encode_corpus demo/demo/minilm"
    assert progress.job_label("leaderboard", []) == "leaderboard"
    from r2med_eval.workflow.code import CodeIndex

    code = CodeIndex()
    # progress only logs and prints: editing it reruns nothing, while the modules that use it stay covered
    for rule in ("encode_corpus", "rerank_run", "lucene_index", "score_cliniq"):
        files = code.closure(rule)[1]
        assert "src/r2med_eval/progress.py" not in files, rule
    assert "src/r2med_eval/dense/encode.py" in code.closure("encode_corpus")[1]

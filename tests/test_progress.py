"""Issue 14.11: long stages report progress with rate and ETA while they run (time-based), and Anserini's
output is streamed to the log line by line."""
import logging
import sys
import time

from r2med_eval import lucene, progress


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
    assert caplog.records[-1].getMessage().endswith("(done)") and "100/100" in caplog.records[-1].getMessage()


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

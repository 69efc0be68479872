"""The command line is as strict as the pipeline (issue 40.3) and reads what trec_eval reads (40.5).

Every bad input ends in one ``r2med-eval:`` line with its fix, exit status non-zero, no traceback, in seconds and
under 1 GB (the seven of the issue run as whole processes under those limits); the run reader is the pipeline's
(``scoring.runfile``); comment lines in qrels and runs and fields after a run line's sixth are read as trec_eval
10.0 reads them."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from r2med_eval import cli

REPO = Path(__file__).resolve().parents[1]
QRELS = "q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n"
RUN = "q1 Q0 a 1 0.9 t\nq1 Q0 b 2 0.5 t\nq2 Q0 c 1 0.7 t\n"


@pytest.fixture
def task(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.trec").write_text(RUN)
    return tmp_path


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _process(*args, cwd):
    """``python -m r2med_eval ARGS`` as a user runs it: its own process, 1 GB of address space, 20 s."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "r2med_eval", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=20, preexec_fn=_limited, env=env)


def _one_line(proc, *words):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("r2med-eval: "), proc.stderr
    assert "Traceback" not in proc.stderr and "Fix:" in lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", ["score 1_000", "score nan", "missing run", "a directory", "/dev/zero",
                                  "--weights nan 1", "--k -60"])
def test_the_issues_seven_bad_inputs_end_in_one_line(task, case):
    if case.startswith("score"):
        (task / "bad.trec").write_text(RUN + f"q2 Q0 d 2 {case.split()[1]} t\n")
        proc = _process("eval", "qrels.txt", "bad.trec", cwd=task)
        _one_line(proc, "bad.trec, line 4", {"1_000": "underscore", "nan": "NaN"}[case.split()[1]])
    elif case == "missing run":
        _one_line(_process("eval", "qrels.txt", "nope.trec", cwd=task), "nope.trec", "not found")
    elif case == "a directory":
        (task / "folder").mkdir()
        _one_line(_process("eval", "qrels.txt", "folder", cwd=task), "folder", "is a folder")
    elif case == "/dev/zero":
        _one_line(_process("eval", "qrels.txt", "/dev/zero", cwd=task), "/dev/zero", "not a regular file")
    elif case == "--weights nan 1":
        proc = _process("fuse", "run.trec", "run.trec", "--method", "minmax", "--weights", "nan", "1", cwd=task)
        _one_line(proc, "--weights", "finite")
    else:
        _one_line(_process("fuse", "run.trec", "run.trec", "--k", "-60", cwd=task), "--k", "negative")


@pytest.mark.parametrize("score", ["１０", "٣", "inf", "-inf", "1e400", "0x1p3", "0.5x", "NaN"])
def test_every_score_trec_eval_would_misread_is_named(task, capsys, score):
    (task / "bad.trec").write_text(RUN + f"q2 Q0 d 2 {score} t\n")
    assert cli.main(["eval", str(task / "qrels.txt"), str(task / "bad.trec")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"r2med-eval: {task / 'bad.trec'}, line 4: the score (5th field") and err.count("\n") == 1


@pytest.mark.parametrize("text,words", [
    ("q1 Q0 a 1 0.9 t\nq1 Q0 a 2 0.5 t\n", ["line 2", "twice", "first on line 1"]),
    ("q1 Q0 a 1 0.9\n", ["line 1", "expected 6 columns"]),
    (b"q1 Q0 \xe9 1 0.9 t\n", ["line 1", "not UTF-8"]),
    ("q1 Q0 " + "x" * 70_000 + " 1 0.9 t\n", ["line 1", "longer than"]),
])
def test_bad_runs_name_the_line(task, capsys, text, words):
    path = task / "bad.trec"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert cli.main(["eval", str(task / "qrels.txt"), str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"r2med-eval: {path}") and err.count("\n") == 1 and all(w in err for w in words), err


def test_a_huge_line_stops_in_seconds_and_little_memory(task):
    (task / "long.trec").write_bytes(b"q1 Q0 " + b"x" * (200 << 20) + b" 1 0.5 t\n")  # 200 MB, one line
    _one_line(_process("eval", "qrels.txt", "long.trec", cwd=task), "longer than")


@pytest.mark.parametrize("args,words", [
    (["fuse", "run.trec", "run.trec", "--method", "minmax", "--weights", "1"], ["1 weights for 2 runs"]),
    (["fuse", "run.trec", "run.trec", "--weights", "1", "2"], ["linear methods"]),
    (["fuse", "run.trec", "--depth", "0"], ["--depth", "below 1"]),
    (["fuse", "run.trec", "-o", "."], ["is a folder"]),
    (["eval", "qrels.txt", "run.trec", "-M", "0"], ["-M", "below 1"]),
    (["eval", "qrels.txt", "run.trec", "-l", "x"], ["-l", "not a whole number"]),
    (["eval", "qrels.txt", "run.trec", "-m", "Judged@0"], ["cutoff below 1"]),
    (["eval", "run.trec", "qrels.txt"], ["looks like a run", "QRELS RUN"]),
    (["compare", "qrels.txt", "run.trec", "--baseline", "run", "--alpha", "2"], ["--alpha", "between 0 and 1"]),
    (["eval", "qrels.txt", "run.trec", "--no-such-option"], ["unrecognized arguments"]),
])
def test_every_option_error_is_one_line(task, capsys, monkeypatch, args, words):
    monkeypatch.chdir(task)
    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse's errors: exit status 2
        code = exc.code
    err = capsys.readouterr().err
    assert code in (1, 2) and err.startswith("r2med-eval: ") and err.count("\n") == 1, err
    assert all(w in err for w in words), err


def test_duplicate_judgments_name_the_cli_option(task, capsys):
    (task / "dup.txt").write_text(QRELS + "q1 0 a 2\n")
    assert cli.main(["eval", str(task / "dup.txt"), str(task / "run.trec")]) == 1
    err = capsys.readouterr().err
    assert "--duplicate-qrels max, first or last" in err and "config.yaml" not in err
    assert cli.main(["eval", str(task / "dup.txt"), str(task / "run.trec"), "--duplicate-qrels", "max"]) == 0


def test_compare_help_prints_a_plain_percent(capsys):
    with pytest.raises(SystemExit):
        cli.main(["compare", "--help"])
    out = capsys.readouterr().out
    assert "95% bootstrap" in out and "%%" not in out


# ---------------------------------------------------------------- what trec_eval reads (40.5)

def test_comment_lines_and_trailing_fields_are_read_as_trec_eval_reads_them(task, capsys):
    (task / "qrels.c").write_text("# judged by hand\n" + QRELS.replace("q2", "# q2 0 c 2\nq2", 1))
    (task / "run.c").write_text("# a run\n  # an indented comment\n" + RUN.replace(" t\n", " t more fields\n"))
    assert cli.main(["eval", str(task / "qrels.c"), str(task / "run.c"), "-m", "num_ret", "num_rel", "P@2",
                     "--format", "json"]) == 0
    import json

    got = json.loads(capsys.readouterr().out)
    assert cli.main(["eval", str(task / "qrels.txt"), str(task / "run.trec"), "-m", "num_ret", "num_rel", "P@2",
                     "--format", "json"]) == 0
    assert got["metrics"] == json.loads(capsys.readouterr().out)["metrics"] == {"num_ret": 3, "num_rel": 2,
                                                                                 "P@2": 0.5}


def test_c_l_and_m_options_change_what_they_change(task, capsys):
    (task / "part.trec").write_text("q1 Q0 a 1 0.9 t\nq1 Q0 b 2 0.5 t\n")  # q2 missing

    def figures(*args):
        assert cli.main(["eval", str(task / "qrels.txt"), *args, "-m", "P@1", "num_ret", "--format", "json"]) == 0
        import json

        return json.loads(capsys.readouterr().out)["metrics"]

    assert figures(str(task / "part.trec")) == figures(str(task / "part.trec"), "-c") == {"P@1": 0.5, "num_ret": 2}
    assert figures(str(task / "part.trec"), "--retrieved-only") == {"P@1": 1.0, "num_ret": 2}
    assert figures(str(task / "run.trec"), "-l", "2") == {"P@1": 0.5, "num_ret": 3}
    assert figures(str(task / "run.trec"), "-M", "1") == {"P@1": 1.0, "num_ret": 2}
    capsys.readouterr()
    assert cli.main(["eval", str(task / "qrels.txt"), str(task / "run.trec"), "-m", "num_ret", "gm_map", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "num_ret\tq1\t2" in lines and "num_ret\tall\t3" in lines  # counts as integers, as trec_eval prints
    assert not [x for x in lines if x.startswith("gm_map\tq")]  # trec_eval prints gm_map on the all line only


def test_measures_may_come_before_the_files(task, capsys, monkeypatch):
    """``eval -m Judged@10 qrels run`` (trec_eval's users put the options first): the files after the measures are
    the files, not more measures; the figures equal those of the files-first order."""
    monkeypatch.chdir(task)
    assert cli.main(["eval", "-m", "Judged@10", "P@10", "qrels.txt", "run.trec", "-q"]) == 0
    first = capsys.readouterr().out
    assert cli.main(["eval", "qrels.txt", "run.trec", "-q", "-m", "Judged@10", "P@10"]) == 0
    assert capsys.readouterr().out == first and "Judged@10\tall\t1.0000" in first
    with pytest.raises(SystemExit) as stop:  # one file: the run is missing, said as such
        cli.main(["eval", "-m", "Judged@10", "qrels.txt"])
    assert stop.value.code == 2 and "the following arguments are required: run" in capsys.readouterr().err


# ---------------------------------------------------------------- note text is never quoted (issue 48.5)

NOTE_WORD = "ZQXPLANTEDWORD"


@pytest.mark.parametrize("note", [
    f"Patient was admitted with {NOTE_WORD} fever and cough overnight\n",  # the word where the score goes
    f"Pt {NOTE_WORD} given aspirin 81 mg daily\nPt {NOTE_WORD} given aspirin 81 mg daily\n",  # a document twice
    f"Pt was then given 0.5{NOTE_WORD} once daily\n",  # a number, then the word
    f"Pt was then given 1_{NOTE_WORD}0 once daily\n",
    f"Pt was then given {NOTE_WORD}nan once daily\n",
    f"Pt was then given 1{NOTE_WORD}e5 once daily\n",
])
def test_a_note_bearing_file_given_as_the_run_is_named_not_quoted(task, note):
    """A file of notes (CliniQ's text) given as the run: one line naming the file and the line, no word of it."""
    (task / "NOTEEVENTS.csv").write_text(note)
    for args in (["eval", "qrels.txt", "NOTEEVENTS.csv"], ["fuse", "run.trec", "NOTEEVENTS.csv"]):
        proc = _process(*args, cwd=task)
        line = _one_line(proc, "NOTEEVENTS.csv, line ")
        assert NOTE_WORD not in proc.stderr + proc.stdout and "aspirin" not in line and "Pt" not in line, line


# ---------------------------------------------------------------- the CLI corners of issue 48.5

@pytest.mark.parametrize("case", ["retrieved-only, nothing retrieved", "fuse of empty runs", "weights 0 0",
                                  "missing run after -m", "a 10 MB tag", "a long rank field"])
def test_cli_corners_end_in_one_line_and_write_nothing(task, case):
    (task / "empty1.trec").write_text("")
    (task / "empty2.trec").write_text("")
    (task / "other.trec").write_text("q9 Q0 a 1 0.5 t\n")  # a query the judgments do not have
    args, words = {
        "retrieved-only, nothing retrieved": (["eval", "qrels.txt", "other.trec", "--retrieved-only"],
                                              ["other.trec", "retrieved nothing for any of the 2 judged queries"]),
        "fuse of empty runs": (["fuse", "empty1.trec", "empty2.trec", "-o", "out.trec"],
                               ["every run given holds no entry (empty1.trec, empty2.trec)"]),
        "weights 0 0": (["fuse", "run.trec", "run.trec", "--method", "minmax", "--weights", "0", "0", "-o",
                         "out.trec"], ["--weights are all 0"]),
        "missing run after -m": (["eval", "-m", "nDCG@10", "qrels.txt", "MISSING"], ["MISSING: run file not found"]),
        "a 10 MB tag": (["eval", "qrels.txt", "long.trec"], ["long.trec, line 2", "longer than 65,536 bytes"]),
        "a long rank field": (["fuse", "long.trec", "run.trec", "-o", "out.trec"], ["long.trec, line 2", "longer"]),
    }[case]
    if case == "a 10 MB tag":
        (task / "long.trec").write_text(RUN[:16] + "q1 Q0 b 2 0.5 " + "t" * (10 << 20) + "\n")
    elif case == "a long rank field":
        (task / "long.trec").write_text(RUN[:16] + "q1 Q0 b " + "9" * 100_000 + " 0.5 t\n")
    _one_line(_process(*args, cwd=task), *words)
    assert not (task / "out.trec").exists() and not list(task.glob(".out.trec*"))

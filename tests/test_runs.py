import os

import pytest

from r2med_eval import runs
from r2med_eval.errors import InputError
from r2med_eval.io import atomic_path


def test_ties_break_by_doc_id_and_bytes_are_stable(tmp_path):
    run = {"q2": {"b": 1.0, "a": 1.0, "c": 2.0}, "q1": {"z": 0.1234567, "y": 0.1234571}}
    first, second = tmp_path / "1.trec", tmp_path / "2.trec"
    runs.write_run(run, first, "m")
    runs.write_run({"q1": dict(reversed(list(run["q1"].items()))), "q2": dict(reversed(list(run["q2"].items())))},
                   second, "m")
    assert first.read_bytes() == second.read_bytes()
    lines = first.read_text().splitlines()
    # q1: both round to 0.123457, so the tie breaks by id; q2: c first, then a before b
    assert [l.split()[2] for l in lines] == ["y", "z", "c", "a", "b"]
    assert lines[0] == "q1 Q0 y 1 0.123457 m"
    assert runs.read_run(first)["q2"] == {"c": 2.0, "a": 1.0, "b": 1.0}


def test_top_k():
    assert list(runs.top_k({"a": 1, "b": 3, "c": 2}, 2)) == ["b", "c"]


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("killed")
    assert not target.exists()
    assert os.listdir(tmp_path) == []


def test_bad_run_file(tmp_path):
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 0.5 m\nq1 Q0 d1 2 0.4 m\n")
    with pytest.raises(InputError, match="line 2"):
        runs.read_run(bad)
    with pytest.raises(InputError):
        runs.write_run({"q": {"d": 1}}, tmp_path / "x", tag="has space")

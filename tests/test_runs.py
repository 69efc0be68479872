import os

import pytest

from r2med_eval.errors import InputError
from r2med_eval.io import atomic_path
from r2med_eval.scoring import runs


def test_ties_break_by_doc_id_descending_and_bytes_are_stable(tmp_path):
    """Equal (written) scores in trec_eval's order, document id descending: the rank column is the rank trec_eval
    scores."""
    run = {"q2": {"b": 1.0, "a": 1.0, "c": 2.0}, "q1": {"z": 0.1234567, "y": 0.1234571}}
    first, second = tmp_path / "1.trec", tmp_path / "2.trec"
    runs.write_run(run, first, "m")
    runs.write_run({"q1": dict(reversed(list(run["q1"].items()))), "q2": dict(reversed(list(run["q2"].items())))},
                   second, "m")
    assert first.read_bytes() == second.read_bytes()
    lines = first.read_text().splitlines()
    # q1: both round to 0.123457, so the tie breaks by id, z before y; q2: c first, then b before a
    assert [line.split()[2] for line in lines] == ["z", "y", "c", "b", "a"]
    assert lines[0] == "q1 Q0 z 1 0.123457 m"
    assert runs.read_run(first)["q2"] == {"c": 2.0, "b": 1.0, "a": 1.0}


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


def test_outputs_follow_the_umask_and_private_ones_are_owner_only(tmp_path):
    """Issue 14.7: mkstemp made every output 0600; now they follow the umask, MIMIC-derived ones stay 0600."""
    import os
    import stat

    from r2med_eval import io

    old = os.umask(0o022)
    try:
        io.write_json(tmp_path / "a" / "x.json", {"a": 1})
        with io.atomic_path(tmp_path / "p.jsonl", private=True) as tmp:
            tmp.write_text("secret\n")
        tree = tmp_path / "tree" / "sub"
        tree.mkdir(parents=True)
        (tree / "f").write_text("x")
        os.chmod(tree, 0o700)
        io.set_tree_mode(tmp_path / "tree")
        assert stat.S_IMODE(os.stat(tmp_path / "a" / "x.json").st_mode) == 0o644
        assert stat.S_IMODE(os.stat(tmp_path / "p.jsonl").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tree).st_mode) == 0o755
        io.protect_tree(tmp_path / "tree")
        assert stat.S_IMODE(os.stat(tree).st_mode) == 0o700 and stat.S_IMODE(os.stat(tree / "f").st_mode) == 0o600
        os.umask(0o077)
        io.write_text(tmp_path / "y.txt", "y")
        assert stat.S_IMODE(os.stat(tmp_path / "y.txt").st_mode) == 0o600
    finally:
        os.umask(old)

"""trec_eval 10.0 itself, built from its source (``tests/conftest.py``'s ``trec_eval``), against ``r2med-eval eval``.

Every line trec_eval prints for ``-m all_trec -q`` (each measure, parameters included, per query and ``all``) must be
the line r2med-eval prints, to the printed digit, with ``-c``, ``-M``, ``-l``, ``-J``, ``-N``, ``-Z`` and ``-R``
(``qrels`` and ``qrels_jg``: ``-m qrels_jg``'s measures over judgment groups),
on trec_eval's own test files (tests/data/trec_eval) and on runs of the demo (data/demo: word-overlap retrievers whose
scores tie everywhere, a judged query missing, negative grades): the run read as text on the fast path and line by
line, as a binary ``.run.npz`` run, and through the API. Then issue 49's three edge cases on every path: the ``-l 2``
``num_rel`` sum, scores that differ below float32 precision, and byte-order marks.
"""

from __future__ import annotations

import gzip
import random
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from r2med_eval import cli
from r2med_eval.scoring import metrics

DATA = REPO / "tests" / "data" / "trec_eval"


def _lines(text: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in text.splitlines():
        if line.strip():
            name, qid, value = (p.strip() for p in line.split("\t"))
            out[(name, qid)] = value
    return out


def theirs(trec_eval, args) -> dict[tuple[str, str], str]:
    proc = subprocess.run([trec_eval, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return _lines(proc.stdout)


def ours(capsys, args) -> dict[tuple[str, str], str]:
    """r2med-eval eval's lines keyed by trec_eval's name of each measure (``P.5`` is ``P_5``; ``Z`` kept)."""
    *options, qrels, run = map(str, args)
    assert cli.main(["eval", qrels, run, *options]) == 0
    out = {}
    for (name, qid), value in _lines(capsys.readouterr().out).items():
        z = "Z" if name.startswith("Z") and name[1:] else ""
        out[(z + metrics.measure(name[len(z):]).trec, qid)] = value
    return out


def same(trec_eval, capsys, args) -> int:
    want, got = theirs(trec_eval, args), ours(capsys, args)
    assert {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v} == {}
    assert set(got) == set(want)  # no line more, no line less
    return len(want)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """trec_eval's test files, decompressed."""
    folder = tmp_path_factory.mktemp("trec_eval_files")
    for name in ("qrels.test", "qrels.rel_level", "qrels.test.with-comments", "results.test", "results.trunc",
                 "zscores_file", "qrels.123"):
        (folder / name).write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    return folder


@pytest.mark.parametrize("options,qrels,run", [
    (["-m", "all_trec", "-q"], "qrels.test", "results.test"),
    (["-m", "all_trec", "-q", "-c"], "qrels.test", "results.trunc"),
    (["-m", "all_trec", "-q", "-c", "-M", "100"], "qrels.test", "results.trunc"),
    (["-m", "all_trec", "-m", "relstring.20", "-q", "-l", "2"], "qrels.rel_level", "results.test"),
    (["-m", "all_trec", "-q", "-c", "-l", "2"], "qrels.rel_level", "results.test"),
    (["-m", "all_trec", "-q", "-J"], "qrels.test", "results.test"),
    (["-m", "all_trec", "-q", "-J", "-c", "-l", "2", "-M", "50"], "qrels.rel_level", "results.trunc"),
    (["-m", "all_trec", "-q", "-N", "100000", "-m", "utility.1,-1,-1,0.5"], "qrels.test", "results.test"),
    (["-m", "all_trec", "-q", "-Z", "zscores_file"], "qrels.test", "results.test"),
    (["-m", "all_trec", "-q", "-c", "-J", "-Z", "zscores_file"], "qrels.test", "results.trunc"),
    (["-m", "all_trec", "-q", "-R", "qrels"], "qrels.test.with-comments", "results.test"),
    (["-m", "yaap", "-m", "map", "-m", "num_q", "-q", "-c", "-J"], "qrels.rel_level", "results.trunc"),
    (["-m", "qrels_jg", "-q", "-R", "qrels_jg"], "qrels.123", "results.test"),
    (["-m", "qrels_jg", "-q", "-R", "qrels_jg", "-c", "-J", "-M", "100", "-l", "2"], "qrels.123", "results.trunc"),
    (["-m", "qrels_jg", "-m", "P_avgjg.5,7", "-m", "Rprec_mult_avgjg.0.5,1.5", "-q", "-R", "qrels_jg"], "qrels.123",
     "results.test"),
    (["-q", "-m", "iprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000", "-m",
      "Rprec_mult.5.0,0.2,0.35", "-m", "utility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75", "-m", "ndcg.1=3,2=9,4=4.5",
      "-m", "ndcg_cut.10,20", "-m", "success.2,5,20", "-m", "rbp.p=0.5", "-m", "rbp_resid.p=0.99", "-m",
      "set_F.0.25", "-m", "G.1=2,2=5", "-m", "Rndcg.1=1,2=4", "-m", "ndcg_rel.3=10", "-m", "relative_P.2,50",
      "-m", "unj.1,3,1000"], "qrels.rel_level", "results.test"),
])
def test_trec_eval_test_files(trec_eval, capsys, files, options, qrels, run):
    args = [files / a if a == "zscores_file" else a for a in options] + [files / qrels, files / run]
    assert same(trec_eval, capsys, args) >= (9 if "all_trec" not in options else 80)


def test_a_nickname_prints_in_trec_eval_s_order(trec_eval, capsys, files):
    """-m all_trec -q: the same lines in the same order as trec_eval's (its names unpadded)."""
    args = ["-m", "all_trec", "-q", "-c", files / "qrels.test", files / "results.trunc"]
    assert list(ours(capsys, args)) == list(theirs(trec_eval, args))


def test_published_z_scores_are_the_built_trec_eval_s(trec_eval, files):
    """The build is trec_eval 10.0: its -Z output is the published out.test.aqZ, line for line."""
    proc = subprocess.run([trec_eval, "-q", "-m", "all_trec", "-Z", files / "zscores_file", files / "qrels.test",
                           files / "results.test"], capture_output=True, text=True)
    assert proc.stdout == gzip.decompress((DATA / "out.test.aqZ.gz").read_bytes()).decode()


# ---------------------------------------------------------------- the demo's runs

@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's judgments as TREC qrels (two grades made negative, a query judged twice as many), and runs of two
    word-overlap retrievers (scores of quarter steps: ties everywhere), one missing a judged query; each as TREC text
    (single spaces: the fast path), the same with a comment line (line by line), and binary."""
    import r2med_eval

    folder = tmp_path_factory.mktemp("demo_runs")
    task = r2med_eval.load_task(REPO / "data" / "demo")
    qrels = {q: dict(d) for q, d in task.qrels.items()}
    first = sorted(qrels)[0]
    qrels[first][next(iter(qrels[first]))] = -1
    qrels[sorted(qrels)[3]][sorted(qrels[sorted(qrels)[3]])[-1]] = -2
    (folder / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q in sorted(qrels) for d, g in qrels[q].items()))
    # two judgment groups: all the judgments, and every other one with the grades turned (-R qrels_jg)
    (folder / "qrels_jg").write_text("".join(
        f"{q} a {d} {g}\n" for q in sorted(qrels) for d, g in qrels[q].items()) + "".join(
        f"{q} b {d} {2 - g if g >= 0 else g}\n" for q in sorted(qrels)[::2] for d, g in list(qrels[q].items())[::2]))

    def words(text, n):
        return {w for w in text.lower().split() if len(w) >= n}

    runs = {}
    for name, n in (("overlap", 1), ("long", 6)):
        run = {q: {d: len(words(t, n) & words(doc["text"], n)) / 4 for d, doc in task.corpus.items()}
               for q, t in task.queries.items()}
        run = {q: dict(sorted(docs.items(), key=lambda x: (-x[1], x[0]))[:60]) for q, docs in run.items()}
        if name == "long":
            del run[sorted(qrels)[1]]
        runs[name] = run
        r2med_eval.write_run(run, folder / f"{name}.trec", tag=name)
        text = (folder / f"{name}.trec").read_text()
        (folder / f"{name}.commented.trec").write_text("# a comment line: read line by line\n" + text)
        r2med_eval.write_run(run, folder / f"{name}.run.npz", tag=name)
    # every (query, measure) present: trec_eval's binary search reads past its table for a missing one; a standard
    # deviation of 0 tests both of its cases (the value at the mean: 0; elsewhere: -1000000)
    rng = random.Random(7)
    names = [m.trec for m in metrics.chosen(["all_trec"])]
    z = [f"{q} {m} {rng.choice([0, 0, 0.25, rng.uniform(0, 0.5)]):.4f} {rng.choice([0, 0.1, 0.25]):.4f}\n"
         for q in sorted(qrels) for m in names]
    (folder / "zscores").write_text("".join(z))
    return folder, qrels, runs


DEMO_OPTIONS = [["-m", "all_trec", "-q"], ["-m", "all_trec", "-q", "-c"], ["-m", "all_trec", "-q", "-c", "-l", "2"],
                ["-m", "all_trec", "-q", "-c", "-J", "-M", "20"], ["-m", "all_trec", "-q", "-c", "-N", "500", "-m",
                                                                   "utility.1,-1,-0.5,0.01"],
                ["-m", "all_trec", "-q", "-c", "-Z", "zscores"], ["-m", "all_trec", "-q", "-R", "qrels"],
                ["-m", "qrels_jg", "-q", "-c", "-R", "qrels_jg"]]


# "long" misses a judged query: trec_eval 10.0 stops at it unless -c
DEMO_CASES = [(n, o) for n in ("overlap", "long") for o in DEMO_OPTIONS if n == "overlap" or "-c" in o]


@pytest.mark.parametrize("name,options", DEMO_CASES, ids=lambda x: x if isinstance(x, str) else " ".join(x[2:]))
def test_demo_runs_every_path(trec_eval, capsys, demo, options, name):
    folder, qrels, runs = demo
    options = [str(folder / o) if o == "zscores" else o for o in options]
    qrels = folder / ("qrels_jg" if "qrels_jg" in options else "qrels")
    want = theirs(trec_eval, [*options, qrels, folder / f"{name}.trec"])
    assert len(want) > (500 if "qrels_jg" in options else 1000)
    for variant in (f"{name}.trec", f"{name}.commented.trec", f"{name}.run.npz"):
        got = ours(capsys, [*options, qrels, folder / variant])
        assert {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v} == {}, variant
        assert set(got) == set(want), variant


@pytest.mark.parametrize("name", ["overlap", "long"])
def test_demo_runs_through_the_api(trec_eval, demo, name):
    import r2med_eval

    folder, qrels, runs = demo
    want = theirs(trec_eval, ["-m", "all_trec", "-q", "-c", "-J", folder / "qrels", folder / f"{name}.trec"])
    result = r2med_eval.evaluate(qrels, runs[name], metrics=["all_trec"], judged_only=True, complete=True)
    names = {m.name: m for m in metrics.chosen(["all_trec"])}
    for (trec_name, qid), value in want.items():
        got = result["metrics"][trec_name] if qid == "all" else result["per_query"][qid][trec_name]
        if names[trec_name].family in ("relstring",):
            assert f"'{got}'" == value
        elif names[trec_name].family == "runid":
            assert got == "" and value == name  # a run given as a dict has no tag
        elif value.endswith("nan"):
            assert got != got
        else:
            assert (str(int(got)) if "." not in value else f"{got:.4f}") == value, (trec_name, qid)


# ---------------------------------------------------------------- issue 49's edge cases, on every path

def _paths(folder: Path, name: str, lines_: list[str], tag: str = "r"):
    """The run as TREC text (fast path where it can be), with a comment line (line by line) and binary."""
    import r2med_eval

    (folder / f"{name}.trec").write_bytes("".join(lines_).encode())
    (folder / f"{name}.c.trec").write_bytes(("# comment\n" + "".join(lines_)).encode())
    run = r2med_eval.read_run(folder / f"{name}.trec")
    r2med_eval.write_run(run, folder / f"{name}.run.npz", tag=tag)
    return [folder / f"{name}.trec", folder / f"{name}.c.trec", folder / f"{name}.run.npz"], run


def test_num_rel_at_level_2_sums_per_query_unless_c_is_given(trec_eval, capsys, files, tmp_path):
    """Without -c, num_rel's all line is the per-query sum at the level (97 on qrels.rel_level); with an explicit -c,
    trec_eval's count of every judgment graded above 0 (559). Fast path, line by line, binary and the API."""
    import r2med_eval

    text = (files / "results.test").read_text().splitlines(keepends=True)
    paths, run = _paths(tmp_path, "results", text)
    qrels = files / "qrels.rel_level"
    assert theirs(trec_eval, ["-l", "2", "-m", "num_rel", qrels, paths[0]])[("num_rel", "all")] == "97"
    assert theirs(trec_eval, ["-c", "-l", "2", "-m", "num_rel", qrels, paths[0]])[("num_rel", "all")] == "559"
    for path in paths:
        assert ours(capsys, ["-l", "2", "-m", "num_rel", qrels, path])[("num_rel", "all")] == "97"
        assert ours(capsys, ["-c", "-l", "2", "-m", "num_rel", qrels, path])[("num_rel", "all")] == "559"
    assert r2med_eval.evaluate(qrels, run, metrics=["num_rel"], level=2)["metrics"]["num_rel"] == 97
    assert r2med_eval.evaluate(qrels, run, metrics=["num_rel"], level=2, complete=True)["metrics"]["num_rel"] == 559


def test_scores_are_compared_as_trec_eval_10_compares_them(trec_eval, capsys, tmp_path):
    """trec_eval 10.0 holds scores as C doubles ("Convert float to double", 2023): 20.000002 ranks above 20.000001
    and RR is 0.5, on every path. (trec_eval 9 and pytrec_eval held them as floats, where the two tie and the id
    order gives 1.0.)"""
    import pytrec_eval

    import r2med_eval

    (tmp_path / "qrels").write_text("q 0 b 1\nq 0 a 0\n")
    paths, run = _paths(tmp_path, "close", ["q Q0 a 1 20.000002 r\n", "q Q0 b 2 20.000001 r\n"])
    assert theirs(trec_eval, ["-q", "-m", "recip_rank", tmp_path / "qrels", paths[0]])[("recip_rank", "q")] == "0.5000"
    for path in paths:
        assert ours(capsys, ["-q", "-m", "recip_rank", tmp_path / "qrels", path])[("recip_rank", "q")] == "0.5000"
    assert r2med_eval.evaluate({"q": {"b": 1, "a": 0}}, run, metrics=["RR"])["metrics"]["RR"] == 0.5
    old = pytrec_eval.RelevanceEvaluator({"q": {"b": 1, "a": 0}}, {"recip_rank"}).evaluate(run)
    assert old["q"]["recip_rank"] == 1.0  # trec_eval 9's floats: the documented difference


def test_byte_order_marks_are_part_of_the_first_query_id(trec_eval, capsys, tmp_path):
    """A run or TREC qrels file that starts with a UTF-8 byte-order mark: trec_eval reads the mark as part of the
    first line's query id (so that query is another query), and a comment line after the mark is no comment. The
    same on the fast path, line by line, binary and through the API, with and without comment lines."""
    import r2med_eval

    bom = "\ufeff"
    run = ["q1 Q0 a 1 3 r\n", "q1 Q0 b 2 2 r\n", "q2 Q0 a 1 3 r\n", "q2 Q0 c 2 1 r\n"]
    plain_qrels = "q1 0 a 1\nq1 0 b 1\nq2 0 c 1\n"
    (tmp_path / "qrels").write_text(plain_qrels)
    (tmp_path / "qrels.bom").write_text(bom + plain_qrels)
    (tmp_path / "qrels.bom.c").write_text(bom + "#x 0 comment 0\n" + plain_qrels)
    paths, _ = _paths(tmp_path, "bom", [bom + run[0], *run[1:]])
    (tmp_path / "bom.commented.trec").write_text(bom + "# Q0 x 1 0.5 r\n" + "".join(run))
    measures = ["-q", "-c", "-m", "map", "-m", "num_ret", "-m", "num_q"]
    for qrels in ("qrels", "qrels.bom", "qrels.bom.c"):
        for path in [*paths, tmp_path / "bom.commented.trec"]:
            if path.name.endswith(".npz"):
                continue
            want = theirs(trec_eval, [*measures, tmp_path / qrels, path])
            assert ours(capsys, [*measures, tmp_path / qrels, path]) == want, (qrels, path.name)
            if path.name == "bom.trec":
                assert ours(capsys, [*measures, tmp_path / qrels, paths[2]]) == want, (qrels, "binary")
                api = r2med_eval.evaluate(tmp_path / qrels, path, metrics=["map"], complete=True)
                assert {q: f"{row['map']:.4f}" for q, row in api["per_query"].items()} == {
                    q: v for (m, q), v in want.items() if m == "map" and q != "all"}
    assert theirs(trec_eval, [*measures, tmp_path / "qrels", paths[0]])[("num_ret", "q1")] == "1"  # b: a is \ufeffq1's
    assert theirs(trec_eval, [*measures, tmp_path / "qrels.bom", paths[0]])[("num_ret", "\ufeffq1")] == "1"


def test_a_measure_trec_eval_would_refuse_is_refused(capsys, files):
    for bad in ("rbp.0.8", "utility.1,2", "ndcg.x", "set_F.a"):
        assert cli.main(["eval", str(files / "qrels.test"), str(files / "results.test"), "-m", bad]) == 1
        err = capsys.readouterr().err
        assert err.startswith("r2med-eval: ") and "Fix:" in err and err.count("\n") == 1, err

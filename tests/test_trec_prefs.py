"""trec_eval 10.0's preference formats (``-R prefs``, ``-R qrels_prefs``) and measures, built trec_eval against
``r2med-eval eval`` line for line (``tests/test_trec_eval_built.py``'s helpers and demo runs).

On trec_eval's own preference test files (``prefs.test``: equivalence classes and preference arrays, transitive
preferences, no preference, no relevant document; ``qrels.test`` read as preferences) with ``-q``, ``-m all_prefs``,
``prefs`` and each measure alone, ``-c``, ``-M``, ``-Z`` and the options that change nothing here (``-J``, ``-l``,
``-N``); on the demo's runs (ties everywhere, a judged query missing, negative grades) through the fast path, line by
line, binary runs and the API; then every preferences file trec_eval stops at, crashes on or reads past its data for,
refused with one ``r2med-eval:`` line.
"""

from __future__ import annotations

import gzip
import random
import subprocess
from pathlib import Path

import pytest
from test_trec_eval_built import DATA, demo, ours, same, theirs  # noqa: F401 (demo: its fixture, used by name)

from r2med_eval import cli
from r2med_eval.scoring import metrics, trec_all, trec_prefs

ALL_PREFS = [m.name for m in metrics.chosen(["all_prefs"])]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """trec_eval's preference test files and the qrels and runs read as preferences, decompressed; a -Z file of
    every preference measure and query (standard deviations of 0 included)."""
    folder = tmp_path_factory.mktemp("trec_eval_prefs")
    for name in ("prefs.test", "prefs.comment.test", "prefs.results.test", "qrels.test", "qrels.rel_level",
                 "results.test", "results.trunc", "out.test.prefs", "out.test.qrels_prefs"):
        (folder / name).write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    rng = random.Random(3)
    qids = sorted({line.split()[0] for line in (folder / "prefs.test").read_text().splitlines()})
    (folder / "zscores").write_text("".join(
        f"{q} {m} {rng.choice([0, 0.5, rng.uniform(0, 1)]):.4f} {rng.choice([0, 0.1, 0.3]):.4f}\n"
        for q in qids for m in ALL_PREFS[2:] + ["num_q"]))
    return folder


@pytest.mark.parametrize("options,prefs,run", [
    (["-m", "all_prefs", "-q", "-R", "prefs"], "prefs.test", "prefs.results.test"),
    (["-m", "all_prefs", "-q", "-R", "prefs"], "prefs.comment.test", "prefs.results.test"),
    (["-m", "all_prefs", "-q", "-R", "prefs", "-M", "3"], "prefs.test", "prefs.results.test"),
    (["-m", "all_prefs", "-q", "-R", "prefs", "-c", "-J", "-l", "2", "-N", "50"], "prefs.test", "results.test"),
    (["-m", "all_prefs", "-q", "-R", "prefs", "-Z", "zscores"], "prefs.test", "prefs.results.test"),
    (["-m", "all_prefs", "-q", "-R", "qrels_prefs"], "qrels.test", "results.test"),
    (["-m", "all_prefs", "-q", "-R", "qrels_prefs", "-c", "-M", "100"], "qrels.test", "results.trunc"),
    (["-m", "all_prefs", "-q", "-R", "qrels_prefs", "-c", "-J", "-l", "2", "-M", "50"], "qrels.rel_level",
     "results.trunc"),
    (["-m", "prefs", "-q", "-R", "qrels_prefs"], "qrels.rel_level", "results.test"),
])
def test_trec_eval_s_preference_files(trec_eval, capsys, files, options, prefs, run):
    args = [files / a if a == "zscores" else a for a in options] + [files / prefs, files / run]
    assert same(trec_eval, capsys, args) >= 26


@pytest.mark.parametrize("name", trec_all.NICKNAMES["all_prefs"])
def test_each_preference_measure_alone(trec_eval, capsys, files, name):
    for options, prefs, run in ((["-R", "prefs", "-M", "5"], "prefs.test", "prefs.results.test"),
                                (["-R", "qrels_prefs", "-c"], "qrels.test", "results.trunc")):
        assert same(trec_eval, capsys, ["-q", "-m", name, *options, files / prefs, files / run]) >= 1


def test_the_build_prints_trec_eval_s_published_preference_outputs(trec_eval, files):
    for rel, prefs, run, out in (("prefs", "prefs.test", "prefs.results.test", "out.test.prefs"),
                                 ("qrels_prefs", "qrels.test", "results.test", "out.test.qrels_prefs")):
        proc = subprocess.run([trec_eval, "-m", "all_prefs", "-q", "-R", rel, files / prefs, files / run],
                              capture_output=True, text=True)
        assert proc.stdout == (files / out).read_text()


def test_a_nickname_prints_in_trec_eval_s_order(trec_eval, capsys, files):
    args = ["-m", "all_prefs", "-q", "-R", "prefs", files / "prefs.test", files / "prefs.results.test"]
    assert list(ours(capsys, args)) == list(theirs(trec_eval, args))


# ---------------------------------------------------------------- the demo's runs

@pytest.fixture(scope="module")
def demo_prefs(demo):  # noqa: F811 (the fixture imported above)
    """The demo's judgments as preferences: ``qrels`` and ``qrels_jg`` (two groups, negative grades) read as
    qrels_prefs, the same without negative grades, and a prefs file whose groups have two sub-groups each (partial
    orders made whole by transitivity: preference arrays)."""
    folder, qrels, runs = demo
    (folder / "qrels.nonneg").write_text("".join(
        f"{q} {jg} {d} {max(int(g), 0)}\n" for q, jg, d, g in (x.split() for x in
                                                                (folder / "qrels_jg").read_text().splitlines())))
    lines = []
    for q in sorted(qrels):
        judged = sorted(qrels[q].items())
        for sub, part in (("x", judged[::2]), ("y", judged[1::3] + judged[:1])):
            lines += [f"{q} a {sub} {d} {max(g, 0)}\n" for d, g in part]
        turned = [(d, 2 - g if g >= 0 else 0) for d, g in judged]
        for sub, part in (("1", turned[:4]), ("2", turned[3:])):
            lines += [f"{q} b {sub} {d} {g}.5\n" if g else f"{q} b {sub} {d} 0\n" for d, g in part]
    (folder / "prefs").write_text("".join(lines))
    return folder, runs


DEMO_CASES = [("overlap", "qrels_prefs", "qrels", ["-m", "prefs", "-m", "prefs_pair_ret", "-m", "prefs_simp_imp"]),
              ("long", "qrels_prefs", "qrels_jg", ["-c", "-m", "prefs", "-m", "prefs_avgjg_ret", "-M", "20"]),
              ("overlap", "qrels_prefs", "qrels.nonneg", ["-m", "all_prefs"]),
              ("long", "qrels_prefs", "qrels.nonneg", ["-c", "-m", "all_prefs", "-M", "7"]),
              ("overlap", "prefs", "prefs", ["-m", "all_prefs"]),
              ("long", "prefs", "prefs", ["-c", "-m", "all_prefs", "-M", "20", "-J", "-l", "2"])]


@pytest.mark.parametrize("name,rel,prefs,options", DEMO_CASES, ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_demo_runs_every_path(trec_eval, capsys, demo_prefs, name, rel, prefs, options):
    folder, _ = demo_prefs
    options = ["-q", "-R", rel, *options]
    want = theirs(trec_eval, [*options, folder / prefs, folder / f"{name}.trec"])
    assert len(want) > 100
    for variant in (f"{name}.trec", f"{name}.commented.trec", f"{name}.run.npz"):
        got = ours(capsys, [*options, folder / prefs, folder / variant])
        assert {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v} == {}, variant
        assert set(got) == set(want), variant


def test_demo_runs_through_the_api(trec_eval, demo_prefs):
    import r2med_eval

    folder, runs = demo_prefs
    for rel, prefs in (("prefs", "prefs"), ("qrels_prefs", "qrels.nonneg")):
        want = theirs(trec_eval, ["-q", "-c", "-m", "all_prefs", "-R", rel, folder / prefs, folder / "long.trec"])
        result = r2med_eval.evaluate(None, runs["long"], metrics=["all_prefs"],
                                     preferences=trec_prefs.read(folder / prefs, rel))
        counts = set(trec_prefs.COUNTS) | {"num_q"}
        for (measure, qid), value in want.items():
            got = result["metrics"][measure] if qid == "all" else result["per_query"][qid][measure]
            if measure == "runid":
                assert got == "" and value == "long"  # a run given as a dict has no tag
            else:
                assert (str(int(got)) if measure in counts else f"{got:.4f}") == value, (rel, measure, qid)
    as_dict = {q: list(lines) for q, lines in trec_prefs.read(folder / "prefs").queries.items()}
    via_file = r2med_eval.evaluate(None, runs["long"], metrics=["prefs"], preferences=trec_prefs.read(folder / "prefs"))
    assert r2med_eval.evaluate(None, runs["long"], metrics=["prefs"], preferences=as_dict) == via_file


# ---------------------------------------------------------------- trec_eval's quirks, kept where it defines a number

QUIRKS = {
    # a document twice at one level counts twice; a comment of five fields right after a comment is a preference
    "twice": "#c\n#c g s zz 1\nq1 g s a 2\nq1 g s a 2\nq1 g s b 1\nq1 g s zz 0\n",
    # a group whose highest level is -3.0 (trec_eval's "illegal level" marker) loses its lowest class
    "minus3": "q1 g s a -3.0\nq1 g s b -4\nq1 g s c -5\nq1 h s a -3\nq1 h s c -4\nq1 k s a 1\nq1 k s b -3\n",
    # levels below 0: not relevant in one sub-group, neither in several; the Rnonrel measures' lowest class against
    # itself
    "negative": "q1 g s a 2\nq1 g s b 0\nq1 g s c 0\nq1 g s d 0\nq1 h s a -1\nq1 h s b -2\nq1 h t b 1\n"
                "q1 h t c 0\nq1 h t d -1\n",
    # a query the run misses, whose preferences judge trec_eval's stand-in document (-c)
    "stand-in": "q1 g s a 1\nq1 g s b 0\nq2 g s ceci_nest_pas_un_docno 1\nq2 g s x 0\nq2 g s y 2\n",
}


def _random_prefs(seed: int, negative: bool) -> str:
    """Preferences of 6 queries: one to three judgment groups each, each one sub-group or two or three subsets of
    one hidden order (consistent: no cycle, level 0 the same document's everywhere in a group)."""
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(16)] + ["a", "b", "c"]
    lines = []
    for q in ("q1", "q2", "q3", "q4", "q5", "q6"):
        for g in range(rng.randint(1, 3)):
            pool = [-3.0, -1, 0, 1, 2.5] if negative else [0, 0, 1, 2, 3, 2.5]
            hidden = {d: rng.choice(pool) for d in rng.sample(docs, rng.randint(2, 12))}
            subs = rng.choice([1, 1, 2, 3])
            for s in range(subs):
                part = rng.sample(sorted(hidden), rng.randint(1, len(hidden))) if subs > 1 else sorted(hidden)
                lines += [f"{q} g{g} s{s} {d} {hidden[d]}\n" for d in part]
                if subs == 1 and rng.random() < 0.3:
                    lines.append(lines[-1])
    return "".join(lines)


@pytest.mark.parametrize("case", [*QUIRKS, "random-0", "random-1", "random-2", "negative-0", "negative-1"])
def test_trec_eval_s_quirks_are_kept(trec_eval, capsys, tmp_path, case):
    """Small preference files where trec_eval's counting is unusual but defined, and seeded random ones (levels
    below 0 too), with runs of ties and -M: every line trec_eval prints (the Rnonrel measures left out where levels
    go below 0: there trec_eval may read past its data, refused above)."""
    kind, _, seed = case.partition("-")
    text = QUIRKS.get(case) or _random_prefs(int(seed), kind == "negative")
    (tmp_path / "prefs").write_text(text)
    rng = random.Random(case)
    docs = sorted({line.split()[3] for line in text.splitlines() if not line.startswith("#")} | {"e", "f"})
    run = "".join(f"{q} Q0 {d} 0 {rng.choice([1, 2, 2.5])} r\n" for q in ("q1", "q3", "q4", "q5", "q6")
                  for d in rng.sample(docs, min(len(docs), rng.randint(1, 12))))
    (tmp_path / "run").write_text(run)
    negative = kind == "negative" or case == "minus3"
    names = [n for n in ALL_PREFS if not (negative and "Rnonrel" in n)]
    for options in ([], ["-M", "4"]):
        args = ["-q", "-c", "-R", "prefs", *(x for n in names for x in ("-m", n)), *options]
        assert same(trec_eval, capsys, [*args, tmp_path / "prefs", tmp_path / "run"]) >= 20


# ---------------------------------------------------------------- what trec_eval cannot score: one line each

RUN = "q1 Q0 a 1 3 r\nq1 Q0 b 2 2 r\nq1 Q0 c 3 1 r\n"


@pytest.mark.parametrize("text,options,line,stops", [
    ("q1 g s a 2\nq1 g a 1\n", ["-R", "prefs"], 2, True),  # 4 fields in a prefs file: malformed
    ("q1 g s a 2\nq1 g s b 1 x\n", ["-R", "prefs"], 2, True),
    ("q1 g a 2\n\nq1 g b 1\n", ["-R", "qrels_prefs"], 2, True),  # an empty line
    ("#one\n#two\nq1 g s a 2\nq1 g s b 1\n", ["-R", "prefs"], 2, True),  # a comment after a comment
    ("q1 g s a 2\nq1 g s b 1\n#last\n", ["-R", "prefs"], 3, True),  # trec_eval crashes
    ("q1 g s a 2\nq1 g s b one\n", ["-R", "prefs"], 2, False),  # trec_eval reads the level as 0
    ("q1 g s a 2\nq1 g s a 1\nq1 g s b 0\n", ["-R", "prefs"], None, True),  # two levels in one sub-group
    ("q1 g s a 2\nq1 g s b 1\nq1 g t b 2\nq1 g t a 1\n", ["-R", "prefs"], None, True),  # a > b > a
    ("q1 g s a 2\nq1 g s b 0\nq1 g t b 1\nq1 g t c 0\n", ["-R", "prefs"], None, True),  # b at 0 and above 0
    ("q1 0 a 1\nq1 0 b 1\nq1 0 c -1\nq1 0 d 0\nq1 0 e 0\n", ["-R", "qrels_prefs", "-m", "prefs_avgjg_Rnonrel"],
     None, False),  # Rnonrel would read past trec_eval's data
    ("q1 g s a 2\nq1 g s b 1\n", ["-R", "prefs", "-m", "map"], None, True),  # not a preference measure
    ("q1 g s a 2\nq1 g s b 1\n", ["-R", "nonsense", "-m", "prefs"], None, True),
])
def test_what_trec_eval_cannot_score_is_one_line(trec_eval, capsys, tmp_path, text, options, line, stops):
    """One ``r2med-eval:`` line naming the file (and the line where there is one) and the fix; ``stops``: trec_eval
    10.0 stops or crashes there too (else it prints a number it reads wrongly or past its data)."""
    (tmp_path / "prefs").write_text(text)
    (tmp_path / "run").write_text(RUN)
    options = options if "-m" in options else [*options, "-m", "all_prefs"]
    assert cli.main(["eval", str(tmp_path / "prefs"), str(tmp_path / "run"), *options]) == 1
    err = capsys.readouterr().err
    assert err.startswith("r2med-eval: ") and "Fix:" in err and err.count("\n") == 1, err
    if "-m" in options[:-2] or options[1] != "nonsense":
        assert str(tmp_path / "prefs") in err or "-R" in err, err
    if line is not None:
        assert f"prefs, line {line}: " in err, err
    proc = subprocess.run([trec_eval, *options, tmp_path / "prefs", tmp_path / "run"], capture_output=True,
                          text=True)
    assert (proc.returncode != 0 or "Malformed" in proc.stderr) == stops, proc.stderr


def test_a_preference_measure_needs_preferences(capsys, files):
    assert cli.main(["eval", str(files / "qrels.test"), str(files / "results.test"), "-m", "prefs_simp"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("r2med-eval: prefs_simp reads preferences.") and "-R qrels_prefs" in err, err

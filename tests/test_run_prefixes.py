"""Rules that read runs as columns must see what they would see in the whole run read as dicts (runs.read_run).

score_run scores the run as columns for every query at once (scoring.trec): every value, count and the run's
depth are pytrec_eval's on the run read whole, ties, unjudged queries, empty queries and BEIR's
ignore_identical_ids included. A truncating reranker keeps each query's top k in the run's own order
(runs.read_run_tops): the same documents, the same reranked run. The CliniQ pool and fusion read one query at a
time."""

from __future__ import annotations

import random

import pytest

from r2med_eval.rerank import scorers as rerank
from r2med_eval.scoring import metrics, runs


def _ids(rng: random.Random, n: int) -> list[str]:
    # ids whose string order differs from their numeric order, upper and lower case, one non-ASCII
    pool = [f"d{i}" for i in range(n)] + [f"D{i}" for i in range(n // 4)] + ["é1", "z", "Z0"]
    rng.shuffle(pool)
    return pool[:n]


def _case(seed: int, tmp_path, *, depth: int = 150, sep: str = " ", interleave: bool = False):
    """A run file with heavy ties (scores on a grid of 7 values), relevant documents deep or absent, a judged query
    missing from the run, an unjudged query in it, and documents named after their query."""
    rng = random.Random(seed)
    qids = [f"q{i}" for i in range(12)]
    run, qrels = {}, {}
    for qi, q in enumerate(qids):
        docs = _ids(rng, depth + rng.randrange(-40, 40))
        if qi % 3 == 0:
            docs[rng.randrange(len(docs))] = q  # a document whose id is the query's (ignore_identical_ids)
        if qi != 5:
            run[q] = {d: round(rng.randrange(7) / 3 - 1, 6) for d in docs}
        if qi == 7:
            continue  # unjudged: in the run, not in the qrels
        judged = rng.sample(docs, 12)
        grades = {d: rng.choice([0, 0, 1, 2]) for d in judged}
        if qi == 2:
            grades = {d: 0 for d in judged}  # judged, nothing relevant
        if qi == 4:  # one relevant document, ranked last
            last = min(run[q], key=lambda d: (run[q][d], d))
            grades = {d: 0 for d in judged if d != last} | {last: 1}
        if qi == 9:
            grades["never-retrieved"] = 2
        qrels[q] = grades
    path = tmp_path / f"run-{seed}.trec"
    lines = []
    for q in sorted(run, key=lambda _: rng.random()):  # queries in no particular order
        items = list(run[q].items())
        rng.shuffle(items)  # lines in no particular order: the reader ranks them
        lines += [sep.join([q, "Q0", d, str(r), f"{s:.6f}", "tag"]) for r, (d, s) in enumerate(items, 1)]
    if interleave:  # the queries' lines mixed (a file not written query by query)
        rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, qrels, qids


def _pytrec(path, qrels, ignore: bool, measures):
    """pytrec_eval (trec_eval's code) on the file read whole as dicts (runs.read_run)."""
    import pytrec_eval

    run = runs.read_run(path)
    dropped = 0
    if ignore:
        run, dropped = runs.drop_identical_ids(run)
    chosen = [metrics.measure(m) for m in measures]
    raw = {m.name: pytrec_eval.RelevanceEvaluator(qrels, {m.request}, relevance_level=m.rel or 1).evaluate(
        {q: docs for q, docs in run.items() if docs}) for m in chosen}
    rows = {q: {m.name: raw[m.name].get(q, {}).get(m.trec, 0.0) for m in chosen} for q in qrels}
    return rows, runs.run_depth(run), dropped


MEASURES = ["nDCG@10", "AP", "RR", "P@5", "R@100", "RR(rel=2)", "Rprec", "bpref", "num_ret", "num_rel_ret"]


@pytest.mark.parametrize("seed,interleave", [(0, False), (1, False), (2, True), (3, True)])
@pytest.mark.parametrize("ignore", [False, True])
@pytest.mark.parametrize("sep", [" ", "\t"])
def test_a_file_scored_as_columns_is_pytrec_eval_on_the_file_read_whole(tmp_path, seed, interleave, ignore, sep):
    """The scorer reads the file as columns (pyarrow, or line by line for other white space) and ranks every query
    at once: the per-query values, counts and depth of pytrec_eval on the file read as dicts, ties, unjudged
    queries, a judged query missing from the run and BEIR's ignore_identical_ids included."""
    path, qrels, qids = _case(seed, tmp_path, interleave=interleave, sep=sep)
    got = metrics.evaluate(path, qrels, qids, measures=MEASURES, ignore_identical_ids=ignore)
    want, depth, dropped = _pytrec(path, qrels, ignore, MEASURES)
    assert got["per_query"].keys() == want.keys()
    for q in want:
        assert got["per_query"][q] == pytest.approx(want[q], abs=1e-12), q
    assert (got["run_depth"], got["counts"].get("identical_ids_dropped", 0)) == (depth, dropped)
    assert got["counts"]["judged_queries_with_empty_run_ids"] == ["q5"] and got["counts"]["unjudged_query_ids"] == \
        ["q7"]
    assert ignore == (dropped > 0)


def test_spaced_and_tabbed_files_read_fast_mixed_white_space_line_by_line(tmp_path):
    """One separator throughout (spaces, or tabs): pyarrow; both, or other white space: the exact reader; the same
    run either way."""
    from r2med_eval.scoring import runfile

    spaced, qrels, qids = _case(3, tmp_path)
    tabbed = tmp_path / "tabbed.trec"
    tabbed.write_text(spaced.read_text(encoding="utf-8").replace(" ", "\t"), encoding="utf-8")
    mixed = tmp_path / "mixed.trec"
    mixed.write_text(spaced.read_text(encoding="utf-8").replace(" ", " \t ", 1), encoding="utf-8")
    assert runfile._fast(spaced) is not None and runfile._fast(tabbed) is not None and runfile._fast(mixed) is None
    assert runs.read_run(spaced) == runs.read_run(tabbed) == runs.read_run(mixed)


def test_columns_hold_what_read_run_reads(tmp_path):
    from r2med_eval.scoring import runfile

    path, *_ = _case(5, tmp_path)
    table = runfile.read(path)
    docs, d = table.codes()
    rebuilt: dict = {}
    for q, x, s in zip(table.q.tolist(), d.tolist(), table.score.tolist()):
        rebuilt.setdefault(table.qids[q], {})[docs[x]] = s
    assert rebuilt == runs.read_run(path)


@pytest.mark.parametrize("text,why", [
    ("q1 Q0 a 1 0.5 t\n# x Q0 b 2 0.4\nq1 Q0 b 2 0.4 t\n", "a comment line of 6 words"),
    ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 1_0 t\n", "a score only Python reads"),
    ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 nan t\n", "a score pyarrow reads, not finite"),
    ("q1 Q0 a 1 0.5 t x\nq1 Q0 b 2 0.4 t\n", "a seventh field (trec_eval ignores it)"),
    ("q1  Q0 a 1 0.5\n", "two spaces in a row: an empty field"),
    ("q1 Q0 a 1 0.5 t\r\nq1 Q0 b 2 0.4 t\r\n", "carriage returns"),
    ("q1 Q0 a\x00 1 0.5 t\n", "a NUL byte"),
])
def test_pyarrow_declines_what_the_exact_reader_must_judge(tmp_path, text, why):
    from r2med_eval.scoring import runfile

    path = tmp_path / "r.trec"
    path.write_text(text, encoding="utf-8")
    assert runfile._fast(path) is None, why


def test_a_document_twice_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t\nq1 Q0 a 3 0.3 t\n", encoding="utf-8")
    for reader in (runs.read_run, lambda p: metrics.evaluate(p, {"q1": {"a": 1}})):
        with pytest.raises(Exception) as err:
            reader(path)
        assert "r.trec, line 3" in str(err.value) and "twice" in str(err.value) and "first on line 1" in \
            str(err.value)


def _rounding_case(tmp_path, seed: int, interleave: bool) -> tuple:
    """Scores with more than 6 decimals, many on either side of a rounding boundary and many equal once rounded
    (the run's order rounds them: runs.ranked), written exactly (repr)."""
    rng = random.Random(seed)
    lines = []
    for qi in range(9):
        q = f"q{qi}"
        docs = _ids(rng, rng.choice([5, 30, 80]))
        for d in docs:
            grid = rng.randrange(6) * 1e-6 + 0.25
            s = grid + rng.choice([0.0, 4.9e-7, 5e-7, 5.1e-7, -4.9e-7, -5e-7, 2e-7, 1e-9])
            lines.append(f"{q} Q0 {d} 0 {s!r} t")
    if interleave:
        rng.shuffle(lines)
    path = tmp_path / f"r{seed}.trec"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("seed,interleave", [(0, False), (1, True), (2, False)])
@pytest.mark.parametrize("k", [1, 10, 40])
def test_tops_are_the_runs_own_top_k(tmp_path, seed, interleave, k):
    path = _rounding_case(tmp_path, seed, interleave)
    whole = runs.read_run(path)
    tops, depth = runs.read_run_tops(path, k)
    assert depth == runs.run_depth(whole)
    assert tops == {q: {d: whole[q][d] for d, _ in runs.ranked(docs)[:k]} for q, docs in whole.items()}
    assert [list(tops[q]) for q in sorted(tops)] == [[d for d, _ in runs.ranked(whole[q])[:k]] for q in sorted(whole)]


def test_a_truncating_rerank_of_the_tops_is_the_rerank_of_the_whole_run(tmp_path):
    path = _rounding_case(tmp_path, 3, True)
    whole = runs.read_run(path)
    tops, _ = runs.read_run_tops(path, 10)
    queries = {q: f"query {q}" for q in whole}
    corpus = {d: {"title": "", "text": f"text of {d}"} for docs in whole.values() for d in docs}

    def scorer(pairs, qid, ids):  # deterministic, with ties
        return [float(sum(map(ord, qid + d)) % 5) for d in ids]

    a = rerank.rerank_run(whole, 10, scorer, queries, corpus, batch_size=4, truncate=True)
    b = rerank.rerank_run(tops, 10, scorer, queries, corpus, batch_size=4, truncate=True)
    assert a[:2] == b[:2] and a[2]["pairs"] == b[2]["pairs"]


@pytest.mark.parametrize("orders", [
    {"a": "evalpy", "b": "corpus", "c": "corpus"},
    {"a": "corpus", "b": "corpus", "c": "corpus"},
    {"a": "doc_id", "b": "doc_id", "c": "doc_id"},
    {"a": "evalpy", "b": "doc_id", "c": "corpus"},
])
def test_cliniq_pool_from_each_runs_top_is_the_pool_of_the_whole_runs(tmp_path, orders):
    """report_cliniq pools one run at a time from its top chunks (cliniq.pool_files): the same pool as
    cliniq.pool over every run read whole, ties in each run's order, a chunk outside the corpus included."""
    from r2med_eval.cliniq import metrics as cliniq

    rng = random.Random(7)
    ids = [f"{n}_{i}" for n in (3, 12, 40) for i in range(9)]  # corpus order is not id order
    files, whole = {}, {}
    for name in orders:
        lines = []
        for q in ("q1", "q2", "q3"):
            docs = rng.sample(ids, 20) + (["99_0"] if name == "b" and q == "q2" else [])
            docs.sort(key=lambda _: rng.random())  # ties stay in this (the file's) order
            lines += [f"{q} Q0 {d} {r} {rng.choice([0.5, 0.25, 0.125]):.6f} {name}" for r, d in enumerate(docs, 1)]
        files[name] = tmp_path / f"{name}.trec"
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
        whole[name] = runs.read_run(files[name])
    judged = {"q1": set(ids[:5]), "q2": set(ids[10:14])}
    position = {c: i for i, c in enumerate(ids)} if "corpus" in orders.values() else None
    for depth in (1, 4, 10):
        want = cliniq.pool(whole, judged, depth, queries=["q1", "q2", "q3"], position=position,
                           in_order={m for m, o in orders.items() if o == "evalpy"})
        assert cliniq.pool_files(files, orders, ids, judged, depth, ["q1", "q2", "q3"]) == want
        assert want


@pytest.mark.parametrize("method,options", [("rrf", {"k": 60}), ("rrf", {"k": 1, "depth": 5}),
                                            ("minmax", {"weights": [0.7, 0.3, 1.0]}), ("zscore", {"depth": 20})])
def test_fusion_query_by_query_writes_the_fusion_of_the_whole_runs(tmp_path, method, options):
    """fuse_runs fuses one query at a time from runs held as columns (runs.QueryDocs, runs.write_run_stream): the
    bytes of fusion.fuse over the runs read whole, then runs.write_run. Queries missing from some runs, lines of
    the queries mixed in one file, ties."""
    from types import SimpleNamespace

    from conftest import fingerprint_file

    from r2med_eval.scoring import fusion, identity
    from r2med_eval.stages.fuse import fuse_runs

    paths = [_case(20, tmp_path, interleave=True)[0], _rounding_case(tmp_path, 21, False), _case(22, tmp_path)[0]]
    want = tmp_path / "want.trec"
    runs.write_run(fusion.fuse([runs.read_run(p) for p in paths], method, **options), want, tag="f", decimals=8)
    ids = sorted({d for p in paths for docs in runs.read_run(p).values() for d in docs})
    for name, path in zip("abc", paths):  # the runs as the pipeline writes them: with what made them
        identity.write_sidecar(path, identity.make(name, "b", "t", identity.fingerprint(ids)))
    sm = SimpleNamespace(input=SimpleNamespace(runs=[str(p) for p in paths],
                                               fingerprint=fingerprint_file(tmp_path, ids)),
                         output=SimpleNamespace(run=str(tmp_path / "got.trec"), info=str(tmp_path / "got.json")),
                         params=SimpleNamespace(spec={"method": method, "runs": ["a", "b", "c"], **options}),
                         wildcards=SimpleNamespace(model="f", benchmark="b", task="t"))
    fuse_runs(sm)
    assert (tmp_path / "got.trec").read_bytes() == want.read_bytes()
    assert len(want.read_text().splitlines()) > 100


def test_a_bad_line_is_named_alike_by_every_reader(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 a 1 0.5 t\tx\nq1 Q0 b 2 0.4\n", encoding="utf-8")  # line 1 fine (7 fields), 2 not
    with pytest.raises(Exception) as whole:
        runs.read_run(path)
    for reader in (lambda: metrics.evaluate(path, {"q1": {"a": 1}}), lambda: runs.read_run_tops(path, 10),
                   lambda: runs.QueryDocs(path)):
        with pytest.raises(Exception) as part:
            reader()
        assert str(part.value) == str(whole.value) and "line 2" in str(part.value)

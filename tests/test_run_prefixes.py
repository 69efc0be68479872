"""Rules that read only part of a run must see what they would see in the whole run read as dicts (runs.read_run).

score_run keeps each query's top 100 in trec_eval's order and, for MRR, down to the first relevant document
(runs.read_run_prefixes, metrics.prefix_read): every value, count and the run's depth are those of the whole run
(the path the fidelity tests check against trec_eval), ties, unjudged queries, empty queries and BEIR's
ignore_identical_ids included. A truncating reranker keeps each query's top k in the run's own order
(runs.read_run_tops): the same documents, the same reranked run."""

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


def _as_score_run(path, qrels, queries, ignore: bool, measures=None):
    chosen = [metrics.measure(m) for m in measures] if measures else metrics.pipeline_measures()
    k, rel = metrics.prefix_read(chosen)
    relevant = {q: {d for d, g in docs.items() if g >= rel} for q, docs in qrels.items()} if rel is not None else None
    run, depth, dropped = runs.read_run_prefixes(path, k, relevant, queries=set(qrels), ignore_identical_ids=ignore)
    return metrics.evaluate(run, qrels, queries, measures=chosen), depth, dropped, run


def _whole(path, qrels, queries, ignore: bool, measures=None):
    run = runs.read_run(path)
    dropped = 0
    if ignore:
        run, dropped = runs.drop_identical_ids(run)
    chosen = [metrics.measure(m) for m in measures] if measures else metrics.pipeline_measures()
    return metrics.evaluate(run, qrels, queries, measures=chosen), runs.run_depth(run), dropped


@pytest.mark.parametrize("seed,interleave", [(0, False), (1, False), (2, True), (3, True)])
@pytest.mark.parametrize("ignore", [False, True])
def test_prefixes_score_as_the_whole_run(tmp_path, seed, interleave, ignore):
    path, qrels, qids = _case(seed, tmp_path, interleave=interleave)
    got, depth, dropped, kept = _as_score_run(path, qrels, qids, ignore)
    want, want_depth, want_dropped = _whole(path, qrels, qids, ignore)
    assert got["per_query"] == want["per_query"]
    assert got["metrics"] == want["metrics"]
    assert got["counts"] == want["counts"]
    assert (depth, dropped) == (want_depth, want_dropped)
    assert want_depth > 100 and sum(len(d) == 100 for d in kept.values()) >= 6  # the cut did cut
    assert "q7" not in kept and "q5" not in kept  # unjudged queries are not kept; a missing one stays missing
    assert ignore == (dropped > 0)
    # the query whose one relevant document is ranked last keeps its whole ranking: MRR reads down to it
    assert len(kept["q4"]) == len(runs.read_run(path)["q4"])


@pytest.mark.parametrize("measures", [
    ["RR(rel=2)", "nDCG@10", "P(rel=2)@5", "RR@3", "Success@10", "R@20"],
    ["RR@7", "AP@30"],
    ["ndcg_cut_5", "recip_rank", "P(rel=2)@1"],
])
def test_other_cut_measures_are_read_to_the_same_values(tmp_path, measures):
    path, qrels, qids = _case(11, tmp_path)
    got, *_ = _as_score_run(path, qrels, qids, False, measures)
    want, *_ = _whole(path, qrels, qids, False, measures)
    assert got["per_query"] == want["per_query"] and got["metrics"] == want["metrics"]


def test_measures_of_the_whole_ranking_are_not_cut():
    for name in ["AP", "nDCG", "Rprec", "Bpref", "map"]:
        assert metrics.prefix_read([metrics.measure("nDCG@10"), metrics.measure(name)]) is None
    assert metrics.prefix_read(metrics.pipeline_measures()) == (100, 1)
    assert metrics.prefix_read([metrics.measure("RR(rel=2)"), metrics.measure("RR")]) == (1, 1)
    assert metrics.prefix_read([metrics.measure("RR@7"), metrics.measure("P@3")]) == (7, None)


def test_files_pyarrow_does_not_take_go_through_read_run(tmp_path):
    """Tabs between the fields: read_run_columns declines, read_run reads it; same prefixes either way."""
    spaced, qrels, qids = _case(3, tmp_path)
    tabbed = tmp_path / "tabbed.trec"
    tabbed.write_text(spaced.read_text(encoding="utf-8").replace(" ", "\t"), encoding="utf-8")
    assert runs.read_run_columns(tabbed) is None and runs.read_run_columns(spaced) is not None
    a = runs.read_run_prefixes(spaced, 10, None, queries=set(qrels), ignore_identical_ids=True)
    b = runs.read_run_prefixes(tabbed, 10, None, queries=set(qrels), ignore_identical_ids=True)
    assert a == b and all(len(docs) <= 10 for docs in a[0].values())


def test_columns_hold_what_read_run_reads(tmp_path):
    path, *_ = _case(5, tmp_path)
    cols = runs.read_run_columns(path)
    rebuilt: dict = {}
    for q, d, s in zip(cols.q.tolist(), cols.d.tolist(), cols.score.tolist()):
        rebuilt.setdefault(cols.qids[q], {})[cols.docs[d]] = s
    assert rebuilt == runs.read_run(path)


@pytest.mark.parametrize("text,why", [
    ("q1 Q0 a 1 0.5 t\n# x Q0 b 2 0.4\nq1 Q0 b 2 0.4 t\n", "a comment line of 6 words"),
    ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", "a document twice for a query"),
    ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 1_0 t\n", "a score only Python reads"),
    ("q1 Q0 a 1 0.5 t\tx\nq1 Q0 b 2 0.4 t\n", "a tab inside the tag: a seventh column for trec_eval"),
    ("q1 Q0 a 1 0.5 t\r\nq1 Q0 b 2 0.4 t\r\n", "carriage returns"),
    ("q1 Q0 a\x00 1 0.5 t\n", "a NUL byte"),
])
def test_columns_decline_what_read_run_must_judge(tmp_path, text, why):
    path = tmp_path / "r.trec"
    path.write_text(text, encoding="utf-8")
    assert runs.read_run_columns(path) is None, why


def test_a_document_twice_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t\nq1 Q0 a 3 0.3 t\n", encoding="utf-8")
    with pytest.raises(Exception) as err:
        runs.read_run_prefixes(path, 100, None)
    assert "r.trec" in str(err.value) and "3" in str(err.value) and "twice" in str(err.value)


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

    from r2med_eval.scoring import fusion
    from r2med_eval.stages.fuse import fuse_runs

    paths = [_case(20, tmp_path, interleave=True)[0], _rounding_case(tmp_path, 21, False), _case(22, tmp_path)[0]]
    want = tmp_path / "want.trec"
    runs.write_run(fusion.fuse([runs.read_run(p) for p in paths], method, **options), want, tag="f", decimals=8)
    sm = SimpleNamespace(input=SimpleNamespace(runs=[str(p) for p in paths]),
                         output=SimpleNamespace(run=str(tmp_path / "got.trec"), info=str(tmp_path / "got.json")),
                         params=SimpleNamespace(spec={"method": method, "runs": ["a", "b", "c"], **options}),
                         wildcards=SimpleNamespace(model="f"))
    fuse_runs(sm)
    assert (tmp_path / "got.trec").read_bytes() == want.read_bytes()
    assert len(want.read_text().splitlines()) > 100


def test_a_line_trec_eval_splits_differently_is_named_as_read_run_names_it(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t\tx\n", encoding="utf-8")
    with pytest.raises(Exception) as whole:
        runs.read_run(path)
    for reader in (lambda: runs.read_run_prefixes(path, 10), lambda: runs.read_run_tops(path, 10),
                   lambda: runs.QueryDocs(path)):
        with pytest.raises(Exception) as part:
            reader()
        assert str(part.value) == str(whole.value) and "line 2" in str(part.value)

"""The vectorised scorer (``scoring.trec``) is trec_eval.

* against pytrec_eval (trec_eval's own code) on random runs with heavy ties, graded and binary judgments, negative
  grades, judged queries the run misses, unjudged queries, queries without a relevant document, ids whose string
  order is not their numeric order: every measure, per query and overall, at relevance levels 0, 1 and 2, to 1e-9;
* against independent transcriptions (written here, importing nothing of ours) where pytrec_eval's trec_eval (9.x)
  is not trec_eval 10.0 (``iprec_at_recall``'s rounded cutoffs) or has no counterpart (``-M``, ir_measures'
  ``Judged@k`` in trec_eval's order);
* against trec_eval 10.0's published test outputs (tests/data/trec_eval, see its README), through ``r2med-eval
  eval``, to the printed digit: its default measures, ``all_trec`` per query, ``-c`` with a judged query missing and
  trailing fields, ``-c -M100``, ``-l2``, parameterised measures, and qrels with comment lines.
"""

from __future__ import annotations

import gzip
import math
import random
from pathlib import Path

import pytest

from r2med_eval import cli
from r2med_eval.scoring import metrics

DATA = Path(__file__).parent / "data" / "trec_eval"
CUTS = (1, 3, 5, 10, 20)


def _case(seed: int):
    """qrels and run: scores on a grid of 5 values (ties everywhere), 12 queries, grades -1..3."""
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(60)] + [f"D{i}" for i in range(10)] + ["é1", "z", "Z0", "d100", "d09"]
    qrels, run = {}, {}
    for i in range(12):
        q = f"q{i}"
        docs = rng.sample(pool, rng.randrange(5, 40))
        if i != 3:  # q3: judged, not retrieved
            run[q] = {d: rng.randrange(5) / 4 for d in docs}
        if i == 7:
            continue  # unjudged
        judged = rng.sample(docs, min(len(docs), rng.randrange(1, 12))) + rng.sample(pool, 4)
        grades = {d: rng.choice([0, 0, 1, 2, 3, -1] if seed % 2 else [0, 1]) for d in judged}
        if i == 5:
            grades = {d: 0 for d in grades}  # judged, nothing relevant
        qrels[q] = grades
    return qrels, run


def _names():
    names = [f"{fam}_{k}" for fam in ("P", "recall", "ndcg_cut", "map_cut", "success") for k in CUTS]
    return names + ["ndcg", "map", "recip_rank", "Rprec", "bpref", "num_ret", "num_rel", "num_rel_ret", "gm_map",
                    "Rprec_mult_0.20", "Rprec_mult_1.00", "Rprec_mult_1.40", "Rprec_mult_2.00"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_measure_equals_pytrec_eval(seed, level):
    import pytrec_eval

    qrels, run = _case(seed)
    chosen = [metrics.measure(n) for n in _names()]
    got = metrics.evaluate(run, qrels, measures=chosen, level=level, complete=False)
    requests = {m.request for m in chosen}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, requests, relevance_level=level).evaluate(run)
    assert set(got["per_query"]) == set(theirs)  # judged queries the run retrieved for
    for q, row in theirs.items():
        for m in chosen:
            want = row[m.trec]
            if m.family == "gm_map":  # pytrec_eval gives the per-query log; ours is the query's AP
                want = math.exp(want)
                assert max(got["per_query"][q][m.name], 1e-5) == pytest.approx(want, abs=1e-9), (q, m.name)
                continue
            assert got["per_query"][q][m.name] == pytest.approx(want, abs=1e-9), (q, m.name, level)
    for m in chosen:
        values = [theirs[q][m.trec] for q in theirs]
        if m.family in ("num_ret", "num_rel", "num_rel_ret"):
            want = sum(values)
        elif m.family == "gm_map":
            want = math.exp(sum(values) / len(values))
        else:
            want = sum(values) / len(values)
        assert got["metrics"][m.name] == pytest.approx(want, abs=1e-9), m.name


def test_complete_scores_a_missing_judged_query_zero_and_counts_it():
    qrels, run = _case(1)
    names = ["nDCG@10", "AP", "RR", "P@5", "num_ret", "num_rel", "gm_map"]
    complete = metrics.evaluate(run, qrels, measures=names)
    partial = metrics.evaluate(run, qrels, measures=names, complete=False)
    assert "q3" in complete["per_query"] and "q3" not in partial["per_query"]
    assert complete["per_query"]["q3"]["nDCG@10"] == 0 and complete["per_query"]["q3"]["num_ret"] == 0
    assert complete["per_query"]["q3"]["num_rel"] == sum(g >= 1 for g in qrels["q3"].values())
    n = len(qrels)
    assert complete["metrics"]["AP"] == pytest.approx(partial["metrics"]["AP"] * (n - 1) / n, abs=1e-12)
    assert complete["metrics"]["gm_map"] < partial["metrics"]["gm_map"]  # the missing query counts as 1e-5
    assert complete["counts"]["judged_queries_with_empty_run_ids"] == ["q3"]
    assert complete["counts"]["unjudged_query_ids"] == ["q7"]


# ---------------------------------------------------------------- transcriptions (nothing of ours imported)

def _trec_order(docs: dict) -> list[str]:
    """form_res_rels.c's comp_sim_docno: sim descending, then strcmp(docno) descending."""
    by_id = sorted(docs, key=lambda d: d.encode("utf-8"), reverse=True)
    return sorted(by_id, key=lambda d: docs[d], reverse=True)


def _rel_list(docs: dict, judged: dict) -> list[int]:
    return [(judged[d] if judged[d] >= 0 else -2) if d in judged else -1 for d in _trec_order(docs)]


def _iprec_10(rel_list, num_rel, fraction, level):
    """m_iprec_at_recall.c of trec_eval 10.0, loop for loop (lround cutoffs)."""
    num_ret = len(rel_list)
    num_rel_ret = sum(1 for r in rel_list if r >= level)
    x = fraction * num_rel
    cutoff = int(math.floor(x + 0.5)) if x - math.floor(x) != 0.5 else int(math.floor(x)) + 1
    value = 0.0
    if cutoff > num_rel_ret:
        return value
    precis = num_rel_ret / num_ret
    int_precis = precis
    rel_so_far = num_rel_ret
    i = num_ret
    while i > 0 and rel_so_far > 0:
        precis = rel_so_far / i
        if int_precis < precis:
            int_precis = precis
        if rel_list[i - 1] >= level:
            if rel_so_far == cutoff:
                return int_precis
            rel_so_far -= 1
        i -= 1
    return int_precis


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [1, 2])
def test_iprec_at_recall_is_trec_eval_10(seed, level):
    qrels, run = _case(seed)
    fractions = (0.0, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.75, 1.0)
    chosen = [metrics.measure(f"iprec_at_recall.{f}") for f in fractions]
    got = metrics.evaluate(run, qrels, measures=chosen, level=level, complete=False)["per_query"]
    for q, row in got.items():
        rel_list = _rel_list(run[q], qrels[q])
        num_rel = sum(1 for g in qrels[q].values() if g >= 0 and g >= level)
        for f, m in zip(fractions, chosen):
            assert row[m.name] == _iprec_10(rel_list, num_rel, f, level), (q, f)


@pytest.mark.parametrize("depth", [1, 4, 15])
def test_depth_is_the_run_cut_in_trec_eval_order(depth):
    """-M N: pytrec_eval on each query's first N documents in trec_eval's order."""
    import pytrec_eval

    qrels, run = _case(3)
    cut = {q: {d: docs[d] for d in _trec_order(docs)[:depth]} for q, docs in run.items()}
    names = ["P_5", "map", "ndcg", "recip_rank", "num_ret", "bpref", "Rprec"]
    got = metrics.evaluate(run, qrels, measures=names, depth=depth, complete=False)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, set(names)).evaluate(cut)
    for q in theirs:
        for n in names:
            assert got["per_query"][q][n] == pytest.approx(theirs[q][n], abs=1e-12), (q, n)


@pytest.mark.parametrize("k", [1, 5, 10, 30])
def test_judged_at_k_is_the_judged_fraction_of_the_top_k_in_trec_eval_order(k):
    qrels, run = _case(4)
    got = metrics.evaluate(run, qrels, measures=[f"Judged@{k}", f"judged_at_{k}"])
    for q in qrels:
        docs = run.get(q, {})
        top = _trec_order(docs)[:k]
        want = sum(d in qrels[q] for d in top) / len(top) if top else 0.0
        assert got["per_query"][q][f"Judged@{k}"] == want == got["per_query"][q][f"judged_at_{k}"]
    # a tie across the cutoff: trec_eval's order takes the larger id first (ir_measures' the smaller)
    tie = metrics.evaluate({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 0}}, measures=["Judged@1"])
    assert tie["metrics"]["Judged@1"] == 0.0


# ---------------------------------------------------------------- trec_eval 10.0's published test outputs

def _file(tmp_path, name) -> str:
    target = tmp_path / name
    if not target.exists():
        target.write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    return str(target)


def _expected(name) -> dict[tuple[str, str], str]:
    out = {}
    for line in gzip.decompress((DATA / f"{name}.gz").read_bytes()).decode().splitlines():
        measure_, qid, value = (part.strip() for part in line.split("\t"))
        out[(measure_, qid)] = value
    return out


def _ours(capsys, args) -> dict[tuple[str, str], str]:
    assert cli.main(["eval", *args]) == 0
    out = {}
    for line in capsys.readouterr().out.splitlines():
        name, qid, value = line.split("\t")
        out[(metrics.measure(name).trec, qid)] = value
    return out


PLAIN = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank", "ndcg")
FAMILIES = ("iprec_at_recall", "P", "recall", "Rprec_mult", "success", "map_cut", "ndcg_cut")


def _family(name: str) -> str | None:
    """The measure (or trec_eval family) an output line's name belongs to; None for those r2med-eval lacks."""
    return name if name in PLAIN else name.rsplit("_", 1)[0] if name.rsplit("_", 1)[0] in FAMILIES else None


def _supported(expected):
    return {k: v for k, v in expected.items() if _family(k[0])}


@pytest.mark.parametrize("out,qrels,run,options", [
    ("out.test", "qrels.test", "results.test", []),
    ("out.test", "qrels.test.with-comments", "results.test", []),
    ("out.test.aq", "qrels.test", "results.test", ["-q"]),
    ("out.test.aqc", "qrels.test", "results.trunc", ["-q", "-c"]),
    ("out.test.aqcM", "qrels.test", "results.trunc", ["-q", "-c", "-M", "100"]),
    ("out.test.aql", "qrels.rel_level", "results.test", ["-q", "-l", "2", "--retrieved-only"]),
])
def test_trec_eval_published_outputs(tmp_path, capsys, out, qrels, run, options):
    expected = _supported(_expected(out))
    families = sorted({_family(k[0]) for k in expected})
    ours = _ours(capsys, [_file(tmp_path, qrels), _file(tmp_path, run), "-m", *families, *options])
    assert len(expected) >= (29 if out == "out.test" else 200)
    differ = {k: (v, ours.get(k)) for k, v in expected.items() if ours.get(k) != v}
    assert not differ
    assert {k for k in ours if k[0] in {e[0] for e in expected}} == set(expected)  # no line more, no line less


def test_trec_eval_published_parameterised_measures(tmp_path, capsys):
    expected = _supported(_expected("out.test.meas_params"))
    expected = {k: v for k, v in expected.items() if not k[0].startswith("ndcg_cut_23")}  # cutoff 23.4: atol's 23
    ours = _ours(capsys, [_file(tmp_path, "qrels.test"), _file(tmp_path, "results.test"), "-q", "-m",
                          "iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3", "recall.20,2000", "Rprec_mult.5.0,0.2,0.35",
                          "ndcg_cut.10,20", "success.2,5,20"])
    assert len(expected) == 72
    assert {k: (v, ours.get(k)) for k, v in expected.items() if ours.get(k) != v} == {}


def test_score_run_reports_judged_at_10_for_an_r2med_layout_run(tmp_path):
    """The pipeline's metrics JSON and per-query file hold judged_at_10: the fraction of each judged query's top 10
    (trec_eval's order) that has a judgment of any grade, 0 for a judged query the run misses."""
    import json
    from types import SimpleNamespace

    import r2med_eval
    from r2med_eval.benchmarks import datasets
    from r2med_eval.stages.score import score_run

    task = r2med_eval.load_task(Path(__file__).resolve().parents[1] / "data" / "demo")
    datasets.write_internal(task, tmp_path / "task")
    run = {q: {d: float(len(set(t.split()) & set(doc["text"].split())) % 4) for d, doc in task.corpus.items()}
           for q, t in list(task.queries.items())[1:]}  # ties everywhere; the first query retrieves nothing
    from conftest import fingerprint_file

    from r2med_eval.scoring import identity, runs

    runs.write_run(run, tmp_path / "run.trec", tag="overlap",  # as the pipeline writes it: with what made it
                   identity=identity.make("overlap", "demo", "demo", identity.fingerprint(task.corpus)))
    score_run(SimpleNamespace(
        input=SimpleNamespace(run=str(tmp_path / "run.trec"), qrels=str(tmp_path / "task" / "qrels.tsv"),
                              queries=str(tmp_path / "task" / "queries.jsonl"),
                              fingerprint=fingerprint_file(tmp_path, task.corpus)),
        output=SimpleNamespace(metrics=str(tmp_path / "m.json"), per_query=str(tmp_path / "pq.tsv")),
        params=SimpleNamespace(spec={"ignore_identical_ids": False}),
        wildcards=SimpleNamespace(benchmark="demo", task="demo", model="overlap")))
    want = {}
    for q, judged in task.qrels.items():
        top = _trec_order(run.get(q, {}))[:10]
        want[q] = sum(d in judged for d in top) / len(top) if top else 0.0
    got = json.loads((tmp_path / "m.json").read_text())["metrics"]["judged_at_10"]
    assert got == round(sum(want.values()) / len(want), 6) and 0 < got < 1
    header, *rows = (tmp_path / "pq.tsv").read_text().splitlines()
    column = header.split("\t").index("judged_at_10")
    assert {r.split("\t")[0]: float(r.split("\t")[column]) for r in rows} == {q: round(v, 6) for q, v in want.items()}

"""Every name of ir_measures' own measure list (``ir_measures.measures.registry``: each measure bare and with each of
its documented parameters), given to ``r2med-eval eval`` and to the API, against ``ir_measures.calc`` on a demo run.

A name ir_measures computes here must give ir_measures' values, per query and overall: exactly where ir_measures'
own code computes it (names the fast path does not know), to 1e-9 where the fast path does (trec_eval's measures,
``scoring.trec``), except where the documented tie order differs (``RR@k`` and ``Judged@k``: ir_measures' msmarco and
judged providers take equal scores by id ascending, trec_eval by id descending), and there the values equal
ir_measures' on the same run with its ties broken in trec_eval's order. A name ir_measures parses but cannot compute
here (a required parameter missing, a value of the wrong type, no provider installed for it, a provider that fails)
ends in one ``r2med-eval:`` line. Query ids are the demo's numbers (``demo-q01`` is ``1``): ir_measures' gdeval
provider (ERR, nDCG with ``dcg='exp-log2'``) reads numeric ids only.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import REPO

from r2med_eval import cli
from r2med_eval.scoring import metrics

EXAMPLES = {"cutoff": 10, "rel": 2, "judged_only": True, "dcg": "exp-log2", "gains": {0: 0, 1: 1, 2: 3}, "p": 0.5,
            "beta": 0.5, "alpha": 0.5, "T": 2.0, "min_rel": 0, "max_rel": 2, "recall": 0.2, "relative": True,
            "normalize": True}
TIES = ("recip_rank", "judged")  # the fast path's families whose ir_measures providers order ties otherwise


def names() -> list[str]:
    import ir_measures

    out = []
    for name, cls in sorted(ir_measures.measures.registry.items()):
        out.append(name)
        at = "@10" if "cutoff" in cls.SUPPORTED_PARAMS else ""
        out += [f"{name}@10" if key == "cutoff" else f"{name}({key}={EXAMPLES[key]!r}){at}"
                for key in cls.SUPPORTED_PARAMS]
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    import r2med_eval

    task = r2med_eval.load_task(REPO / "data" / "demo")
    rename = {q: str(int(q.rsplit("q", 1)[1])) for q in task.queries}  # gdeval reads numeric query ids only
    qrels = {rename[q]: d for q, d in task.qrels.items()}
    run = {}
    for q, text in task.queries.items():
        words = set(text.lower().split())
        scores = {d: len(words & set(doc["text"].lower().split())) / 4 for d, doc in task.corpus.items()}
        top = sorted(sorted(scores, reverse=True), key=lambda d: -scores[d])[:50]  # trec_eval's order, as written
        run[rename[q]] = {d: scores[d] for d in top}
    folder = tmp_path_factory.mktemp("irm")
    r2med_eval.write_run(run, folder / "run.trec", tag="overlap")
    (folder / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    return folder, qrels, run


@pytest.fixture(scope="module")
def split(demo):
    """(names ir_measures computes here with their per-query values, names it does not with its exception)."""
    import ir_measures

    _, qrels, run = demo
    good, bad = {}, {}
    for name in names():
        try:
            measure = ir_measures.parse_measure(name)
            good[name] = {r.query_id: r.value for r in ir_measures.iter_calc([measure], qrels, run)}
        except Exception as exc:
            bad[name] = exc
    return good, bad


def _untied(run):
    """The run with each query's scores replaced by its trec_eval ranks (descending): no ties, the same order."""
    out = {}
    for q, docs in run.items():
        order = sorted(sorted(docs, reverse=True), key=lambda d: -docs[d])
        out[q] = {d: float(len(order) - i) for i, d in enumerate(order)}
    return out


def test_every_name_ir_measures_computes_is_equal_through_the_api_and_the_command(demo, split, capsys):
    import ir_measures

    import r2med_eval

    folder, qrels, run = demo
    good, _ = split
    assert len(good) >= 120 and len(names()) >= 180
    # the API's run in another order (each query's documents reversed): the providers still see trec_eval's order
    reordered = {q: dict(reversed(list(docs.items()))) for q, docs in run.items()}
    api = r2med_eval.evaluate(qrels, reordered, metrics=list(good), complete=False)
    assert cli.main(["eval", str(folder / "qrels"), str(folder / "run.trec"), "--retrieved-only", "-q", "--format",
                     "json", "-m", *good]) == 0
    command = json.loads(capsys.readouterr().out)
    differ = {(q, n) for q, row in api["per_query"].items() for n, v in row.items()
              if command["per_query"][q][n] != v and v == v}
    assert not differ, sorted({n for _, n in differ})
    assert json.dumps(command["metrics"]) == json.dumps(api["metrics"])
    untied = _untied(run)
    tie_differences = set()
    for name, theirs in good.items():
        family = metrics.measure(name).family
        ours = {q: row[name] for q, row in api["per_query"].items() if row[name] == row[name]}  # nan: no value
        aggregate = ir_measures.calc_aggregate([ir_measures.parse_measure(name)], qrels, run)
        equal = all(math.isclose(ours[q], v, rel_tol=1e-12, abs_tol=1e-9) for q, v in theirs.items())
        if not equal and family in TIES:
            tie_differences.add(name)
            theirs = {r.query_id: r.value for r in ir_measures.iter_calc([ir_measures.parse_measure(name)], qrels,
                                                                        untied)}
            aggregate = ir_measures.calc_aggregate([ir_measures.parse_measure(name)], qrels, untied)
            equal = all(math.isclose(ours[q], v, rel_tol=1e-12, abs_tol=1e-9) for q, v in theirs.items())
        assert equal, (name, family)
        assert set(ours) == set(theirs), name
        assert math.isclose(api["metrics"][name], next(iter(aggregate.values())), rel_tol=1e-12, abs_tol=1e-9), name
    # the demo run is full of ties: RR@10 and Judged@10 meet the documented difference, nothing else does
    assert {"RR@10", "Judged@10"} <= tie_differences <= {n for n in good if metrics.measure(n).family in TIES}


def test_names_the_fast_path_computes_are_the_fast_path(split):
    """nDCG@10, P@10, R@100, AP, Bpref, Rprec, NumRet, ... never load ir_measures' providers; the others do."""
    good, _ = split
    fast = {n for n in good if metrics.measure(n).family != "ir_measures"}
    assert {"nDCG@10", "P@10", "AP", "Bpref", "Rprec", "NumRet", "NumRel", "NumQ", "RR", "infAP"} <= fast
    assert {"nDCG(judged_only=True)@10", "SetP", "SetF(beta=0.5)", "ERR@10", "Compat(p=0.5)", "alpha_nDCG@10",
            "nDCG(dcg='exp-log2')@10", "nDCG(gains={0: 0, 1: 1, 2: 3})@10"} <= set(good) - fast


def test_a_name_ir_measures_cannot_compute_here_is_one_line(demo, split, capsys):
    import r2med_eval
    from r2med_eval.errors import InputError

    folder, qrels, run = demo
    _, bad = split
    assert {"P", "RBP@10", "IPrec", "NumRel(rel=2)"} <= set(bad)
    # NumRel(rel=2) has no provider in ir_measures; the fast path computes it (trec_eval's num_rel at -l 2)
    got = r2med_eval.evaluate(qrels, run, metrics=["NumRel(rel=2)"])["per_query"]
    assert got == {q: {"NumRel(rel=2)": sum(g >= 2 for g in docs.values())} for q, docs in qrels.items()}
    for name in [*bad, "INST(T=2)", "nDCG(foo=1)@10", "SetF(beta='x')"]:
        if name in ("NumRel(rel=2)", "P"):  # P alone: trec_eval's P family (P_5 ... P_1000), docs/api.md
            continue
        with pytest.raises(InputError):
            r2med_eval.evaluate(qrels, run, metrics=[name])
        assert cli.main(["eval", str(folder / "qrels"), str(folder / "run.trec"), "-m", name]) == 1
        err = capsys.readouterr().err
        assert err.startswith("r2med-eval: ") and err.count("\n") == 1 and "Fix:" in err, (name, err)
    assert cli.main(["eval", str(folder / "qrels"), str(folder / "run.trec"), "-m", "nDGC@10"]) == 1
    assert "did you mean 'nDCG@10'" in capsys.readouterr().err


def test_pandas_frames_and_records_are_inputs(demo):
    import ir_measures
    import pandas as pd

    import r2med_eval

    _, qrels, run = demo
    qrels_frame = pd.DataFrame([(q, d, g) for q, docs in qrels.items() for d, g in docs.items()],
                               columns=["query_id", "doc_id", "relevance"])
    run_frame = pd.DataFrame([(q, d, s) for q, docs in run.items() for d, s in docs.items()],
                             columns=["query_id", "doc_id", "score"])
    chosen = ["nDCG@10", "RR", "SetF(beta=0.5)"]
    want = r2med_eval.evaluate(qrels, run, metrics=chosen)
    assert r2med_eval.evaluate(qrels_frame, run_frame, metrics=chosen) == want
    records = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    judged = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    assert r2med_eval.evaluate(judged, records, metrics=chosen) == want
    from r2med_eval.errors import InputError

    with pytest.raises(InputError, match="no column score"):
        r2med_eval.evaluate(qrels, run_frame.rename(columns={"score": "sim"}))

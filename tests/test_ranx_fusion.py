"""ranx's fusion methods, normalisations, optimisation and tests, through ranx itself (``scoring.ranx_fusion``,
``scoring.comparison``), against ranx run by hand on the same runs.

* every one of ranx's 25 fusion methods with every one of its 7 normalisations (and none) from ``r2med-eval fuse``:
  the fused run's documents and scores (to the 8 written decimals) are ranx's, ranked in trec_eval's order; the
  methods whose parameters ranx learns (probfuse, slidefuse, bayesfuse, mapfuse, posfuse, segfuse) and the weighted
  ones through ``--optimize`` on declared training queries, which the fused run then lacks;
* the pipeline's own ``rrf`` and ``minmax`` / ``zscore`` (``convention: ranx``) are ranx's ``rrf`` and ``wsum`` with
  ``min-max`` / ``zmuv``; on ties, ranx ranks in the order it is given the documents (the documented difference);
* ``fusion:`` entries with ranx's methods run through Snakemake (``type: run`` inputs), each fused file ranx's;
* ``compare`` with several runs and measures: every pair, ranx's student / fisher / tukey p-values, Holm across the
  family, ranx's table and LaTeX.
"""

from __future__ import annotations

import inspect
import json

import pytest
from conftest import REPO, snakemake, workflow_dir

from r2med_eval import cli
from r2med_eval.scoring import ranx_fusion

NORMS = ranx_fusion.NORMS
PLAIN = [m for m in ranx_fusion.METHODS if not ranx_fusion.PARAMS[m][0]]  # no required parameter
GIVEN = {"gmnz": {"gamma": 0.7}, "rbc": {"phi": 0.6}, "mixed": {"weights": [0.3, 0.7]},
         "w_bordafuse": {"weights": [0.3, 0.7]}, "w_condorcet": {"weights": [0.3, 0.7]},
         "wmnz": {"weights": [0.3, 0.7]}, "wsum": {"weights": [0.3, 0.7]}, "logn_isr": {"sigma": 0.02},
         "rrf": {"k": 10}}


def test_the_parameter_table_is_ranx_s():
    from ranx.fusion import fusion_switch

    for method in ranx_fusion.METHODS:
        sig = inspect.signature(fusion_switch(method)).parameters
        required = tuple(n for n, p in sig.items() if n not in ("runs", "name") and p.default is p.empty)
        optional = tuple(n for n, p in sig.items() if n not in ("runs", "name") and p.default is not p.empty)
        assert ranx_fusion.PARAMS[method] == (required, optional), method


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Three word-overlap runs of the demo (ties everywhere), as files in trec_eval's order; training judgments of
    the first 12 judged queries."""
    import r2med_eval

    task = r2med_eval.load_task(REPO / "data" / "demo")
    folder = tmp_path_factory.mktemp("fusion")
    runs = []
    for n in (1, 4, 6):
        run = {}
        for q, text in task.queries.items():
            words = {w for w in text.lower().split() if len(w) >= n}
            scores = {d: len(words & set(doc["text"].lower().split())) / 4 + (n == 4) * len(d) / 1000
                      for d, doc in task.corpus.items()}
            top = sorted(sorted(scores, reverse=True), key=lambda d: -scores[d])[:40]
            run[q] = {d: scores[d] for d in top}
        r2med_eval.write_run(run, folder / f"r{n}.trec", tag=f"r{n}")
        runs.append(r2med_eval.read_run(folder / f"r{n}.trec"))
    train = {q: task.qrels[q] for q in sorted(task.qrels)[:12]}
    (folder / "train.qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in train.items()
                                                for d, g in docs.items()))
    (folder / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in task.qrels.items()
                                          for d, g in docs.items()))
    return folder, runs, train, task.qrels


def _ranx(runs, method, norm, params=None):
    """ranx.fuse by hand: the runs as read (each query's documents in the file's, trec_eval's, order), ranx's
    candidate sets listed by id descending (ranx's own order is the set's, which changes with the hash seed)."""
    import importlib

    import ranx
    from numba.typed import List as TypedList
    from numba.types import unicode_type

    qids = sorted({q for r in runs for q in r})
    rx = [ranx.Run({q: r.get(q, {}) for q in qids}, name=f"r{i}") for i, r in enumerate(runs)]
    modules = [importlib.import_module(m) for m in ranx_fusion.CANDIDATE_MODULES]
    before = [m.get_candidates for m in modules]

    def fixed(found_runs):
        return TypedList([TypedList(sorted({d for r in found_runs for d in r[q].keys()}, reverse=True)) or
                          TypedList.empty_list(unicode_type) for q in found_runs[0].keys()])

    try:
        for m in modules:
            m.get_candidates = fixed
        fused = ranx.fuse(rx, norm=None if norm == "none" else norm, method=method, params=params or {})
    finally:
        for m, b in zip(modules, before):
            m.get_candidates = b
    return {q: dict(d) for q, d in fused.to_dict().items()}


def _same(path, want: dict, label: str = "") -> None:
    """The fused file holds ranx's documents and scores (8 decimals), in trec_eval's order of those scores."""
    import r2med_eval

    got = r2med_eval.read_run(path)
    assert set(got) == {q for q, d in want.items() if d}
    for q, docs in got.items():
        assert set(docs) == set(want[q]), q
        bad = [(d, docs[d], want[q][d]) for d in docs if abs(docs[d] - want[q][d]) > 6e-9 * max(1, abs(want[q][d]))]
        assert not bad, (label, q, bad[:3])
        order = sorted(sorted(docs, reverse=True), key=lambda d: -round(want[q][d], 8))
        assert list(docs) == order, q


CASES = [(m, "min-max") for m in PLAIN + list(GIVEN) if m != "rrf"]  # every method (rrf: the pipeline's, below)
CASES += [(m, n) for n in NORMS if n != "min-max" for m in ("wsum", "isr")]  # every norm, by score and by rank


@pytest.mark.parametrize("norm", sorted({n for _, n in CASES}))
def test_every_method_and_norm_from_the_command_is_ranx_s(demo, norm, capsys):
    folder, runs, _, _ = demo
    files = [str(folder / f"r{n}.trec") for n in (1, 4, 6)][:2]
    for method in [m for m, n in CASES if n == norm]:
        params = GIVEN.get(method, {})
        out = folder / f"{method}.{norm}.trec"
        args = ["fuse", *files, "--method", method, "--norm", norm, "-o", str(out)]
        args += [x for k, v in params.items() for x in ("--param", f"{k}={json.dumps(v)}")]
        assert cli.main(args) == 0, capsys.readouterr().err
        _same(out, _ranx(runs[:2], method, norm, params), method)


@pytest.mark.parametrize("method", ranx_fusion.TRAINED + ("wsum", "rbc", "gmnz", "w_condorcet"))
def test_learned_fusions_train_on_declared_queries_only(demo, method, capsys):
    import ranx

    folder, runs, train, qrels = demo
    out = folder / f"{method}.learned.trec"
    assert cli.main(["fuse", str(folder / "r1.trec"), str(folder / "r4.trec"), "--method", method, "--optimize",
                     "ndcg@10", "--train-qrels", str(folder / "train.qrels"), "-o", str(out)]) == 0
    said = capsys.readouterr().err
    assert "learned on" in said and "the fused run holds the other queries" in said
    held_out = set(runs[0]) - set(train)
    train_runs = [ranx.Run({q: r[q] for q in sorted(train)}, name=f"r{i}") for i, r in enumerate(runs[:2])]
    options = {"show_progress": False} if method in ("wsum", "rbc", "gmnz", "w_condorcet") else {}
    params = ranx.optimize_fusion(ranx.Qrels({q: train[q] for q in sorted(train)}), train_runs, norm="min-max",
                                  method=method, metric="ndcg@10", **options)
    want = _ranx([{q: r[q] for q in held_out} for r in runs[:2]], method, "min-max", params)
    _same(out, want)
    assert not set(__import__("r2med_eval").read_run(out)) & set(train)  # nothing evaluated on training queries
    assert len(set(qrels) - set(train)) > 0


def test_a_fusion_without_its_parameters_or_training_is_one_line(demo, capsys):
    folder, _, _, _ = demo
    files = [str(folder / "r1.trec"), str(folder / "r4.trec")]
    for args in (["--method", "gmnz"], ["--method", "probfuse"], ["--method", "wsum", "--param", "weights=[1]"],
                 ["--method", "mnz", "--param", "foo=1"], ["--method", "wsum", "--optimize", "ndcg@10"],
                 ["--method", "rrf", "--norm", "zmuv"], ["--method", "minmax", "--param", "gamma=1"]):
        assert cli.main(["fuse", *files, *args]) == 1
        err = capsys.readouterr().err
        assert err.startswith("r2med-eval: ") and err.count("\n") == 1 and "Fix:" in err, err


def _untied(run):
    """The run with each query's scores replaced by its trec_eval ranks (descending): no ties, the same order."""
    return {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}


def test_the_pipeline_s_own_methods_are_ranx_s_up_to_ranx_s_tie_order(demo):
    """rrf is ranx's rrf where no scores tie (ranx sorts each query's documents with numba's unstable argsort, so
    equal scores take an order of its own: on the tied demo runs the two differ); minmax and zscore under the ranx
    convention are ranx's wsum with min-max and zmuv."""
    import r2med_eval

    _, runs, _, _ = demo
    untied = [_untied(r) for r in runs[:2]]
    ours = r2med_eval.fuse(untied, "rrf", k=60)
    want = _ranx(untied, "rrf", "none", {"k": 60})
    assert all(abs(ours[q][d] - want[q][d]) < 1e-15 for q in want for d in want[q])
    assert r2med_eval.fuse(runs[:2], "rrf", k=60) == ours  # the trec_eval order of the ties is the untied order
    tied = _ranx(runs[:2], "rrf", "none", {"k": 60})
    assert any(abs(tied[q][d] - ours[q][d]) > 1e-12 for q in ours for d in ours[q])  # ranx's own tie order
    for method, norm in (("minmax", "min-max"), ("zscore", "zmuv")):
        ours = r2med_eval.fuse(runs[:2], method, convention="ranx")
        want = _ranx(runs[:2], "wsum", norm, {"weights": [1.0, 1.0]})
        assert all(abs(ours[q][d] - want[q][d]) < 1e-9 for q in want for d in want[q]), method
    # ours does not depend on the order the documents come in; the ties take trec_eval's order
    reversed_ties = [{q: dict(sorted(d.items(), key=lambda x: (-x[1], x[0]))) for q, d in r.items()} for r in runs[:2]]
    assert r2med_eval.fuse(reversed_ties, "rrf", k=60) == r2med_eval.fuse(runs[:2], "rrf", k=60)


WORKFLOW = """
benchmarks:
  demo:
    layout: r2med
    tasks:
      demo: {{path: {demo}}}
models:
  r1: {{type: run, path: "{runs}/r1.trec"}}
  r4: {{type: run, path: "{runs}/r4.trec"}}
fusion:
  mnz-zmuv: {{method: mnz, runs: [r1, r4], norm: zmuv}}
  wsum-rank: {{method: wsum, runs: [r1, r4], norm: rank, params: {{weights: [0.3, 0.7]}}}}
  bordafuse: {{method: bordafuse, runs: [r1, r4], norm: borda}}
  gmnz-max: {{method: gmnz, runs: [r1, r4], norm: max, params: {{gamma: 0.7}}, depth: 20}}
  rbc: {{method: rbc, runs: [r4, r1], norm: none, params: {{phi: 0.6}}}}
  learned: {{method: probfuse, runs: [r1, r4], optimize: {{metric: ndcg@10, train_qrels: "train/{{benchmark}}.qrels"}}}}
report:
  baseline: r1
"""


@pytest.mark.slow
def test_fusion_entries_with_ranx_methods_run_in_the_workflow(demo, tmp_path):
    import r2med_eval
    from r2med_eval.scoring import fusion

    folder, _, _, _ = demo
    work = workflow_dir(tmp_path, WORKFLOW.format(demo=REPO / "data" / "demo", runs=folder))
    (work / "train").mkdir()
    (work / "train" / "demo.qrels").write_text((folder / "train.qrels").read_text())
    targets = [f"results/runs/demo/demo/{n}.trec" for n in ("mnz-zmuv", "wsum-rank", "bordafuse", "gmnz-max", "rbc")]
    snakemake(work, "--cores", "2", *targets, "results/metrics/demo/demo/wsum-rank.json",
              "results/metrics/demo/demo/learned.json")
    runs = [r2med_eval.read_run(work / "results/runs/demo/demo" / f"{n}.trec") for n in ("r1", "r4")]  # imported
    cases = {"mnz-zmuv": ("mnz", "zmuv", {}, runs[:2]),
             "wsum-rank": ("wsum", "rank", {"weights": [0.3, 0.7]}, runs[:2]),
             "bordafuse": ("bordafuse", "borda", {}, runs[:2]),
             "gmnz-max": ("gmnz", "max", {"gamma": 0.7}, fusion.cut(runs[:2], 20)),
             "rbc": ("rbc", "none", {"phi": 0.6}, [runs[1], runs[0]])}
    for name, (method, norm, params, inputs) in cases.items():
        _same(work / "results/runs/demo/demo" / f"{name}.trec", _ranx(inputs, method, norm, params), name)
        lineage = json.loads((work / "results/runs/demo/demo" / f"{name}.lineage.json").read_text())
        assert lineage["method"] == method and lineage["norm"] == norm
    # probfuse learned on the 12 training queries of train/demo.qrels: the fused run and its scores lack them
    train = r2med_eval.read_qrels(work / "train" / "demo.qrels")
    want, learned = ranx_fusion.fuse_trained(train, runs, "probfuse", "min-max", "ndcg@10")
    _same(work / "results/runs/demo/demo/learned.trec", want, "learned")
    lineage = json.loads((work / "results/runs/demo/demo/learned.lineage.json").read_text())
    assert lineage["training_queries"] == 12 and lineage["learned"]["probs"] == learned["probs"]
    scored = json.loads((work / "results/metrics/demo/demo/learned.json").read_text())["counts"]
    plain = json.loads((work / "results/metrics/demo/demo/wsum-rank.json").read_text())["counts"]
    assert scored["judged_queries_scored"] == plain["judged_queries_scored"] - 12
    rows = (work / "results/per_query/demo/demo/learned.tsv").read_text().splitlines()[1:]
    assert not {r.split("\t")[0] for r in rows} & set(train)
    assert scored["judged_queries_with_empty_run"] == 0  # the training queries are not scored as empty


def test_a_fusion_entry_ranx_would_refuse_stops_the_configuration():
    from r2med_eval.errors import ConfigError
    from r2med_eval.workflow import config as wconfig

    base = {"method": "gmnz", "runs": ["bm25", "minilm"], "norm": "min-max", "params": {}}
    learn = {"metric": "ndcg@10", "train_qrels": "t.qrels"}
    for spec, words in ((base, "needs gamma"), ({**base, "params": {"gamma": 1, "x": 2}}, "no parameter x"),
                        ({**base, "method": "rrf", "norm": "zmuv"}, "norm apply to ranx's methods"),
                        ({**base, "method": "rrf", "optimize": learn}, "optimize apply to ranx's methods"),
                        ({**base, "method": "probfuse"}, "needs probs"),
                        ({**base, "optimize": learn, "params": {"gamma": 1}}, "params would be overwritten"),
                        ({**base, "norm": "l2"}, "unknown normalisation")):
        with pytest.raises(ConfigError, match=words):
            wconfig._check_ranx_fusion("f", spec, "config.yaml")
    wconfig._check_ranx_fusion("f", {**base, "params": {"gamma": 0.5}}, "config.yaml")
    wconfig._check_ranx_fusion("f", {**base, "method": "probfuse", "optimize": learn}, "config.yaml")


@pytest.mark.parametrize("test", ["student", "fisher", "tukey"])
def test_compare_every_pair_and_measure_holm_across_the_family(demo, test, capsys):
    """r2med-eval compare with three runs and two measures: ranx's test on the per-query values, Holm over the 6
    tests, the table and ranx's LaTeX."""
    import numpy as np
    from ranx.statistical_tests import compute_statistical_significance

    import r2med_eval
    from r2med_eval.scoring import comparison
    from r2med_eval.scoring.stats import holm

    folder, runs, _, qrels = demo
    files = [str(folder / f"r{n}.trec") for n in (1, 4, 6)]
    assert cli.main(["compare", str(folder / "qrels"), *files, "-m", "nDCG@10", "RR", "--test", test, "--format",
                     "json", "--permutations", "1000", "--seed", "42"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["a"], r["b"], r["measure"]) for r in rows] == [(a, b, m) for a, b in (("r1", "r4"), ("r1", "r6"),
                                                                                     ("r4", "r6"))
                                                              for m in ("nDCG@10", "RR")]
    scores = {}
    for n, run in zip(("r1", "r4", "r6"), runs):
        pq = r2med_eval.evaluate(qrels, run, metrics=["nDCG@10", "RR"])["per_query"]
        scores[n] = {m: np.asarray([pq[q][m] for q in sorted(pq)]) for m in ("nDCG@10", "RR")}
    if test == "fisher":  # ranx's draws are not reproducible (parallel threads): its p within sampling error
        raw = [comparison.fisher(scores[r["a"]][r["measure"]], scores[r["b"]][r["measure"]], 1000, 42) for r in rows]
        found = compute_statistical_significance(["r1", "r4", "r6"], scores, stat_test=test, n_permutations=4000,
                                                 max_p=0.05, random_seed=42)
        assert [found[r["a"], r["b"]][r["measure"]]["p_value"] for r in rows] == pytest.approx(raw, abs=0.06)
    else:
        found = compute_statistical_significance(["r1", "r4", "r6"], scores, stat_test=test, n_permutations=1000,
                                                 max_p=0.05, random_seed=42)
        raw = [found[r["a"], r["b"]][r["measure"]]["p_value"] for r in rows]
    assert [r["p"] for r in rows] == raw
    assert [r["p_adjusted"] for r in rows] == holm(raw)
    assert [r["significant"] for r in rows] == [p <= 0.05 for p in holm(raw)]
    assert cli.main(["compare", str(folder / "qrels"), *files, "-m", "nDCG@10", "RR", "--test", test]) == 0
    table = capsys.readouterr().out
    assert "nDCG@10" in table and "RR" in table and "Holm-adjusted" in table
    assert cli.main(["compare", str(folder / "qrels"), *files, "-m", "nDCG@10", "RR", "--test", test, "--format",
                     "latex"]) == 0
    latex = capsys.readouterr().out
    assert "\\begin{tabular}{c|l|c|c}" in latex and "\\textbf{nDCG@10}" in latex and "\\bottomrule" in latex


def test_compare_with_a_baseline_takes_several_measures(demo, capsys):
    folder, _, _, _ = demo
    files = [str(folder / f"r{n}.trec") for n in (1, 4)]
    assert cli.main(["compare", str(folder / "qrels"), *files, "--baseline", "r1", "-m", "nDCG@10", "RR",
                     "--permutations", "200", "--bootstrap", "200", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} == {"nDCG@10", "RR"}


def test_fisher_is_ranx_s_formula_with_a_seeded_generator():
    """With enough permutations the p-value reaches the exact one (every sign vector of 10 differences), ranx's
    formula (no +1); the same seed gives the same p."""
    import itertools

    import numpy as np

    from r2med_eval.scoring import comparison

    a = np.array([0.3, 0.5, 0.2, 0.9, 0.4, 0.6, 0.1, 0.8, 0.55, 0.35])
    b = np.array([0.2, 0.45, 0.25, 0.6, 0.3, 0.65, 0.05, 0.5, 0.5, 0.3])
    d = a - b
    exact = np.mean([abs(np.dot(s, d)) / len(d) >= abs(d.mean()) for s in itertools.product((-1, 1), repeat=10)])
    assert comparison.fisher(a, b, 200000, 7) == pytest.approx(exact, abs=0.005)
    assert comparison.fisher(a, b, 1000, 7) == comparison.fisher(a, b, 1000, 7)


def test_ranx_measure_names_are_ranx_s(demo, capsys):
    """precision@10, hits@10, hit_rate@10, f1@10, r-precision, dcg/ndcg_burges@10 (-l2 too): ranx.evaluate's values
    on the run as trec_eval orders it, per query and mean, from the API and from r2med-eval eval."""
    import math

    import ranx

    import r2med_eval

    folder, runs, _, qrels = demo
    names = ["precision@10", "hits@10", "hit_rate@10", "f1@10", "r-precision", "dcg@10", "dcg_burges@10",
             "ndcg_burges@10", "precision@5-l2", "f1@10-l2"]
    got = r2med_eval.evaluate(qrels, runs[1], metrics=names)
    assert cli.main(["eval", str(folder / "qrels"), str(folder / "r4.trec"), "-q", "--format", "json",
                     "-m", *names]) == 0
    assert json.loads(capsys.readouterr().out)["per_query"] == got["per_query"]
    ranx_run = ranx.Run({q: runs[1].get(q, {}) for q in sorted(qrels)})
    ranx.evaluate(ranx.Qrels({q: qrels[q] for q in sorted(qrels)}), ranx_run, names, save_results_in_run=True)
    for name in names:
        want = {q: float(v) for q, v in ranx_run.scores[name].items()}
        assert {q: row[name] for q, row in got["per_query"].items()} == pytest.approx(want, abs=1e-12), name
        assert math.isclose(got["metrics"][name], ranx_run.mean_scores[name], abs_tol=1e-12), name

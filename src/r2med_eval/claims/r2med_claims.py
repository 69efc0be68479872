"""R2MED's four claims as parts and tests over per-query nDCG@10 (``results/per_query/...``) and the per-query lexical
overlap (rule ``claims_overlap``). ``data``: ``{"values": {run: {(task, query): value}}, "overlap": {(task, query):
share}}``; ``spec``: the claim's roles (``roles.select``)."""

from __future__ import annotations

from . import evidence as ev
from .evidence import best
from .verdicts import Part

MEASURE = "nDCG@10"


def lexical_overlap(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    values, overlap = data["values"], data.get("overlap") or {}
    needs = spec["needs"]
    a = Part("dense_beats_lexical", "the best dense retriever beats the best lexical run", "one", -1,
             needs=needs.get("dense_beats_lexical"))
    low = Part("overlap_low", "the per-query overlap is low", "one", -1)
    little = Part("overlap_explains_little", "the overlap explains little of the best run's effectiveness", "one",
                  -1, needs=needs.get("overlap_explains_little"))
    chosen: dict = {}
    if spec["lexical"]:
        chosen["lexical"], chosen["lexical_means"] = best(values, spec["lexical"])
    if spec["dense"]:
        chosen["dense"], chosen["dense_means"] = best(values, spec["dense"])
    if not a.needs:
        lex, dense = chosen["lexical"], chosen["dense"]
        a.tests.append(ev.paired(values[lex], values[dense], label=f"{lex} - {dense}", runs=[lex, dense],
                                 measure=MEASURE, resampling=resampling))
    low.tests.append(ev.one_sample(overlap, rules["overlap_low"], label="mean overlap", runs=[],
                                   measure="share of a query's analysed terms in a relevant document",
                                   resampling=resampling, unit="share"))
    if not little.needs:
        top, _ = best(values, spec["lexical"] + spec["dense"])
        chosen["best"] = top
        t = ev.correlation(overlap, values[top], rules["explains_little"], label=f"overlap vs {top}", runs=[top],
                           measure=f"Spearman's rho, overlap and {MEASURE}")
        if "lexical" in chosen and chosen["lexical"] != top:  # how much it explains of BM25's: shown, not tested
            t.detail["rho_with_lexical"] = ev.correlation(overlap, values[chosen["lexical"]], rules["explains_little"],
                                                          label="", runs=[], measure="").effect
        little.tests.append(t)
    return [a, low, little], chosen


def rerank_depth(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    values = data["values"]
    part = Part("depths", "reranking deeper degrades or gains inconsistently", "often", -1,
                needs=spec["needs"].get("depths"))
    first_stage = {}
    for p in spec["pairs"]:
        deep, shallow = p["deep"], p["shallow"]
        t = ev.paired(values[deep], values[shallow], label=f"{deep} - {shallow}", runs=[deep, shallow],
                      measure=MEASURE, resampling=resampling)
        t.detail.update(first_stage=p["first_stage"], first_stage_mean=ev.mean_over(values[p["first_stage"]]),
                        depths=p["depths"])
        first_stage[p["first_stage"]] = t.detail["first_stage_mean"]
        part.tests.append(t)
    return [part], {"pairs": spec["pairs"], "first_stage_means": first_stage}


def medical_pretraining(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    values = data["values"]
    part = Part("pairs", "a medical retriever is worse than a general one of similar size", "counterexample", -1,
                needs=spec["needs"].get("pairs"))
    for p in spec["pairs"]:
        m, g = p["medical"], p["general"]
        t = ev.paired(values[m], values[g], label=f"{m} - {g}", runs=[m, g], measure=MEASURE, resampling=resampling)
        t.detail["parameters_millions"] = p["parameters"]
        part.tests.append(t)
    return [part], {"pairs": spec["pairs"]}


def _pair_means(values: dict, pairs: list, a: str, b: str) -> tuple[dict, dict]:
    return ev.averaged([values[p[a]] for p in pairs]), ev.averaged([values[p[b]] for p in pairs])


def gar_reasoning(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    values = data["values"]
    improves = Part("llm_expansion_improves", "LLM-written expansions improve on the plain queries", "one", 1,
                    needs=spec["needs"].get("llm_expansion_improves"))
    helps = Part("reasoning_helps_more", "reasoning LLMs' expansions beat non-reasoning LLMs'", "one", 1,
                 needs=spec["needs"].get("reasoning_helps_more"))
    if spec["improves"]:
        a, b = _pair_means(values, spec["improves"], "variant", "base")
        t = ev.paired(a, b, label=f"mean of {len(spec['improves'])} expanded runs - their retrievers",
                      runs=[r for p in spec["improves"] for r in (p["variant"], p["base"])], measure=MEASURE,
                      resampling=resampling)
        t.detail["pairs"] = {p["variant"]: ev.mean_over(values[p["variant"]]) - ev.mean_over(values[p["base"]])
                             for p in spec["improves"]}
        improves.tests.append(t)
    if spec["reasoning"]:
        a, b = _pair_means(values, spec["reasoning"], "reasoning", "non_reasoning")
        t = ev.paired(a, b, label=f"mean of {len(spec['reasoning'])} reasoning - non-reasoning pairs",
                      runs=[r for p in spec["reasoning"] for r in (p["reasoning"], p["non_reasoning"])],
                      measure=MEASURE, resampling=resampling)
        helps.tests.append(t)
    return [improves, helps], {"improves": spec["improves"], "reasoning": spec["reasoning"]}


BUILDERS = {"r2med.lexical_overlap": lexical_overlap, "r2med.rerank_depth": rerank_depth,
            "r2med.medical_pretraining": medical_pretraining, "r2med.gar_reasoning": gar_reasoning}

"""Which runs each claim compares, chosen from the registry's own tags before any number is read, and what to add
when a claim cannot be tested.

A benchmark is described as ``{"kind": "r2med" | "cliniq", "completion": bool, "runs": {run: entry}}`` (runs in the
configuration's order), each entry one of

* ``{"kind": "retriever", "family": "lexical" | "dense" | None, "domain": "medical" | "general" | None,
  "parameters": millions | None}`` (a first-stage run on the plain queries);
* ``{"kind": "variant", "model": retriever, "method": GAR method, "llm": name, "llm_kind": "reasoning" |
  "non-reasoning" | "human", "family": ...}`` (a query-variant run);
* ``{"kind": "rerank", "input": run, "reranker": name, "depth": k}``;
* ``{"kind": "fusion", "method": "rrf" | "minmax" | "zscore", "inputs": [runs]}``.

``select`` returns, per claim id, ``{"runs": [every run it reads], "needs": {part: what to add}, ...}`` with the
claim's own structure (pairs, candidates); a part named in ``needs`` is not testable.
"""

from __future__ import annotations

from .catalogue import RULES, claims_of

LEXICAL_NEEDS = "add a lexical first-stage run (a bm25_lucene or bm25_paper model, or tags.family: lexical)"
DENSE_NEEDS = "add a dense first-stage retriever (a dense, python or mteb model, or tags.family: dense)"


def _retrievers(runs: dict, **want) -> list[str]:
    return [r for r, e in runs.items() if e["kind"] == "retriever" and all(e.get(k) == v for k, v in want.items())]


def root_families(runs: dict, run: str, seen: tuple = ()) -> set:
    """The families of the first-stage runs a run is built from (through reranking and fusion)."""
    entry = runs.get(run)
    if entry is None or run in seen:
        return set()
    if entry["kind"] in ("retriever", "variant"):
        return {entry.get("family")}
    inputs = [entry["input"]] if entry["kind"] == "rerank" else entry["inputs"]
    return set().union(*(root_families(runs, r, seen + (run,)) for r in inputs))


def _families(runs: dict) -> tuple[dict, dict]:
    lexical, dense = _retrievers(runs, family="lexical"), _retrievers(runs, family="dense")
    needs = {}
    if not lexical:
        needs["lexical"] = LEXICAL_NEEDS
    if not dense:
        needs["dense"] = DENSE_NEEDS
    return {"lexical": lexical, "dense": dense}, needs


def lexical_overlap(runs: dict) -> dict:
    fam, needs = _families(runs)
    out = {"runs": fam["lexical"] + fam["dense"], **fam, "needs": {}}
    if needs:
        out["needs"]["dense_beats_lexical"] = "; ".join(needs.values())
    if not fam["lexical"] and not fam["dense"]:  # the overlap is set against the best first-stage run's figures
        out["needs"]["overlap_explains_little"] = f"{LEXICAL_NEEDS}, or {DENSE_NEEDS.removeprefix('add ')}"
    return out


def rerank_depth(runs: dict) -> dict:
    groups: dict[tuple, dict] = {}
    for name, e in runs.items():
        if e["kind"] == "rerank":
            groups.setdefault((e["input"], e["reranker"]), {})[int(e["depth"])] = name
    pairs = []
    for (first, reranker), by_depth in groups.items():
        if len(by_depth) >= 2:
            shallow, deep = min(by_depth), max(by_depth)
            pairs.append({"first_stage": first, "reranker": reranker, "shallow": by_depth[shallow],
                          "deep": by_depth[deep], "depths": [shallow, deep]})
    out = {"runs": [r for p in pairs for r in (p["first_stage"], p["shallow"], p["deep"])], "pairs": pairs,
           "needs": {}}
    if not pairs:
        single = [(first, reranker, next(iter(d))) for (first, reranker), d in groups.items()]
        out["needs"]["depths"] = (
            "rerank the same first stage at depth 10 and 100 (e.g. " + "; ".join(
                f"rerank {f} with {m} at depths [10, 100], not only {k}" for f, m, k in single) + ")"
            if single else "add a rerank at depth 10 and 100 over the same first stage (rerank: [{run: <first "
                           "stage>, reranker: <reranker>, depths: [10, 100]}])")
    return out


def size_pairs(runs: dict, medical: list[str], general: list[str]) -> tuple[list[dict], list[str]]:
    """Every (medical, general) pair of runs whose sizes (tags.parameters, millions) lie within a factor
    ``RULES["similar_size"]``, and what to add for a medical run without a size or without a general run of its
    size."""
    ratio = RULES["similar_size"]
    general = [g for g in general if runs[g].get("parameters")]
    pairs, needs = [], []
    for m in medical:
        size = runs[m].get("parameters")
        if not size:
            needs.append(f"give {m} its size (tags.parameters, in millions)")
            continue
        close = [g for g in general if max(size, runs[g]["parameters"]) / min(size, runs[g]["parameters"]) <= ratio]
        pairs += [{"medical": m, "general": g, "parameters": [size, runs[g]["parameters"]]} for g in close]
        if not close:
            needs.append(f"add a general-domain first-stage retriever of {size / ratio:g} to {size * ratio:g} M "
                         f"parameters (tags: {{domain: general, parameters: ...}}), the size of {m}")
    return pairs, needs


def medical_pretraining(runs: dict) -> dict:
    pairs, needs = size_pairs(runs, _retrievers(runs, domain="medical"), _retrievers(runs, domain="general"))
    out = {"runs": list(dict.fromkeys(r for p in pairs for r in (p["medical"], p["general"]))), "pairs": pairs,
           "needs": {}}
    if not pairs:
        out["needs"]["pairs"] = "; ".join(needs) if needs else (
            "run a medical and a general first-stage retriever of similar size, tagged (tags: {domain: medical | "
            "general, parameters: <millions>}; e.g. medcpt and contriever-msmarco of config/r2med_models.yaml)")
    return out


def gar_reasoning(runs: dict) -> dict:
    variants = {r: e for r, e in runs.items() if e["kind"] == "variant" and e["llm_kind"] != "human"
                and runs.get(e["model"], {}).get("kind") == "retriever"}
    improves = [{"variant": v, "base": e["model"]} for v, e in variants.items()]
    reasoning = []
    for v, e in variants.items():
        if e["llm_kind"] != "reasoning":
            continue
        for w, f in variants.items():
            if f["llm_kind"] == "non-reasoning" and (f["model"], f["method"]) == (e["model"], e["method"]):
                reasoning.append({"reasoning": v, "non_reasoning": w})
    out = {"runs": list(dict.fromkeys([x for p in improves for x in (p["variant"], p["base"])])), "improves": improves,
           "reasoning": reasoning, "needs": {}}
    if not improves:
        out["needs"]["llm_expansion_improves"] = (
            "add query-variant runs expanded by an LLM (query_variants with an LLM whose llms.<llm>.tags.kind is "
            "not human) for a first-stage retriever")
    if not reasoning:
        out["needs"]["reasoning_helps_more"] = (
            "add query-variant runs of one retriever and method expanded by a reasoning and by a non-reasoning LLM "
            "(llms.<llm>.tags.kind: reasoning | non-reasoning)")
    return out


def bm25_strong(runs: dict) -> dict:
    fam, needs = _families(runs)
    out = {"runs": fam["lexical"] + fam["dense"], **fam, "needs": {}}
    if needs:
        for part in ("multi_patient", "single_patient"):
            out["needs"][part] = "; ".join(needs.values())
    return out


def general_beats_medical(runs: dict) -> dict:
    """Pairs of a general and a medical dense retriever of similar size (as ``medical_pretraining`` pairs them)."""
    general = _retrievers(runs, family="dense", domain="general")
    medical = _retrievers(runs, family="dense", domain="medical")
    pairs, needs = size_pairs(runs, medical, general)
    out = {"runs": list(dict.fromkeys(r for p in pairs for r in (p["general"], p["medical"]))), "pairs": pairs,
           "general": general, "medical": medical, "needs": {}}
    missing = [d for d, have in (("general", general), ("medical", medical)) if not have]
    if missing:
        examples = {"general": "bge-large-en-v1.5", "medical": "medcpt"}
        out["needs"]["general_minus_medical"] = "; ".join(
            f"run a dense retriever tagged tags.domain: {d} (e.g. {examples[d]} of config/r2med_models.yaml)"
            for d in missing)
    elif not pairs:
        out["needs"]["general_minus_medical"] = "; ".join(needs) if needs else (
            "run a general and a medical dense retriever of similar size (tags.parameters within a factor 2)")
    return out


def semantic_gains(runs: dict) -> dict:
    fam, needs = _families(runs)
    out = {"runs": fam["lexical"] + fam["dense"], **fam, "needs": {}}
    if needs:
        for part in ("semantic_gain", "semantic_share"):
            out["needs"][part] = "; ".join(needs.values())
    return out


def implication_hardest(runs: dict) -> dict:
    out = {"runs": list(runs), "needs": {}}
    if not runs:
        out["needs"]["every_run"] = "add a run"
    return out


def rrf_improves(runs: dict) -> dict:
    fusions = []
    for name, e in runs.items():
        if e["kind"] != "fusion" or e["method"] != "rrf":
            continue
        fams = [root_families(runs, r) for r in e["inputs"]]
        if {"lexical"} in fams and {"dense"} in fams:
            fusions.append({"fusion": name, "inputs": list(e["inputs"])})
    out = {"runs": list(dict.fromkeys(r for f in fusions for r in [f["fusion"], *f["inputs"]])), "fusions": fusions,
           "needs": {}}
    if not fusions:
        for part in ("shallow", "deep"):
            out["needs"][part] = ("add an RRF fusion of a lexical and a dense run (fusion: {rrf-bm25-<dense>: "
                                  "{method: rrf, runs: [bm25, <dense>]}})")
    return out


def multi_patient_reliable(runs: dict, completion: bool) -> dict:
    out = {"runs": [], "needs": {}}
    if not completion:
        out["needs"]["completion"] = ("configure cliniq_completion for this benchmark (an LLM judge completes the "
                                      "multi-patient judgments: docs/cliniq.md#judgment-completion)")
    return out


def select(description: dict) -> dict[str, dict]:
    """Per claim about the benchmark's kind: the runs it reads, its structure and what to add (``needs``)."""
    runs = description["runs"]
    selectors = {"r2med.lexical_overlap": lexical_overlap, "r2med.rerank_depth": rerank_depth,
                 "r2med.medical_pretraining": medical_pretraining, "r2med.gar_reasoning": gar_reasoning,
                 "cliniq.bm25_strong": bm25_strong, "cliniq.general_beats_medical": general_beats_medical,
                 "cliniq.semantic_gains": semantic_gains, "cliniq.implication_hardest": implication_hardest,
                 "cliniq.rrf_improves": rrf_improves,
                 "cliniq.multi_patient_reliable": lambda r: multi_patient_reliable(r, description.get("completion",
                                                                                                       False))}
    return {c["id"]: selectors[c["id"]](runs) for c in claims_of(description["kind"])}

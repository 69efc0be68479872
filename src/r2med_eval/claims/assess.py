"""A benchmark's claims assessed: each claim's parts and tests built from its roles and the per-query data, Holm over
every test of the benchmark's claims, then each verdict (``verdicts.decide``)."""

from __future__ import annotations

from . import cliniq_claims, r2med_claims
from .catalogue import BY_ID, claims_of
from .evidence import clean
from .verdicts import correct, decide

BUILDERS = {**r2med_claims.BUILDERS, **cliniq_claims.BUILDERS}


def assess(benchmark: str, kind: str, specs: dict, data: dict, rules: dict, resampling: dict,
           figures=()) -> list[dict]:
    """The claims about a benchmark of ``kind`` (r2med or cliniq), in the catalogue's order: ``id``, ``benchmark``,
    ``source``, ``statement``, ``verdict``, ``reason``, ``rule``, ``needs``, ``effect`` (the headline test),
    ``evidence`` (the runs read, those chosen, every part with its tests), ``figures`` (the names of the benchmark's
    plots the claim rests on, among ``figures``)."""
    built = {}
    for claim in claims_of(kind):
        built[claim["id"]] = BUILDERS[claim["id"]](specs[claim["id"]], data, rules, resampling)
    family = correct({cid: parts for cid, (parts, _) in built.items()})
    out = []
    for cid, (parts, chosen) in built.items():
        claim = BY_ID[cid]
        decided = decide(claim, parts, rules)
        out.append({"id": cid, "benchmark": benchmark, "source": claim["source"], "statement": claim["statement"],
                    "verdict": decided["verdict"], "reason": decided["reason"], "rule": claim["rule"],
                    "needs": decided["needs"], "effect": decided["effect"],
                    "evidence": {"runs": specs[cid]["runs"], "chosen": clean(chosen), "parts": decided["parts"],
                                 "holm_family": family, "alpha": rules["alpha"]},
                    "figures": [f for f in claim["figures"] if f in figures]})
    return out

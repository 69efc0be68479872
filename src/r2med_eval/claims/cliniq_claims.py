"""CliniQ's six claims as parts and tests over each run's per-query figures (``cliniq.per_query``, written by rule
``score_cliniq``: multi-patient nDCG@10 overall and per match type, single-patient nDCG overall and per match type)
and the judgment completion's
verdict. ``data``: ``{"values": {run: {(task, query): {column: value}}}, "verdict": dict | None}``."""

from __future__ import annotations

from ..cliniq.corpus import MATCH_TYPES
from . import evidence as ev
from .catalogue import SEMANTIC_TYPES
from .evidence import best
from .verdicts import Part

MULTI, SINGLE, DEEP = "multi-patient nDCG@10", "single-patient nDCG", "multi-patient Recall@100"


def column(rows: dict, name: str) -> dict:
    """``{key: value}`` of one column of a run's per-query figures, the queries where it is defined."""
    return {k: r[name] for k, r in rows.items() if r.get(name) is not None}


def _multi(values: dict) -> dict:
    return {r: column(rows, "multi_all") for r, rows in values.items()}


def bm25_strong(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    values, share = data["values"], rules["competitive_share"]
    parts = [Part(f"{s}_patient", f"lexical is competitive with dense, {s}-patient", "one", 1,
                  needs=spec["needs"].get(f"{s}_patient")) for s in ("multi", "single")]
    chosen: dict = {}
    if spec["lexical"] and spec["dense"]:
        multi = _multi(values)
        lex, chosen["lexical_means"] = best(multi, spec["lexical"])
        dense, chosen["dense_means"] = best(multi, spec["dense"])
        chosen.update(lexical=lex, dense=dense)
        for part, name, measure in zip(parts, ("multi_all", "single_all"), (MULTI, SINGLE)):
            part.tests.append(ev.paired(column(values[lex], name), column(values[dense], name),
                                        label=f"{lex} - {dense}", runs=[lex, dense], measure=measure,
                                        resampling=resampling, factor=share))
    return parts, chosen


def general_beats_medical(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    """General minus medical over the pairs of similar size (``roles.size_pairs``, as ``r2med.medical_pretraining``
    pairs them), the per-query mean over the pairs, multi-patient."""
    part = Part("general_minus_medical", "general dense retrievers beat medical ones of similar size", "one", 1,
                needs=spec["needs"].get("general_minus_medical"))
    pairs = spec.get("pairs", [])
    if not part.needs:
        multi = _multi(data["values"])
        a = ev.averaged([multi[p["general"]] for p in pairs])
        b = ev.averaged([multi[p["medical"]] for p in pairs])
        label = " ; ".join(f"{p['general']} - {p['medical']}" for p in pairs)
        t = ev.paired(a, b, label=(f"mean over {len(pairs)} size-matched pairs: {label}" if len(pairs) > 1 else label),
                      runs=list(dict.fromkeys(r for p in pairs for r in (p["general"], p["medical"]))),
                      measure=MULTI, resampling=resampling)
        t.detail["pairs"] = [[p["general"], p["medical"], *p["parameters"][::-1]] for p in pairs]
        part.tests.append(t)
    return [part], {"pairs": pairs, "general": spec["general"], "medical": spec["medical"]}


def semantic_gains(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    """The best dense run's gain over the best lexical run per match type (multi-patient). (1) Its gain on semantic
    matches is above 0. (2) At least ``rules["semantic_share"]`` of its gain lies on semantic matches: per query with a
    string and a semantic match, G_sem its mean gain over its semantic types and G_str its gain on string matches,
    the share G_sem / (G_sem + G_str) is at least s exactly when (1 - s) G_sem - s G_str is at least 0, which is
    tested."""
    share = rules["semantic_share"]
    gain = Part("semantic_gain", "the dense run gains on semantic matches", "one", 1,
                needs=spec["needs"].get("semantic_gain"))
    mostly = Part("semantic_share", f"at least {share:.0%} of the dense gain lies on semantic matches", "one", 1,
                  needs=spec["needs"].get("semantic_share"))
    chosen: dict = {}
    if not mostly.needs:
        values = data["values"]
        multi = _multi(values)
        lex, chosen["lexical_means"] = best(multi, spec["lexical"])
        dense, chosen["dense_means"] = best(multi, spec["dense"])
        chosen.update(lexical=lex, dense=dense)
        gains = {}
        for t in MATCH_TYPES:
            ours, theirs = column(values[dense], f"multi_{t}"), column(values[lex], f"multi_{t}")
            gains[t] = {k: v - theirs[k] for k, v in ours.items() if k in theirs}
        chosen["mean_gain_by_match_type"] = {t: ev.mean_over(g) for t, g in gains.items()}
        semantic, string = {}, {}
        for k, s in gains["string"].items():
            sem = [gains[t][k] for t in SEMANTIC_TYPES if k in gains[t]]
            if sem:
                semantic[k], string[k] = sum(sem) / len(sem), s
        g_sem, g_str = ev.mean_over(semantic), ev.mean_over(string)
        chosen.update(semantic_gain=g_sem, string_gain=g_str,
                      semantic_share=g_sem / (g_sem + g_str) if g_sem + g_str > 0 else None)
        runs = [dense, lex]
        gain.tests.append(ev.one_sample(semantic, 0.0, label=f"{dense} over {lex}: semantic gain", runs=runs,
                                        measure=MULTI + " gain", resampling=resampling))
        dd = {k: (1 - share) * semantic[k] - share * string[k] for k in semantic}
        t = ev.one_sample(dd, 0.0, label=f"{dense} over {lex}: {1 - share:g} x semantic gain - {share:g} x string "
                          "gain", runs=runs, measure=MULTI + " gain", resampling=resampling)
        t.detail["semantic_share"] = chosen["semantic_share"]
        mostly.tests.append(t)
    return [gain, mostly], chosen


def implication_hardest(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    part = Part("every_run", "implication is each run's hardest match type", "all", -1,
                needs=spec["needs"].get("every_run"))
    hardest = {}
    for run in spec["runs"]:
        rows = data["values"][run]
        by_type = {t: column(rows, f"multi_{t}") for t in MATCH_TYPES}
        means = {t: ev.mean_over(v) for t, v in by_type.items() if v and t != "implication"}
        if not means:
            continue
        other = min(means, key=lambda t: (means[t], MATCH_TYPES.index(t)))
        hardest[run] = other
        part.tests.append(ev.paired(by_type["implication"], by_type[other], label=f"{run}: implication - {other}",
                                    runs=[run], measure=MULTI, resampling=resampling))
    if not part.tests and not part.needs:
        part.note = "no run has a query with an implication and another match type"
    return [part], {"hardest_other_type": hardest}


def rrf_improves(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    """Every RRF fusion of a lexical and a dense run against each input, on a shallow measure (multi-patient
    nDCG@10) and on a deep one (multi-patient Recall@100): "large gains on both shallow and deep metrics"."""
    parts = [Part("shallow", "each RRF fusion beats each of its inputs on nDCG@10 (shallow)", "all", 1,
                  needs=spec["needs"].get("shallow")),
             Part("deep", "each RRF fusion beats each of its inputs on Recall@100 (deep)", "all", 1,
                  needs=spec["needs"].get("deep"))]
    for part, name, measure in zip(parts, ("multi_all", "multi_recall_at_100"), (MULTI, DEEP)):
        values = {r: column(rows, name) for r, rows in data["values"].items()}
        for f in spec["fusions"]:
            for r in f["inputs"]:
                part.tests.append(ev.paired(values[f["fusion"]], values[r], label=f"{f['fusion']} - {r}",
                                            runs=[f["fusion"], r], measure=measure, resampling=resampling))
    return parts, {"fusions": spec["fusions"]}


def multi_patient_reliable(spec: dict, data: dict, rules: dict, resampling: dict) -> tuple[list[Part], dict]:
    part = Part("completion", "the judgment completion finds the multi-patient results reliable", "one", 1,
                needs=spec["needs"].get("completion"))
    verdict = data.get("verdict")
    if not part.needs:
        part.fixed, part.note = completion_verdict(verdict)
    return [part], {"completion": verdict}


def completion_verdict(doc: dict | None) -> tuple[str, str]:
    """(verdict, note) from the completion's verdict.json: its ``status`` (reliable: holds, unreliable: does not
    hold, inconclusive: no usable judgment, so nothing was estimated); a file without one (an earlier version)
    by ``reliable`` true/false; anything else is inconclusive."""
    if not isinstance(doc, dict):
        return "inconclusive", "no verdict"
    if doc.get("status") == "inconclusive":
        return "inconclusive", "the completion could not decide (no usable judgment of the sample)"
    reliable = {"reliable": True, "unreliable": False}.get(doc.get("status"), doc.get("reliable"))
    if reliable is True:
        return "holds", ("reliable by the review's rule: no ranking flips and BM25's recall advantage holds"
                         if isinstance(doc.get("review"), dict) else
                         "reliable: no system moves beyond the threshold and no ordering flips")
    if reliable is False:
        review = doc.get("review")
        if isinstance(review, dict):  # the review's rule decides: rankings and BM25's recall advantage
            adv = review.get("bm25_advantage") or {}
            shift = adv.get("relative_change")
            return "does_not_hold", (f"unreliable by the review's rule: {len(review.get('flipped') or [])} rankings "
                                     "flip; BM25's recall advantage " + (
                                         f"shifts by {shift:+.1f}% relative" if isinstance(shift, (int, float)) else
                                         "shifts without bound (from 0)" if adv.get("shifted") else
                                         "is not computed" if not adv.get("computed") else "holds"))
        moved, flipped = len(doc.get("moved") or []), len(doc.get("flipped") or [])
        return "does_not_hold", f"unreliable: {moved} figures move beyond the threshold, {flipped} orderings flip"
    return "inconclusive", "the completion gives no verdict"


BUILDERS = {"cliniq.bm25_strong": bm25_strong, "cliniq.general_beats_medical": general_beats_medical,
            "cliniq.semantic_gains": semantic_gains, "cliniq.implication_hardest": implication_hardest,
            "cliniq.rrf_improves": rrf_improves, "cliniq.multi_patient_reliable": multi_patient_reliable}

"""Expert labels in CliniQ's judgment completion (``cliniq_completion.human_labels``, one file per expert): the judge
against each expert and every expert against every other (Cohen's kappa and the observed agreement, for relevance
on the pairs both labelled and for the match type on the pairs both find relevant), and the false-negative rate by
each expert's labels where the expert labelled, beside the judge's on the same pairs; the tables of both (CSV,
Markdown, LaTeX). Ids, labels and numbers only.

The review behind the test asks for two medical experts on about ten queries: their agreement with each other is
the ceiling the judge can be held to, and the rate by their labels is the check of the judge's estimate.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .completion_report import _ci, _num, _tex_table
from .corpus import IRRELEVANT, MATCH_TYPES

JUDGE = "judge"
COLUMNS = ("kind", "rater_a", "rater_b", "aspect", "n", "agreement", "kappa", "found", "rate", "rate_low",
           "rate_high", "covered")


def expert_name(path) -> str:
    """An expert's name in the tables: the file's name without its extension."""
    return Path(path).stem


def agreement(a: dict[tuple[str, str], str], b: dict[tuple[str, str], str]) -> dict:
    """Rater ``a`` (the judge, or an expert) against rater ``b`` (an expert) on the pairs both gave a usable label:
    relevance (relevant or not) and, on the pairs both find relevant, the match type; observed agreement and Cohen's
    kappa with their counts, a confusion table, and ``b``'s labels that ``a`` did not give (or answered
    malformed)."""
    from ..scoring.stats import cohen_kappa
    from .judge import MALFORMED

    both = sorted(k for k in b if k in a and a[k] != MALFORMED)
    rel_b = ["relevant" if b[k] in MATCH_TYPES else IRRELEVANT for k in both]
    rel_a = ["relevant" if a[k] in MATCH_TYPES else IRRELEVANT for k in both]
    typed = [k for k in both if b[k] in MATCH_TYPES and a[k] in MATCH_TYPES]
    kr, ar, nr = cohen_kappa(rel_a, rel_b)
    kt, at, nt = cohen_kappa([a[k] for k in typed], [b[k] for k in typed])
    confusion: dict[tuple[str, str], int] = defaultdict(int)
    for k in both:
        confusion[(a[k], b[k])] += 1
    return {"relevance": {"n": nr, "agreement": ar, "kappa": kr},
            "match_type": {"n": nt, "agreement": at, "kappa": kt},
            "human_labels": len(b), "not_judged": sum(1 for k in b if k not in a),
            "judge_malformed": sum(1 for k in b if a.get(k) == MALFORMED), "confusion": dict(confusion)}


def agreements(judge: dict, experts: dict[str, dict]) -> list[tuple[str, str, dict]]:
    """(rater a, rater b, ``agreement``) for the judge against each expert, then each pair of experts."""
    out = [(JUDGE, name, agreement(judge, labels)) for name, labels in experts.items()]
    names = list(experts)
    out += [(a, b, agreement(experts[a], experts[b])) for i, a in enumerate(names) for b in names[i + 1:]]
    return out


def rates(design_rows: list[dict], sample_rows: list[dict], judge: dict, experts: dict[str, dict]) -> list[dict]:
    """The false-negative rate (any match type) of the completed queries by each expert's labels on the sampled
    pairs the expert labelled, and by the judge's labels on the same pairs: the stratified estimator of
    ``completion.estimate``, the pairs a rater did not label counted as non-response within their stratum."""
    from .completion import estimate, strata
    from .judge import MALFORMED

    sampled = {(r["query_id"], r["chunk_id"]) for r in sample_rows}
    out = []
    for name, labels in experts.items():
        mine = {k: v for k, v in labels.items() if k in sampled}
        for rater, source in ((name, mine), (JUDGE, {k: judge.get(k, MALFORMED) for k in mine})):
            e = estimate(strata(design_rows, sample_rows, source), "relevant")
            out.append({"kind": "fnr", "rater_a": rater, "rater_b": name, "aspect": "relevant",
                        "n": e["judged"] - e["malformed"], "found": e["found"], "rate": e["rate"],
                        "rate_low": e["rate_low"], "rate_high": e["rate_high"], "covered": e["covered"]})
    return out


def rows(pairs: list[tuple[str, str, dict]], fnr: list[dict]) -> list[dict]:
    """The CSV rows (``COLUMNS``): one per pair of raters and aspect, then the rates."""
    out = [{"kind": "agreement", "rater_a": a, "rater_b": b, "aspect": aspect, **result[aspect]}
           for a, b, result in pairs for aspect in ("relevance", "match_type")]
    return out + fnr


def markdown(pairs: list[tuple[str, str, dict]] | None, fnr: list[dict], name: str | None = None) -> str:
    """``name``: the benchmark as the heading shows it (``report.synthetic.titled``)."""
    from ..report.tables import md_escape

    out = ["## The judge against expert labels" + (f" ({md_escape(name)})" if name else ""), ""]
    if not pairs:
        return "\n".join(out + ["No expert labels are configured (cliniq\\_completion.human\\_labels)."]) + "\n"
    for a, b, r in pairs:
        if a == JUDGE:
            out.append(f"- {md_escape(b)}: {r['human_labels']} labels; {r['not_judged']} name a chunk the judge did "
                       f"not judge, {r['judge_malformed']} one whose answer stayed malformed.")
    out += ["", "| rater | against | aspect | pairs | agreement x 100 | Cohen's kappa |",
            "|---|---|---|---:|---:|---:|"]
    for a, b, r in pairs:
        for aspect, name in (("relevance", "relevance"), ("match_type", "match type (both relevant)")):
            x = r[aspect]
            out.append(f"| {md_escape(a)} | {md_escape(b)} | {name} | {x['n']} | {_num(x['agreement'] * 100, 1)} | "
                       f"{_num(x['kappa'], 3)} |")
    if fnr:
        out += ["", "False-negative rate (x 100, 95% interval) by each expert's labels on the sampled chunks the "
                "expert labelled, and by the judge's on the same chunks:", "",
                "| labels of | on the chunks of | labelled | found | FNR x 100 | 95% CI |",
                "|---|---|---:|---:|---:|---|"]
        for r in fnr:
            ci = _ci(r["rate_low"], r["rate_high"])
            out.append(f"| {md_escape(r['rater_a'])} | {md_escape(r['rater_b'])} | {r['n']} | {r['found']} | "
                       f"{_num(r['rate'] * 100, 2)} | {ci} |")
    judge_pairs = [(b, r) for a, b, r in pairs if a == JUDGE and r["confusion"]]
    labels = list(MATCH_TYPES + (IRRELEVANT,))
    for b, r in judge_pairs:
        out += ["", f"Judge (rows) against {md_escape(b)} (columns):", "",
                "| judge | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        for x in labels:
            out.append(f"| {x} | " + " | ".join(str(r["confusion"].get((x, y), 0)) for y in labels) + " |")
    return "\n".join(out) + "\n"


def latex(benchmark: str, pairs: list[tuple[str, str, dict]] | None, fnr: list[dict],
          shown_as: str | None = None) -> str:
    from ..report.tables import tex_label

    body = [[a, b, name, str(r[aspect]["n"]), _num(r[aspect]["agreement"] * 100, 1), _num(r[aspect]["kappa"], 3)]
            for a, b, r in pairs or () for aspect, name in (("relevance", "relevance"), ("match_type", "match type"))]
    body += [[r["rater_a"], r["rater_b"], "FNR x 100", str(r["n"]), _num(r["rate"] * 100, 2), ""] for r in fnr]
    caption = (f"CliniQ judgment completion on {shown_as or benchmark}: the judge against each expert and expert "
               "against expert, "
               "observed agreement (x 100) and Cohen's kappa; FNR rows: the false-negative rate by the first rater's "
               "labels on the chunks the second labelled." + ("" if pairs else " No expert labels were configured."))
    return _tex_table(("Rater", "Against", "Aspect", "Pairs", "Agreement", "Kappa"), body, caption,
                      tex_label("tab", "cliniq", benchmark, "completion", "agreement"), "lllrrr")

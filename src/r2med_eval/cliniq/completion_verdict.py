"""The verdict of CliniQ's judgment completion: the review's own decision rule, with both readings of its threshold,
the project's stricter per-system rule beside it, and the expert arm. Ids, labels and numbers only.

The review (the CliniQ assessment's concrete test) says: "If the model rankings or the reported recall advantage of
BM25 shifts by more than 5 relative points, the Multi-Patient benchmark results as presented are not reliable."

* **Model rankings** (``REVIEW_METRICS``): the order of the re-scored systems over all queries on MRR, nDCG@10 (both
  variants: CliniQ's, which the paper reports, and trec_eval's) and Recall@100, with CliniQ's judgments and with the
  completed ones; a ranking shifts when a pair of systems flips (a tie that opens or closes is no flip).
* **BM25's recall advantage** (``bm25_advantage``): Recall@100 of the lexical run (the best by the original figure
  when there are several) minus that of the best dense run (by the original figure, held fixed), over all queries.
  Two readings of "shifts by more than 5 relative points":

  - *relative* (the one that decides): the advantage's relative change, |after - before| / |before|, above 5%;
  - *share*: the advantage as a percentage of the dense run's recall, (lexical - dense) / dense x 100, moving by more
    than 5 percentage points.

  Both are computed and shown. Without a lexical or a dense run among the re-scored runs the advantage is not
  computed and the rankings alone decide (said in the verdict).

The **per-system rule** is ours and stricter: any system whose MRR, nDCG@10 (either variant) or Recall@100 over all
queries moves by more than ``move_threshold`` relative points, or any flipped ordering. It is reported on its own line,
labelled as ours; the status (``reliable``, ``unreliable``, ``inconclusive`` when no answer of the judge could be used)
is the review's. The two disagree both ways: an equal absolute drop in every system's recall moves each system by more
than 5% (unreliable for ours) and leaves the advantage and the rankings alone (reliable for the review); an advantage
that falls from 0.02 to 0.005 while no system moves by 5% is the reverse.
"""

from __future__ import annotations

import math

from .completion import EFFECTIVENESS
from .completion_report import _num, _pct, label

REVIEW_METRICS = EFFECTIVENESS  # the rankings the review's rule reads: MRR, both nDCG@10, Recall@100
REVIEW_RULE = ("If the model rankings or the reported recall advantage of BM25 shifts by more than 5 relative "
               "points, the Multi-Patient benchmark results as presented are not reliable.")


def bm25_advantage(rescored: list[dict], families: dict[str, str | None], threshold: float) -> dict:
    """BM25's Recall@100 advantage over the best dense run, over all queries, before and after completion, with both
    readings of a shift (module docstring). ``families``: run -> lexical, dense or None (a fusion, a rerank)."""
    recall = {r["model"]: r for r in rescored if r["group"] == "all" and r["metric"] == "recall_at_100"}
    order = list(recall)
    lexical = [m for m in order if families.get(m) == "lexical"]
    dense = [m for m in order if families.get(m) == "dense"]
    if not lexical or not dense:
        missing = " and no ".join(w for w, runs in (("lexical", lexical), ("dense", dense)) if not runs)
        return {"computed": False, "why": f"no {missing} run among the re-scored runs"}

    def top(runs):
        return max(runs, key=lambda m: (recall[m]["original"], -order.index(m)))

    lex, den = top(lexical), top(dense)
    lo, lc, do, dc = (recall[lex]["original"], recall[lex]["completed"], recall[den]["original"],
                      recall[den]["completed"])
    before, after = lo - do, lc - dc
    if before == 0:
        relative = 0.0 if after == 0 else math.copysign(math.inf, after)
    else:
        relative = (after - before) / abs(before) * 100.0
    share_before = before / do * 100.0 if do else math.nan
    share_after = after / dc * 100.0 if dc else math.nan
    change = share_after - share_before
    return {"computed": True, "lexical": lex, "dense": den, "lexical_original": lo, "lexical_completed": lc,
            "dense_original": do, "dense_completed": dc, "original": before, "completed": after,
            "relative_change": relative, "shifted": abs(relative) > threshold,
            "share_original": share_before, "share_completed": share_after, "share_change": change,
            "share_shifted": bool(change == change and abs(change) > threshold)}


def review_rule(rescored: list[dict], ranks: list[dict], families: dict, threshold: float) -> dict:
    """The review's rule on the re-scored figures: {reliable, flipped (metric, above, below) over all queries,
    advantage (``bm25_advantage``), reliable_share (the verdict under the share reading)}."""
    flipped = sorted({(r["metric"], a, b) for r in ranks if r["group"] == "all" and r["metric"] in REVIEW_METRICS
                      for a, b in r["flipped_pairs"]})
    adv = bm25_advantage(rescored, families, threshold)
    shifted = adv["computed"] and adv["shifted"]
    share_shifted = adv["computed"] and adv["share_shifted"]
    return {"reliable": not flipped and not shifted, "reliable_share": not flipped and not share_shifted,
            "flipped": flipped, "advantage": adv}


def per_system_rule(rescored: list[dict], ranks: list[dict]) -> dict:
    """Our stricter rule: a figure over all queries (MRR, both nDCG@10, Recall@100) moving beyond the threshold, or any
    flipped ordering. Returns {reliable, moved (model, metric), systems (the models that moved), figures (how many
    figures it reads)}."""
    eff = [r for r in rescored if r["group"] == "all" and r["metric"] in EFFECTIVENESS]
    moved = [r for r in eff if r["moved"]]
    flipped = [1 for r in ranks if r["group"] == "all" and r["metric"] in EFFECTIVENESS and r["flipped_pairs"]]
    return {"reliable": not moved and not flipped, "moved": [(r["model"], r["metric"]) for r in moved],
            "moved_rows": moved, "systems": list(dict.fromkeys(r["model"] for r in moved)), "figures": len(eff)}


def expert_arm(agreement_rows: list[dict] | None, experts: dict, completed_queries: int) -> dict:
    """What the expert arm found: per expert pair its relevance agreement and kappa (``agreement.csv``'s rows) and
    the false-negative rate by each expert's labels; or why it was not run, and on what. ``experts``: {present: the
    files read, missing: the files the design expects that are not there} (names)."""
    present, missing = list(experts.get("present", ())), list(experts.get("missing", ()))
    on_what = (f"the review asks two medical experts to label the judged chunks of about 10 of the "
               f"{completed_queries} completed queries (labels.tsv lists them)")
    if not present:
        why = (f"the experts' files {', '.join(missing)} (cliniq_completion.human_labels) are not there yet" if missing
               else "no expert's labels are configured (cliniq_completion.human_labels)")
        return {"run": False, "missing": missing,
                "text": f"The expert arm was not run: {why}; {on_what}, and their agreement with each other is the "
                        "ceiling the judge can be held to."}
    rows = [r for r in agreement_rows or [] if r.get("kind") == "agreement" and r.get("aspect") == "relevance"]

    def cell(r, key, digits):
        value = r.get(key, "")
        return "n/a" if value in ("", None) else f"{float(value):.{digits}f}"

    pairs = [f"{r['rater_a']} against {r['rater_b']}: kappa {cell(r, 'kappa', 2)} on {r['n']} pairs "
             f"(agreement {cell(r, 'agreement', 2)})" for r in rows]
    fnr = [r for r in agreement_rows or [] if r.get("kind") == "fnr" and r["rater_a"] == r["rater_b"]]
    rates = [f"{r['rater_a']} {_pct(float(r['rate']), 2) if r['rate'] else 'n/a'} on {r['n']} chunks" for r in fnr]
    text = (f"Expert arm ({len(present)} expert{'s' if len(present) != 1 else ''}: {', '.join(present)}), relevance: "
            + "; ".join(pairs) + "." + (" False-negative rate by the experts' labels: " + "; ".join(rates) + "."
                                        if rates else ""))
    if missing:
        text += f" Not run on {', '.join(missing)} (not there yet); {on_what}."
    return {"run": True, "missing": missing, "text": text}


def _advantage_text(adv: dict, threshold: float) -> str:
    if not adv["computed"]:
        return f"BM25's recall advantage is not computed ({adv['why']}), so the rankings alone decide"
    lex, den = adv["lexical"], adv["dense"]
    rel = adv["relative_change"]
    return (f"BM25's recall advantage ({lex} R@100 minus {den}'s) goes from {adv['original'] * 100:+.2f} to "
            f"{adv['completed'] * 100:+.2f} points, a relative change of {rel:+.1f}%"
            f" ({'more' if adv['shifted'] else 'not more'} than {threshold:g}%); read as a share of {den}'s recall it "
            f"goes from {_num(adv['share_original'], 2)}% to {_num(adv['share_completed'], 2)}%, "
            f"{_num(adv['share_change'], 2)} points ({'more' if adv['share_shifted'] else 'not more'} than "
            f"{threshold:g})")


def verdict(benchmark: str, info: dict, overall: dict, rescored: list[dict], ranks: list[dict], threshold: float,
            families: dict | None = None, experts: dict | None = None) -> dict:
    """The verdict on the benchmark's multi-patient results: the review's rule decides (``review_rule``), ours is
    reported beside it (``per_system_rule``), the test is inconclusive when no answer of the judge could be used.
    ``info``: llm, judged, malformed, queries, pool, coded_from; ``experts``: ``expert_arm``'s result. Returns
    {reliable, status, headline (one line), text, review, per_system, moved, flipped, marks, malformed_share}."""
    review = review_rule(rescored, ranks, families or {}, threshold)
    ours = per_system_rule(rescored, ranks)
    taus = {r["metric"]: r for r in ranks if r["group"] == "all"}
    systems = len({r["model"] for r in rescored})
    pairs = systems * (systems - 1) // 2
    usable = info["judged"] - info["malformed"]
    share = info["malformed"] / info["judged"] if info["judged"] else 0.0
    marks = sum(1 for r in rescored if r["moved"])
    asked = "the uniform sample and the pool" if info.get("pool", True) else "the uniform sample: the review's " \
        "sample-only design"
    parts = []
    if info["malformed"]:
        parts.append(f"Warning: {info['malformed']} of the judge's {info['judged']} answers ({share * 100:.1f}%) "
                     "stayed malformed after the re-asks; they count as unjudged, and every figure below rests on "
                     "the usable answers only.")
    coded = info.get("coded_from")
    judge = info["llm"] + (f", model {info['model']}" if info.get("model") else "") + (
        f"; prompt: {info['prompt']}" if info.get("prompt") else "")
    parts.append(f"On {benchmark}, the judge ({judge}) labelled {usable} of the {info['judged']} unjudged "
                 f"chunks of uncoded admissions it was asked about ({asked}) over {info['queries']} queries"
                 + (f"; coded admissions from {coded}" if coded else "") + ".")
    if overall["covered"]:
        parts.append(f"It estimates that {_pct(overall['rate'], 2)} (95% CI {_pct(overall['rate_low'], 2)} to "
                     f"{_pct(overall['rate_high'], 2)}) of these queries' unjudged chunks are relevant, about "
                     f"{_num(overall['missing'], 0)} ({_num(overall['missing_low'], 0)} to "
                     f"{_num(overall['missing_high'], 0)}) relevant chunks that CliniQ counts as not relevant; "
                     f"{overall['found']} of them were found and judged.")
    else:
        parts.append("No answer of the judge could be used, so the false-negative rate is not estimated and the "
                     "completed judgments equal CliniQ's: the test is inconclusive.")
    if experts:
        parts.append(experts["text"])
    parts.append(f"The review's rule decides: \"{REVIEW_RULE}\"")
    if systems >= 2:
        tau_text = "; ".join(f"{label(m)} {_num(taus[m]['kendall_tau'], 2)} "
                             f"[{_num(taus[m]['ci_low'], 2)}, {_num(taus[m]['ci_high'], 2)}]" for m in REVIEW_METRICS)
        parts.append(f"Kendall's tau-b between the original and the completed ranking of the {systems} systems "
                     f"(95% bootstrap interval over queries; n/a where one ranking is all ties): {tau_text}.")
        strict = {r["metric"]: r["strict_pairs"] for r in ranks if r["group"] == "all"}
        broken = {m for m, _, _ in review["flipped"]}
        held = [m for m in REVIEW_METRICS if m not in broken]
        if held:
            parts.append("The ranking by " + ", ".join(f"{label(m)} ({strict[m]} of {pairs} pairs ordered)"
                                                       for m in held) + " holds: no pair flips.")
        if broken:
            parts.append("The ranking by " + ", ".join(label(m) for m in REVIEW_METRICS if m in broken)
                         + " shifts: " + "; ".join(f"{a} above {b} by {label(m)} becomes {b} above {a}"
                                                   for m, a, b in review["flipped"]) + ".")
    else:
        parts.append("With a single system there is no ranking to test.")
    parts.append(_advantage_text(review["advantage"], threshold) + ".")
    if ours["moved_rows"]:
        moved_text = "; ".join(f"{r['model']} {label(r['metric'])} {_num(r['original'] * 100, 2)} -> "
                               f"{_num(r['completed'] * 100, 2)} ({r['relative_change']:+.1f}%)"
                               for r in ours["moved_rows"])
    else:
        moved_text = "none"
    parts.append(f"Our stricter per-system rule (not the review's: unreliable when any system's MRR, nDCG@10 or "
                 f"Recall@100 over all queries moves by more than {threshold:g} relative points, or any ranking "
                 f"flips) finds {'no reason to doubt' if ours['reliable'] else 'them unreliable'}; figures moving: "
                 f"{moved_text}. \u2021 marks {marks} cells of the re-scored tables: these "
                 f"{len(ours['moved_rows'])} and {marks - len(ours['moved_rows'])} per query type, over the completed "
                 "queries or on judged@10, which no rule reads.")
    reliable = review["reliable"]
    status = "inconclusive" if not overall["covered"] else "reliable" if reliable else "unreliable"
    if overall["covered"]:
        parts.append("By the review's rule the benchmark's multi-patient results therefore hold under the completed "
                     "judgments." if reliable else
                     "By the review's rule the benchmark's multi-patient results as presented are not reliable on "
                     "this evidence; the rankings listed as holding remain supported.")
    adv = review["advantage"]
    line = [f"false-negative rate {_pct(overall['rate'], 2)} (95% CI {_pct(overall['rate_low'], 2)} to "
            f"{_pct(overall['rate_high'], 2)});" if overall["covered"] else "no usable answer of the judge;"]
    line.append("rankings: " + ("; ".join(f"{a} > {b} by {label(m)} flips" for m, a, b in review["flipped"])
                                if review["flipped"] else "no pair flips") + ";")
    line.append(f"BM25's recall advantage {adv['relative_change']:+.1f}% relative (share of {adv['dense']}'s recall "
                f"{_num(adv['share_change'], 2)} points);" if adv["computed"] else
                f"BM25's recall advantage not computed ({adv['why']});")
    line.append(f"ours: {len(ours['moved_rows'])} of {ours['figures']} figures over all queries moved by more than "
                f"{threshold:g} relative points ({len(ours['systems'])} of {systems} systems"
                + (f": {', '.join(ours['systems'])}" if ours["systems"] else "") + ").")
    if experts is not None:
        line.append("Expert arm " + ("reported" + (f" (missing: {', '.join(experts['missing'])})"
                                                   if experts["missing"] else "") + "." if experts["run"] else
                                     "not run" + (f" (missing: {', '.join(experts['missing'])})"
                                                  if experts["missing"] else "") + "."))
    if info["malformed"]:
        line.append(f"{share * 100:.1f}% of the judge's answers malformed.")
    return {"reliable": reliable and bool(overall["covered"]), "status": status, "rule": "review",
            "headline": f"{status.capitalize()} by the review's rule: " + " ".join(line), "text": " ".join(parts),
            "review": {k: v for k, v in review.items()},
            "per_system": {"reliable": ours["reliable"], "moved": ours["moved"], "systems": ours["systems"]},
            "moved": ours["moved"], "flipped": review["flipped"], "marks": marks, "malformed_share": share,
            "experts": experts}


def verdict_markdown(benchmark: str, result: dict) -> str:
    """The verdict at a glance: one line (reliable / unreliable / inconclusive by the review's rule, the false-negative
    rate, the rankings, BM25's advantage in both readings, our per-system rule), then the reasoning."""
    from ..report.tables import md_escape

    head = result["headline"].split(": ", 1)[1]
    return (f"## Verdict ({md_escape(benchmark)})\n\n**{result['status'].capitalize()}** by the review's rule: "
            f"{md_escape(head)}\n\nDetails: {md_escape(result['text'])}\n")


def verdict_json(benchmark: str, result: dict, extra: dict) -> dict:
    """``verdict.json``: the status by the review's rule, the review's parts (rankings, BM25's advantage in both
    readings), our per-system rule, the count of marked cells, and ``extra`` (the design, counts); non-finite numbers
    as null."""
    from .files import clean_json

    review = result["review"]
    return clean_json({
        "benchmark": benchmark, "status": result["status"], "reliable": result["reliable"], "rule": result["rule"],
        "headline": result["headline"],
        "review": {"rule": REVIEW_RULE, "reliable": review["reliable"], "reliable_by_share": review["reliable_share"],
                   "flipped": [list(x) for x in review["flipped"]], "bm25_advantage": review["advantage"]},
        "per_system": {"reliable": result["per_system"]["reliable"], "systems": result["per_system"]["systems"],
                       "moved": [list(x) for x in result["per_system"]["moved"]]},
        "marks": result["marks"], "moved": [list(x) for x in result["moved"]],
        "flipped": [list(x) for x in result["flipped"]], "malformed_share": round(result["malformed_share"], 6),
        **extra})

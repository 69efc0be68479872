"""The report of CliniQ's judgment completion (``cliniq_completion``): the verdict paragraph and the tables (CSV,
Markdown, LaTeX) of the estimates, the re-scored figures and the orderings (the experts' tables are ``experts``).
Ids, labels and numbers only."""

from __future__ import annotations

from .completion import COMPLETED_GROUP, EFFECTIVENESS, RESCORED_METRICS

# ------------------------------------------------------------------ the verdict

def label(metric: str) -> str:
    """A metric's name as the tables print it (``tables.metric_label``; judged@10 too)."""
    from ..report.tables import metric_label

    return "judged@10" if metric == "judged_at_10" else metric_label(metric)


def _pct(x: float, digits: int = 1) -> str:
    return "n/a" if x != x else f"{x * 100:.{digits}f}%"


def _num(x: float, digits: int = 1) -> str:
    return "n/a" if x != x else f"{x:.{digits}f}"


def verdict(benchmark: str, info: dict, overall: dict, rescored: list[dict], ranks: list[dict],
            threshold: float) -> dict:
    """The verdict on the benchmark's multi-patient conclusions (all queries): a conclusion is an ordering of two
    systems by one effectiveness figure (MRR, both nDCG@10, Recall@100); it holds when the completed judgments keep
    it; the benchmark's multi-patient results are called unreliable when any system moves by more than
    ``threshold`` relative points on one of those figures or any ordering flips, and the test inconclusive when no
    answer of the judge could be used. Returns {reliable, status, headline (the one line), text, moved, flipped}."""
    eff = [r for r in rescored if r["group"] == "all" and r["metric"] in EFFECTIVENESS]
    moved = [r for r in eff if r["moved"]]
    flips = {r["metric"]: r["flipped_pairs"] for r in ranks if r["group"] == "all" and r["metric"] in EFFECTIVENESS}
    taus = {r["metric"]: r for r in ranks if r["group"] == "all"}
    systems = len({r["model"] for r in rescored})
    pairs = systems * (systems - 1) // 2
    flipped = sorted({(m, a, b) for m, fl in flips.items() for a, b in fl})
    usable = info["judged"] - info["malformed"]
    share = info["malformed"] / info["judged"] if info["judged"] else 0.0
    asked = "the uniform sample and the pool" if info.get("pool", True) else "the uniform sample: the review's " \
        "sample-only design"
    coded = info.get("coded_from")
    parts = []
    if info["malformed"]:
        parts.append(f"Warning: {info['malformed']} of the judge's {info['judged']} answers ({share * 100:.1f}%) "
                     "stayed malformed after the re-asks; they count as unjudged, and every figure below rests on "
                     "the usable answers only.")
    parts.append(f"On {benchmark}, the judge ({info['llm']}) labelled {usable} of the {info['judged']} unjudged "
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
    if systems < 2:
        parts.append("With a single system there is no ordering to test.")
    strict = {r["metric"]: r["strict_pairs"] for r in ranks if r["group"] == "all"}
    held = [m for m in EFFECTIVENESS if not flips.get(m)]
    broken = [m for m in EFFECTIVENESS if flips.get(m)]
    if systems >= 2:
        tau_text = "; ".join(f"{label(m)} {_num(taus[m]['kendall_tau'], 2)} "
                             f"[{_num(taus[m]['ci_low'], 2)}, {_num(taus[m]['ci_high'], 2)}]" for m in EFFECTIVENESS)
        parts.append(f"Kendall's tau-b between the original and the completed ordering of the {systems} systems "
                     f"(95% bootstrap interval over queries; n/a where one ordering is all ties): {tau_text}.")
        if held:
            parts.append("The ordering by " + ", ".join(f"{label(m)} ({strict[m]} of {pairs} pairs ordered)"
                                                        for m in held) + " holds: no pair flips.")
        if broken:
            parts.append("The ordering by " + ", ".join(label(m) for m in broken) + " does not: " + "; ".join(
                f"{a} above {b} by {label(m)} becomes {b} above {a}" for m, a, b in flipped) + ".")
    if moved:
        parts.append(f"Systems moving by more than {threshold:g} relative points: " + "; ".join(
            f"{r['model']} {label(r['metric'])} {_num(r['original'] * 100, 2)} -> "
            f"{_num(r['completed'] * 100, 2)} ({r['relative_change']:+.1f}%)" for r in moved) + ".")
    else:
        parts.append(f"No system moves by more than {threshold:g} relative points on MRR, nDCG@10 (either variant) "
                     "or Recall@100.")
    reliable = not moved and not flipped
    status = "inconclusive" if not overall["covered"] else "reliable" if reliable else "unreliable"
    movers = list(dict.fromkeys(r["model"] for r in moved))
    line = []
    line.append(f"false-negative rate {_pct(overall['rate'], 2)} (95% CI {_pct(overall['rate_low'], 2)} to "
                f"{_pct(overall['rate_high'], 2)});" if overall["covered"] else "no usable answer of the judge;")
    line.append(f"{len(movers)} of {systems} system{'s' if systems != 1 else ''} moved by more than {threshold:g} "
                f"relative points" + (f" ({', '.join(movers)})" if movers else "") + ";")
    line.append("flipped: " + "; ".join(f"{a} > {b} by {label(m)}" for m, a, b in flipped) + "." if flipped
                else "no ordering flipped.")
    if overall["covered"]:
        parts.append("The benchmark's multi-patient conclusions therefore hold under the completed judgments."
                     if reliable else
                     "By the test's rule (a move above the threshold or a flipped ordering), the benchmark's "
                     "multi-patient results are unreliable on this evidence; the conclusions listed as holding above "
                     "remain supported.")
    if info["malformed"]:
        line.append(f"{share * 100:.1f}% of the judge's answers malformed.")
    return {"reliable": reliable and bool(overall["covered"]), "status": status,
            "headline": f"{status.capitalize()}: " + " ".join(line), "text": " ".join(parts),
            "moved": [(r["model"], r["metric"]) for r in moved], "flipped": flipped, "malformed_share": share}


def verdict_markdown(benchmark: str, result: dict) -> str:
    """The verdict at a glance: one line (reliable / unreliable / inconclusive, the false-negative rate with its
    interval, how many systems moved, which pairs flipped), then the reasoning."""
    from ..report.tables import md_escape

    head = result["headline"].split(": ", 1)[1]
    return (f"## Verdict ({md_escape(benchmark)})\n\n**{result['status'].capitalize()}**: {md_escape(head)}\n\n"
            f"Details: {md_escape(result['text'])}\n")


# ------------------------------------------------------------------ tables

ESTIMATE_COLUMNS = ("scope", "group", "measure", "queries", "population", "covered", "judged", "malformed", "found",
                    "rate", "rate_low", "rate_high", "missing", "missing_low", "missing_high", "n_eff")
PER_QUERY_COLUMNS = ("query_id", "query_type", "population", "covered", "judged", "malformed", "found", "rate",
                     "rate_low", "rate_high", "missing", "missing_low", "missing_high", "n_eff")
RESCORED_COLUMNS = ("model", "group", "metric", "queries", "original", "completed", "change", "relative_change",
                    "moved")
RANKING_COLUMNS = ("group", "metric", "systems", "queries", "strict_pairs", "kendall_tau", "ci_low", "ci_high",
                   "undefined_resamples", "flipped", "flipped_pairs")


def csv_text(columns, rows) -> str:
    import csv
    import io

    def cell(v):
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, float):
            return "" if v != v else f"{v:.6f}"
        if isinstance(v, list):
            return ";".join(f"{a}>{b}" for a, b in v)
        return v

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([cell(r.get(c, "")) for c in columns])
    return buf.getvalue()


def ranking_rows(ranks):
    return [{**r, "flipped": len(r["flipped_pairs"])} for r in ranks]


def _ci(low: float, high: float, scale: float = 100.0, digits: int = 2) -> str:
    return "n/a" if low != low else f"[{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def _group_name(group: str) -> str:
    return "completed queries" if group == COMPLETED_GROUP else group


def estimates_markdown(benchmark: str, rows: list[dict], info: dict) -> str:
    from ..report.tables import md_escape

    out = [f"## False negatives of CliniQ's multi-patient judgments ({md_escape(benchmark)})", "",
           f"Judge {md_escape(info['llm'])} on {info['queries']} queries: a uniform sample of up to "
           f"{info['sample_per_query']} chunks per query (seed {info['seed']})"
           + (f" and the pool of the top {info['pool_depth']} of {info['runs']} runs" if info["pool_depth"] else
              " (the review's sample-only design: no pool)")
           + ", from the chunks of admissions CliniQ did not judge for the query. FNR: the estimated share of those "
           "chunks that are relevant (x 100), with its 95% design-based interval (Clopper-Pearson on the effective "
           "sample size, Korn and Graubard); missing: the estimated number of relevant chunks there. Population: "
           "chunks of uncoded admissions (covered: those an estimate speaks for; strata without a usable answer "
           "are left out).", "",
           "| group | measure | queries | population | covered | judged | malformed | found | FNR x 100 | 95% CI | "
           "missing | 95% CI |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    kept = compact_estimates(rows)
    if len(kept) < len(rows):
        out.insert(-2, f"Match types only where the judge found one ({len(rows) - len(kept)} rows without any are in "
                   "estimates.csv).\n")
    for r in kept:
        out.append(f"| {md_escape(r['group'])} | {md_escape(r['measure'])} | {r['queries']} | {r['population']} | "
                   f"{r['covered']} | {r['judged']} | {r['malformed']} | {r['found']} | {_num(r['rate'] * 100, 2)} | "
                   f"{_ci(r['rate_low'], r['rate_high'])} | {_num(r['missing'], 1)} | "
                   f"{_ci(r['missing_low'], r['missing_high'], 1.0, 1)} |")
    return "\n".join(out) + "\n"


def compact_estimates(rows: list[dict]) -> list[dict]:
    """The rows a reader needs: every group's relevant chunks, a match type's only where the judge found one."""
    return [r for r in rows if r["measure"] == "relevant" or r["found"]]


def rescored_markdown(benchmark: str, rescored: list[dict], ranks: list[dict], threshold: float) -> str:
    from ..report.tables import md_escape

    models = list(dict.fromkeys(r["model"] for r in rescored))
    groups = list(dict.fromkeys(r["group"] for r in rescored))
    index = {(r["model"], r["group"], r["metric"]): r for r in rescored}
    out = [f"## Multi-patient figures with the completed judgments ({md_escape(benchmark)})", "",
           f"Original -> completed (x 100) and the relative change; \u2020 marks a move of more than {threshold:g} "
           "relative points. Queries per group: " + ", ".join(
               f"{md_escape(_group_name(g))} {index[(models[0], g, RESCORED_METRICS[0])]['queries']}" for g in groups)
           + ".", ""]
    for metric in RESCORED_METRICS:
        out += [f"### {md_escape(label(metric))}", "",
                "| model | " + " | ".join(md_escape(_group_name(g)) for g in groups) + " |",
                "|---|" + "---:|" * len(groups)]
        for m in models:
            cells = []
            for g in groups:
                r = index[(m, g, metric)]
                mark = " \u2020" if r["moved"] else ""
                cells.append("n/a" if r["original"] != r["original"] else
                             f"{r['original'] * 100:.2f} -> {r['completed'] * 100:.2f} "
                             f"({_num(r['relative_change'], 1)}%){mark}")
            out.append(f"| {md_escape(m)} | " + " | ".join(cells) + " |")
        out.append("")
    out += ["### Orderings", "", "| group | metric | Kendall's tau | 95% CI (bootstrap over queries) | flipped pairs |",
            "|---|---|---:|---|---|"]
    for r in ranks:
        flips = ", ".join(f"{a} > {b} -> {b} > {a}" for a, b in r["flipped_pairs"]) or "none"
        out.append(f"| {md_escape(_group_name(r['group']))} | {md_escape(label(r['metric']))} | "
                   f"{_num(r['kendall_tau'], 3)} | {_ci(r['ci_low'], r['ci_high'], 1.0, 3)} | {md_escape(flips)} |")
    return "\n".join(out) + "\n"


def _tex_table(header, rows, caption: str, label: str, align: str) -> str:
    """A booktabs table of text cells (escaped)."""
    from ..report.tables import tex_escape

    out = [r"\begin{table}[htbp]", r"\centering", r"\small", r"\begin{tabular}{" + align + "}", r"\toprule",
           " & ".join(tex_escape(h) for h in header) + r" \\", r"\midrule"]
    out += [" & ".join(tex_escape(c) for c in r) + r" \\" for r in rows]
    out += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{tex_escape(caption)}}}", rf"\label{{{label}}}",
            r"\end{table}"]
    return "\n".join(out) + "\n"


def estimates_latex(benchmark: str, rows: list[dict]) -> str:
    from ..report.tables import tex_label

    body = [[r["group"], r["measure"], str(r["queries"]), str(r["judged"]), str(r["found"]),
             _num(r["rate"] * 100, 2), _ci(r["rate_low"], r["rate_high"]), _num(r["missing"], 0),
             _ci(r["missing_low"], r["missing_high"], 1.0, 0)] for r in rows]
    return _tex_table(("Group", "Measure", "Q", "Judged", "Found", "FNR", "95% CI", "Missing", "95% CI"), body,
                      f"CliniQ judgment completion on {benchmark}: estimated false-negative rate (x 100) among "
                      "the unjudged chunks of uncoded admissions, and the estimated number of missing relevant "
                      "chunks, with 95% design-based intervals (Clopper-Pearson on the effective sample size). Q: "
                      "queries; found: relevant chunks the judge found.",
                      tex_label("tab", "cliniq", benchmark, "completion", "fnr"), "llrrrrlrl")


def rescored_latex(benchmark: str, rescored: list[dict], threshold: float) -> str:
    """One table per metric: models as rows, original and completed per group (all and each query type)."""
    from ..report.tables import latex_table, tex_label

    models = list(dict.fromkeys(r["model"] for r in rescored))
    groups = [g for g in dict.fromkeys(r["group"] for r in rescored) if g != COMPLETED_GROUP]
    index = {(r["model"], r["group"], r["metric"]): r for r in rescored}
    parts = []
    for metric in RESCORED_METRICS:
        columns = [(g, name) for g in groups for name in ("orig.", "compl.")]
        rows, marks = [], {}
        for m in models:
            row = [m]
            for g in groups:
                r = index[(m, g, metric)]
                row += [None if r["original"] != r["original"] else r["original"],
                        None if r["completed"] != r["completed"] else r["completed"]]
                if r["moved"]:
                    marks[(m, len(row) - 1)] = "\u2020"
            rows.append(row)
        counts = ", ".join(f"{g} {index[(models[0], g, metric)]['queries']}" for g in groups)
        parts.append(latex_table(columns, rows, caption=f"CliniQ multi-patient {label(metric)} x 100 on "
                                 f"{benchmark}, with CliniQ's judgments (orig.) and the completed ones (compl.).",
                                 label=tex_label("tab", "cliniq", benchmark, "completion", metric), marks=marks,
                                 bold=False, notes=[f"\u2020: moves by more than {threshold:g} relative points.",
                                                    f"Queries: {counts}."]))
    return "\n".join(parts)


def ranking_latex(benchmark: str, ranks: list[dict]) -> str:
    from ..report.tables import tex_label

    body = [[label(r["metric"]), _num(r["kendall_tau"], 3), _ci(r["ci_low"], r["ci_high"], 1.0, 3),
             str(len(r["flipped_pairs"]))] for r in ranks if r["group"] == "all"]
    return _tex_table(("Metric", "Kendall's tau", "95% CI", "Flipped pairs"), body,
                      f"CliniQ judgment completion on {benchmark}: Kendall's tau-b between the system orderings with "
                      "CliniQ's and with the completed judgments (all queries), 95% bootstrap intervals over "
                      "queries, and the pairs of systems whose order flips.",
                      tex_label("tab", "cliniq", benchmark, "completion", "ranking"), "lrlr")

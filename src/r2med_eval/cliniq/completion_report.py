"""The report of CliniQ's judgment completion (``cliniq_completion``): the tables (CSV, Markdown, LaTeX) of the
estimates, the re-scored figures and the orderings (the experts' tables are ``experts``, the verdict
``completion_verdict``). ``MARK_MOVED`` (‡) marks a figure that moves by more than the threshold: a symbol of its
own, since † is the randomization test elsewhere on the page. Ids, labels and numbers only."""

from __future__ import annotations

from .completion import COMPLETED_GROUP, RESCORED_METRICS

MARK_MOVED = "\u2021"  # double dagger: moved by more than move_threshold relative points


def label(metric: str) -> str:
    """A metric's name as the tables print it (``tables.metric_label``; judged@10 too)."""
    from ..report.tables import metric_label

    return "judged@10" if metric == "judged_at_10" else metric_label(metric)


def _pct(x: float, digits: int = 1) -> str:
    return "n/a" if x != x else f"{x * 100:.{digits}f}%"


def _num(x: float, digits: int = 1) -> str:
    return "n/a" if x != x else f"{x:.{digits}f}"


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
           f"Original -> completed (x 100) and the relative change; {MARK_MOVED} marks a move of more than "
           f"{threshold:g} relative points (the verdict's per-system rule reads the MRR, nDCG@10 and R@100 cells over "
           "all queries). Queries per group: " + ", ".join(
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
                mark = f" {MARK_MOVED}" if r["moved"] else ""
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


def estimates_latex(benchmark: str, rows: list[dict], name: str | None = None) -> str:
    """``name``: the benchmark as the caption shows it (``report.synthetic.titled``)."""
    from ..report.tables import tex_label

    body = [[r["group"], r["measure"], str(r["queries"]), str(r["judged"]), str(r["found"]),
             _num(r["rate"] * 100, 2), _ci(r["rate_low"], r["rate_high"]), _num(r["missing"], 0),
             _ci(r["missing_low"], r["missing_high"], 1.0, 0)] for r in rows]
    return _tex_table(("Group", "Measure", "Q", "Judged", "Found", "FNR", "95% CI", "Missing", "95% CI"), body,
                      f"CliniQ judgment completion on {name or benchmark}: estimated false-negative rate (x 100) among "
                      "the unjudged chunks of uncoded admissions, and the estimated number of missing relevant "
                      "chunks, with 95% design-based intervals (Clopper-Pearson on the effective sample size). Q: "
                      "queries; found: relevant chunks the judge found.",
                      tex_label("tab", "cliniq", benchmark, "completion", "fnr"), "llrrrrlrl")


def rescored_latex(benchmark: str, rescored: list[dict], threshold: float, name: str | None = None) -> str:
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
                    marks[(m, len(row) - 1)] = MARK_MOVED
            rows.append(row)
        counts = ", ".join(f"{g} {index[(models[0], g, metric)]['queries']}" for g in groups)
        parts.append(latex_table(columns, rows, caption=f"CliniQ multi-patient {label(metric)} x 100 on "
                                 f"{name or benchmark}, with CliniQ's judgments (orig.) and the completed ones "
                                 "(compl.).",
                                 label=tex_label("tab", "cliniq", benchmark, "completion", metric), marks=marks,
                                 bold=False, notes=[f"{MARK_MOVED}: moves by more than {threshold:g} relative points.",
                                                    f"Queries: {counts}."]))
    return "\n".join(parts)


def ranking_latex(benchmark: str, ranks: list[dict], name: str | None = None) -> str:
    from ..report.tables import tex_label

    body = [[label(r["metric"]), _num(r["kendall_tau"], 3), _ci(r["ci_low"], r["ci_high"], 1.0, 3),
             str(len(r["flipped_pairs"]))] for r in ranks if r["group"] == "all"]
    return _tex_table(("Metric", "Kendall's tau", "95% CI", "Flipped pairs"), body,
                      f"CliniQ judgment completion on {name or benchmark}: Kendall's tau-b between the system "
                      "orderings with CliniQ's and with the completed judgments (all queries), 95% bootstrap "
                      "intervals over queries, and the pairs of systems whose order flips.",
                      tex_label("tab", "cliniq", benchmark, "completion", "ranking"), "lrlr")

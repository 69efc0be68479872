"""The claims as a reader meets them: ``results/claims.md`` (a table per benchmark, then each claim's statement, rule
and tests), ``results/tables/claims.tex`` (booktabs) and the "Claims" section of ``results/index.html``. Effects are
differences of a measure x 100 (points) with their 95% interval, a share or a correlation as it is."""

from __future__ import annotations

from html import escape

from ..report.synthetic import MARK
from ..report.tables import md_escape, tex_escape, tex_label
from .verdicts import WORDS, pvalue

KIND_NAMES = {"r2med": "R2MED's claims", "cliniq": "CliniQ's claims"}
VERDICT_COLOURS = {"holds": "#e8f4e8", "does_not_hold": "#f8e4e4", "inconclusive": "#f4f0dc",
                   "not_testable": "#eeeeee"}
ROWS_PER_TABLE = 40  # a LaTeX float's rows: well within a page at \small


def effect_text(effect: dict | None, interval: bool = True) -> str:
    """``-12.34 [-20.10, -4.58]`` (points), ``share 0.412 [0.380, 0.450]``, ``rho 0.120 [...]``; empty without a
    figure."""
    if not effect or effect.get("effect") is None:
        return ""
    unit = effect.get("unit", "points")
    if unit == "points":
        def f(x):
            return f"{x * 100:+.2f}"
    else:
        def f(x):
            return f"{x:.3f}"
    text = ("rho " if unit == "rho" else "share " if unit == "share" else "") + f(effect["effect"])
    if interval and effect.get("ci_low") is not None:
        text += f" [{f(effect['ci_low'])}, {f(effect['ci_high'])}]"
    return text


def _benchmarks(claims: list[dict]) -> list[str]:
    return list(dict.fromkeys(c["benchmark"] for c in claims))


def markdown(claims: list[dict], rules: dict, resampling: dict) -> str:
    lines = ["# The papers' claims, tested on these runs", "",
             f"Verdicts by the decision rules of docs/report.md (Claims): a test decides at Holm-adjusted p < "
             f"{rules['alpha']:g}, Holm over every test of a benchmark's claims. Effects are differences of nDCG x 100 "
             f"(points) with 95% percentile bootstrap intervals over queries ({resampling['bootstrap']} resamples); "
             f"paired randomization tests with {resampling['permutations']} sign flips (seed {resampling['seed']}).",
             ""]
    if not claims:
        lines.append("No benchmark of the kinds the claims are about (layout r2med or cliniq) was run.")
        return "\n".join(lines) + "\n"
    for bench in _benchmarks(claims):
        mine = [c for c in claims if c["benchmark"] == bench]
        mark = f" ({MARK})" if any(c.get("synthetic") for c in mine) else ""
        lines += [f"## {md_escape(bench)}{mark}", "", "| claim | verdict | effect [95% CI] | p (Holm) | reason |",
                  "|---|---|---|---:|---|"]
        for c in mine:
            e = c["effect"] or {}
            lines.append(f"| {md_escape(c['id'])} | **{WORDS[c['verdict']]}** | {effect_text(e)} | "
                         f"{pvalue(e.get('p_holm')) if e else ''} | {md_escape(c['reason'])} |")
        lines.append("")
        for c in mine:
            lines += [f"### {md_escape(c['id'])}: {WORDS[c['verdict']]}{mark}", "",
                      f"> {md_escape(c['statement'])}", "", f"Rule: {md_escape(c['rule'])}", ""]
            lines += [f"- {md_escape(p['summary'])}" for p in c["evidence"]["parts"]] + [""]
            if c["needs"]:
                lines += [f"To test it: {md_escape(c['needs'])}.", ""]
            tests = [(p, t) for p in c["evidence"]["parts"] for t in p["tests"]]
            if tests:
                lines += ["| part | comparison | measure | n | effect [95% CI] | against | p | p (Holm) |",
                          "|---|---|---|---:|---|---:|---:|---:|"]
                for p, t in tests:
                    lines.append(f"| {md_escape(p['title'])} ({WORDS[p['verdict']]}) | {md_escape(t['label'])} | "
                                 f"{md_escape(t['measure'])} | {_n(t)} | {effect_text(t)} | "
                                 f"{_boundary(t)} | {pvalue(t['p'])} | {pvalue(t['p_holm'])} |")
                lines.append("")
    return "\n".join(lines) + "\n"


def _n(t: dict) -> str:
    """The queries a test used, and those it left out for a value that is not a finite number."""
    skipped = (t.get("detail") or {}).get("skipped_not_finite")
    return f"{t['n']} ({skipped} not finite, left out)" if skipped else str(t["n"])


def _boundary(t: dict) -> str:
    if t.get("unit", "points") == "points":
        factor = (t.get("detail") or {}).get("factor")
        return f"a - {factor:g} b > 0" if factor else "0"
    return f"{t['boundary']:g}"


def latex(claims: list[dict], rules: dict) -> str:
    """One booktabs float per ``ROWS_PER_TABLE`` rows: claim, verdict, effect with its interval, Holm-adjusted p; a
    spanning row per benchmark."""
    if not claims:
        return "% no benchmark of the kinds the claims are about was run\n"
    rows = []
    for bench in _benchmarks(claims):
        mark = f" ({MARK})" if any(c.get("synthetic") for c in claims if c["benchmark"] == bench) else ""
        rows.append(rf"\multicolumn{{4}}{{l}}{{\textit{{{tex_escape(bench + mark)}}}}} \\")
        for c in (c for c in claims if c["benchmark"] == bench):
            e = c["effect"] or {}
            rows.append(f"{tex_escape(c['id'])} & {WORDS[c['verdict']]} & {tex_escape(effect_text(e))} & "
                        f"{tex_escape(pvalue(e.get('p_holm')) if e else '')} \\\\")
    chunks = [rows[i:i + ROWS_PER_TABLE] for i in range(0, len(rows), ROWS_PER_TABLE)]
    out = []
    for i, chunk in enumerate(chunks, start=1):
        part = "" if len(chunks) == 1 else (f" Part {i} of {len(chunks)}." if i == 1 else
                                            f" Continued: part {i} of {len(chunks)}.")
        label = tex_label("tab", "claims") + ("" if i == 1 else f":part{i}")
        out += [r"\begin{table}", r"\centering", r"\small",
                rf"\caption{{The papers' claims tested on these runs: verdict, effect (nDCG x 100, a share or "
                rf"Spearman's rho) with its 95\% bootstrap interval over queries, Holm-adjusted p (Holm over each "
                rf"benchmark's tests, alpha {rules['alpha']:g}).{part}}}",
                rf"\label{{{label}}}", r"\begin{tabular}{llll}", r"\toprule",
                r"Claim & Verdict & Effect [95\% CI] & p (Holm) \\", r"\midrule", *chunk, r"\bottomrule",
                r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(out)


def html_section(claims: list[dict], figure_href) -> list[str]:
    """The index page's "Claims" section body: a table (verdict, effect and interval, a one-line reason, links to
    the figures it rests on). ``figure_href(path)``: a figure's link, or None when it is not there."""
    if not claims:
        return ['<p class="note">No benchmark of the kinds the claims are about (layout r2med or cliniq) was '
                "run.</p>"]
    alpha = claims[0]["evidence"]["alpha"]
    out = ['<p class="note">Each claim of R2MED and CliniQ tested on these runs by the decision rules of '
           f"docs/report.md (Claims): a test decides at Holm-adjusted p &lt; {alpha:g}, effects are nDCG differences "
           "x 100 (or a share, or Spearman's rho) with 95% bootstrap intervals over queries.</p>",
           '<table id="claims"><thead><tr>' + "".join(
               f'<th scope="col">{h}</th>' for h in ("benchmark", "claim", "verdict", "effect [95% CI]", "p (Holm)",
                                                     "reason", "figures")) + "</tr></thead><tbody>"]
    for c in claims:
        e = c["effect"] or {}
        links = []
        for path in c["figures"]:
            href = figure_href(path)
            if href:
                name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
                links.append(f'<a href="{escape(href)}">{escape(name.replace("_", " "))}</a>')
        reason = c["reason"] if c["verdict"] != "not_testable" else f"To test it: {c['needs']}."
        shown = c["benchmark"] + (f" ({MARK})" if c.get("synthetic") else "")
        out.append(
            f'<tr><th scope="row" class="model">{escape(shown)}</th><td>{escape(c["id"])}</td>'
            f'<td style="background:{VERDICT_COLOURS[c["verdict"]]};font-weight:600">{WORDS[c["verdict"]]}</td>'
            f'<td class="num">{escape(effect_text(e))}</td>'
            f'<td class="num">{escape(pvalue(e.get("p_holm")) if e else "")}</td>'
            f"<td>{escape(reason)}</td><td>{', '.join(links)}</td></tr>")
    out.append("</tbody></table>")
    return out

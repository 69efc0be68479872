"""Tables a researcher can paste: Markdown escaping and LaTeX (booktabs) tables.

A LaTeX file is one ``table`` float (``\\begin{table} ... \\end{table}``) needing only ``booktabs`` in the
preamble; values are x 100 with two decimals, the best value of each column bold, significance marks as
superscripts (``*`` t-test, ``\\dag`` randomization test), an empty cell as ``--``, an undefined one (NaN) as
``n/a``. Column groups (a benchmark's tasks, a CliniQ setting's match types) get a spanning header with
``\\cmidrule``.
"""

from __future__ import annotations

import re

# metric names as printed in every table and plot
METRIC_LABELS = {"mrr": "MRR", "ndcg": "nDCG", "map": "MAP", "ndcg_at_10_cliniq": "nDCG@10 (CliniQ)"}


def metric_label(metric: str) -> str:
    """``ndcg_at_10`` -> ``nDCG@10``, ``recall_at_100`` -> ``Recall@100``, ``mrr`` -> ``MRR``."""
    if metric in METRIC_LABELS:
        return METRIC_LABELS[metric]
    m = re.match(r"^(ndcg|map|recall|precision|mrr)_at_(\d+)$", metric)
    if m:
        return {"ndcg": "nDCG", "map": "MAP", "recall": "Recall", "precision": "P", "mrr": "MRR"}[m.group(1)] \
            + f"@{m.group(2)}"
    return metric


# ---------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def md_escape(text: str) -> str:
    """``text`` shown literally in a Markdown (CommonMark / GFM) paragraph or table cell."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


# ---------------------------------------------------------------- LaTeX

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "\u2020": r"\dag{}", "\u2013": "--", "\u00d7": r"$\times$", "<": r"$<$",
                ">": r"$>$"}
_TEX_MARKS = {"*": "*", "\u2020": r"\dag"}


def tex_escape(text: str) -> str:
    """``text`` printed literally; ``--`` in a name (``bm25--minilm@100``) stays two hyphens, not a dash."""
    text = str(text)
    return "".join("{}-" if c == "-" and i and text[i - 1] == "-" else _TEX_SPECIAL.get(c, c)
                   for i, c in enumerate(text))


def tex_marks(marks: str) -> str:
    return r"\textsuperscript{" + "".join(_TEX_MARKS.get(c, tex_escape(c)) for c in marks) + "}" if marks else ""


def best_per_column(rows) -> dict:
    """{column index: best (largest) value} over ``rows`` of [label, value...]; empty cells (None) and undefined
    ones (NaN, shown "n/a") never count; columns without a value are left out."""
    best = {}
    for j in range(1, max((len(r) for r in rows), default=1)):
        vals = [r[j] for r in rows if r[j] is not None and r[j] == r[j]]
        if vals:
            best[j] = max(vals)
    return best


def latex_table(columns, rows, *, caption: str, label: str, marks: dict | None = None, scale: float = 100.0,
                stub: str = "Model", notes=(), bold: bool = True) -> str:
    """A booktabs table. ``columns``: [(group, name)], a group spanning its consecutive columns (group ``""``:
    no spanning header); ``rows``: [label, value...] (None: empty); ``marks[(label, j)]``: significance marks
    of column j (1-based); the best value of each column (over more than one row) in bold unless ``bold`` is
    False."""
    marks = marks or {}
    best = best_per_column(rows) if bold and len(rows) > 1 else {}
    spans: list[list] = []
    for group, _ in columns:
        if spans and spans[-1][0] == group:
            spans[-1][1] += 1
        else:
            spans.append([group, 1])
    out = [r"\begin{table}[htbp]", r"\centering", r"\small",
           r"\begin{tabular}{l" + "r" * len(columns) + "}", r"\toprule"]
    if any(g for g, _ in spans):
        cells, rules, col = [""], [], 2
        for group, n in spans:
            if group:
                cells.append(rf"\multicolumn{{{n}}}{{c}}{{{tex_escape(group)}}}")
                rules.append(rf"\cmidrule(lr){{{col}-{col + n - 1}}}")
            else:
                cells += [""] * n
            col += n
        out += [" & ".join(cells) + r" \\", " ".join(rules)]
    out.append(" & ".join([tex_escape(stub)] + [tex_escape(name) for _, name in columns]) + r" \\")
    out.append(r"\midrule")
    for r in rows:
        cells = [tex_escape(r[0])]
        for j, v in enumerate(r[1:], start=1):
            if v is None or v != v:  # not run; NaN: undefined
                cells.append("--" if v is None else "n/a")
                continue
            text = f"{v * scale:.2f}"
            text = rf"\textbf{{{text}}}" if j in best and v == best[j] else text
            cells.append(text + tex_marks(marks.get((r[0], j), "")))
        out.append(" & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    caption_text = " ".join([caption, *notes])
    out += [rf"\caption{{{tex_escape(caption_text)}}}", rf"\label{{{label}}}", r"\end{table}"]
    return "\n".join(out) + "\n"


def tex_label(*parts: str) -> str:
    """A \\label key from names (letters, digits, ``-`` and ``:`` only)."""
    return ":".join(re.sub(r"[^A-Za-z0-9-]+", "-", p).strip("-") for p in parts)

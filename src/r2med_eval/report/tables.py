"""Tables a researcher can paste: Markdown escaping and LaTeX (booktabs) tables.

A LaTeX file holds ``table`` floats (``\\begin{table} ... \\end{table}``) needing only ``booktabs`` in the
preamble; values are x 100 with two decimals, the best value of each column bold, significance marks as
superscripts (``*`` t-test, ``\\dag`` randomization test), an empty cell as ``--``, an undefined one (NaN) as ``n/a``.
Column groups (a benchmark's tasks, a CliniQ setting's match types) get a spanning header with ``\\cmidrule``. Every
table fits a one-column page with 1-inch margins (``latex_table``): one float where it can, parts where it cannot.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

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
                "\u2020": r"\dag{}", "\u2013": "--", "\u00d7": r"$\times$", "\u2212": "$-$", "<": r"$<$",
                ">": r"$>$", "\u00a7": r"\S{}", "\u00b0": r"$^{\circ}$", "\u2021": r"\ddag{}"}
# superscript marks: significance (``*``, dagger), Judged@10 below the threshold (degree), unusable LLM answers
# (section sign), a figure the judgment completion moves beyond its threshold (double dagger)
_TEX_MARKS = {"*": "*", "\u2020": r"\dag", "\u00b0": r"$\circ$", "\u00a7": r"\S", "\u2021": r"\ddag"}


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


# ---------------------------------------------------------------- LaTeX: fitting a one-column page

# The narrowest common text block: US letter with 1-inch margins, 6.5 x 9 in (pt = 1/72.27 in).
TEXT_WIDTH_PT = 6.5 * 72.27
TEXT_HEIGHT_PT = 9.0 * 72.27
# Computer Modern Roman advance widths in 1/1000 em (cmr10; T1's ec fonts match them for these glyphs); an
# unknown character counts 600, more than most, so the estimate errs wide. Bold (cmbx10) digits are 575.
_CMR = {" ": 333, "!": 278, "#": 833, "$": 500, "%": 833, "&": 778, "'": 278, "(": 389, ")": 389, "*": 500,
        "+": 778, ",": 278, "-": 333, ".": 278, "/": 500, ":": 278, ";": 278, "<": 778, "=": 778, ">": 778,
        "?": 472, "@": 778, "[": 278, "]": 278, "_": 800, "^": 500, "{": 500, "}": 500, "|": 278, "~": 500,
        "\u2013": 500, "\u2014": 1000, "\u00d7": 778, "\u2020": 600, "\u2021": 600, "\u2212": 778,
        **dict.fromkeys("0123456789", 500),
        **dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", (750, 708, 722, 764, 681, 653, 785, 750, 361, 514, 778, 625, 917,
                                                  750, 778, 681, 778, 736, 556, 722, 750, 750, 1028, 750, 750, 611))),
        **dict(zip("abcdefghijklmnopqrstuvwxyz", (500, 556, 444, 556, 444, 306, 500, 556, 278, 306, 528, 278, 833,
                                                  556, 500, 556, 528, 392, 394, 389, 556, 528, 722, 528, 528, 444)))}
_BOLD = 1.15
# The smaller sizes use their own, relatively wider designs (ecrm0900, ecrm0800, ecrm0600): measured against
# cmr10 scaled, plus 1%.
_OPTICAL = {9.0: 1.04, 8.0: 1.075, 6.0: 1.25}
# (command, font size, baselineskip) of the article class at 10pt; superscripts are set at 6pt in both
_SIZES = {"small": (r"\small", 9.0, 11.0), "footnotesize": (r"\footnotesize", 8.0, 9.5)}
_SUPERSCRIPT_PT = 6.0
# Short forms of the column names our tables print most (R2MED's tasks, CliniQ's match types); any other long
# name is shortened word by word. Every short form used is spelt out in the caption.
ABBREVIATIONS = {"Biology": "Bio.", "Bioinformatics": "Bioinf.", "Medical-Sciences": "Med.-Sci.",
                 "MedXpertQA-Exam": "MedXp.", "MedQA-Diag": "MedQA", "PMC-Treatment": "PMC-Tr.",
                 "PMC-Clinical": "PMC-Cl.", "IIYi-Clinical": "IIYi-Cl.", "abbreviation": "abbr.",
                 "implication": "impl.", "hyponym": "hypo.", "synonym": "syn.", "string": "str."}


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Estimated width in pt of ``text`` printed in Computer Modern at ``size`` pt (errs wide)."""
    return (sum(_CMR.get(c, 600) for c in str(text)) / 1000 * size * _OPTICAL.get(size, 1.01)
            * (_BOLD if bold else 1.0))


def wrapped_lines(text: str, size: float, width: float) -> int:
    """The lines ``text`` takes in a paragraph ``width`` pt wide, broken between words where the next word would
    overflow (TeX's breaks fit as many words or more: its spaces shrink), a word wider than the line alone on it."""
    lines, used, space = 1, 0.0, text_width(" ", size)
    for word in text.split():
        w = text_width(word, size)
        if used and used + space + w > width:
            lines, used = lines + 1, w
        else:
            used += (space if used else 0.0) + w
    return lines


def header_lines(name: str) -> list[str]:
    """A column name on two lines, broken after the ``-``, ``_``, ``/`` or space nearest its middle (one line
    when it has none)."""
    cuts = [i + 1 for i, c in enumerate(name[:-1]) if c in "-_/ " and 0 < i < len(name) - 1]
    if not cuts:
        return [name]
    cut = min(cuts, key=lambda i: abs(len(name) - 2 * i))
    return [name[:cut].rstrip(), name[cut:]]


def abbreviate(name: str, taken=()) -> str:
    """A short form of a column name: ``ABBREVIATIONS``, else each word of more than five letters cut to its
    first four and a full stop, longer cuts where that collides with ``taken``."""
    if name in ABBREVIATIONS and ABBREVIATIONS[name] not in taken:
        return ABBREVIATIONS[name]
    for keep in range(4, max(5, len(name))):
        short = re.sub(r"[A-Za-z]{6,}", lambda m: m.group(0)[:keep] + ".", name)
        if short not in taken:
            return short
    return name


@dataclass
class _Fit:
    size: str
    sep: float
    names: list  # each value column's header lines
    legend: str  # the abbreviations used, spelt out ("" when none)
    column_parts: list  # [[value column index...]...]
    row_parts: list  # [[row index...]...]


class _Table:
    """The cells of a table and the width and height LaTeX will give them."""

    def __init__(self, columns, rows, stubs, marks, scale, bold, signed=()):
        self.columns, self.stubs, self.n = list(columns), list(stubs), len(stubs)
        best = {}
        if bold and len(rows) > 1:
            for j in range(len(self.columns)):
                vals = [r[self.n + j] for r in rows if r[self.n + j] is not None and r[self.n + j] == r[self.n + j]]
                if vals:
                    best[j] = max(vals)
        self.labels = [[str(x) for x in r[:self.n]] for r in rows]
        self.values = [[None if v is None else ("n/a", False, "") if v != v else  # not run; NaN: undefined
                        (f"{v * scale:{'+' if j in signed else ''}.2f}".replace("-", "\u2212"),
                         j in best and v == best[j], marks.get((r[0], j + 1), ""))
                        for j, v in enumerate(r[self.n:])] for r in rows]

    def value_width(self, j: int, size: float) -> float:
        out = text_width("\u2013", size)
        for row in self.values:
            if row[j] is not None:
                text, bold, mark = row[j]
                out = max(out, text_width(text, size, bold) + text_width(mark, _SUPERSCRIPT_PT))
        return out

    def stub_widths(self, size: float) -> list[float]:
        return [max([text_width(s, size)] + [text_width(r[i], size) for r in self.labels])
                for i, s in enumerate(self.stubs)]

    def names(self, size: float, abbreviated: bool) -> tuple[list, str]:
        """Each value column's header lines (stacked, or shortened, where the name is wider than its values)
        and the legend of the short forms."""
        out, used, taken = [], {}, set()
        for j, (_, name) in enumerate(self.columns):
            if text_width(name, size) <= self.value_width(j, size):
                out.append([name])
            elif abbreviated:
                short = used.get(name) or abbreviate(name, taken)
                if short != name:
                    used[name] = short
                    taken.add(short)
                out.append(header_lines(short) if text_width(short, size) > self.value_width(j, size) else [short])
            else:
                out.append(header_lines(name))
        legend = "; ".join(f"{s} = {n}" for n, s in used.items())
        return out, (f"Abbreviations: {legend}." if legend else "")

    def width(self, part: list, size: float, sep: float, names: list) -> float:
        """Width in pt of the tabular of the value columns ``part``: each column its widest cell and two
        ``tabcolsep``; a spanning header wider than its columns widens them."""
        widths = {j: max(self.value_width(j, size), *(text_width(x, size) for x in names[j])) + 2 * sep
                  for j in part}
        total = sum(w + 2 * sep for w in self.stub_widths(size)) + sum(widths.values())
        for group, js in _spans([(self.columns[j][0], j) for j in part]):
            if group:
                total += max(0.0, text_width(group, size) + 2 * sep - sum(widths[j] for j in js))
        return total


def _spans(tagged) -> list[tuple[str, list]]:
    """[(group, [item...])] of consecutive items of the same group, from [(group, item)]."""
    out: list = []
    for group, item in tagged:
        if out and out[-1][0] == group:
            out[-1][1].append(item)
        else:
            out.append((group, [item]))
    return out


def _fit(table: _Table, caption_text: str) -> _Fit:
    """The first layout that fits a one-column page: ``\\small``; then ``\\footnotesize`` with less space
    between columns; then column names shortened (spelt out in the caption); then the columns split over
    several tables (at group boundaries where a group fits) and, independently, the rows (a page's worth each)."""
    everything = list(range(len(table.columns)))
    limit = TEXT_WIDTH_PT - 2.0
    for size_name, sep, abbreviated in (("small", 6.0, False), ("footnotesize", 4.0, False),
                                        ("footnotesize", 4.0, True)):
        size = _SIZES[size_name][1]
        names, legend = table.names(size, abbreviated)
        if table.width(everything, size, sep, names) <= limit:
            parts = [everything]
            break
    else:  # split the columns: whole groups while they fit, a group too wide for a page alone over several
        parts = []
        for _, js in _spans([(g, j) for j, (g, _) in enumerate(table.columns)]):
            if parts and table.width(parts[-1] + js, size, sep, names) <= limit:
                parts[-1] = parts[-1] + js
                continue
            parts.append([])
            for j in js:
                if parts[-1] and table.width(parts[-1] + [j], size, sep, names) > limit:
                    parts.append([])
                parts[-1].append(j)
    skip = _SIZES[size_name][2]
    header = (2 if any(g for g, _ in table.columns) else 1) + max((len(x) for x in names), default=1) - 1
    # LaTeX sets a caption in \normalsize (10 pt on 12 pt), whatever size the table's body is in
    caption = wrapped_lines(f"Table 99: {caption_text} {legend} Continued: part 9 of 9.", 10.0, TEXT_WIDTH_PT)
    fixed = (header + 1) * skip + caption * 12.0 + 30.0  # rules and their spacing, the caption's skip
    per_part = max(1, int((TEXT_HEIGHT_PT - 10.0 - fixed) // skip))
    n = len(table.values)
    step = math.ceil(n / max(1, math.ceil(n / per_part))) if n else 1
    rows = [list(range(i, min(n, i + step))) for i in range(0, n, step)] or [[]]
    return _Fit(size_name, sep, names, legend, parts, rows)


def latex_table(columns, rows, *, caption: str, label: str, marks: dict | None = None, scale: float = 100.0,
                stub="Model", notes=(), bold: bool = True, signed=()) -> str:
    """Booktabs tables that fit a one-column page with 1-inch margins (US letter: 6.5 x 9 in; ``_fit``).
    ``columns``: [(group, name)], a group spanning its consecutive columns (group ``""``: no spanning header);
    ``stub``: the name of the label column, or a tuple of names for several; ``rows``: [label..., value...]
    (None: empty); ``marks[(first label, j)]``: significance marks of value column j (1-based); the best value of
    each column (over more than one row) in bold unless ``bold`` is False; the value columns ``signed`` (0-based)
    with their sign (a difference). One ``table`` float, or several
    ("part k of n") when the columns or rows do not fit one page; the first keeps ``label``, the others add
    ``:part<k>``."""
    stubs = (stub,) if isinstance(stub, str) else tuple(stub)
    table = _Table(columns, rows, stubs, marks or {}, scale, bold, signed)
    caption_text = " ".join([caption, *notes])
    fit = _fit(table, caption_text)
    command, _, _ = _SIZES[fit.size]
    parts = [(cols, rws) for cols in fit.column_parts for rws in fit.row_parts]
    out = []
    for k, (cols, rws) in enumerate(parts, start=1):
        head = [r"\begin{table}[htbp]", r"\centering", command]
        head += [rf"\setlength{{\tabcolsep}}{{{fit.sep:g}pt}}"] if fit.sep != 6.0 else []
        head += [r"\begin{tabular}{" + "l" * len(stubs) + "r" * len(cols) + "}", r"\toprule"]
        spans = _spans([(table.columns[j][0], j) for j in cols])
        if any(g for g, _ in spans):
            cells, rules, col = [""] * len(stubs), [], len(stubs) + 1
            for group, js in spans:
                if group:
                    cells.append(rf"\multicolumn{{{len(js)}}}{{c}}{{{tex_escape(group)}}}")
                    rules.append(rf"\cmidrule(lr){{{col}-{col + len(js) - 1}}}")
                else:
                    cells += [""] * len(js)
                col += len(js)
            head += [" & ".join(cells) + r" \\", " ".join(rules)]
        names = [tex_escape(fit.names[j][0]) if len(fit.names[j]) == 1 else
                 r"\shortstack{" + r"\\".join(tex_escape(x) for x in fit.names[j]) + "}" for j in cols]
        head.append(" & ".join([tex_escape(s) for s in stubs] + names) + r" \\")
        head.append(r"\midrule")
        for i in rws:
            cells = [tex_escape(x) for x in table.labels[i]]
            for j in cols:
                cell = table.values[i][j]
                if cell is None:
                    cells.append("--")
                    continue
                text, is_best, mark = cell
                text = tex_escape(text)
                cells.append((rf"\textbf{{{text}}}" if is_best else text) + tex_marks(mark))
            head.append(" & ".join(cells) + r" \\")
        head += [r"\bottomrule", r"\end{tabular}"]
        if len(parts) == 1:
            text = " ".join(x for x in (caption_text, fit.legend) if x)
        elif k == 1:
            text = " ".join(x for x in (caption_text, fit.legend, f"Part 1 of {len(parts)}.") if x)
        else:
            text = " ".join(x for x in (caption, fit.legend, f"Continued: part {k} of {len(parts)}.") if x)
        head += [rf"\caption{{{tex_escape(text)}}}", rf"\label{{{label if k == 1 else f'{label}:part{k}'}}}",
                 r"\end{table}"]
        out.append("\n".join(head) + "\n")
    return "\n".join(out)


def tex_label(*parts: str) -> str:
    """A \\label key from names (letters, digits, ``-`` and ``:`` only)."""
    return ":".join(re.sub(r"[^A-Za-z0-9-]+", "-", p).strip("-") for p in parts)

"""Self-contained HTML pages (inline CSS, no scripts, no external assets) for the leaderboards."""

from __future__ import annotations

from html import escape

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .4em; }
th, td { border: 1px solid #ccc; padding: .3em .7em; }
th { background: #f0f0f0; }
th.model { text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { font-weight: 700; background: #e8f4e8; }
td.missing { color: #999; }
sup.sig { color: #a33; }
p.legend, p.note { font-size: .9em; color: #444; max-width: 60em; }
""".strip()


def table(header, rows, *, table_id: str, caption: str, best: dict, marks: dict | None = None,
          scale: float = 100.0) -> str:
    """An HTML table: ``rows`` are [label, value...]; ``best[j]`` the best value of column j (bold);
    ``marks[(row label, j)]`` a significance marker shown as a superscript."""
    marks = marks or {}
    out = [f'<table id="{escape(table_id)}">', f"<caption>{escape(caption)}</caption>", "<thead><tr>"]
    out += [f'<th scope="col">{escape(h)}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for r in rows:
        cells = [f'<th scope="row" class="model">{escape(str(r[0]))}</th>']
        for j, v in enumerate(r[1:], start=1):
            if v is None:
                cells.append('<td class="num missing">&ndash;</td>')
                continue
            cls = "num best" if best.get(j) is not None and v == best[j] and len(rows) > 1 else "num"
            mark = marks.get((r[0], j), "")
            sup = f'<sup class="sig">{escape(mark)}</sup>' if mark else ""
            cells.append(f'<td class="{cls}">{v * scale:.2f}{sup}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def page(title: str, body_parts) -> str:
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>\n{CSS}\n</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
        *body_parts,
        "</body>",
        "</html>",
    ]) + "\n"


def paragraph(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{escape(text)}</p>'


def heading(text: str) -> str:
    return f"<h2>{escape(text)}</h2>"

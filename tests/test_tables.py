"""Tables to paste into a paper: LaTeX (booktabs) compiled by pdflatex, Markdown rendered by markdown-it,
per-benchmark averages and the row order; CliniQ's wide tables; every plot panel has data.

pdflatex is Debian's (texlive-latex-base, texlive-latex-recommended); without it the LaTeX compile test skips
with the reason (a failure under R2MED_EVAL_REQUIRE_LATEX=1, which .ci/run sets under CI=true), and the
files are still parsed (``check_tex``).
"""
import json

import pytest
from conftest import R2MED_TASK_NAMES, check_tex, compile_tex, full_matrix_runs, full_matrix_table
from markdown_it import MarkdownIt

from r2med_eval.cliniq import files as cliniq_files
from r2med_eval.cliniq import plots as cliniq_plots
from r2med_eval.cliniq import tables as cliniq_tables
from r2med_eval.report import figure, leaderboard, palette, plots, r2med_paper, significance, tables

# two benchmarks, r2med with two tasks; hyde runs on r2med only, "half" on one r2med task only
VALUES = {("r2med", "a", "bm25"): 0.30, ("r2med", "b", "bm25"): 0.50, ("cliniq", "c", "bm25"): 0.60,
          ("r2med", "a", "dense"): 0.40, ("r2med", "b", "dense"): 0.44, ("cliniq", "c", "dense"): 0.70,
          ("r2med", "a", "dense+hyde"): 0.80, ("r2med", "b", "dense+hyde"): 0.90,
          ("r2med", "a", "half_run"): 0.10}
MARKS = {("r2med", "a"): {"dense": "*\u2020", "dense+hyde": "*"}}
LEGEND = significance.legend(0.05, "bm25", 10000)


def metric_files(root):
    out = []
    for (bench, task, model), v in VALUES.items():
        path = root / "metrics" / bench / task / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"benchmark": bench, "task": task, "model": model, "metrics": {"ndcg_at_10": v}}))
        out.append(path)
    return out


@pytest.fixture
def board(tmp_path):
    files = metric_files(tmp_path)
    out = {e: tmp_path / f"leaderboard.{e}" for e in ("csv", "md", "html", "tex")}
    leaderboard.write(files, out["csv"], out["md"], html_path=out["html"], significance=MARKS, legend=LEGEND,
                      tex_path=out["tex"])
    bench = {e: tmp_path / f"r2med.{e}" for e in ("csv", "md", "html", "tex")}
    leaderboard.write_benchmark(files, "r2med", bench["csv"], bench["md"], bench["html"], significance=MARKS,
                                legend=LEGEND, notes=["Queries compared per task: a 25, b 25."],
                                tex_path=bench["tex"])
    return out, bench


def test_averages_are_per_benchmark_and_rows_are_ranked_against_rows_with_the_same_columns(board):
    out, _ = board
    header, *rows = [line.split(",") for line in out["csv"].read_text().splitlines()]
    assert header == ["model", "cliniq/c", "r2med/a", "r2med/b", "r2med/avg"]  # no average across benchmarks
    # issue 40: grouped by the columns a row has (both benchmarks, then r2med only, then r2med's task a only); within
    # a group by the mean over its benchmarks of the mean over their tasks: dense (0.70 + 0.42) / 2 above bm25
    # (0.60 + 0.40) / 2; dense+hyde 0.85 (r2med only) no longer above the runs on both
    assert [r[0] for r in rows] == ["dense", "bm25", "dense+hyde", "half_run"]
    assert rows[-1] == ["half_run", "", "0.10000", "", ""]  # an incomplete benchmark average stays empty
    assert leaderboard.rank_key({"x": [None, None]}) == float("inf")


def test_markdown_marks_survive_rendering(board):
    """The legend starts with `*`: unescaped it renders as a bullet list and the marker is lost."""
    md = MarkdownIt("commonmark").enable("table")
    for path in board:
        html = md.render(path["md"].read_text())
        assert "<ul>" not in html and "<li>" not in html
        assert "<p>* paired t-test, \u2020 paired randomization test" in html
        assert "<strong>80.00</strong>*</td>" in html and "40.00*\u2020</td>" in html
        assert "p &lt; 0.05" in html
    row = {"benchmark": "r2med", "task": "a", "model": "dense", "mean": 0.4, "ci_low": 0.3, "ci_high": 0.5,
           "diff": 0.1, "p_ttest": 0.01, "significant": "*\u2020", "note": "only_common *queries*", "n_queries": 25,
           "metric": "ndcg_at_10"}
    sig = significance.to_markdown([row], "bm25", 0.05, 100, 100)
    html = md.render(sig)
    assert "<li>" in html and "<p>* paired t-test" in html and "<td>*\u2020</td>" in html
    assert "<li>r2med/a dense: only_common *queries*</li>" in html


def test_leaderboard_latex(board, tmp_path):
    out, bench = board
    tex = out["tex"].read_text()
    check_tex(tex, "leaderboard.tex")
    assert r"\multicolumn{3}{c}{r2med}" in tex and r"\cmidrule(lr){3-5}" in tex and r"\toprule" in tex
    assert r"dense+hyde & -- & \textbf{80.00}\textsuperscript{*} & \textbf{90.00} & \textbf{85.00} \\" in tex
    assert r"40.00\textsuperscript{*\dag}" in tex and r"half\_run" in tex and r"p $<$ 0.05" in tex
    check_tex(bench["tex"].read_text(), "r2med.tex")
    assert "Queries compared per task" in bench["tex"].read_text()


CLINIQ_ROWS = [
    {"model": m, "setting": s, "group": g, "metric": met, "value": v, "n_queries": n}
    for m, base in (("bm25", 0.4), ("dense", 0.6))
    for s, metrics, groups in (("single", ("mrr", "ndcg", "map"), (("all", 20), ("string", 8), ("synonym", 0))),
                               ("multi", ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100"),
                                (("all", 10), ("string", 6), ("synonym", 4))))
    for met in metrics for g, n in groups
    for v in [None if n == 0 else round(base + 0.01 * len(g) + 0.001 * len(met), 6)]]


def test_cliniq_wide_tables():
    wide = cliniq_tables.wide_tables(CLINIQ_ROWS)
    assert [t["title"] for t in wide] == ["MRR", "nDCG", "MAP and Recall@100", "nDCG@10, standard"]
    mrr = wide[0]
    assert mrr["columns"] == [("Single-patient (MRR)", "all"), ("Single-patient (MRR)", "string"),
                              ("Multi-patient (MRR)", "all"), ("Multi-patient (MRR)", "string"),
                              ("Multi-patient (MRR)", "synonym")]
    assert mrr["dropped"] == ["single-patient synonym"]  # nothing scored: left out, said so
    assert [r[0] for r in mrr["rows"]] == ["bm25", "dense"] and len(mrr["rows"][0]) == 6
    assert wide[1]["columns"][2] == ("Multi-patient (nDCG@10 (CliniQ))", "all")
    md = cliniq_tables.wide_markdown(wide, "CliniQ by match type (demo)")
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "single: string (n=8)</th>" in html and "multi: synonym (n=4)</th>" in html
    assert "Not shown (nothing scored): single-patient synonym." in md
    tex = cliniq_tables.wide_latex(wide, "CliniQ by match type (demo)", "tab:cliniq")
    check_tex(tex, "cliniq.tex")
    assert r"\multicolumn{2}{c}{Single-patient (MRR)} & \multicolumn{3}{c}{Multi-patient (MRR)}" in tex
    assert tex.count(r"\begin{table}") == 4


def paper_result():
    rows = [{"benchmark": "r2med", "task": "Biology", "model": "bm25-paper", "paper_task": "Biology", "ours": 0.9,
             "theirs": 0.1976, "diff": 0.7024, "flag": True, "note": "x", "source": "r2med", "protocol": None,
             "published_protocol": "r2med", "where": "results/base retriever/bm25/Biology.json@62b7074"}]
    checks = [{"benchmark": "r2med", "task": "Biology", "paper_task": "Biology", "queries": 2, "documents": 2,
               "paper_queries": 103, "paper_documents": 57359, "match": False}]
    return {"rows": rows, "checks": checks}


def test_paper_comparison_latex_and_mismatch():
    tex = r2med_paper.to_latex(paper_result())
    check_tex(tex, "r2med_vs_paper.tex")
    assert r"Biology & bm25-paper & r2med & r2med & 90.00 & 19.76 & +70.24 \\" in tex  # x 100
    assert "not comparable" in tex
    md = r2med_paper.to_markdown(paper_result())
    assert "**Not comparable:** r2med/Biology does not hold the paper's dataset" in md
    assert "| r2med/Biology | Biology | bm25-paper | - | 90.00 | 19.76 | r2med | r2med | +70.24 | **> 0.5** | x |" in md


def test_paper_comparison_without_comparable_runs_writes_no_table():
    rows = [{"benchmark": b, "task": t, "model": m, "paper_task": None, "ours": 0.5, "theirs": None, "diff": None,
             "flag": False, "note": "not an R2MED task", "source": ""}
            for b, t in (("demo", "demo"), ("cliniq-demo", "cliniq")) for m in ("bm25", "minilm", "rrf")]
    rows.append({**rows[0], "benchmark": "r", "task": "Biology", "paper_task": "Biology", "model": "mine",
                 "note": "no paper_name (or not a published configuration)"})
    result = {"rows": rows, "checks": []}
    tex = r2med_paper.to_latex(result)
    assert r"\begin{table}" not in tex and tex.startswith("% ") and "7 (run, task) pairs" in tex
    md = r2med_paper.to_markdown(result)
    assert "|" not in md  # no table, not even a header
    assert "No comparable runs: 7 (run, task) pairs, none with a published number" in md
    assert ("- 6 (run, task) pairs on cliniq-demo/cliniq, demo/demo: not an R2MED task" in md
            and "- 1 (run, task) pair: no paper_name (or not a published configuration): mine." in md)


# ---------------------------------------------------------------- every table fits a page, at the full matrix's size

MATCH_TYPES = ("all", "abbreviation", "hyponym", "implication", "string", "synonym")


def scale_tables(root):
    """The LaTeX tables of the full R2MED matrix (60 runs x 8 tasks, marks on a third of the cells, CliniQ
    beside it), CliniQ's six match types for 20 runs, and the paper comparison of every (run, task) pair (and three
    runs' means against a published mean of the eight tasks)."""
    root.mkdir(parents=True, exist_ok=True)
    runs, _ = full_matrix_runs()
    table = full_matrix_table()
    for r in runs[:20]:
        table[r][("cliniq", "cliniq")] = table[r][("r2med", "Biology")] / 2
    marks = {("r2med", t): {r: "*\u2020" for r in runs[i % 3::3]} for i, t in enumerate(R2MED_TASK_NAMES)}
    header, rows = leaderboard.build(table)
    (root / "leaderboard.tex").write_text(leaderboard.to_latex(header, rows, "ndcg_at_10",
                                                               leaderboard.column_marks(header, marks), LEGEND))
    bheader, brows = leaderboard.build_benchmark(table, "r2med")
    tex_header = ["model"] + [f"r2med/{t}" for t in bheader[1:]]
    (root / "leaderboard-r2med.tex").write_text(leaderboard.to_latex(
        tex_header, brows, "ndcg_at_10", leaderboard.column_marks(bheader, marks, benchmark="r2med"), LEGEND,
        label="tab:leaderboard:r2med", notes=["Queries compared per task: " + ", ".join(
            f"{t} {n}" for t, n in zip(R2MED_TASK_NAMES, (103, 77, 88, 97, 118, 150, 114, 129))) + "."]))
    cliniq = [{"model": m, "setting": s, "group": g, "metric": met, "value": (i * 7 + j) % 100 / 100, "n_queries": 10}
              for i, m in enumerate(runs[:20]) for s, mets in (("single", ("mrr", "ndcg", "map")),
                                                               ("multi", ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq",
                                                                          "recall_at_100")))
              for met in mets for j, g in enumerate(MATCH_TYPES)]
    (root / "cliniq.tex").write_text(cliniq_tables.wide_latex(cliniq_tables.wide_tables(cliniq),
                                                             "CliniQ by match type (cliniq)", "tab:cliniq"))
    paper = [{"benchmark": "r2med", "task": t, "model": r, "paper_task": t, "ours": v[("r2med", t)],
              "theirs": 0.2, "diff": v[("r2med", t)] - 0.2, "flag": True, "note": "", "source": ""}
             for r, v in table.items() for t in R2MED_TASK_NAMES]
    paper += [{"benchmark": "r2med", "task": "average", "model": r, "paper_task": "average", "tasks": 8, "ours": 0.44,
               "theirs": 0.4285, "diff": 0.0115, "flag": True, "note": "", "source": "reasonrank",
               "published_protocol": "reasonrank", "first_stage": f"{runs[0]}, run here (dense)"} for r in runs[:3]]
    (root / "paper.tex").write_text(r2med_paper.to_latex({"rows": paper, "checks": []}))
    files = [root / n for n in ("leaderboard.tex", "leaderboard-r2med.tex", "cliniq.tex", "paper.tex")]
    for f in files:
        check_tex(f.read_text(), f.name)
    return files


def test_tables_at_scale_split_and_shorten_to_fit(tmp_path):
    leader, bench, cliniq, paper = (f.read_text() for f in scale_tables(tmp_path))
    # 60 rows do not fit one page: split into parts of at most a page each, every run once per column part
    assert "Part 1 of" in bench and "Continued: part 2 of" in bench and r"\label{tab:leaderboard:r2med:part2}" in bench
    runs, _ = full_matrix_runs()
    for tex in (leader, bench):
        seen = {r: tex.count(f"\n{tables.tex_escape(r)} & ") for r in runs}
        assert min(seen.values()) >= 1 and len(set(seen.values())) == 1, seen  # each run once per column part
    # long task names are stacked or shortened, and every short form is spelt out
    assert r"\shortstack{" in bench or "Abbreviations:" in bench
    for short in ("abbr.", "impl."):
        assert f"{short} = " in cliniq
    assert paper.count(r"\begin{table}") >= 8  # 480 (run, task) pairs over several pages
    means = {line.split(" & ")[1] for line in paper.splitlines() if line.startswith("Mean of the 8 & ")}
    assert means == {tables.tex_escape(r) for r in runs[:3]} and "Mean of the 8: the run's mean over the eight" in paper


def test_every_table_compiles_with_pdflatex(board, tmp_path):
    """CI's check that every table fits a one-column page with 1-inch margins: pdflatex reports no overfull box
    and no float too large, for the small tables and for the full matrix's."""
    out, bench = board
    wide = cliniq_tables.wide_tables(CLINIQ_ROWS)
    (tmp_path / "cliniq.tex").write_text(cliniq_tables.wide_latex(wide, "CliniQ", "tab:cliniq"))
    (tmp_path / "paper.tex").write_text(r2med_paper.to_latex(paper_result()))
    for path in (out["tex"], bench["tex"]):
        assert "\n\\small\n" in path.read_text()  # a small table keeps the larger size
    scale = scale_tables(tmp_path / "scale")
    log = compile_tex([out["tex"], bench["tex"], tmp_path / "cliniq.tex", tmp_path / "paper.tex", *scale],
                      tmp_path / "latex")
    assert "Output written on doc.pdf" in log


def test_escapes():
    assert tables.md_escape("a*b_c|d") == r"a\*b\_c\|d"
    assert tables.tex_escape("50% & a_b \u2020") == r"50\% \& a\_b \dag{}"
    assert tables.tex_escape("bm25--minilm@100 \u2013") == "bm25-{}-minilm@100 --"  # the name, not a dash
    assert [tables.metric_label(m) for m in ("ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100", "map", "mrr")] == [
        "nDCG@10", "nDCG@10 (CliniQ)", "Recall@100", "MAP", "MRR"]


# ---------------------------------------------------------------- plots: every panel has data


def test_cliniq_plot_panels_all_have_data(tmp_path, monkeypatch):
    """Single- and multi-patient measure different metrics: a panel per metric of each setting, none empty."""
    path = tmp_path / "by_match_type.csv"
    path.write_text(cliniq_files.table_csv(CLINIQ_ROWS))
    seen = []
    check = figure.check_panels
    monkeypatch.setattr(figure, "check_panels", lambda fig: (seen.append(fig), check(fig)))
    cliniq_plots.cliniq_breakdown(path, "match_type", "demo", tmp_path / "m.png", tmp_path / "m.svg",
                           palette.assign(["bm25", "dense"]))
    fig = seen[0]
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == sorted(["single-patient: MRR", "single-patient: nDCG", "single-patient: MAP",
                             "multi-patient: MRR", "multi-patient: nDCG@10", "multi-patient: nDCG@10 (CliniQ)",
                             "multi-patient: Recall@100"])  # 7 panels, not 2 x 7 with 5 empty
    assert all(figure.panel_points(ax) > 0 for ax in fig.axes)
    single = next(ax for ax in fig.axes if ax.get_title() == "single-patient: MRR")
    assert [t.get_text() for t in single.get_xticklabels()] == ["all\n(n=20)", "string\n(n=8)"]  # synonym: none
    assert all(abs(p.get_height()) > 1 for p in single.patches)  # x 100


def test_scatter_is_x100_and_empty_panels_are_refused(tmp_path, monkeypatch):
    seen = []
    check = figure.check_panels
    monkeypatch.setattr(figure, "check_panels", lambda fig: (seen.append(fig), check(fig)))
    plots.scatter({"t": ({"q1": 0.5, "q2": 1.0}, {"q1": 0.25, "q2": 1.0})}, "a", "b", "demo", "ndcg_at_10",
                  tmp_path / "s.png", tmp_path / "s.svg")
    ax = seen[0].axes[0]
    assert ax.get_xlim() == (-3, 103) and sorted(ax.collections[0].get_offsets()[:, 0]) == [50.0, 100.0]
    assert "x 100" in ax.get_xlabel()
    plt = figure.pyplot()
    fig, axes = plt.subplots(1, 2)
    axes[0].bar([0], [1.0])
    axes[1].set_title("empty")
    with pytest.raises(ValueError, match="plot panel 'empty' has no data"):
        figure.check_panels(fig)
    plt.close(fig)

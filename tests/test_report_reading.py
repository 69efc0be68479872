"""Issue 40: the report as a researcher reads it. The combined leaderboard orders like with like; Judged@10 and
unusable LLM answers are marked; Holm's family is configurable; the configuration takes ir_measures' metric names;
linear fusion has ranx's convention; the report shows what earlier runs scored and names what it leaves out;
the CliniQ completion section opens with one line; the terminal of a run is a line per finished job."""

from __future__ import annotations

import copy
import csv
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO

from r2med_eval import cli, progress
from r2med_eval.cliniq import completion_report as rep
from r2med_eval.errors import ConfigError
from r2med_eval.report import leaderboard, significance
from r2med_eval.scoring import fusion, stats
from r2med_eval.workflow import config, earlier, inputs
from r2med_eval.workflow.params import Params
from r2med_eval.workflow.registry import Registry

BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def metrics(root, values: dict, judged: dict | None = None):
    """Metric JSONs {(benchmark, task, model): nDCG@10}; ``judged``: their Judged@10 where given."""
    files = []
    for (bench, task, model), v in values.items():
        path = root / "metrics" / bench / task / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        m = {"ndcg_at_10": v, "mrr": v}
        if judged and (bench, task, model) in judged:
            m["judged_at_10"] = judged[(bench, task, model)]
        path.write_text(json.dumps({"benchmark": bench, "task": task, "model": model, "metrics": m}))
        files.append(path)
    return files


# ---------------------------------------------------------------- item 8: like with like


def test_combined_leaderboard_ranks_a_run_only_against_runs_with_the_same_columns(tmp_path):
    """The 1% rehearsal's case: a run on R2MED only (72.54) stood above the best R2MED run (89.53, also 38.06 on
    CliniQ) because rows were ranked by the mean over the columns each had. Now runs on both come first, then the
    R2MED-only ones; within each group every run has the same columns."""
    files = metrics(tmp_path, {("r2med", "a", "bm25-paper"): 0.9, ("r2med", "b", "bm25-paper"): 0.8906,
                               ("cliniq", "c", "bm25-paper"): 0.3806,
                               ("r2med", "a", "dense"): 0.5, ("r2med", "b", "dense"): 0.5,
                               ("cliniq", "c", "dense"): 0.45,
                               ("r2med", "a", "bm25-paper+q2d"): 0.7254, ("r2med", "b", "bm25-paper+q2d"): 0.7254})
    table = leaderboard.collect(files)
    old = sorted(table, key=lambda m: leaderboard.rank_key({b: [v for (bb, _), v in table[m].items() if bb == b]
                                                            for b in ("r2med", "cliniq")}))
    assert old[0] == "bm25-paper+q2d"  # the old rule: the one-benchmark run first
    header, rows, groups = leaderboard.build_grouped(table)
    assert [r[0] for r in rows] == ["bm25-paper", "dense", "bm25-paper+q2d"]
    assert groups == [("cliniq + r2med", 2), ("r2med only", 1)]
    out = {e: tmp_path / f"lb.{e}" for e in ("csv", "md", "html", "tex")}
    leaderboard.write(files, out["csv"], out["md"], html_path=out["html"], tex_path=out["tex"])
    for ext in ("md", "html", "tex"):
        text = out[ext].read_text().replace("\n", " ")
        assert "grouped by the benchmarks a run was scored on" in text and "r2med only (1 run)" in text, ext
    # within one benchmark the order is R2MED's own: the best R2MED run first
    header, rows = leaderboard.build_benchmark(table, "r2med")
    assert [r[0] for r in rows] == ["bm25-paper", "bm25-paper+q2d", "dense"]
    # a run that misses a task of a benchmark is ranked with the runs that miss it too
    table["partial"] = {("r2med", "a"): 0.99}
    assert leaderboard.build_grouped(table)[2][-1] == ("r2med (a) only", 1)


# ---------------------------------------------------------------- item 1's display: Judged@10, unusable answers


def test_judged_at_10_below_the_threshold_is_marked_and_explained(tmp_path):
    files = metrics(tmp_path, {("liveqa", "pool", "bm25"): 0.3, ("liveqa", "pool", "minilm"): 0.4,
                               ("liveqa", "pool", "old"): 0.2},
                    judged={("liveqa", "pool", "bm25"): 0.44, ("liveqa", "pool", "minilm"): 0.9})
    out = {e: tmp_path / f"lb.{e}" for e in ("csv", "md", "html", "tex")}
    leaderboard.write(files, out["csv"], out["md"], html_path=out["html"], tex_path=out["tex"])
    md = out["md"].read_text()
    assert "| bm25 | 30.00° |" in md and "| minilm | **40.00** |" in md and "| old | 20.00 |" in md
    assert "° Judged@10 below 80%" in md and "lowest 44%" in md and "(1 cell;" in md
    assert '30.00<sup class="sig">°</sup>' in out["html"].read_text()
    assert r"30.00\textsuperscript{$\circ$}" in out["tex"].read_text()
    rows = {r["model"]: r for r in csv.DictReader(out["csv"].open())}
    assert rows["bm25"]["liveqa/pool judged@10"] == "0.44000" and rows["old"]["liveqa/pool judged@10"] == ""
    # the threshold is the configuration's; per benchmark too, the CSV with a judged@10 column per task
    leaderboard.write(files, out["csv"], out["md"], judged_below=0.4)
    assert "°" not in out["md"].read_text()
    bench = {e: tmp_path / f"b.{e}" for e in ("csv", "md", "html", "tex")}
    leaderboard.write_benchmark(files, "liveqa", bench["csv"], bench["md"], bench["html"], tex_path=bench["tex"])
    rows = {r["model"]: r for r in csv.DictReader(bench["csv"].open())}
    assert rows["bm25"]["pool sig"] == "°" and rows["bm25"]["pool judged@10"] == "0.44000"
    # metrics written before Judged@10 existed: no column, no mark
    older = metrics(tmp_path / "old", {("liveqa", "pool", "bm25"): 0.3})
    leaderboard.write(older, out["csv"], out["md"])
    assert "judged@10" not in out["csv"].read_text() and "°" not in out["md"].read_text()


def test_unusable_llm_answers_are_marked_with_their_count(tmp_path):
    files = metrics(tmp_path, {("demo", "demo", "bm25"): 0.4, ("demo", "demo", "bm25--pw@10"): 0.3})
    lineage = {("demo", "demo", "bm25--pw@10"): {"unusable_answers": 55, "unusable_share": 1.0}}
    out = {e: tmp_path / f"lb.{e}" for e in ("csv", "md", "html")}
    leaderboard.write(files, out["csv"], out["md"], html_path=out["html"], lineage=lineage)
    md = out["md"].read_text()
    assert "| bm25--pw@10 | 30.00§ |" in md and "§ bm25--pw@10 on demo/demo: 55 LLM answers unusable (100.0%)" in md
    leaderboard.write_benchmark(files, "demo", out["csv"], out["md"], out["html"], lineage=lineage)
    assert "30.00§" in out["md"].read_text()
    # a lineage without the count, or with nonsense, marks nothing
    for junk in ({}, {"unusable_answers": "55"}, {"unusable_answers": 0}, {"unusable_answers": True}, []):
        assert leaderboard.unusable_answers({("demo", "demo", "x"): junk}) == {}


# ---------------------------------------------------------------- item 6: Holm's family


def holm_fixture(extra_runs: int) -> dict:
    """One task where ``x`` beats the baseline at p near 0.03 and ``extra_runs`` other tasks with a run that does
    not differ: with Holm over everything, the added comparisons take x's mark away."""
    import numpy as np

    rng = np.random.default_rng(7)
    n = 20
    base = rng.uniform(0.2, 0.6, n)
    z = rng.standard_normal(n)
    z = (z - z.mean()) / z.std(ddof=1)
    tasks = {("b", "t0"): {"bm25": dict(enumerate(base)), "x": dict(enumerate(base + 0.03 + 0.058 * z))}}
    for i in range(1, extra_runs + 1):
        noise = rng.standard_normal(n) * 0.05
        tasks[("b", f"t{i}")] = {"bm25": dict(enumerate(base)), f"y{i}": dict(enumerate(base + noise - noise.mean()))}
    return {k: {m: {f"q{q}": float(v) for q, v in vals.items()} for m, vals in models.items()}
            for k, models in tasks.items()}


@pytest.mark.parametrize("family", ["benchmark", "task", "run"])
def test_holm_families_adjust_within_their_family(family):
    fixture = {**holm_fixture(4), ("c", "t0"): holm_fixture(0)[("b", "t0")]}  # a second benchmark, the same runs
    rows = significance.compute_values(fixture, "bm25", permutations=999, resamples=200, family=family)
    tested = [r for r in rows if r.get("p_ttest") is not None]
    groups: dict = {}
    for r in tested:
        groups.setdefault(significance.holm_key(r, family), []).append(r)
    assert len(groups) == {"benchmark": 2, "task": 6, "run": 6}[family]  # never across benchmarks
    assert all(len({r["benchmark"] for r in members}) == 1 for members in groups.values())
    for members in groups.values():
        assert [r["p_ttest_holm"] for r in members] == stats.holm([r["p_ttest"] for r in members])
    assert f"Holm over {significance.HOLM_FAMILIES[family]}" in significance.legend(0.05, "bm25", 999, family)


def test_adding_runs_keeps_a_runs_marks_under_the_run_family_only():
    def mark_of_x(extra, family):
        rows = significance.compute_values(holm_fixture(extra), "bm25", permutations=999, resamples=200,
                                           family=family)
        return next(r for r in rows if r["model"] == "x")

    alone = mark_of_x(0, "benchmark")
    assert 0.01 < alone["p_ttest"] < 0.05 and alone["significant"].startswith("*")
    assert not mark_of_x(4, "benchmark")["significant"].startswith("*")  # runs added to its benchmark: a larger family
    assert mark_of_x(4, "run")["significant"] == alone["significant"]
    assert mark_of_x(4, "task")["significant"] == alone["significant"]
    with pytest.raises(ValueError, match="unknown Holm family"):
        significance.compute_values(holm_fixture(0), "bm25", permutations=999, resamples=200, family="pairs")


def test_holm_family_reaches_the_report_rules_and_is_validated():
    raw = copy.deepcopy(BASE)
    raw["report"] = {**raw["report"], "holm": "run"}
    params = Params(Registry(config.validate(raw)))
    w = SimpleNamespace(benchmark="demo")
    assert params.significance(w)["holm"] == "run" and params.leaderboard_benchmark(w)["holm"] == "run"
    for family in ("pairs", "all"):  # all (0.2's default) spanned benchmarks: gone
        raw["report"]["holm"] = family
        with pytest.raises(ConfigError, match="holm"):
            config.validate(raw)


# ---------------------------------------------------------------- item 6: one naming scheme


@pytest.mark.parametrize("name,ours", [("nDCG@10", "ndcg_at_10"), ("R@100", "recall_at_100"),
                                       ("AP@100", "map_at_100"), ("P@10", "precision_at_10"), ("RR", "mrr"),
                                       ("ndcg_cut_10", "ndcg_at_10"), ("recip_rank", "mrr"), ("mrr", "mrr")])
def test_the_configuration_takes_the_command_lines_metric_names(name, ours):
    raw = copy.deepcopy(BASE)
    raw["leaderboard"] = {"metric": name}
    cfg = config.validate(raw)
    assert cfg["leaderboard"]["metric"] == ours
    # one spelling in the params: respelling the metric reruns nothing
    same = copy.deepcopy(BASE)
    same["leaderboard"] = {"metric": ours}
    w = SimpleNamespace(benchmark="demo")
    assert Params(Registry(cfg)).leaderboard(w) == Params(Registry(config.validate(same))).leaderboard(w)


@pytest.mark.parametrize("name,says", [("nDCG@7", "does not compute"), ("RR@10", "does not compute"),
                                       ("Bpref", "does not compute"), ("ndcg_at_11", "does not compute"),
                                       ("nDGC@10", "not a computed metric")])
def test_a_metric_score_run_does_not_compute_stops_with_its_names(name, says):
    raw = copy.deepcopy(BASE)
    raw["leaderboard"] = {"metric": name}
    with pytest.raises(ConfigError, match=f"leaderboard.metric '{name}' .*{says}.*nDCG@10"):
        config.validate(raw)


def ranx_transcription(runs, weights, norm):
    """ranx 0.3's fuse(norm="min-max" | "zmuv", method="wsum"), transcribed from its source (normalization/
    min_max_norm.py, zmuv_norm.py, fusion/wsum.py): each query's scores normalised with numba's np.mean / np.std
    (sums from left to right, population deviation) and a denominator of at least 1e-9; the weighted sum counts a
    document missing from a run as 0."""
    out = {}
    for q in sorted({q for run in runs for q in run}):
        normed = []
        for run in runs:
            res = run.get(q, {})
            scores = list(res.values())
            if not scores:
                normed.append({})
                continue
            if norm == "min-max":
                lo, hi = min(scores), max(scores)
                den = max(hi - lo, 1e-9)
                normed.append({d: (s - lo) / den for d, s in res.items()})
            else:
                total = 0.0
                for s in scores:
                    total += s
                mean = total / len(scores)
                sq = 0.0
                for s in scores:
                    sq += (s - mean) ** 2
                den = max(math.sqrt(sq / len(scores)), 1e-9)
                normed.append({d: (s - mean) / den for d, s in res.items()})
        combined = {}
        for res in normed:
            for d in res:
                if d not in combined:
                    combined[d] = sum(w * r.get(d, 0.0) for w, r in zip(weights, normed))
        out[q] = combined
    return out


def test_ranx_convention_equals_ranx_and_floor_differs_where_documented():
    a = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 2.0, "d4": 0.5}, "q2": {"d1": 1.0, "d2": 1.0}, "q3": {"d9": 7.0}}
    b = {"q1": {"d2": 0.9, "d5": 0.7, "d1": 0.1}, "q2": {"d3": 0.4, "d1": 0.2}}
    for method, norm in (("zscore", "zmuv"), ("minmax", "min-max")):
        for weights in ([1.0, 1.0], [0.7, 0.3]):
            ours = fusion.fuse([a, b], method, weights=weights, convention="ranx")
            theirs = ranx_transcription([a, b], weights, norm)
            assert ours.keys() == theirs.keys()
            for q in ours:
                assert ours[q].keys() == theirs[q].keys()
                assert ours[q] == pytest.approx(theirs[q], abs=1e-12), (method, q)
    # the documented difference: a document missing from a run is that run's worst (floor) or its mean (ranx)
    floor = fusion.fuse([a, b], "zscore", convention="floor")["q1"]
    ranx = fusion.fuse([a, b], "zscore", convention="ranx")["q1"]
    z_b = fusion._normalise(b["q1"], "zscore")
    assert floor["d3"] - ranx["d3"] == pytest.approx(min(z_b.values()))
    assert floor["d1"] == pytest.approx(ranx["d1"])  # in both runs: the same
    # equal scores: floor gives 1 under min-max, ranx 0
    assert fusion.fuse([a], "minmax")["q2"] == {"d1": 1.0, "d2": 1.0}
    assert fusion.fuse([a], "minmax", convention="ranx")["q2"] == {"d1": 0.0, "d2": 0.0}
    with pytest.raises(ValueError, match="unknown fusion convention"):
        fusion.fuse([a], "zscore", convention="mean")


def test_fusion_convention_is_configured_per_fused_run():
    raw = copy.deepcopy(BASE)
    raw["fusion"] = {"z": {"method": "zscore", "runs": ["bm25", "minilm"], "convention": "ranx"},
                     "z2": {"method": "zscore", "runs": ["bm25", "minilm"]}}
    params = Params(Registry(config.validate(raw)))
    assert params.fuse_runs(SimpleNamespace(model="z"))["convention"] == "ranx"
    assert params.fuse_runs(SimpleNamespace(model="z2"))["convention"] == "floor"


def test_run_from_another_directory_passes_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("report: {seed: 1}\n")
    args, extra = cli.parser().parse_known_args(["run", "--cores", "2", "--configfile", "config.yaml", "mine.yaml"])
    cmd = cli.run_command(args, extra)
    assert cmd[cmd.index("--directory") + 1] == str(REPO)
    assert cmd[cmd.index("--configfile") + 1:cmd.index("--configfile") + 3] == [str(REPO / "config.yaml"),
                                                                                 str(tmp_path / "mine.yaml")]
    assert "--logger=r2med-eval" in cmd  # no target appended after --configfile (it takes several values)
    # the user's own directory, a dry run, --verbose: as given, with Snakemake's own output
    args, extra = cli.parser().parse_known_args(["run", "-d", str(tmp_path), "-n"])
    cmd = cli.run_command(args, extra)
    assert "--directory" not in cmd and "--logger=r2med-eval" not in cmd
    args, extra = cli.parser().parse_known_args(["run", "--verbose"])
    assert "--logger=r2med-eval" not in cli.run_command(args, extra)
    monkeypatch.chdir(REPO)
    args, extra = cli.parser().parse_known_args(["run"])
    assert "--directory" not in cli.run_command(args, extra)


@pytest.mark.slow
def test_run_from_another_directory_plans_the_default_workflow(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "r2med_eval", "run", "--cores", "1", "-n", "--quiet"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"working directory {REPO}" in proc.stderr and "config.yaml not present" not in proc.stderr + proc.stdout


# ---------------------------------------------------------------- item 9: the completion section at a glance


def completion_rows(found: dict):
    """Estimate rows: all queries and two query types, relevant and five match types; ``found``: (group, measure)
    -> found chunks (0 elsewhere)."""
    rows = []
    for scope, group in (("all", "all"), ("query_type", "disease"), ("query_type", "drug")):
        for measure in ("relevant", "string", "synonym", "abbreviation", "hyponym", "implication"):
            n = found.get((group, measure), 0)
            rows.append({"scope": scope, "group": group, "measure": measure, "queries": 4, "population": 100,
                         "covered": 100, "judged": 20, "malformed": 0, "found": n, "rate": n / 20,
                         "rate_low": 0.0, "rate_high": 0.2, "missing": 5.0 * n, "missing_low": 0.0,
                         "missing_high": 20.0, "n_eff": 20.0})
    return rows


def test_completion_estimates_table_keeps_groups_and_found_match_types_only():
    rows = completion_rows({("all", "relevant"): 3, ("all", "synonym"): 3, ("disease", "relevant"): 3,
                            ("disease", "synonym"): 3})
    info = {"llm": "judge", "queries": 4, "sample_per_query": 5, "seed": 0, "pool_depth": 10, "runs": 3}
    md = rep.estimates_markdown("cq", rows, info)
    table = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| group")]
    assert len(rows) == 18 and len(table) == 5  # three groups, and synonym where it was found
    assert [line.split(" | ")[:2] for line in table] == [["| all", "relevant"], ["| all", "synonym"],
                                                         ["| disease", "relevant"], ["| disease", "synonym"],
                                                         ["| drug", "relevant"]]
    assert "13 rows without any are in estimates.csv" in md


def verdict_inputs(moved: bool, flipped: bool, covered: bool = True):
    overall = {"covered": 100 if covered else 0, "rate": 0.0123, "rate_low": 0.0051, "rate_high": 0.028,
               "missing": 12.0, "missing_low": 5.0, "missing_high": 28.0, "found": 3}
    rescored = [{"model": m, "group": "all", "metric": metric, "moved": moved and m == "bm25", "original": 0.5,
                 "completed": 0.6 if moved and m == "bm25" else 0.5, "relative_change": 20.0 if moved else 0.0,
                 "queries": 4}
                for m in ("bm25", "minilm", "rrf") for metric in ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq",
                                                                  "recall_at_100")]
    flips = [("bm25", "minilm")] if flipped else []
    ranks = [{"group": "all", "metric": metric, "flipped_pairs": flips if metric == "mrr" else [], "strict_pairs": 3,
              "kendall_tau": 1.0, "ci_low": 1.0, "ci_high": 1.0}
             for metric in ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100")]
    info = {"llm": "judge", "judged": 40, "malformed": 0, "queries": 4}
    return info, overall, rescored, ranks


@pytest.mark.parametrize("moved,flipped,covered,status", [(False, False, True, "Reliable"),
                                                          (True, True, True, "Unreliable"),
                                                          (False, False, False, "Inconclusive")])
def test_the_verdict_opens_with_one_line(moved, flipped, covered, status):
    """The verdict (cliniq/completion_verdict.py since issue 47: the review's rule decides, ours beside it) opens with
    one line of its status, the false-negative rate, the flips and the systems that moved."""
    from r2med_eval.cliniq import completion_verdict

    info, overall, rescored, ranks = verdict_inputs(moved, flipped, covered)
    result = completion_verdict.verdict("cq", info, overall, rescored, ranks, 5.0)
    md = completion_verdict.verdict_markdown("cq", result)
    first = md.split("\n\n")[1]
    assert first.startswith(f"**{status}** by the review's rule: ") and "\n" not in first
    if covered:
        assert "false-negative rate 1.23% (95% CI 0.51% to 2.80%)" in first
    else:
        assert "no usable answer of the judge" in first
    assert ("(1 of 3 systems: bm25)" if moved else "(0 of 3 systems)") in first
    assert ("bm25 > minilm by MRR flips" if flipped else "no pair flips") in result["headline"]


# ---------------------------------------------------------------- item 2: the union of what is scored


def test_earlier_benchmarks_and_left_files_are_found_when_planning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reg = Registry(config.validate(copy.deepcopy({**BASE, "benchmarks_to_run": ["demo"],
                                                  "models_to_run": ["bm25", "bm25-paper"]})))
    res = tmp_path / "results"
    for rel in ("metrics/cliniq-demo.jsonl", "metrics/demo.jsonl", "metrics/demo/demo/bm25.json",
                "metrics/demo/demo/minilm.json", "leaderboards/cliniq-demo.md", "leaderboards/cliniq-demo.csv",
                "tables/leaderboard-cliniq-demo.tex", "tables/cliniq-cliniq-demo-by_match_type.tex",
                "plots/cliniq-demo/by_task.png", "cliniq/cliniq-demo/by_match_type.md", "cliniq/cliniq-demo/pool.tsv",
                "plots/demo/rerank_depth.png", "plots/demo/by_task.png", "leaderboards/gone.md",
                "plots/cliniq-demo/.by_task.png.x1.tmp"):
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).write_text("x")
    found = inputs.Inputs(reg)
    assert earlier.benchmarks(reg) == ["cliniq-demo"]
    assert found.earlier_tables() == ["results/metrics/cliniq-demo.jsonl"]
    assert found.earlier_boards() == ["results/leaderboards/cliniq-demo.csv"]
    assert earlier.files(reg) == sorted(f"results/{r}" for r in (
        "leaderboards/cliniq-demo.md", "leaderboards/cliniq-demo.csv", "tables/leaderboard-cliniq-demo.tex",
        "tables/cliniq-cliniq-demo-by_match_type.tex", "plots/cliniq-demo/by_task.png",
        "cliniq/cliniq-demo/by_match_type.md", "cliniq/cliniq-demo/pool.tsv"))
    assert earlier.stale(reg, inputs.all_targets(reg)) == ["results/leaderboards/gone.md",
                                                           "results/plots/demo/rerank_depth.png"]
    assert earlier.unselected_runs(reg) == {"demo/demo": ["minilm"]}
    assert set(earlier.files(reg)) <= set(found.report_index())
    assert Params(reg).report_index(None)["stale"] == earlier.stale(reg, inputs.all_targets(reg))
    assert Params(reg).report_index(None)["earlier"] == ["cliniq-demo"]


def test_a_partial_selection_keeps_a_complete_scoring_of_the_benchmark(tmp_path, monkeypatch):
    """models_to_run leaving runs out: a benchmark with a complete scoring here is kept (its report as that scoring
    left it), one without is reported from this run's part; what a scoring selected is recorded beside its metrics."""
    from r2med_eval.io import write_json

    monkeypatch.chdir(tmp_path)
    full = Registry(config.validate(copy.deepcopy(BASE)))
    part = Registry(config.validate(copy.deepcopy({**BASE, "models_to_run": ["bm25", "bm25-paper"]})))
    assert all(full.complete(b) for b in full.benchmarks) and not any(part.complete(b) for b in part.benchmarks)
    assert full.selection("demo")["complete"] and part.selection("demo")["models_to_run"] == ["bm25", "bm25-paper"]
    assert earlier.kept(part) == [] and earlier.reported(part) == part.benchmarks  # nothing scored here yet
    for b, reg in (("demo", full), ("cliniq-demo", part)):  # demo scored completely, cliniq-demo in part
        write_json(f"results/metrics/{b}.selection.json", reg.selection(b))
        Path(f"results/metrics/{b}.jsonl").write_text("x")
    assert earlier.kept(part) == ["demo"] and earlier.reported(part) == ["cliniq-demo"]
    assert earlier.kept(full) == [] and earlier.shown(part) == ["demo"]
    found = inputs.Inputs(part)
    assert found.earlier_tables() == ["results/metrics/demo.jsonl"]
    assert found.leaderboard()["metrics"] == ["results/metrics/cliniq-demo.jsonl"]
    assert found.leaderboard()["selections"] == ["results/metrics/cliniq-demo.selection.json",
                                                "results/metrics/demo.selection.json"]
    assert not [p for p in found.per_query_files() if "/demo/" in p] and found.per_query_files()
    targets = inputs.all_targets(part)
    assert "results/leaderboards/demo.csv" not in targets and "results/leaderboards/cliniq-demo.csv" in targets
    assert Params(part).report_index(None)["kept"] == ["demo"]


def test_earlier_significance_marks_are_read_from_their_own_table(tmp_path):
    board = tmp_path / "b.csv"
    board.write_text("model,t,avg,t sig,t judged@10\nx,0.5,0.5,*†°,0.3\ny,0.4,0.4,,0.9\n")
    assert leaderboard.read_board_marks(board, "b") == {("b", "t"): {"x": "*†"}}


# ---------------------------------------------------------------- item 7: the terminal


def test_run_monitor_prints_a_line_per_job_an_eta_and_the_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "index.html").write_text("<html>")
    bench = tmp_path / "benchmarks" / "score_run" / "a.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\n4.0\t0:00:04\t10\n")
    now = [0.0]
    lines = []
    m = progress.RunMonitor(lines.append, clock=lambda: now[0],
                            prior=lambda rule: [10.0, 30.0] if rule == "retrieve" else [])
    m.run_info({"score_run": 2, "retrieve": 1, "total": 3})
    m.resources(2)
    m.job_started(1, "score_run", {"benchmark": "demo", "model": "bm25"}, ["logs/score_run/demo/bm25.log"], str(bench))
    now[0] = 5.0
    m.job_finished(1)
    m.progress(1, 3)
    # 1 score_run left (4 s, its benchmark file) + 1 retrieve (20 s, earlier runs' files), concurrency 1 (4 s in 5 s)
    assert lines[-1] == "r2med-eval [1/3 33%] done score_run demo/bm25 (4s); elapsed 5s, ETA 24s"
    m.job_started(2, "retrieve", {"model": "x"}, ["logs/retrieve/x.log"])
    m.job_failed(2, "retrieve", ["logs/retrieve/x.log"])
    assert lines[-1] == "r2med-eval: FAILED retrieve x; its log: logs/retrieve/x.log"
    m.job_failed(2, "retrieve", ["logs/retrieve/x.log"])  # Snakemake reports it again: one line
    assert lines[-2] != lines[-1]
    m.message(logging.INFO, "Select jobs to execute...")
    m.message(logging.WARNING, "Warning: something")
    assert lines[-1] == "Warning: something"
    m.message(logging.INFO, "Complete log(s): /w/.snakemake/log/x.snakemake.log")
    assert lines[-3:] == ["r2med-eval: 1/3 jobs in 5s, 1 failed", "r2med-eval: failed retrieve x: logs/retrieve/x.log",
                          "r2med-eval: Snakemake's full log: /w/.snakemake/log/x.snakemake.log"]  # no report page
    m.summary()  # once
    assert len(lines) == 7
    # a run without failures ends on the report page
    done = progress.RunMonitor(lines.append, clock=lambda: now[0], prior=lambda rule: [])
    done.message(logging.INFO, "Nothing to be done (all requested files are present and up to date).")
    assert lines[-1] == f"r2med-eval: report: {tmp_path / 'results' / 'index.html'}"
    broken = progress.RunMonitor(lines.append, clock=lambda: now[0], prior=lambda rule: [])
    broken.message(logging.ERROR, "r2med-eval: config.yaml: leaderboard.metric 'x' ...")
    broken.summary()
    assert "report:" not in lines[-1]
    assert progress.read_benchmark_seconds(bench) == 4.0 and progress.read_benchmark_seconds(tmp_path / "no") is None


def test_the_plugin_turns_snakemakes_records_into_the_monitors_lines():
    pytest.importorskip("snakemake_interface_logger_plugins")
    from snakemake_interface_logger_plugins.common import LogEvent

    from snakemake_logger_plugin_r2med_eval import LogHandler

    handler = LogHandler(SimpleNamespace(stdout=False), None)
    lines = []
    handler.monitor.write = lines.append

    def record(msg, level=logging.INFO, **extra):
        r = logging.LogRecord("snakemake", level, __file__, 1, msg, None, None)
        r.__dict__.update(extra)
        return r

    handler.emit(record("Job stats: ...", event=LogEvent.RUN_INFO, stats={"a": 1, "total": 1}))
    handler.emit(record(" Rule: a, Jobid: 3", event=LogEvent.JOB_INFO, jobid=3, rule_name="a",
                        wildcards={"benchmark": "demo"}, log=["logs/a/demo.log"], benchmark=None))
    handler.emit(record("input: x\noutput: y", event=LogEvent.SHELLCMD))
    handler.emit(record("Finished jobid: 3", event=LogEvent.JOB_FINISHED, job_id=3))
    handler.emit(record(None, event=LogEvent.PROGRESS, done=1, total=1))
    handler.emit(record("Building DAG of jobs..."))
    assert lines[0].startswith("r2med-eval: 1 jobs to run (1 a)")
    assert lines[1].startswith("r2med-eval [1/1 100%] done a demo (") and len(lines) == 2
    assert handler.writes_to_stream and not handler.writes_to_file


def test_java_and_native_output_of_a_job_stays_in_its_log(tmp_path):
    """Lucene's `INFO: Using MemorySegmentIndexInput` line is written by the JVM to file descriptor 2: smk.run sends
    it to the job's log; the terminal keeps the failure line."""
    code = f"""
import os, sys
sys.path.insert(0, {str(REPO / 'src')!r})
from pathlib import Path
from types import SimpleNamespace
from r2med_eval import smk
from r2med_eval.errors import InputError
def job(sm):
    os.write(2, b"INFO: Using MemorySegmentIndexInput with Java 21\\n")
    os.write(1, b"a C library on stdout\\n")
    print("r2med-eval: a line for a person", file=sys.__stderr__)
    raise InputError("bad input.", fix="fix it.")
sm = SimpleNamespace(log=[{str(tmp_path / 'job.log')!r}], rule="lucene_index",
                     wildcards=SimpleNamespace(benchmark="demo"), params=SimpleNamespace(spec={{}}), config={{}})
smk.run(sm, job)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "MemorySegmentIndexInput" not in proc.stderr + proc.stdout and "C library" not in proc.stdout
    assert proc.stderr.splitlines() == ["r2med-eval: a line for a person", "r2med-eval: bad input. Fix: fix it."]
    log = (tmp_path / "job.log").read_text()
    assert "INFO: Using MemorySegmentIndexInput" in log and "a C library on stdout" in log and "bad input" in log


@pytest.mark.slow
def test_a_subset_run_keeps_the_other_benchmark_and_the_terminal_reads(tmp_path):
    """The user's view through `r2med-eval run`: the default run's two benchmarks (BM25 only, for time), then
    `--config benchmarks_to_run=[demo]` (README's tour): the leaderboard and the index still show cliniq-demo,
    marked as an earlier run's; running everything again gives the first report back. The terminal: a line per
    finished job with done/total and an ETA, the report's path and Snakemake's full log at the end; no job blocks,
    no Java chatter."""
    text = (REPO / "config.yaml").read_text().replace("path: data/demo", f"path: {REPO / 'data' / 'demo'}")
    text = text.replace("data/cliniq-demo", str(REPO / "data" / "cliniq-demo"))
    text += "\nmodels_to_run: [bm25]\n"
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def run(*more):
        proc = subprocess.run([sys.executable, "-m", "r2med_eval", "run", "--cores", "2", "-d", str(work),
                               "--configfile", str(work / "config.yaml"), *more], cwd=tmp_path, capture_output=True,
                              text=True, env=env, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return proc.stderr.splitlines()

    lines = run()
    done = [line for line in lines if line.startswith("r2med-eval [")
            and " done " in line and "] " in line and "ETA" in line]
    total = int(done[-1].split("/")[1].split()[0])
    assert len(done) == total and done[-1].startswith(f"r2med-eval [{total}/{total} 100%] done all")
    assert len(lines) < total + 12, lines  # no job blocks: a line per job and a few more
    assert not [line for line in lines if "MemorySegmentIndexInput" in line or line.startswith(("rule ", "    input"))]
    assert lines[-2] == f"r2med-eval: report: {work / 'results' / 'index.html'}"
    assert lines[-1].startswith("r2med-eval: Snakemake's full log: ") and lines[-1].endswith(".snakemake.log")
    full_log = open(lines[-1].split(": ", 2)[2]).read()
    assert "rule retrieve_bm25_lucene:" in full_log and "wildcards:" in full_log  # Snakemake's full output kept
    first = (work / "results" / "leaderboard.md").read_text()
    assert "| cliniq-demo/cliniq | demo/demo |" in first

    run("--config", "benchmarks_to_run=[demo]")
    board = (work / "results" / "leaderboard.md").read_text()
    assert "| cliniq-demo/cliniq | demo/demo |" in board
    assert "cliniq-demo: this configuration does not select it (benchmarks\\_to\\_run), so its columns and marks are " \
           "those of its last scoring, written " in board
    assert "(partial, 1 run chosen by models\\_to\\_run: bm25;" in board
    index = (work / "results" / "index.html").read_text()
    from r2med_eval.report.synthetic import MARK  # the shipped demos are synthetic (issue 47): headings say so

    for heading in ("Benchmark cliniq-demo", "CliniQ tables: cliniq-demo"):
        assert f"{heading} ({MARK}) (earlier run)" in index, heading
    assert 'href="leaderboards/cliniq-demo.html"' in index and 'href="plots/cliniq-demo/by_task.png"' in index

    run()
    assert (work / "results" / "leaderboard.md").read_text() == first
    assert "(earlier run)" not in (work / "results" / "index.html").read_text()


def test_completion_plot_names_every_system_whole_within_the_page(tmp_path, monkeypatch):
    """The completion plot's names were cut and ran into the next panel (rotated x labels on an 11-inch figure):
    now a row per system, named once on the first panel, on the page width."""
    from r2med_eval.cliniq import plots as cliniq_plots
    from r2med_eval.report.figure import PAGE_WIDTH_IN

    models = ["bm25", "bm25-paper+query2doc-gpt4--rankgpt-gpt4@100", "rrf-bm25-minilm"]
    path = tmp_path / "rescored.csv"
    with open(path, "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["model", "group", "metric", "queries", "original", "completed", "change", "relative_change",
                    "moved"])
        for m in models:
            for metric in ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100"):
                w.writerow([m, "all", metric, 4, 0.5, 0.6, 0.1, 20.0, int(m == "bm25")])
    seen = {}
    real_save = cliniq_plots.save

    def keep(fig, png, svg):
        renderer = fig.canvas.get_renderer()
        seen["labels"] = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.axes[0].get_yticklabels()]
        seen["others"] = [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes[1:]]
        seen["width"] = fig.get_figwidth()
        real_save(fig, png, svg)

    monkeypatch.setattr(cliniq_plots, "save", keep)
    cliniq_plots.cliniq_completion(path, "cq", tmp_path / "c.png", tmp_path / "c.svg")
    assert [name for name, _ in seen["labels"]] == models
    assert all(box.x0 >= 0 for _, box in seen["labels"])  # whole, inside the figure
    assert all(not any(labels) for labels in seen["others"]) and seen["width"] <= PAGE_WIDTH_IN

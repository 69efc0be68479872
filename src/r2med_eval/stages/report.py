"""Stage report (rules/report.smk): leaderboards, significance against the baseline, plots, provenance, the
comparison with R2MED's published numbers and CliniQ's tables, over every scored run."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("r2med_eval")


def significance(sm) -> None:
    from .. import io
    from ..report import significance as sig
    from ..workflow import paths

    rep = sm.params.spec
    files = [(*paths.parse(paths.PER_QUERY, p).values(), p) for p in sm.input]
    family = rep.get("holm", sig.DEFAULT_FAMILY)
    # no file: every selected benchmark is kept at its last complete scoring (workflow.earlier.kept), whose marks
    # stay in its own per-benchmark table
    rows = sig.compute(files, rep["baseline"], metric=rep["metric"], permutations=rep["permutations"],
                       resamples=rep["bootstrap"], seed=rep["seed"], alpha=rep["alpha"], family=family) if files else []
    io.write_text(sm.output.csv, sig.to_csv(rows))
    io.write_text(sm.output.md, sig.to_markdown(rows, rep["baseline"], rep["alpha"], rep["permutations"],
                                                rep["bootstrap"], family))
    tested = [r for r in rows if r.get("p_ttest") is not None]
    log.info("%d runs x tasks, %d compared with %s (Holm over %s); significant: t-test %d, "
             "randomization %d", len(rows), len(tested), rep["baseline"], sig.HOLM_FAMILIES[family],
             sum(1 for r in tested if sig.MARK_TTEST in r["significant"]),
             sum(1 for r in tested if sig.MARK_RANDOMIZATION in r["significant"]))


def _lineage(files) -> dict:
    """{(benchmark, task, run): lineage JSON} of the LLM-reranked runs."""
    from ..io import read_json
    from ..workflow import paths

    return {tuple(paths.parse(paths.RUN_LINEAGE, p).values()): read_json(p) for p in files}


def leaderboard(sm) -> None:
    """The combined leaderboard: the selected benchmarks from this run's metrics; a benchmark only an earlier run
    scored (its collected metrics on disk, ``workflow.inputs.earlier_benchmarks``) as that run left it."""
    from ..report import leaderboard as lb
    from ..report import significance as sig
    from ..workflow import paths

    rep = sm.params.spec
    family = rep.get("holm", sig.DEFAULT_FAMILY)
    marks = sig.marks(sig.read_csv(sm.input.significance))
    earlier = list(getattr(sm.input, "earlier", []))
    for board in getattr(sm.input, "earlier_boards", []):
        marks.update(lb.read_board_marks(board, paths.parse(paths.BENCHMARK_LEADERBOARD, board)["benchmark"]))
    notes = _selection_notes(sm.input.metrics, earlier, getattr(sm.input, "selections", []), rep.get("kept", []))
    from ..report import synthetic

    notes += synthetic.note(rep.get("synthetic", ()), rep.get("synthetic", ()))
    for task, runs in sorted(rep.get("unselected", {}).items()):
        notes.append(f"Not shown: {len(runs)} run{'s' if len(runs) != 1 else ''} scored earlier on {task} that this "
                     f"configuration does not select: {', '.join(runs)} (their metrics stay in "
                     f"results/metrics/{task}/).")
    reference = None
    if rep.get("mteb_reference"):
        from ..report import mteb_results

        ref = rep["mteb_reference"]
        found = mteb_results.read(ref["folder"], tasks=set(ref["tasks"]))
        reference = {f"{name} (MTEB)": {tuple(ref["tasks"][t].split("/", 1)): v for t, v in row.items()}
                     for name, row in found.items()}
        log.info("reference rows from MTEB results in %s: %d models", ref["folder"], len(reference))
    lb.write(list(sm.input.metrics) + earlier, sm.output.csv, sm.output.md, metric=rep["metric"],
             html_path=sm.output.html, significance=marks,
             legend=sig.legend(rep["alpha"], rep["baseline"], rep["permutations"], family), tex_path=sm.output.tex,
             reference=reference, judged_below=rep.get("judged_below", 0.8),
             lineage=_lineage(getattr(sm.input, "lineage", [])), notes=notes)
    log.info("leaderboard over the collected metrics of %d benchmarks (%d from earlier runs)",
             len(sm.input.metrics) + len(earlier), len(earlier))


def _selection_notes(tables, earlier, selections, kept) -> list[str]:
    """The caption's sentences on where each benchmark's columns come from: a benchmark this run scores in part
    (no complete scoring of it here), a benchmark kept at its last complete scoring (this run scores a part of it),
    a benchmark this configuration does not select (its last scoring, complete or not, and when)."""
    from datetime import UTC, datetime

    from ..io import read_json
    from ..workflow import paths

    chosen = {paths.parse(paths.METRICS_SELECTION, p)["benchmark"]: read_json(p) for p in selections}

    def made(table) -> tuple[str, str]:
        b = paths.parse(paths.METRICS_TABLE, table)["benchmark"]
        sel = chosen.get(b) or {}
        runs = len(sel.get("runs") or [])
        how = (f"complete, all {runs} of its runs" if sel.get("complete") else
               f"partial, {runs} run{'s' if runs != 1 else ''} chosen by models_to_run: "
               f"{', '.join(sel.get('models_to_run') or [])}"
               if sel else "selection not recorded (an older version)")
        return b, how

    notes = []
    for table in tables:
        b, how = made(table)
        if not (chosen.get(b) or {}).get("complete", True):
            notes.append(f"{b}: scored by this run in part ({how}); no complete scoring of it lies here, so the runs "
                         "left out are not shown and its marks are those of this part.")
    for table in earlier:
        b, how = made(table)
        when = datetime.fromtimestamp(Path(table).stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
        why = ("this run scores only some of its runs (models_to_run), so its columns and marks are those of its last "
               "complete scoring" if b in kept else
               "this configuration does not select it (benchmarks_to_run), so its columns and marks are those of its "
               "last scoring")
        notes.append(f"{b}: {why}, written {when} ({how}; {table}), with the significance marks of its own "
                     "per-benchmark table.")
    return notes


def leaderboard_benchmark(sm) -> None:
    from ..report import leaderboard as lb
    from ..report import significance as sig

    rep = sm.params.spec
    family = rep.get("holm", sig.DEFAULT_FAMILY)
    rows = sig.read_csv(sm.input.significance)
    bench = sm.wildcards.benchmark
    notes = sorted({f"{r['task']}/{r['model']}: {r['note']}" for r in rows
                    if r["benchmark"] == bench and r["note"] and r["note"] != "baseline"})
    n = sorted({(r["task"], r["n_queries"]) for r in rows if r["benchmark"] == bench and r["note"] == "baseline"})
    notes = [f"Queries compared per task: {', '.join(f'{t} {k}' for t, k in n)}."] + notes if n else notes
    from ..report import synthetic

    notes = synthetic.note([bench], rep.get("synthetic", ())) + notes
    lb.write_benchmark(list(sm.input.metrics), bench, sm.output.csv, sm.output.md, sm.output.html,
                       metric=rep["metric"], significance=sig.marks(rows),
                       legend=sig.legend(rep["alpha"], rep["baseline"], rep["permutations"], family),
                       notes=notes, tex_path=sm.output.tex, judged_below=rep.get("judged_below", 0.8),
                       lineage=_lineage(getattr(sm.input, "lineage", [])))
    log.info("leaderboard of %s over %s", bench, ", ".join(sm.input.metrics))


def plot_palette(sm) -> None:
    """The benchmark's palette: the styles of the file already there (``update`` output) kept, new runs on the
    first free ones (``r2med_eval.palette``)."""
    from ..report import palette

    out = Path(sm.output[0])
    previous = palette.read(out) if out.is_file() else {}
    runs = sm.params.spec["runs"]
    palette.write(out, palette.assign([r for r, _ in runs], previous, preferred=dict(runs)))


def _figure_inputs(sm):
    """The collected metrics, the palette and the bootstrap intervals of a benchmark's plot rule."""
    from ..report import leaderboard as lb
    from ..report import palette
    from ..report import significance as sig

    bench = sm.wildcards.benchmark
    table = lb.collect(list(sm.input.metrics), sm.params.spec["metric"])
    return table, palette.read(sm.input.palette), sig.intervals(sig.read_csv(sm.input.significance), bench)


def plot_leaderboard(sm) -> None:
    from ..report import plots

    spec = sm.params.spec
    table, styles, ci = _figure_inputs(sm)
    bench = sm.wildcards.benchmark
    plots.by_task(table, bench, spec["metric"], sm.output.by_task_png, sm.output.by_task_svg, styles, ci)
    plots.heatmap(table, bench, spec["metric"], sm.output.heatmap_png, sm.output.heatmap_svg)
    for note in spec["notes"]:
        log.info("note: %s", note)


def plot_rerank_depth(sm) -> None:
    from ..errors import InputError
    from ..report import plots

    spec = sm.params.spec
    table, styles, ci = _figure_inputs(sm)
    if not plots.rerank_depth(table, sm.wildcards.benchmark, spec["metric"], sm.output.png, sm.output.svg,
                              spec["lineage"], styles, ci):
        raise InputError(f"no reranked runs on benchmark {sm.wildcards.benchmark}.",
                         fix="configure a rerank job, or do not ask for this plot.")
    log.info("reranking depth: %s", ", ".join(n for n in spec["lineage"] if n in table))


def plot_scatter(sm) -> None:
    from ..report import plots
    from ..report import significance as sig
    from ..workflow import paths

    pair = sm.params.spec
    per_task = {}
    for a, b in zip(sm.input.a, sm.input.b):
        per_task[paths.parse(paths.PER_QUERY, a)["task"]] = (sig.read_per_query(a, pair["metric"]),
                                                             sig.read_per_query(b, pair["metric"]))
    counts = plots.scatter(per_task, pair["a"], pair["b"], sm.wildcards.benchmark, pair["metric"], sm.output.png,
                           sm.output.svg)
    log.info("scatter %s vs %s: %s", pair["a"], pair["b"], counts)
    if counts["only_one"]:
        log.warning("%d queries judged for only one of the two runs are not drawn", counts["only_one"])


def plot_cliniq(sm) -> None:
    """CliniQ by match type and by query type, the runs in the leaderboard's order."""
    from ..cliniq import plots as cliniq_plots
    from ..report import leaderboard as lb
    from ..report import palette, plots

    styles = palette.read(sm.input.palette)
    bench = sm.wildcards.benchmark
    order, _, _ = plots.leaderboard_order(lb.collect(list(sm.input.metrics), sm.params.spec["metric"]), bench)
    cliniq_plots.cliniq_breakdown(sm.input.match_type, "match_type", bench, sm.output.match_png, sm.output.match_svg,
                                  styles, order)
    cliniq_plots.cliniq_breakdown(sm.input.query_type, "query_type", bench, sm.output.query_png, sm.output.query_svg,
                                  styles, order)


def plot_cliniq_completion(sm) -> None:
    from ..cliniq import plots as cliniq_plots

    cliniq_plots.cliniq_completion(sm.input.rescored, sm.wildcards.benchmark, sm.output.png, sm.output.svg)


def provenance(sm) -> None:
    from .. import io
    from ..report import provenance as prov
    from ..scoring import metric_table
    from ..workflow import paths

    spec = sm.params.spec
    stats = {"{benchmark}/{task}".format(**paths.parse(paths.STATS, p)): p for p in sm.input.stats}
    scored = metric_table.by_run(sm.input.metrics)
    entries = []
    for run in spec["runs"]:
        rec = scored.get((run["benchmark"], run["task"], run["model"]))
        if rec is None:
            raise ValueError(f"provenance: no metrics of {run['benchmark']}/{run['task']}/{run['model']} in "
                             f"{', '.join(sm.input.metrics)}")
        imports = {m: paths.fill(paths.RUN_IMPORT_INFO, benchmark=run["benchmark"], task=run["task"], model=m)
                   for m, s in run["branch"]["models"].items() if s["type"] == "run"}
        entries.append({**run, "metrics": rec["file"], "metrics_sha256": rec["sha256"], "metrics_data": rec["data"],
                        "run": rec["data"]["run"],  # the scored run file
                        "stats": stats[f"{run['benchmark']}/{run['task']}"], "imports": imports})
    repo = Path(prov.__file__).resolve().parents[3]  # the checkout the package runs from
    doc = prov.collect(entries, spec["datasets"], repo)
    generation = getattr(sm.input, "generation", [])
    if generation:  # generated expansion files: the LLM, its sampling, tokens and cost (no server address or key)
        doc["generation"] = {"{benchmark}/{task}/{method}/{llm}".format(**paths.parse(paths.GENERATED_INFO, p)):
                             io.read_json(p) for p in generation}
    llm_rerank = getattr(sm.input, "llm_rerank", [])
    if llm_rerank:  # LLM rerankers: the LLM, its sampling, requests, cache hits, tokens and cost of each run
        doc["llm_rerank"] = {"{benchmark}/{task}/{model}".format(**paths.parse(paths.RUN_LINEAGE, p)): io.read_json(p)
                             for p in llm_rerank}
    judging = getattr(sm.input, "judging", [])
    if judging:  # the judge of CliniQ's judgment completion: the same record (model, sampling, prompt hash, counts)
        doc["judging"] = {paths.parse(paths.COMPLETION_JUDGING, p)["benchmark"]: io.read_json(p) for p in judging}
    io.write_json(sm.output[0], doc)
    log.info("provenance of %d runs; git %s", len(entries), doc["git"])


def r2med_vs_paper(sm) -> None:
    from ..expansion import gar
    from ..report import r2med_paper
    from ..workflow import paths

    p = sm.params.spec
    empty = {}  # "run benchmark/task" -> (empty hypothetical documents, queries), for R2MED's NaN case (GritLM)
    for path in sm.input.variants:
        w = paths.parse(paths.VARIANT, path)
        for run, v in p["empty_hydoc"].items():
            if (v["benchmark"], v["method"], v["llm"]) == (w["benchmark"], w["method"], w["llm"]):
                empty[f"{run} {w['benchmark']}/{w['task']}"] = gar.count_empty_hydocs(path, v["method"], v["reasoning"])
    result = r2med_paper.write_report(list(sm.input.metrics), list(sm.input.stats), p["keys"], p["tasks"], sm.output.md,
                                      tex_target=sm.output.tex, empty_hydocs=empty)
    flagged = [r for r in result["rows"] if r["flag"]]
    for c in result["checks"]:
        if not c["match"]:
            log.warning("%s/%s: %d queries / %d documents, the paper reports %d / %d", c["benchmark"], c["task"],
                        c["queries"], c["documents"], c["paper_queries"], c["paper_documents"])
    pairs = {(r["benchmark"], r["task"], r["model"]) for r in result["rows"]}
    compared = [r for r in result["rows"] if r["theirs"] is not None]
    log.info("%d (run, task) pairs, %d with a published number (%d comparisons: %s), %d flagged", len(pairs),
             len({(r["benchmark"], r["task"], r["model"]) for r in compared}), len(compared),
             ", ".join(f"{s} {sum(1 for r in compared if r['source'] == s)}" for s in sorted({r["source"]
                                                                                                for r in compared}))
             or "none", len(flagged))
    for reason in r2med_paper.not_compared(result["rows"]):
        log.info("not compared: %s", reason)


def report_cliniq(sm) -> None:
    from ..cliniq import metrics as cliniq
    from ..cliniq.files import (
        completeness_markdown,
        judged_chunks,
        nan_back,
        read_cliniq_qrels,
        read_query_types,
        table_csv,
    )
    from ..cliniq.tables import wide_latex, wide_markdown, wide_tables
    from ..io import read_json, read_lines, write_text
    from ..report.synthetic import titled
    from ..report.tables import tex_label
    from ..scoring import identity
    from ..workflow import paths

    spec = sm.params.spec
    ids = read_lines(sm.input.ids)
    identity.verify_files(sm.input.runs, spec["models"], sm.wildcards.benchmark,  # before anything is written
                          paths.parse(paths.CHUNK_IDS, sm.input.ids)["task"], identity.fingerprint(ids))
    models = list(spec["models"])
    bench = sm.wildcards.benchmark
    results = {m: read_json(p) for m, p in zip(models, sm.input.metrics)}
    for grouping, csv_out, md_out, tex_out, title in (
            ("by_match_type", sm.output.match_csv, sm.output.match_md, sm.output.match_tex, "CliniQ by match type"),
            ("by_query_type", sm.output.query_csv, sm.output.query_md, sm.output.query_tex, "CliniQ by query type")):
        rows = [r for m in models for r in cliniq.table_rows(m, nan_back(results[m]), grouping)]
        write_text(csv_out, table_csv(rows))
        tables = wide_tables(rows)
        named = f"{title} ({titled(bench, spec.get('synthetic'))})"
        write_text(md_out, wide_markdown(tables, named) + "\n" + completeness_markdown(models, results))
        write_text(tex_out, wide_latex(tables, named, tex_label("tab", "cliniq", bench, grouping)))
    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)
    judged = judged_chunks(rows, irrelevant)
    qtypes = read_query_types(sm.input.query_types)
    orders = spec["tie_orders"]  # the runs' tie orders: evalpy and corpus, or all corpus, or all doc_id
    pooled = cliniq.pool_files(dict(zip(models, sm.input.runs)), orders, ids, judged, spec["depth"], qtypes)
    lines = ["query_id\tchunk_id\tquery_type\tbest_rank\tn_systems\tsystems"]
    lines += [f"{p['query_id']}\t{p['chunk_id']}\t{qtypes[p['query_id']]}\t{p['best_rank']}\t{len(p['systems'])}\t"
              f"{','.join(p['systems'])}" for p in pooled]
    write_text(sm.output.pool, "\n".join(lines) + "\n")
    log.info("pool of unjudged chunks in the top %d of %d systems: %d (query, chunk) pairs over %d queries",
             spec["depth"], len(models), len(pooled), len({p["query_id"] for p in pooled}))


def claims_overlap(sm) -> None:
    """Per-query lexical overlap of a task's queries with their relevant documents, from the analysed tokens (ids
    and numbers out)."""
    from ..benchmarks.datasets import read_qrels
    from ..claims import overlap
    from ..io import write_text
    from ..lexical.bm25_paper import AnalysedCorpus, AnalysedQueries

    rows, counts = overlap.query_overlap(AnalysedCorpus.load(sm.input.tokens),
                                         AnalysedQueries.load(sm.input.query_tokens), read_qrels(sm.input.qrels))
    write_text(sm.output[0], overlap.to_tsv(rows))
    scored = [r["overlap"] for r in rows if r["overlap"] is not None]
    log.info("lexical overlap of %d queries with a relevant judgment: %d scored (mean %.4f); no analysed term %d, no "
             "relevant document in the corpus %d, not analysed %d; relevant judgments outside the corpus %d",
             counts["queries"], len(scored), sum(scored) / len(scored) if scored else float("nan"), counts["no_terms"],
             counts["no_relevant_in_corpus"], counts["not_analysed"], counts["relevant_outside_corpus"])


def _check_lineage(files, benchmarks: dict) -> None:
    """Each reranked or fused run a claim compares was made as the registry says (its lineage.json)."""
    from ..errors import InputError
    from ..io import read_json
    from ..workflow import paths

    expected = {}
    for b, entry in benchmarks.items():
        claims = entry["claims"]
        for p in claims["r2med.rerank_depth"]["pairs"] if "r2med.rerank_depth" in claims else []:
            for run, depth in ((p["shallow"], p["depths"][0]), (p["deep"], p["depths"][1])):
                expected[(b, run)] = {"input_run": p["first_stage"], "reranker": p["reranker"], "depth": depth}
        for f in claims["cliniq.rrf_improves"]["fusions"] if "cliniq.rrf_improves" in claims else []:
            expected[(b, f["fusion"])] = {"method": "rrf", "inputs": f["inputs"]}
    for path in files:
        w = paths.parse(paths.RUN_LINEAGE, path)
        want = expected.get((w["benchmark"], w["model"]), {})
        have = read_json(path)
        wrong = {k: have.get(k) for k, v in want.items() if have.get(k) != v}
        if wrong:
            raise InputError(f"the run's lineage {wrong} is not the configuration's {want}.", path=path,
                             fix="rerun the run's rule (delete the file and its run).")


def claims(sm) -> None:
    """Every claim about every benchmark it applies to: verdict and evidence (``claims.assess``), as
    ``results/claims.json``, ``results/claims.md`` and ``results/tables/claims.tex``."""
    from ..claims import overlap, render
    from ..claims.assess import assess
    from ..cliniq import per_query
    from ..io import read_json, write_json, write_text
    from ..report.significance import read_per_query
    from ..workflow import paths

    spec = sm.params.spec
    rules, resampling, benchmarks = spec["rules"], spec["resampling"], spec["benchmarks"]
    data = {b: {"values": {}, "overlap": {}, "verdict": None} for b in benchmarks}
    for path in sm.input.per_query:
        w = paths.parse(paths.PER_QUERY, path)
        values = data[w["benchmark"]]["values"].setdefault(w["model"], {})
        values.update({(w["task"], q): v for q, v in read_per_query(path, rules["metric"]).items()})
    for path in sm.input.overlap:
        w = paths.parse(paths.CLAIMS_OVERLAP, path)
        data[w["benchmark"]]["overlap"].update({(w["task"], q): v for q, v in overlap.read_tsv(path).items()})
    for path in sm.input.cliniq:
        w = paths.parse(paths.CLINIQ_PER_QUERY, path)
        values = data[w["benchmark"]]["values"].setdefault(w["model"], {})
        values.update({(w["task"], q): row for q, row in per_query.read_tsv(path).items()})
    for path in sm.input.verdicts:
        data[paths.parse(paths.COMPLETION_FILE, path)["benchmark"]]["verdict"] = read_json(path)
    _check_lineage(sm.input.lineage, benchmarks)
    found = []
    for b, entry in benchmarks.items():
        found += assess(b, entry["kind"], entry["claims"], data[b], rules, resampling, figures=entry["figures"])
    for c in found:
        c["figures"] = [paths.fill(paths.PLOT, benchmark=c["benchmark"], name=n, ext="png") for n in c["figures"]]
        c["synthetic"] = bool(benchmarks[c["benchmark"]].get("synthetic"))
        log.info("%s on %s: %s", c["id"], c["benchmark"], c["verdict"])
    write_json(sm.output.json, found)
    write_text(sm.output.md, render.markdown(found, rules, resampling))
    write_text(sm.output.tex, render.latex(found, rules))


def report_index(sm) -> None:
    """``results/index.html``: every table rendered, every plot shown, a link to every output."""
    from ..io import read_json, write_text
    from ..report import html as h
    from ..report.synthetic import titled
    from ..workflow import paths

    spec = sm.params.spec
    files = set(map(str, sm.input))
    root = str(Path(paths.INDEX_PAGE).parent)

    def rel(path: str) -> str:
        return str(Path(path).relative_to(root))

    def links(*candidates) -> str:
        have = [c for c in candidates if c in files]
        return '<p class="note">Files: ' + ", ".join(h.link(rel(c)) for c in have) + "</p>" if have else ""

    def rendered(md: str) -> list[str]:
        return [h.markdown(Path(md).read_text(encoding="utf-8"))] if md in files else []

    def plots(bench: str, names) -> list[str]:
        """The figures at their printed size (1 in = 96 CSS px), the size their text is meant to be read at."""
        from ..report.figure import DPI

        out = []
        for name in names:
            png = paths.fill(paths.PLOT, benchmark=bench, name=name, ext="png")
            if png in files:
                svg = paths.fill(paths.PLOT, benchmark=bench, name=name, ext="svg")
                size = tuple(round(px * 96 / DPI) for px in h.png_size(png))
                out.append(h.figure(rel(png), f"{bench}: {name.replace('_', ' ')}", rel(svg) if svg in files else None,
                                    size))
        return out

    def tex(name: str) -> list[str]:
        """A LaTeX table's path, when the file holds a table (r2med_vs_paper without comparable runs does not)."""
        path = paths.fill(paths.TABLE, name=name)
        return [path] if path in files and "\\begin{table}" in Path(path).read_text(encoding="utf-8") else []

    earlier, kept = list(spec.get("earlier") or ()), set(spec.get("kept") or ())
    notes = {False: [h.paragraph("Scored by an earlier run in this folder: this configuration does not select this "
                                 "benchmark (benchmarks_to_run), so these tables and plots are as that run left them.",
                                 "legend")],
             True: [h.paragraph("Kept from its last complete scoring: this configuration scores only some of this "
                                "benchmark's runs (models_to_run), so these tables and plots are as that complete "
                                "scoring left them.", "legend")]}

    def earlier_note(b):
        return notes[b in kept][:] if b in earlier else []

    def suffix(b):
        return (" (last complete scoring)" if b in kept else " (earlier run)") if b in earlier else ""
    board = {e: paths.fill(paths.LEADERBOARD, ext=e) for e in ("md", "csv", "html")}
    sections = [("leaderboard", "Leaderboard", rendered(board["md"]) + [
        links(board["csv"], board["md"], board["html"], paths.fill(paths.TABLE, name="leaderboard"))])]
    claims = {e: paths.fill(paths.CLAIMS, ext=e) for e in ("json", "md")}
    if claims["json"] in files:  # the papers' claims, second: what a reproduction is judged by

        from ..claims.render import html_section

        sections.append(("claims", "Claims", html_section(read_json(claims["json"]),
                                                          lambda png: rel(png) if png in files else None) + [
            links(claims["json"], claims["md"], paths.fill(paths.TABLE, name="claims"))]))
    for b in spec["benchmarks"] + earlier:
        per = {e: paths.fill(paths.BENCHMARK_LEADERBOARD, benchmark=b, ext=e) for e in ("md", "csv", "html")}
        sections.append((f"benchmark-{b}", f"Benchmark {titled(b, spec.get('synthetic'))}" + suffix(b),
                         earlier_note(b) + rendered(per["md"]) + [
            links(per["csv"], per["md"], per["html"], paths.fill(paths.TABLE, name=f"leaderboard-{b}"),
                  paths.fill(paths.PALETTE, benchmark=b))]
            + plots(b, ("by_task", "heatmap", "rerank_depth", "scatter"))))
    sig = {e: paths.fill(paths.SIGNIFICANCE, ext=e) for e in ("md", "csv")}
    sections.append(("significance", "Significance", rendered(sig["md"]) + [links(sig["csv"], sig["md"])]))
    cliniq_earlier = [b for b in earlier if paths.fill(paths.CLINIQ_TABLE, benchmark=b, grouping="match_type",
                                                       ext="md") in files]
    for b in spec["cliniq"] + cliniq_earlier:
        body = earlier_note(b)
        for g in ("match_type", "query_type"):
            table = {e: paths.fill(paths.CLINIQ_TABLE, benchmark=b, grouping=g, ext=e) for e in ("md", "csv")}
            body += rendered(table["md"]) + [links(table["csv"], table["md"],
                                                   paths.fill(paths.TABLE, name=f"cliniq-{b}-by_{g}"))]
            body += plots(b, (f"cliniq_by_{g}",))
        body.append(links(paths.fill(paths.CLINIQ_POOL, benchmark=b)))
        sections.append((f"cliniq-{b}", f"CliniQ tables: {titled(b, spec.get('synthetic'))}" + suffix(b), body))
    completion_earlier = [b for b in earlier if paths.fill(paths.COMPLETION_FILE, benchmark=b, name="verdict",
                                                           ext="md") in files]
    for b in list(spec.get("completion") or ()) + completion_earlier:  # the judgment completion: the verdict first
        done = {(n, e): paths.fill(paths.COMPLETION_FILE, benchmark=b, name=n, ext=e)
                for n, e in (("verdict", "md"), ("estimates", "md"), ("agreement", "md"), ("rescored", "md"),
                             ("estimates", "csv"), ("per_query", "csv"), ("agreement", "csv"), ("rescored", "csv"),
                             ("ranking", "csv"), ("estimates", "tex"), ("agreement", "tex"), ("rescored", "tex"),
                             ("ranking", "tex"), ("verdict", "json"))}
        body = [part for n in ("verdict", "estimates", "agreement", "rescored") for part in rendered(done[(n, "md")])]
        body += plots(b, ("cliniq_completion",))  # at its printed size, as every figure
        body.append(links(*[f for (n, e), f in done.items() if e != "md"], *[done[(n, "md")] for n in (
            "verdict", "estimates", "agreement", "rescored")], *[paths.fill(p, benchmark=b) for p in (
                paths.COMPLETION_SAMPLE, paths.COMPLETION_DESIGN, paths.COMPLETION_LABELS, paths.COMPLETION_JUDGING)]))
        sections.append((f"completion-{b}", f"CliniQ judgment completion: {titled(b, spec.get('synthetic'))}", body))
    sections.append(("paper", "R2MED: ours against the paper", rendered(paths.R2MED_VS_PAPER) + [
        links(paths.R2MED_VS_PAPER, *tex("r2med_vs_paper"))]))
    prov = read_json(paths.PROVENANCE) if paths.PROVENANCE in files else {"runs": [], "datasets": {}}
    sections.append(("provenance", "Provenance", [
        h.paragraph(f"{len(prov['runs'])} runs over {len(prov['datasets'])} tasks: configuration, dataset and model "
                    "sources, file checksums, timings, package versions, git commit."),
        links(paths.PROVENANCE)]))
    stale = [f for f in spec.get("stale") or () if Path(f).is_file()]
    if stale:  # named when the workflow was planned; linked if still there
        sections.append(("stale", "Left from earlier runs", [h.paragraph(
            f"{len(stale)} report file{'s' if len(stale) != 1 else ''} written by earlier runs that this run neither "
            "rewrote nor shows above (a plot that no longer applies, a table of a run or benchmark no longer "
            "selected): they may not match the tables above. Delete them, or rerun the configuration that made "
            "them."), '<ul class="files">' + "".join(f"<li>{h.link(rel(f))}</li>" for f in stale) + "</ul>"]))
    sections.append(("files", "Every output", ['<ul class="files">' + "".join(
        f"<li>{h.link(rel(f))}</li>" for f in sorted(files)) + "</ul>"]))
    write_text(sm.output[0], h.index_page("r2med-eval results", sections))
    log.info("index page over %d files", len(files))


def mteb_export(sm) -> None:
    """Every run on an R2MED task in MTEB's results layout (``r2med_eval.mteb_results``)."""
    import shutil
    from pathlib import Path

    from ..report import mteb_results
    from ..scoring import metric_table

    out = Path(sm.output[0])
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    scored = metric_table.by_run(sm.input.metrics)
    entries = []
    for e in sm.params.spec["entries"]:
        rec = scored.get((e["benchmark"], e["task"], e["model"]))
        if rec is None:
            raise ValueError(f"MTEB export: no metrics of {e['benchmark']}/{e['task']}/{e['model']} in "
                             f"{', '.join(sm.input.metrics)}")
        entries.append({**e, "metrics": rec["data"]["metrics"]})
    files = mteb_results.export(entries, tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log.info("MTEB results layout: %d files for %d runs", len(files), len(entries))

"""The work of each Snakemake rule, as functions of the ``snakemake`` object.

``scripts/*.py`` are thin adapters that call these; each function reads only
``snakemake.input/output/params/wildcards/threads`` so it can be driven from tests too.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("r2med_eval")


def prepare_task(sm) -> None:
    from . import datasets

    spec = sm.params.spec
    log.info("loading %s/%s: layout %s from %s", sm.wildcards.benchmark, sm.wildcards.task, spec["layout"],
             spec["path"])
    ds = datasets.load(spec["layout"], spec["path"], split=spec.get("split", "test"),
                       empty_text=spec.get("empty_text", "error"), unknown_qrels=spec.get("unknown_qrels", "error"),
                       duplicate_qrels=spec.get("duplicate_qrels", "error"))
    ds.stats.update({"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task})
    _r2med_task_checks(sm, spec, ds)
    datasets.write_internal(ds, Path(sm.output.corpus).parent)
    st = ds.stats
    log.info("documents %d, queries %d (judged %d, unjudged %d: %s), judgments %d by grade %s",
             st["documents"], st["queries"], st["judged_queries"], st["unjudged_queries"],
             ", ".join(st["unjudged_query_ids"]) or "-", st["judgments"], st["judgments_by_grade"])
    log.info("filtered: empty documents dropped %d; duplicate judgments merged %d; judgments on unknown "
             "queries dropped %d, on unknown documents %d, on dropped documents %d",
             st["empty_documents_dropped"], st["qrels_duplicates_merged"], st["qrels_unknown_query_dropped"],
             st["qrels_unknown_document_dropped"], st["qrels_on_dropped_documents"])


def lucene_index(sm) -> None:
    from . import io, lucene

    info = lucene.build_index(sm.input.corpus, sm.output.index, threads=sm.threads)
    io.write_json(sm.output.info, info)


def retrieve_bm25_lucene(sm) -> None:
    from . import lucene, runs

    spec = sm.params.model
    queries = None
    if spec.get("variant"):
        from . import datasets, gar, io

        hy = {obj["id"]: obj["hy_doc"] for _, obj in io.iter_jsonl(sm.input.variant)}
        method = spec["variant"]["method"]
        queries = {q: gar.lexical_query(method, t, hy[q]) for q, t in datasets.read_queries(sm.input.queries).items()}
        log.info("query variant %s/%s, combined as the official BM25 code does", method, spec["variant"]["llm"])
    run = lucene.search(sm.input.index, sm.input.queries, k1=spec["k1"], b=spec["b"], k=spec["top_k"],
                        threads=sm.threads, queries=queries)
    lines = runs.write_run(run, sm.output.run, tag=sm.wildcards.model)
    log.info("wrote %d lines for %d queries to %s", lines, len(run), sm.output.run)


def score_run(sm) -> None:
    from . import datasets, io, metrics, runs

    run = runs.read_run(sm.input.run)
    qrels = datasets.read_qrels(sm.input.qrels)
    queries = datasets.read_queries(sm.input.queries)
    run, identical = _drop_identical_ids(sm, run)
    result = metrics.evaluate(run, qrels, queries)
    c = result["counts"]
    if identical is not None:
        c["identical_ids_dropped"] = identical
    log.info("scored %d judged queries; %d unjudged queries excluded (%s); %d judged queries with an empty "
             "run scored 0; %d judged queries have no relevant document", c["judged_queries_scored"],
             c["unjudged_queries_excluded"], ", ".join(c["unjudged_query_ids"]) or "-",
             c["judged_queries_with_empty_run"], c["judged_queries_without_relevant"])
    names = metrics.metric_names()
    io.write_json(sm.output.metrics, {
        "benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "model": sm.wildcards.model,
        "run": str(sm.input.run), "run_depth": runs.run_depth(run),
        "metrics": {m: round(result["metrics"][m], 6) for m in names}, "counts": c,
    })
    io.write_text(sm.output.per_query, metrics.per_query_tsv(result["per_query"], names))
    log.info("ndcg_at_10 = %.5f", result["metrics"]["ndcg_at_10"])


def leaderboard(sm) -> None:
    from . import leaderboard as lb
    from . import significance as sig

    rep = sm.params.report
    marks = sig.marks(sig.read_csv(sm.input.significance))
    lb.write(list(sm.input.metrics), sm.output.csv, sm.output.md, metric=sm.params.metric, html_path=sm.output.html,
             significance=marks, legend=sig.legend(rep["alpha"], rep["baseline"], rep["permutations"]))
    log.info("leaderboard over %d metric files", len(sm.input.metrics))


def encode_corpus_shard(sm) -> None:
    from . import dense, io

    shard, nshards = int(sm.wildcards.shard), int(sm.wildcards.nshards)
    if not 1 <= shard <= nshards:
        raise ValueError(f"shard {shard} of {nshards} is out of range")
    dense.encode_corpus_shard(sm.input.corpus, sm.output.shard, sm.params.model, sm.wildcards.model,
                              sm.wildcards.task, shard - 1, nshards, threads=sm.threads)


def gather_embeddings(sm) -> None:
    from . import dense

    info = dense.gather(list(sm.input.shards), sm.input.corpus, sm.output.emb, sm.output.ids,
                        storage=sm.params.storage)
    log.info("gathered %d shards: %s", len(sm.input.shards), info)


def encode_queries(sm) -> None:
    from . import dense

    dense.encode_queries(sm.input.queries, sm.output.emb, sm.output.ids, sm.params.model, sm.wildcards.model,
                         sm.wildcards.task, threads=sm.threads)


def retrieve_dense(sm) -> None:
    import numpy as np

    from . import dense, io, runs

    query_emb = np.load(sm.input.query_emb)
    query_ids = io.read_lines(sm.input.query_ids)
    corpus_emb, doc_ids = dense.load_corpus_embeddings(sm.input.emb, sm.input.ids, sm.input.corpus,
                                                       dim=query_emb.shape[1])
    spec = sm.params.search
    run, info = dense.search(corpus_emb, doc_ids, query_emb, query_ids, spec["top_k"], spec["index"],
                             threads=sm.threads)
    runs.write_run(run, sm.output.run, tag=sm.wildcards.model, query_order=sorted(run))
    io.write_json(sm.output.info, info)


def rerank_run(sm) -> None:
    from . import datasets, io, rerank, runs

    job = sm.params.job
    spec = job["reranker_spec"]
    run = runs.read_run(sm.input.run)
    rerank.check_depth(run, int(job["depth"]), job["run"])
    if spec["type"] == "cross_encoder":
        scorer = rerank.cross_encoder_scorer(spec, job["reranker"])
    else:
        scorer = rerank.cached_embedding_scorer(sm.input.emb, sm.input.ids, sm.input.query_emb,
                                                sm.input.query_ids, sm.input.corpus)
    queries = datasets.read_queries(sm.input.queries)
    corpus = datasets.read_corpus(sm.input.corpus)
    merged, raw, info = rerank.rerank_run(run, int(job["depth"]), scorer, queries, corpus,
                                          batch_size=int(spec.get("batch_size", 32)))
    runs.write_run(merged, sm.output.run, tag=sm.wildcards.model)
    lines = ["query_id\tdoc_id\tscore"] + [f"{q}\t{d}\t{s:.6f}" for q in sorted(raw) for d, s in
                                           sorted(raw[q].items(), key=lambda x: (-x[1], x[0]))]
    io.write_text(sm.output.scores, "\n".join(lines) + "\n")
    io.write_json(sm.output.info, {"kind": "rerank", "input_run": job["run"], "reranker": job["reranker"],
                                   "depth": int(job["depth"]), "reranker_type": spec["type"], **info})


def fuse_runs(sm) -> None:
    from . import fusion, io, runs

    job = sm.params.job
    inputs = [runs.read_run(p) for p in sm.input.runs]
    if job["method"] == "rrf":
        fused = fusion.rrf(inputs, k=int(job["k"]), depth=job.get("depth"))
    else:
        weights = job.get("weights") or [1.0] * len(inputs)
        fused = fusion.linear(inputs, weights, how=job["method"], depth=job.get("depth"))
    runs.write_run(fused, sm.output.run, tag=sm.wildcards.model, decimals=8)
    io.write_json(sm.output.info, {"kind": "fusion", "method": job["method"], "inputs": job["runs"],
                                   **{k: v for k, v in job.items() if k in ("k", "weights", "depth")}})
    log.info("fused %s with %s into %d queries", ", ".join(job["runs"]), job["method"], len(fused))


def prepare_query_variant(sm) -> None:
    from . import datasets, gar, io

    queries = datasets.read_queries(sm.input.queries)
    hy = gar.read_variant(sm.input.variant, queries)
    n = io.write_jsonl(sm.output[0], ({"id": q, "text": queries[q], "hy_doc": hy[q]} for q in queries))
    log.info("query variant %s/%s: %d queries", sm.wildcards.method, sm.wildcards.llm, n)


def encode_query_variant(sm) -> None:
    from . import dense

    dense.encode_query_variant(sm.input.variant, sm.output.emb, sm.output.ids, sm.params.model,
                               sm.wildcards.model, sm.wildcards.task, sm.wildcards.method, threads=sm.threads)


# ---------------------------------------------------------------- report


def significance(sm) -> None:
    from . import io
    from . import significance as sig

    rep = sm.params.report
    rows = sig.compute(list(sm.input), rep["baseline"], metric=rep["metric"], permutations=rep["permutations"],
                       resamples=rep["bootstrap"], seed=rep["seed"], alpha=rep["alpha"])
    io.write_text(sm.output.csv, sig.to_csv(rows))
    io.write_text(sm.output.md, sig.to_markdown(rows, rep["baseline"], rep["alpha"], rep["permutations"],
                                                rep["bootstrap"]))
    tested = [r for r in rows if r.get("p_ttest") is not None]
    log.info("%d runs x tasks, %d compared with %s (Holm over %d comparisons); significant: t-test %d, "
             "randomization %d", len(rows), len(tested), rep["baseline"], len(tested),
             sum(1 for r in tested if sig.MARK_TTEST in r["significant"]),
             sum(1 for r in tested if sig.MARK_RANDOMIZATION in r["significant"]))


def leaderboard_benchmark(sm) -> None:
    from . import leaderboard as lb
    from . import significance as sig

    rep = sm.params.report
    rows = sig.read_csv(sm.input.significance)
    bench = sm.wildcards.benchmark
    notes = sorted({f"{r['task']}/{r['model']}: {r['note']}" for r in rows
                    if r["benchmark"] == bench and r["note"] and r["note"] != "baseline"})
    n = sorted({(r["task"], r["n_queries"]) for r in rows if r["benchmark"] == bench and r["note"] == "baseline"})
    notes = [f"Queries compared per task: {', '.join(f'{t} {k}' for t, k in n)}."] + notes if n else notes
    lb.write_benchmark(list(sm.input.metrics), bench, sm.output.csv, sm.output.md, sm.output.html,
                       metric=rep["metric"], significance=sig.marks(rows),
                       legend=sig.legend(rep["alpha"], rep["baseline"], rep["permutations"]), notes=notes)
    log.info("leaderboard of %s over %d metric files", bench, len(sm.input.metrics))


def plot_leaderboard(sm) -> None:
    from . import leaderboard as lb
    from . import plots

    table = lb.collect(list(sm.input), sm.params.metric)
    bench = sm.wildcards.benchmark
    plots.by_task(table, bench, sm.params.metric, sm.output.by_task_png, sm.output.by_task_svg)
    plots.heatmap(table, bench, sm.params.metric, sm.output.heatmap_png, sm.output.heatmap_svg)
    for note in sm.params.notes:
        log.info("note: %s", note)


def plot_rerank_depth(sm) -> None:
    from . import leaderboard as lb
    from . import plots

    table = lb.collect(list(sm.input), sm.params.metric)
    if not plots.rerank_depth(table, sm.wildcards.benchmark, sm.params.metric, sm.output.png, sm.output.svg):
        from .errors import InputError

        raise InputError(f"no reranked runs (<run>--<reranker>@<k>) on benchmark {sm.wildcards.benchmark}.",
                         fix="configure a rerank job, or do not ask for this plot.")


def plot_scatter(sm) -> None:
    from pathlib import Path

    from . import plots
    from . import significance as sig

    pair = sm.params.pair
    per_task = {}
    for a, b in zip(sm.input.a, sm.input.b):
        per_task[Path(a).parent.name] = (sig.read_per_query(a, pair["metric"]), sig.read_per_query(b, pair["metric"]))
    counts = plots.scatter(per_task, pair["a"], pair["b"], sm.wildcards.benchmark, pair["metric"], sm.output.png,
                           sm.output.svg)
    log.info("scatter %s vs %s: %s", pair["a"], pair["b"], counts)
    if counts["only_one"]:
        log.warning("%d queries judged for only one of the two runs are not drawn", counts["only_one"])


def plot_cliniq(sm) -> None:
    from . import plots

    plots.cliniq_breakdown(sm.input.match_type, "match_type", sm.wildcards.benchmark, sm.output.match_png,
                           sm.output.match_svg)
    plots.cliniq_breakdown(sm.input.query_type, "query_type", sm.wildcards.benchmark, sm.output.query_png,
                           sm.output.query_svg)


def provenance(sm) -> None:
    from pathlib import Path

    from . import io
    from . import provenance as prov

    stats = {Path(p).parent.relative_to(Path(p).parents[2]).as_posix(): p for p in sm.input.stats}
    entries = []
    for metrics, run in zip(sm.input.metrics, sm.input.runs):
        m = Path(metrics)
        bench, task, model = m.parts[-3], m.parts[-2], m.name[: -len(".json")]
        entries.append({"benchmark": bench, "task": task, "model": model, "metrics": metrics, "run": run,
                        "stats": stats[f"{bench}/{task}"]})
    doc = prov.collect(sm.params.config, entries, sm.params.repo)
    io.write_json(sm.output[0], doc)
    log.info("provenance of %d runs; git %s", len(entries), doc["git"])


# ---------------------------------------------------------------- R2MED: Hub downloads, paper-faithful BM25, report

def _r2med_task_checks(sm, spec, ds) -> None:
    """A downloaded task's files against its manifest; an R2MED task's counts against the paper's."""
    from pathlib import Path

    from . import hfdata, r2med

    if spec.get("source"):
        folder = Path(spec["path"])
        manifest = hfdata.verify_manifest(folder / "manifest.json",
                                          {n: folder / n for n in hfdata.CORE_FILES})
        ds.stats["download"] = {"repo": manifest["repo"], "revision": manifest["revision"],
                                "origin": manifest["origin"]["kind"]}
        log.info("files match the download manifest (%s at %s)", manifest["repo"], manifest["revision"])
    if spec.get("paper_task"):
        ds.stats["paper_check"] = r2med.check_stats(spec["paper_task"], ds.stats)


def _drop_identical_ids(sm, run):
    """BEIR's ignore_identical_ids: drop documents whose id is the query id (counted), where the rule says so."""
    if not getattr(sm.params, "ignore_identical_ids", False):
        return run, None
    dropped = 0
    out = {}
    for qid, docs in run.items():
        if qid in docs:
            dropped += 1
            docs = {d: s for d, s in docs.items() if d != qid}
        out[qid] = docs
    log.info("ignore_identical_ids: dropped %d retrieved documents whose id equals the query id", dropped)
    return out, dropped


def download_task(sm) -> None:
    from pathlib import Path

    from . import hfdata

    p = sm.params.fetch
    manifest = hfdata.fetch_task(Path(sm.output.manifest).parent, task=sm.wildcards.task, source=p["source"],
                                 local=p.get("local"), sha256_pins=p.get("sha256") or {})
    log.info("placed %s at %s (%s) in %s", manifest["repo"], manifest["revision"], manifest["origin"]["kind"],
             Path(sm.output.manifest).parent)


def download_query_variant(sm) -> None:
    from . import hfdata

    p = sm.params.fetch
    rel = f"{sm.wildcards.method}/{sm.wildcards.llm}/query_with_hydoc.jsonl"
    info = hfdata.fetch_variant(sm.output[0], task=sm.wildcards.task, source=p["source"], relpath=rel,
                                local=p.get("local"))
    log.info("%s: %d lines, sha256 %s", rel, info["lines"], info["sha256"])


def retrieve_bm25_paper(sm) -> None:
    from . import bm25_paper, datasets, io, runs

    spec = sm.params.model
    corpus = datasets.read_corpus(sm.input.corpus)
    queries = datasets.read_queries(sm.input.queries)
    if spec.get("variant"):
        from . import gar

        hy = {obj["id"]: obj["hy_doc"] for _, obj in io.iter_jsonl(sm.input.variant)}
        method = spec["variant"]["method"]
        queries = {q: gar.lexical_query(method, t, hy[q]) for q, t in queries.items()}
        log.info("query variant %s/%s, combined as the official BM25 code does", method, spec["variant"]["llm"])
    doc_ids = list(corpus)
    run, info = bm25_paper.retrieve(doc_ids, [datasets.doc_contents(corpus[d]) for d in doc_ids], list(queries),
                                    list(queries.values()), k1=spec["k1"], b=spec["b"], top_k=spec["top_k"],
                                    fill_zero=spec["fill_zero"])
    lines = runs.write_run(run, sm.output.run, tag=sm.wildcards.model, decimals=8)
    io.write_json(sm.output.info, info)
    log.info("paper-faithful BM25: %s", {k: v for k, v in info.items() if k != "queries_without_known_terms"})
    if info["queries_without_known_terms"]:
        log.warning("%d queries share no term with the corpus (their top %d is the first documents, score 0): %s",
                    len(info["queries_without_known_terms"]), spec["top_k"],
                    ", ".join(info["queries_without_known_terms"][:20]))
    log.info("wrote %d lines for %d queries to %s", lines, len(run), sm.output.run)


def r2med_vs_paper(sm) -> None:
    from . import r2med

    p = sm.params.report
    result = r2med.write_report(list(sm.input.metrics), list(sm.input.stats), p["keys"], p["tasks"], sm.output[0],
                                table_path=sm.input.table)
    flagged = [r for r in result["rows"] if r["flag"]]
    for c in result["checks"]:
        if not c["match"]:
            log.warning("%s/%s: %d queries / %d documents, the paper reports %d / %d", c["benchmark"], c["task"],
                        c["queries"], c["documents"], c["paper_queries"], c["paper_documents"])
    log.info("%d (model, task) pairs, %d with a published number, %d differ by more than %.3f",
             len(result["rows"]), sum(1 for r in result["rows"] if r["theirs"] is not None), len(flagged),
             r2med.FLAG_ABOVE)

"""Stage score (rules/score.smk): trec_eval measures per query and mean under R2MED's result names; CliniQ's
own measures; a benchmark's metric JSONs collected into one file for the reports."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def score_run(sm) -> None:
    from .. import io
    from ..benchmarks import datasets
    from ..errors import InputError
    from ..scoring import identity, metrics, runfile

    identity.verify_job_run(sm.input.run, sm.wildcards, sm.input.fingerprint)
    qrels = datasets.read_qrels(sm.input.qrels)
    queries = datasets.read_queries(sm.input.queries)
    training = _training_queries(sm)
    if training:  # a learned fusion: never scored on the queries its parameters were learned on
        qrels = {q: d for q, d in qrels.items() if q not in training}
        queries = {q: t for q, t in queries.items() if q not in training}
        log.info("left out %d training queries of the learned fusion (%s)", len(training), sm.input.exclude[0])
    ignore = sm.params.spec["ignore_identical_ids"]
    # the whole run as columns (a full-depth CliniQ run is 20 M entries), scored for every query at once
    table = runfile.read(sm.input.run, duplicates=False)
    result = metrics.score(table, qrels, metrics.pipeline_measures(), queries=queries, ignore_identical_ids=ignore)
    c = result["counts"]
    if ignore:
        log.info("ignore_identical_ids: dropped %d retrieved documents whose id equals the query id",
                 c["identical_ids_dropped"])
    if not c["judged_queries_scored"]:
        raise InputError("no query of the task is judged: every metric would be undefined (NaN).",
                         path=sm.input.qrels, fix="use the qrels of this task's queries, or remove the task from "
                                                  "config.yaml.")
    if c["judged_queries_without_relevant"] >= c["judged_queries_scored"]:
        log.warning("no judged query has a relevant document: every measure is 0 for every run, so the leaderboards "
                    "show n/a for this task")
    log.info("scored %d judged queries; %d unjudged queries excluded (%s); %d judged queries with an empty "
             "run scored 0; %d judged queries have no relevant document", c["judged_queries_scored"],
             c["unjudged_queries_excluded"], ", ".join(c["unjudged_query_ids"]) or "-",
             c["judged_queries_with_empty_run"], c["judged_queries_without_relevant"])
    names = metrics.metric_names() + [metrics.JUDGED]
    record = {
        "benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "model": sm.wildcards.model,
        "run": str(sm.input.run), "run_depth": result["run_depth"],
        "metrics": {m: round(result["metrics"][m], 6) for m in names}, "counts": c,
    }
    if sm.params.spec.get("protocol"):  # the evaluation protocol the run was made under (benchmarks.protocols)
        record["protocol"] = sm.params.spec["protocol"]
    io.write_json(sm.output.metrics, record)
    io.write_text(sm.output.per_query, metrics.per_query_tsv(result["per_query"], names))
    log.info("ndcg_at_10 = %.5f; judged_at_10 = %.4f", result["metrics"]["ndcg_at_10"],
             result["metrics"][metrics.JUDGED])


def _training_queries(sm) -> set[str]:
    """The queries of a learned fusion's training judgments (rule input ``exclude``), which score_run leaves out."""
    from ..benchmarks import datasets

    files = list(getattr(sm.input, "exclude", None) or [])
    return {q for path in files for q in datasets.read_any_qrels(path)}


def score_cliniq(sm) -> None:
    from ..cliniq import metrics as cliniq
    from ..cliniq import per_query
    from ..cliniq.files import clean_json, read_cliniq_qrels, read_query_types
    from ..io import read_lines, write_json, write_text

    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)
    qtypes = read_query_types(sm.input.query_types)
    ids = read_lines(sm.input.ids)
    _check_runs(sm, [sm.input.run], [sm.wildcards.model], ids)
    tie_order = sm.params.spec["tie_order"]
    ranked = cliniq.read_ranked_run(sm.input.run, ids, tie_order)  # full-depth runs: arrays, not a dict per query
    result = cliniq.evaluate_ranked(ranked, rows, qtypes, ids, irrelevant)
    c = result["counts"]
    depth = ranked.depth()
    log.info("ranking: score descending, equal scores %s", {
        "evalpy": "in the run file's order (a dense run: eval.py's np.argsort order)",
        "corpus": "in corpus order (eval.py's scoring with a stable argsort)", "doc_id": "by chunk id"}[tie_order])
    if c.get("unranked_chunks"):
        log.warning("single-patient: %d chunks of scored notes are not in the run (depth %d); they are ranked after "
                    "the retrieved ones in chunk order. For eval.py's exact figures rank the whole corpus "
                    "(benchmark depth: full, the default) with a model that scores every chunk (%d)",
                    c["unranked_chunks"], depth, len(ids))
    out = {"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "model": sm.wildcards.model,
           "run": str(sm.input.run), "run_depth": depth, "corpus_chunks": len(ids), "tie_order": tie_order, **result}
    write_json(sm.output.metrics, clean_json(out))
    # per judged query, by match type (the CliniQ claims' evidence), from the same ranking
    write_text(sm.output.per_query, per_query.to_tsv(per_query.per_query(ranked, rows, qtypes, ids)))
    m, s = result["multi"]["all"], result["single"]["all"]
    log.info("multi-patient (%d queries): MRR %.4f nDCG@10 %.4f (CliniQ-compatible %.4f) R@100 %.4f; "
             "single-patient (%d notes): MRR %.4f nDCG %.4f MAP %.4f; judged@10 %.4f; counts %s", m["n"], m["mrr"],
             m["ndcg_at_10"], m["ndcg_at_10_cliniq"], m["recall_at_100"], s["n"], s["mrr"], s["ndcg"], s["map"],
             result["judged_at_10"]["all"]["judged_at_10"],
             {k: v for k, v in c.items() if k != "unjudged_query_ids"})


def _check_runs(sm, files, names, ids) -> None:
    """CliniQ's runs checked against what the job expects (``scoring.identity``): the runs ``names``, of the
    job's benchmark and its task, over the corpus of its chunk ids."""
    from ..scoring import identity
    from ..workflow import paths

    task = getattr(sm.wildcards, "task", None) or paths.parse(paths.CHUNK_IDS, sm.input.ids)["task"]
    identity.verify_files(files, names, sm.wildcards.benchmark, task, identity.fingerprint(ids))


def collect_metrics(sm) -> None:
    """A benchmark's metric JSONs in one file, and beside it what this scoring selected (complete or not): the
    report shows a benchmark from its last complete scoring (``workflow.earlier``)."""
    from ..io import write_json
    from ..scoring import metric_table

    n = metric_table.write(list(sm.input), sm.output[0])
    selection = sm.params.spec["selection"]
    write_json(sm.output.selection, selection)
    log.info("collected the metrics of %d runs of %s (%s)", n, sm.wildcards.benchmark,
             "complete" if selection["complete"] else "partial: models_to_run " + ", ".join(selection["models_to_run"]))


# ------------------------------------------------------------------ CliniQ's judgment completion (cliniq_completion)

def cliniq_completion_sample(sm) -> None:
    """The sampling design: per completed query, the population of unjudged chunks of uncoded admissions (coded:
    from MIMIC's code tables, ``coded_from: codes``, or from CliniQ's judgments), a seeded uniform sample of it, and
    with ``pool_depth`` > 0 the pool of those chunks in the top ``pool_depth`` of the selected runs
    (``cliniq_completion``)."""
    from collections import Counter
    from pathlib import Path

    from ..cliniq import completion as comp
    from ..cliniq import corpus as cc
    from ..cliniq import metrics as cliniq
    from ..cliniq.files import judged_chunks, read_cliniq_qrels, read_query_types
    from ..io import read_lines, write_text

    spec = sm.params.spec
    folder = Path(sm.input.annotations[0]).parent
    queries, _ = cc.read_queries(folder)
    own, _ = cc.read_qrels(folder, queries)  # CliniQ's own judgments: whose notes its annotators labelled
    by_judgments = comp.coded_admissions(own)
    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)  # every judgment row, new_judgments included
    judged = judged_chunks(rows, irrelevant)
    qtypes = read_query_types(sm.input.query_types)
    ids = read_lines(sm.input.ids)
    from_codes, without_code = None, ()
    if spec["coded_from"] == "codes":
        from ..cliniq import codes

        tables = dict(zip(codes.TABLES, sm.input.code_tables))
        from_codes, counts = codes.coded(tables, queries, qtypes, spec["coded_unit"],
                                         {cliniq.note_of(c) for c in ids})
        without_code = counts["queries_without_code"]
        log.info("code tables: %s", {k: v for k, v in counts.items()
                                     if k not in ("queries_without_code", "mapped_through", "unit_differs")})
        if without_code:
            log.warning("%d queries map to no code of the tables (their titles match no query text); their coded "
                        "admissions come from CliniQ's judgments (design.tsv: coded_from %s): %s", len(without_code),
                        comp.NO_CODE, ", ".join(without_code))
    coded, how = comp.resolve_coded(by_judgments, from_codes, without_code, spec["coded_unit"],
                                    counts if from_codes is not None else None)
    selected = comp.select_queries(spec["queries"], coded, qtypes, by_judgments)
    tops = {}
    _check_runs(sm, sm.input.runs, spec["runs"] if spec["pool_depth"] else [], ids)  # the pool's runs
    if spec["pool_depth"]:
        tops = {name: comp.top_chunks(cliniq.read_ranked_run(path, ids, spec["tie_orders"][name]), selected,
                                      spec["pool_depth"])
                for name, path in zip(spec["runs"], sm.input.runs)}
    sample, design = comp.design(selected, qtypes, coded, ids, judged, tops, spec["sample_per_query"], spec["seed"],
                                 how)
    write_text(sm.output.sample, comp.table_text(comp.SAMPLE_HEADER, sample))
    write_text(sm.output.design, comp.table_text(comp.DESIGN_HEADER, design))
    col = {c: i for i, c in enumerate(comp.DESIGN_HEADER)}
    if from_codes is not None:
        coded_rows = [d for d in design if d[col["coded_from"]] == "codes"]
        titles = Counter(source for d in coded_rows for source in d[col["mapped_through"]].split(":")[0].split(";"))
        log.info("%d of %d completed queries map to a code (by the kind of title: %s), %d fall back to CliniQ's "
                 "judgments; the units patient and admission classify %d admissions differently over them (coded_unit "
                 "%s)", len(coded_rows), len(design), dict(sorted(titles.items())), len(design) - len(coded_rows),
                 sum(d[col["unit_differs"]] for d in coded_rows), spec["coded_unit"])
        log.info("coded by %s (%s): the two definitions differ on %d admissions over %d queries (%d coded by the "
                 "tables only: without a chunk CliniQ judges relevant; %d by CliniQ's judgments only: no code of the "
                 "tables maps to the query there)", spec["coded_unit"], spec["coded_from"],
                 sum(d[col["codes_only"]] + d[col["judgments_only"]] for d in coded_rows), len(coded_rows),
                 sum(d[col["codes_only"]] for d in coded_rows), sum(d[col["judgments_only"]] for d in coded_rows))
    log.info("%d queries (%s); population %d chunks of uncoded admissions; pool %d (top %d of %d runs); uniform "
             "sample %d (%d of them in the pool), %d draws extended past the pool; %d chunks to judge",
             len(selected), {t: sum(1 for q in selected if qtypes[q] == t) for t in cc.QUERY_TYPES},
             sum(d[col["population"]] for d in design), sum(d[col["pool"]] for d in design), spec["pool_depth"],
             len(tops), sum(d[col["drawn"]] for d in design),
             sum(d[col["drawn_in_pool"]] for d in design), sum(d[col["extended"]] for d in design), len(sample))


def cliniq_completion_judge(sm) -> None:
    """The LLM judge of every sampled chunk (CliniQ's annotation design: relevance, then the match type): its
    prompts quote the notes, so they go only to a loopback server or one declared in ``phi_servers``; the answers'
    cache and the table of labels with the judge's rationale are owner-only under resources/; results/ gets the
    labels (ids) and the counts."""
    from collections import Counter

    from .. import io
    from ..benchmarks import datasets
    from ..cliniq import judge
    from ..cliniq.completion import DESIGN_HEADER, SAMPLE_HEADER, read_table
    from ..io import protect_up_to
    from ..llm.client import Client, ask_parsed
    from ..llm.policy import ServerPolicy
    from ..llm.requests import sampling_params
    from ..llm.server import serving
    from ..workflow import paths

    spec = sm.params.spec
    bench = sm.wildcards.benchmark
    sample = read_table(sm.input.sample, SAMPLE_HEADER)
    queries = datasets.read_queries(sm.input.queries)
    needed = {r["chunk_id"] for r in sample}
    chunks = {obj["id"]: obj["text"] for _, obj in io.iter_jsonl(sm.input.chunks) if obj["id"] in needed}
    template, appended = judge.with_answer_format(judge.read_prompt(judge.prompt_path(spec["prompt"]),
                                                                    spec["prompt_sha256"]))
    origin = judge.PROMPT_ORIGINS["configured" if spec["prompt"] else "shipped"]
    log.info("prompt: %s%s", origin, "; the judge's final-line format appended (the prompt has none)" if appended
             else "")
    messages = {}
    for r in sample:
        prompt = judge.build_prompt(template, queries[r["query_id"]], r["query_type"], chunks[r["chunk_id"]])
        messages[f"{r['query_id']} {r['chunk_id']}"] = [{"role": "system", "content": spec["system_prompt"]},
                                                        {"role": "user", "content": prompt}]
    private_root = paths.fill(paths.PRIVATE_COMPLETION_ROOT, benchmark=bench)
    cache = paths.fill(paths.PRIVATE_JUDGE_CACHE, benchmark=bench, llm=spec["llm"])
    policy = ServerPolicy.from_config(sm.config, f"the judge prompts of benchmark {bench}")
    client = Client(spec, cache, private=True, policy=policy, unit="judgment")
    log.info("judging %d (query, chunk) pairs with %s (model %s, sampling %s), prompt sha256 %s", len(messages),
             spec["llm"], spec["model"], sampling_params(spec), spec["prompt_sha256"])
    # a server inside this job when vllm.enabled; it may log prompts: owner-only, under resources/
    server_log = paths.fill(paths.private_log_file("cliniq_completion_judge", "server"), benchmark=bench)
    with serving(spec, server_log):
        parsed, usage, rounds = ask_parsed(
            client, messages, lambda answer: judge.parse_answer(answer, spec["reasoning"]),
            retries=spec["malformed_retries"], repair=judge.REPAIR)
    table = []
    for r in sample:
        got = parsed[f"{r['query_id']} {r['chunk_id']}"]
        label, rationale = got.value if got.value is not None else (judge.MALFORMED, got.answer.content)
        table.append({"query_id": r["query_id"], "query_type": r["query_type"], "chunk_id": r["chunk_id"],
                      "stratum": r["stratum"], "label": label, "attempts": got.attempts, "rationale": rationale})
    with io.atomic_path(sm.output.judgments, private=True) as tmp:
        tmp.write_text(judge.judgments_tsv(table), encoding="utf-8")
    protect_up_to(sm.output.judgments, private_root)
    io.write_text(sm.output.labels, judge.labels_tsv(table))
    by_label = Counter(r["label"] for r in table)
    malformed = by_label.get(judge.MALFORMED, 0)
    design = read_table(sm.input.design, DESIGN_HEADER)
    io.write_json(sm.output.info, {
        "design": {"queries": len(design), "pool_chunks": sum(1 for r in sample if r["stratum"] == "pool"),
                   "sample_chunks": sum(1 for r in sample if r["drawn"] == "1"),
                   "coded_from": dict(sorted(Counter(d["coded_from"] for d in design).items())),
                   "coded_unit": sorted({d["coded_unit"] for d in design})},
        "malformed_share": round(malformed / len(table), 6) if table else 0.0,
        "benchmark": bench, "llm": spec["llm"], "model": spec["model"], "sampling": sampling_params(spec),
        "prompt_sha256": spec["prompt_sha256"], "prompt": "shipped" if not spec["prompt"] else "configured",
        "prompt_origin": origin, "answer_format_appended": appended,
        "judged": len(table), "by_label": dict(sorted(by_label.items())), "malformed": malformed,
        "malformed_after_round": rounds, "malformed_by_query": dict(sorted(Counter(
            r["query_id"] for r in table if r["label"] == judge.MALFORMED).items())), **usage.as_dict()})
    log.info("labels: %s; malformed after each round: %s; requests sent %d, answers from the cache %d; tokens %d "
             "prompt, %d completion; cost %.6f", dict(sorted(by_label.items())), rounds, usage.requested,
             usage.cached, usage.prompt_tokens, usage.completion_tokens, usage.cost)
    if table and malformed == len(table):
        log.warning("no usable answer: all %d answers of the judge stayed malformed after %d re-asks (labelled %r), "
                    "so the estimates are n/a and the verdict says the test is inconclusive; check the judge's model, "
                    "its max_tokens and the prompt's final-line instruction (the rationales are in %s)", len(table),
                    spec["malformed_retries"], judge.MALFORMED, sm.output.judgments, extra={"terminal": True})
    elif malformed:
        log.warning("%d of %d answers (%.1f%%) stayed malformed after %d re-asks: labelled %r, counted as unjudged in "
                    "the estimates and the re-scoring, and marked in the verdict", malformed, len(table),
                    100.0 * malformed / len(table), spec["malformed_retries"], judge.MALFORMED,
                    extra={"terminal": True})


def _completion_strata(sm):
    from ..cliniq import completion as comp
    from ..cliniq.judge import read_labels

    labels = read_labels(sm.input.labels)
    design = comp.read_table(sm.input.design, comp.DESIGN_HEADER)
    sample = comp.read_table(sm.input.sample, comp.SAMPLE_HEADER)
    return labels, design, comp.strata(design, sample, labels)


def cliniq_completion_estimate(sm) -> None:
    """The false-negative rate (overall, per query type, per match type, per query) with design-based 95%
    intervals, the estimated number of missing relevant chunks, and the judge against the expert labels."""
    from ..cliniq import completion as comp
    from ..cliniq import completion_report as rep
    from ..cliniq import experts as ex
    from ..cliniq.label_files import read_expert_labels
    from ..io import read_json, read_lines, write_text
    from ..report.synthetic import titled

    spec = sm.params.spec
    bench = sm.wildcards.benchmark
    labels, design, strata = _completion_strata(sm)
    experts = {}
    if hasattr(sm.input, "human_labels"):  # read and checked before anything is written
        completed, chunk_ids = {d["query_id"] for d in design}, set(read_lines(sm.input.ids))
        experts = {ex.expert_name(f): read_expert_labels(f, completed, chunk_ids) for f in sm.input.human_labels}
    rows, per_query = comp.estimates(strata)
    info = {**spec, "queries": len(design), "llm": read_json(sm.input.info)["llm"]}
    name = titled(bench, spec.get("synthetic"))  # as headings and captions show the benchmark
    write_text(sm.output.estimates_csv, rep.csv_text(rep.ESTIMATE_COLUMNS, rows))
    write_text(sm.output.estimates_md, rep.estimates_markdown(name, rows, info))
    write_text(sm.output.estimates_tex, rep.estimates_latex(bench, [r for r in rows if r["measure"] == "relevant"
                                                                     or r["scope"] == "all"], name))
    write_text(sm.output.per_query, rep.csv_text(rep.PER_QUERY_COLUMNS, per_query))
    pairs, fnr = [], []
    if experts:
        pairs = ex.agreements(labels, experts)
        fnr = ex.rates(design, comp.read_table(sm.input.sample, comp.SAMPLE_HEADER), labels, experts)
    write_text(sm.output.agreement_csv, rep.csv_text(ex.COLUMNS, ex.rows(pairs, fnr)))
    write_text(sm.output.agreement_md, ex.markdown(pairs, fnr, name))
    write_text(sm.output.agreement_tex, ex.latex(bench, pairs, fnr, name))
    overall = next(r for r in rows if r["scope"] == "all" and r["measure"] == "relevant")
    log.info("false-negative rate %.4f [%.4f, %.4f] over %d of %d population chunks; estimated missing relevant "
             "%.1f [%.1f, %.1f]; found %d; malformed %d", overall["rate"], overall["rate_low"], overall["rate_high"],
             overall["covered"], overall["population"], overall["missing"], overall["missing_low"],
             overall["missing_high"], overall["found"], overall["malformed"])
    for a, b, r in pairs:
        log.info("%s against %s: relevance kappa %.3f (n %d), match type kappa %.3f (n %d)", a, b,
                 r["relevance"]["kappa"], r["relevance"]["n"], r["match_type"]["kappa"], r["match_type"]["n"])


def cliniq_completion_rescore(sm) -> None:
    """Every multi-patient figure of every selected run with CliniQ's and with the completed judgments (the same
    scorer, ``cliniq.evaluate_ranked``), the orderings' Kendall tau with a bootstrap interval, the systems that
    move and the pairs that flip, and the verdict."""
    from collections import Counter

    from ..cliniq import completion as comp
    from ..cliniq import completion_report as rep
    from ..cliniq import completion_verdict as cv
    from ..cliniq import metrics as cliniq
    from ..cliniq.files import read_cliniq_qrels, read_query_types
    from ..io import read_json, read_lines, write_json, write_text
    from ..report.synthetic import titled

    spec = sm.params.spec
    bench = sm.wildcards.benchmark
    labels, design, strata = _completion_strata(sm)
    rows, irrelevant = read_cliniq_qrels(sm.input.cliniq_qrels)
    qtypes = read_query_types(sm.input.query_types)
    ids = read_lines(sm.input.ids)
    full_rows, full_irrelevant, added = comp.completed_judgments(rows, irrelevant, labels)
    _check_runs(sm, sm.input.runs, spec["runs"], ids)
    original, completed = {}, {}
    for name, path in zip(spec["runs"], sm.input.runs):
        ranked = cliniq.read_ranked_run(path, ids, spec["tie_orders"][name])
        original[name] = comp.per_query_values(cliniq.evaluate_ranked(ranked, rows, qtypes, ids, irrelevant))
        completed[name] = comp.per_query_values(cliniq.evaluate_ranked(ranked, full_rows, qtypes, ids,
                                                                       full_irrelevant))
    scored = next(iter(original.values())).keys() if original else []
    groups = comp.groups_of(qtypes, scored, [d["query_id"] for d in design])
    rescored = comp.compare(original, completed, groups, spec["move_threshold"])
    ranks = comp.ranking(original, completed, groups, spec["bootstrap"], spec["seed"])
    info = read_json(sm.input.info)
    overall = comp.estimate(strata, "relevant")
    pool = sum(int(d["pool"]) for d in design)
    sources = Counter(d["coded_from"] for d in design)
    names = {"codes": "MIMIC's code tables", "judgments": "CliniQ's judgments",
             comp.NO_CODE: "CliniQ's judgments where no code maps to the query"}
    coded = ", ".join(f"{names[k]} ({n} {'query' if n == 1 else 'queries'})" for k, n in sorted(sources.items()))
    titles = Counter(kind for d in design if d["mapped_through"]
                     for kind in d["mapped_through"].split(":")[0].split(";"))
    kinds = {"cms-v32": "CMS v32 category titles", "earlier-title": "earlier CMS titles (codes.EARLIER_TITLES)",
             "d_icd_procedures": "procedure titles", "prescriptions": "prescription names"}
    if titles:
        coded += " (mapped through " + ", ".join(f"{kinds.get(k, k)}: {n}" for k, n in sorted(titles.items())) + ")"
    differs = sum(int(d["unit_differs"] or 0) for d in design)
    units = sorted({d["coded_unit"] for d in design if d["coded_from"] == "codes"})
    if units:
        coded += (f"; coded unit {', '.join(units)}, on which the units admission and patient disagree for {differs} "
                  "admissions summed over the queries")
    agreement = None
    if hasattr(sm.input, "agreement"):
        import csv

        with open(sm.input.agreement, encoding="utf-8", newline="") as handle:
            agreement = list(csv.DictReader(handle))
    experts = cv.expert_arm(agreement, spec["experts"], len(design))
    verdict = cv.verdict(bench, {"llm": info["llm"], "model": info.get("model"), "prompt": info.get("prompt_origin"),
                                 "judged": info["judged"], "malformed": info["malformed"], "queries": len(design),
                                 "pool": pool > 0, "coded_from": coded}, overall, rescored, ranks,
                         spec["move_threshold"], spec["families"], experts)
    write_text(sm.output.rescored_csv, rep.csv_text(rep.RESCORED_COLUMNS, rescored))
    name = titled(bench, spec.get("synthetic"))  # as headings and captions show the benchmark
    write_text(sm.output.rescored_md, rep.rescored_markdown(name, rescored, ranks, spec["move_threshold"]))
    write_text(sm.output.rescored_tex, rep.rescored_latex(bench, rescored, spec["move_threshold"], name))
    write_text(sm.output.ranking_csv, rep.csv_text(rep.RANKING_COLUMNS, rep.ranking_rows(ranks)))
    write_text(sm.output.ranking_tex, rep.ranking_latex(bench, ranks, name))
    write_text(sm.output.verdict_md, cv.verdict_markdown(name, verdict))
    write_json(sm.output.verdict_json, cv.verdict_json(bench, verdict, {
        "judgments_added": added, "queries_completed": len(design), "threshold_relative_points": spec["move_threshold"],
        "judged": info["judged"], "malformed": info["malformed"],
        "experts": {"run": experts["run"], **spec["experts"]}, "prompt": info.get("prompt_origin"),
        "design": {"pool_chunks": pool, "sample_only": pool == 0, "coded_from": dict(sorted(sources.items())),
                   "coded_unit": sorted({d["coded_unit"] for d in design}),
                   "mapped_through": dict(sorted(titles.items())), "unit_differs": differs}}))
    log.info("re-scored %d runs over %d queries with %d relevant and %d not relevant judgments added; moved: %s; "
             "flipped: %s; reliable: %s", len(original), len(groups["all"]), added["relevant"],
             added["irrelevant"], verdict["moved"] or "none", verdict["flipped"] or "none", verdict["reliable"])

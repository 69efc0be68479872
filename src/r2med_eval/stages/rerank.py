"""Stage rerank (rules/rerank.smk): re-score the top k of a run with a cross-encoder, RankLLaMA or a bi-encoder
(rerank_run), or rerank it with an LLM behind an OpenAI-compatible server (llm_rerank_run)."""

from __future__ import annotations

import logging

log = logging.getLogger("r2med_eval")


def rerank_run(sm) -> None:
    from .. import io
    from ..benchmarks import datasets
    from ..rerank import merge as rerank_merge
    from ..rerank import scorers as rerank
    from ..scoring import runs

    job = sm.params.spec
    corpus = datasets.read_corpus(sm.input.corpus)
    ident = _checked(sm, corpus)
    spec = job["reranker_spec"]
    truncate = bool(spec["truncate"]) if "truncate" in spec else False  # a dense reranker has no truncate key
    if truncate:  # only each query's top k is read, not the whole run (a full-depth CliniQ run is 20 M lines)
        run, depth = runs.read_run_tops(sm.input.run, int(job["depth"]))
    else:  # the documents below k stay in the reranked run
        run = runs.read_run(sm.input.run)
        depth = runs.run_depth(run)
    note = rerank_merge.depth_note(depth, int(job["depth"]), job["run"])
    if note:
        log.warning("note: %s", note)
    if spec["type"] == "cross_encoder":
        scorer = rerank.cross_encoder_scorer(spec, job["reranker"])
        batch_size = int(spec["batch_size"])
    elif spec["type"] == "rankllama":
        scorer = rerank.rankllama_scorer(spec, job["reranker"])
        batch_size = 16  # pairs per call (each pair is scored alone, as R2MED): progress only
    else:
        scorer = rerank.cached_embedding_scorer(sm.input.emb, sm.input.ids, sm.input.query_emb,
                                                sm.input.query_ids, sm.input.corpus)
        batch_size = max(1, int(job["depth"]))  # cached embeddings: one product per query
    queries = datasets.read_queries(sm.input.queries)
    merged, raw, info = rerank.rerank_run(run, int(job["depth"]), scorer, queries, corpus, batch_size=batch_size,
                                          truncate=truncate)
    if truncate:
        log.info("truncate: the reranked run holds only the re-scored top %d (as R2MED's reranked runs)", job["depth"])
    runs.write_run(merged, sm.output.run, tag=sm.wildcards.model, identity=ident)
    _write_rescored(sm.output.scores, {q: sorted(raw[q], key=lambda d: (-raw[q][d], d)) for q in raw}, raw)
    io.write_json(sm.output.info, {"kind": "rerank", "input_run": job["run"], "reranker": job["reranker"],
                                   "depth": int(job["depth"]), "reranker_type": spec["type"], "truncate": truncate,
                                   **info,
                                   **({"note": note} if note else {})})


def _checked(sm, corpus: dict) -> dict:
    """The input run checked against what the job expects (``scoring.identity``: its name, benchmark, task and the
    fingerprint of ``corpus``, the task's, read by the job anyway); the identity of the job's run."""
    from ..scoring import identity

    fingerprint, w = identity.fingerprint(corpus), sm.wildcards
    identity.verify_files([sm.input.run], [sm.params.spec["run"]], w.benchmark, w.task, fingerprint)
    return identity.make(w.model, w.benchmark, w.task, fingerprint)


def _write_rescored(path, orders: dict[str, list[str]], raw: dict[str, dict[str, float]]) -> None:
    """The reranker's own scores, each query's documents in the reranked order."""
    from .. import io

    lines = ["query_id\tdoc_id\tscore"] + [f"{q}\t{d}\t{raw[q][d]:.6f}" for q in sorted(orders) for d in orders[q]]
    io.write_text(path, "\n".join(lines) + "\n")


def llm_rerank_run(sm) -> None:
    """A listwise sliding window (RankGPT's prompt, or ReasonRank's reasoning prompt) or pointwise yes/no judgments
    by an LLM (``r2med_eval.llm_rerank``), through the one LLM client and its cache. On a MIMIC-derived benchmark the
    prompts quote the notes: the cache and a started server's output lie owner-only under resources/, and the server
    must be a loopback one or declared in ``phi_servers`` (read from the workflow's configuration: a declaration
    changes no output). A ReasonRank mode cuts passages with the served model's tokenizer and writes the tokens of
    every window beside the job's benchmark file (``paths.benchmark_side_file``)."""
    from pathlib import Path

    from .. import io
    from ..benchmarks import datasets
    from ..errors import InputError
    from ..io import protect_up_to
    from ..llm.client import Client
    from ..llm.policy import ServerPolicy
    from ..llm.requests import sampling_params
    from ..llm.server import serving
    from ..rerank import listwise, llm_rerank, pointwise, reasonrank
    from ..rerank import merge as rerank_merge
    from ..scoring import runs
    from ..workflow import paths

    job = sm.params.spec
    spec, settings, reasoning = job["reranker_spec"], job["generate"], job["reasoning"]
    w = {k: getattr(sm.wildcards, k) for k in ("benchmark", "task", "model")}
    depth, private = int(job["depth"]), bool(job["private"])
    corpus = datasets.read_corpus(sm.input.corpus)
    ident = _checked(sm, corpus)
    run = runs.read_run(sm.input.run)
    note = rerank_merge.check_depth(run, depth, job["run"])
    if note:
        log.warning("note: %s", note)
    queries = datasets.read_queries(sm.input.queries)
    tops = {q: [d for d, _ in runs.ranked(run[q])[:depth]] for q in sorted(run)}
    mode, count_tokens = llm_rerank.prompt_mode(spec), None
    if mode in reasonrank.MODES:
        tokenizer = reasonrank.load_tokenizer(spec["tokenizer"], job["reranker"])
        count_tokens = reasonrank.count_tokens(tokenizer)
        texts = {d: reasonrank.passage_content(corpus[d], tokenizer, spec["passage_tokens"])
                 for d in sorted({d for docs in tops.values() for d in docs})}
    else:
        content = listwise.rankgpt_content if spec["passage_format"] == "rankgpt" else datasets.doc_contents
        texts = {d: content(corpus[d]) for docs in tops.values() for d in docs}
    policy = server_log = None
    if private:
        cache = paths.fill(paths.PRIVATE_RERANK_CACHE, **w)
        policy = ServerPolicy.from_config(sm.config, f"the {spec['type']} prompts of benchmark {w['benchmark']}")
        server_log = paths.fill(paths.private_log_file("llm_rerank_run", "server"), **w)
    else:
        cache = paths.fill(paths.RERANK_CACHE, **w)
    sampling = llm_rerank.sampling_overrides(spec, reasoning)
    log.info("%s %s over the top %d of %s: LLM %s (model %s, sampling %s, reasoning %s)", spec["type"],
             job["reranker"], depth, job["run"], spec["llm"], settings["model"],
             {**sampling_params(settings), **sampling}, reasoning)
    template = pointwise.read_template(sm.input.prompt) if spec["type"] == "llm_pointwise" else None
    with serving(settings, server_log):
        client = Client(settings, cache, private=private, policy=policy)
        orders, raw, how, usage, windows = llm_rerank.rerank(spec, client, queries, tops, texts,
                                                             reasoning=reasoning, template=template,
                                                             count_tokens=count_tokens)
    if private and Path(cache).exists():
        protect_up_to(cache, paths.fill(paths.PRIVATE, benchmark=w["benchmark"], task=w["task"]))
    log.info("%s; requests %d, from the cache %d; tokens %d prompt, %d completion; cost %.6f",
             how.get("scoring", "permutations"), usage.requested, usage.cached, usage.prompt_tokens,
             usage.completion_tokens, usage.cost)
    if mode in reasonrank.MODES:
        how["tokens"] = _log_tokens(windows, paths.fill(paths.benchmark_side_file("llm_rerank_run", "tokens"), **w))
    bad, answers = llm_rerank.unusable(spec, how)
    share = bad / answers if answers else 0.0
    if spec["type"] == "llm_pointwise":
        what = "answers named neither answer word"
    elif mode == "rankgpt":
        what = "answers named no passage"
    else:
        what = (f"windows had no readable ranking after {spec['reasks']} re-asks (no <answer>: "
                f"{how['parsing']['unusable_by']['missing_answer']}, no passage named: "
                f"{how['parsing']['unusable_by']['no_passage']}, an unreadable digit: "
                f"{how['parsing']['unusable_by']['unreadable']})")
    if share > spec["max_unusable"]:
        raise InputError(f"reranker {job['reranker']} over {job['run']}: {bad} of {answers} {what} ({share:.1%}, "
                         f"above max_unusable {spec['max_unusable']:.1%}); the reranked run would be the first-stage "
                         "order where they fall, so none is written.",
                         fix=f"check the LLM behind llms.{spec['llm']} (served model, max_tokens, log probabilities) "
                             f"and the prompt{' and answers' if spec['type'] == 'llm_pointwise' else ''}; or raise "
                             f"models.{job['reranker']}.max_unusable to accept them (the answers are cached).")
    if bad:
        log.warning("%d of %d %s (%.1f%%, within max_unusable %.1f%%): counted in the lineage (unusable_answers)",
                    bad, answers, what, 100 * share, 100 * spec["max_unusable"])
    merged = {q: rerank_merge.merge(run[q], llm_rerank.positional(o), spec["truncate"]) for q, o in orders.items()}
    runs.write_run(merged, sm.output.run, tag=sm.wildcards.model, identity=ident)
    _write_rescored(sm.output.scores, orders, raw)
    io.write_json(sm.output.info, {
        "kind": "rerank", "input_run": job["run"], "reranker": job["reranker"], "depth": depth,
        "reranker_type": spec["type"], "truncate": spec["truncate"], "pairs": sum(len(o) for o in orders.values()),
        "llm": spec["llm"], "model": settings["model"], "sampling": {**sampling_params(settings), **sampling},
        "reasoning": reasoning, **{k: spec[k] for k in ("passage_words", "passage_format") if k in spec},
        **how, "unusable_answers": bad,
        "unusable_share": round(share, 6), "answers_judged": answers, **usage.as_dict(),
        **({"note": note} if note else {})})


def _log_tokens(windows: list[dict], path) -> dict:
    """A ReasonRank reranking's tokens: every window's row to ``path`` (beside the job's benchmark file), a summary
    per window and per query to the log; returns the summary (for the lineage)."""
    from .. import io
    from ..rerank import reasonrank

    io.write_text(path, reasonrank.records_tsv(windows))
    summary = reasonrank.token_summary(windows)
    for key in ("reasoning_tokens", "completion_tokens"):
        if key in summary:
            for scope in ("per_window", "per_query"):
                s = summary[key][scope]
                log.info("%s %s: %d, total %d, mean %s, median %s, 95th percentile %s, max %s", key.replace("_", " "),
                         scope.replace("_", " "), s["count"], s["total"], s["mean"], s["median"], s["p95"], s["max"])
    if summary["windows_cut_at_max_tokens"]:
        log.warning("%d of %d windows were cut at max_tokens (their reasoning ran past the budget)",
                    summary["windows_cut_at_max_tokens"], summary["windows"])
    log.info("tokens of every window: %s", path)
    return summary

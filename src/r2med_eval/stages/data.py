"""Stage data (rules/data.smk): load each task from its on-disk layout once, validate it, write the
internal layout; query variants; Hub downloads (datasets and model weights); CliniQ's queries and judgments."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("r2med_eval")


def prepare_task(sm) -> None:
    from ..benchmarks import datasets

    spec = sm.params.spec
    log.info("loading %s/%s: layout %s from %s", sm.wildcards.benchmark, sm.wildcards.task, spec["layout"],
             spec["path"])
    ds = datasets.load(spec["layout"], spec["path"], split=spec["split"], empty_text=spec["empty_text"],
                       unknown_qrels=spec["unknown_qrels"], duplicate_qrels=spec["duplicate_qrels"])
    ds.stats.update({"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task})
    _r2med_task_checks(spec, ds)
    datasets.write_internal(ds, Path(sm.output.corpus).parent)
    st = ds.stats
    log.info("documents %d, queries %d (judged %d, unjudged %d: %s), judgments %d by grade %s",
             st["documents"], st["queries"], st["judged_queries"], st["unjudged_queries"],
             ", ".join(st["unjudged_query_ids"]) or "-", st["judgments"], st["judgments_by_grade"])
    log.info("filtered: empty documents dropped %d; duplicate judgments merged %d; judgments on unknown "
             "queries dropped %d, on unknown documents %d, on dropped documents %d",
             st["empty_documents_dropped"], st["qrels_duplicates_merged"], st["qrels_unknown_query_dropped"],
             st["qrels_unknown_document_dropped"], st["qrels_on_dropped_documents"])


def fingerprint_corpus(sm) -> None:
    """The fingerprint of a task's corpus ids (``scoring.identity``), from its corpus (CliniQ: its chunk ids, no
    text): every run writer records it, every run reader checks it."""
    from ..io import write_json
    from ..scoring import identity

    fp = identity.fingerprint(identity.corpus_ids(sm.input[0]))
    write_json(sm.output[0], fp)
    log.info("%s/%s: %d document ids, sha256 %s", sm.wildcards.benchmark, sm.wildcards.task, fp["documents"],
             fp["sha256"])


def _r2med_task_checks(spec, ds) -> None:
    """A downloaded task's files against its manifest; an R2MED task's counts against the paper's."""
    from ..benchmarks import r2med
    from ..hub import datasets as hfdata

    if spec.get("source"):
        folder = Path(spec["path"])
        manifest = hfdata.verify_manifest(folder / "manifest.json", {n: folder / n for n in hfdata.CORE_FILES})
        ds.stats["download"] = {"repo": manifest["repo"], "revision": manifest["revision"],
                                "origin": manifest["origin"]["kind"]}
        log.info("files match the download manifest (%s at %s)", manifest["repo"], manifest["revision"])
    if spec.get("paper_task"):
        ds.stats["paper_check"] = r2med.check_stats(spec["paper_task"], ds.stats)


def prepare_query_variant(sm) -> None:
    _write_variant(sm)


def prepare_private_query_variant(sm) -> None:
    """prepare_query_variant on a MIMIC-derived benchmark: the file (its expansions may quote the notes) is
    owner-only under resources/; a copy an earlier version left in results/ is removed."""
    from ..workflow import paths

    w = {k: getattr(sm.wildcards, k) for k in ("benchmark", "task", "method", "llm")}
    _retire_public_copy(paths.fill(paths.VARIANT, **w))
    _write_variant(sm, private_root=paths.fill(paths.PRIVATE, benchmark=w["benchmark"], task=w["task"]))


def _write_variant(sm, private_root: str | None = None) -> None:
    from ..benchmarks import datasets
    from ..expansion import gar

    queries = datasets.read_queries(sm.input.queries)
    rows = gar.read_variant(sm.input.variant, queries)
    n = _write_jsonl(sm.output[0], ({"id": q, "text": rows[q]["text"], "hy_doc": rows[q]["hy_doc"]} for q in queries),
                     private_root)
    log.info("query variant %s/%s: %d queries", sm.wildcards.method, sm.wildcards.llm, n)


def _write_jsonl(target, rows, private_root: str | None = None) -> int:
    """JSON lines to ``target`` (atomically); with ``private_root``, owner-only, as the folders up to it."""
    if private_root is None:
        from ..io import write_jsonl

        return write_jsonl(target, rows)
    from ..cliniq.corpus import write_private_jsonl
    from ..io import protect_up_to

    n = write_private_jsonl(target, rows)
    protect_up_to(target, private_root)
    return n


def _retire_public_copy(path: str, moved_to: str | None = None) -> None:
    """A file an earlier version wrote outside resources/ (or readable by others) on a MIMIC-derived benchmark:
    removed, or moved to ``moved_to`` (owner-only) when that does not exist yet."""
    import os

    if not os.path.lexists(path):
        return
    if moved_to and not os.path.lexists(moved_to):
        from ..io import private_folder

        private_folder(Path(moved_to).parent)
        os.chmod(path, 0o600)
        os.replace(path, moved_to)
        log.warning("moved %s (written by an earlier version, readable by others) to %s, owner-only", path, moved_to)
    else:
        os.unlink(path)
        log.warning("removed %s: an earlier version wrote it there, readable by others; on a MIMIC-derived "
                    "benchmark it lives under resources/ now", path)


def generate_query_variant(sm) -> None:
    """An expansion file written by an LLM behind an OpenAI-compatible server (``r2med_eval.generate``)."""
    _generate_variant(sm)


def generate_private_query_variant(sm) -> None:
    """generate_query_variant on a MIMIC-derived benchmark: the expansion file, the cache of the answers and the
    output of a server started in the job stay under resources/, owner-only; LameR's prompts quote the notes, so
    they go only to a loopback server or one declared in ``phi_servers`` (``llm.ServerPolicy``, read from the
    workflow's configuration: a declaration changes no output)."""
    from ..expansion import generate
    from ..llm.policy import ServerPolicy
    from ..workflow import paths

    w = {k: getattr(sm.wildcards, k) for k in ("benchmark", "task", "method", "llm")}
    cache = paths.fill(paths.PRIVATE_GENERATE_CACHE, **w)
    _retire_public_copy(paths.fill(paths.GENERATED, **w))
    _retire_public_copy(paths.fill(paths.GENERATE_CACHE, **w), moved_to=cache)
    policy = None
    if sm.params.spec["method"] in generate.CORPUS_METHODS:
        policy = ServerPolicy.from_config(sm.config, f"the {sm.params.spec['method']} prompts of benchmark "
                                                     f"{w['benchmark']}")
    _generate_variant(sm, cache=cache, policy=policy,
                      private_root=paths.fill(paths.PRIVATE, benchmark=w["benchmark"], task=w["task"]),
                      server_log=paths.fill(paths.private_log_file("generate_private_query_variant", "server"), **w))


def _generate_variant(sm, cache: str | None = None, policy=None, private_root: str | None = None,
                      server_log: str | None = None) -> None:
    from .. import io
    from ..benchmarks import datasets
    from ..expansion import generate
    from ..llm.requests import sampling_params
    from ..llm.server import serving
    from ..scoring import identity, runs
    from ..workflow import paths

    spec = sm.params.spec
    method, task = spec["method"], spec["prompt_task"]
    queries = datasets.read_queries(sm.input.queries)
    examples = passages = None
    if method == "query2doc":
        examples = generate.read_examples(sm.input.examples, task) if hasattr(sm.input, "examples") else None
    if method == "lamer":
        corpus = {d: doc["text"] for d, doc in datasets.read_corpus(sm.input.corpus).items()}
        identity.verify_files([sm.input.run], [spec["lamer_retriever"]], sm.wildcards.benchmark, sm.wildcards.task,
                              identity.fingerprint(corpus))  # the first stage's run, checked
        run = runs.read_run(sm.input.run)
        passages = {}
        for q in queries:
            ranked = sorted(run.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:spec["lamer_depth"]]
            passages[q] = generate.lamer_passages([d for d, _ in ranked], corpus, spec["lamer_words"])
        log.info("LameR: the top %d passages of %s, cut to %d words", spec["lamer_depth"], sm.input.run,
                 spec["lamer_words"])
    prompts = generate.build_prompts(method, task, queries, examples=examples, passages=passages)
    log.info("%s prompts for R2MED task %s, LLM %s (model %s, sampling %s)", method, task, spec["llm"],
             spec["model"], sampling_params(spec))
    if cache is None:
        cache = paths.fill(paths.GENERATE_CACHE, **{k: getattr(sm.wildcards, k)
                                                    for k in ("benchmark", "task", "method", "llm")})
    with serving(spec, server_log):  # vLLM inside this job (a GPU node on SLURM) when enabled
        answers, stats = generate.generate(prompts, spec, cache, private=private_root is not None, policy=policy)
    log.info("answers: %d (%d from the cache, %d requested now); tokens: %d prompt, %d completion; cost %.6f",
             stats["queries"], stats["cached"], stats["requested"], stats["prompt_tokens"],
             stats["completion_tokens"], stats["cost"])
    _write_jsonl(sm.output.variant, ({"id": q, "text": queries[q], "hy_doc": answers[q]} for q in queries),
                 private_root)
    io.write_json(sm.output.info, {
        "method": method, "prompt_task": task, "llm": spec["llm"], "model": spec["model"],
        "system_prompt": spec["system_prompt"], "sampling": sampling_params(spec),
        "prompt_template_sha256": generate.template_sha256(method, task, examples), **stats})


def download_task(sm) -> None:
    from ..hub import datasets as hfdata

    p = sm.params.spec
    manifest = hfdata.fetch_task(Path(sm.output.manifest).parent, task=sm.wildcards.task, source=p["source"],
                                 local=p["local"], sha256_pins=p["sha256"])
    log.info("placed %s at %s (%s) in %s", manifest["repo"], manifest["revision"], manifest["origin"]["kind"],
             Path(sm.output.manifest).parent)


def download_query_variant(sm) -> None:
    from ..hub import datasets as hfdata

    p = sm.params.spec
    rel = f"{sm.wildcards.method}/{sm.wildcards.llm}/query_with_hydoc.jsonl"
    info = hfdata.fetch_variant(sm.output[0], task=sm.wildcards.task, source=p["source"], relpath=rel,
                                local=p["local"])
    log.info("%s: %d lines, sha256 %s", rel, info["lines"], info["sha256"])


def prefetch_model(sm) -> None:
    """A model's Hub snapshots into the Hugging Face cache (a local rule: compute nodes are often offline)."""
    from ..hub import models as hfmodels

    spec = sm.params.spec
    sources = {side: spec[side] for side in hfmodels.SIDES if spec.get(side)}
    hfmodels.prefetch(sm.wildcards.model, sources, sm.output[0])
    log.info("wrote %s", sm.output[0])


def link_cliniq_corpus(sm) -> None:
    """The retrievers' corpus.jsonl: a relative symlink to the owner-only chunks under resources/."""
    from ..cliniq.files import link_relative

    link_relative(Path(sm.input.corpus), Path(sm.output.corpus))
    log.info("linked %s -> %s", sm.output.corpus, sm.input.corpus)


def prepare_cliniq_queries(sm) -> None:
    from ..cliniq import corpus as cc
    from ..io import write_jsonl, write_text

    queries, qtypes = cc.read_queries(Path(sm.input.queries[0]).parent)
    write_jsonl(sm.output.queries, ({"id": q, "text": t} for q, t in queries.items()))
    write_text(sm.output.query_types, "".join(f"{q}\t{t}\n" for q, t in qtypes.items()))
    log.info("queries %d: %s", len(queries), {t: sum(1 for v in qtypes.values() if v == t) for t in cc.QUERY_TYPES})


def prepare_cliniq(sm) -> None:
    from ..benchmarks.datasets import write_qrels
    from ..cliniq import corpus as cc
    from ..io import read_lines, write_json, write_text

    spec = sm.params.spec
    folder = Path(sm.input.hadm_ids).parent
    queries, qtypes = cc.read_queries(folder)
    rows, stats = cc.read_qrels(folder, queries)
    ids = read_lines(sm.input.ids)
    new = []
    if spec["new_judgments"]:
        from ..cliniq.label_files import read_new_judgments

        new = read_new_judgments(spec["new_judgments"], queries, set(ids))
        log.info("merged %d new judgments from %s (%d relevant, %d not relevant)", len(new), spec["new_judgments"],
                 sum(1 for r in new if r[2] != cc.IRRELEVANT), sum(1 for r in new if r[2] == cc.IRRELEVANT))
    stats.update(cc.check_chunks(rows, set(ids), spec["missing_chunk_qrels_max"], folder / "qrels_*.tsv"))
    all_rows = rows + new
    write_text(sm.output.cliniq_qrels, "".join(f"{q}\t{c}\t{t}\n" for q, c, t in all_rows))
    binary: dict[str, dict[str, int]] = {}
    for q, c, t in all_rows:
        grade = 0 if t == cc.IRRELEVANT else 1
        binary.setdefault(q, {})[c] = max(grade, binary.get(q, {}).get(c, 0))
    write_qrels(binary, sm.output.qrels)
    by_type = {t: sum(1 for r in all_rows if r[2] == t) for t in cc.MATCH_TYPES + (cc.IRRELEVANT,)}
    judged = {q for q, _, t in all_rows if t != cc.IRRELEVANT}
    stats.update({"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task, "layout": "cliniq",
                  "documents": len(ids), "queries": len(queries),
                  "queries_by_type": {t: sum(1 for v in qtypes.values() if v == t) for t in cc.QUERY_TYPES},
                  "judged_queries": len(judged), "unjudged_queries": len(queries) - len(judged),
                  "unjudged_query_ids": [q for q in queries if q not in judged],
                  "judgments_by_match_type": by_type, "new_judgments": len(new),
                  "files": {name: {"sha256": cc.sha256_file(folder / name)} for name in cc.ANNOTATION_FILES}})
    write_json(sm.output.stats, stats)
    log.info("queries %d (%s); judgments %d by match type %s; repeated (query, chunk) rows %d; on chunks absent from "
             "the corpus %d", len(queries), stats["queries_by_type"], len(all_rows), by_type,
             stats["judgments_repeating_a_chunk"], stats["judgments_on_absent_chunks"])

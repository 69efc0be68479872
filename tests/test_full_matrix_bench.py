"""bench/full_matrix.py at a small scale (a few seconds): the synthetic R2MED and CliniQ read through the pipeline's
own loaders, their statistics against the paper's counts and MTEB's lengths, the expansions, and the configuration
fragments merged over docs/reproducing-the-paper.md's files as Snakemake merges them (the real run: docs/scale.md)."""
import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import full_matrix as fm  # noqa: E402

from r2med_eval.benchmarks import datasets
from r2med_eval.benchmarks.r2med import PAPER_STATS  # noqa: E402
from r2med_eval.cliniq import corpus as cc  # noqa: E402
from r2med_eval.expansion import gar  # noqa: E402
from r2med_eval.llm import reasoning  # noqa: E402

SCALE = 0.002


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    stats = fm.generate(out, seed=3, scale=SCALE, parts=("r2med", "cliniq"))
    return out, stats


def test_r2med_tasks_have_the_papers_counts_and_mtebs_lengths(generated):
    out, stats = generated
    mteb = fm.task_statistics()
    assert set(stats["r2med"]) == set(PAPER_STATS)
    for task, (n_queries, n_docs) in PAPER_STATS.items():
        ds = datasets.load("r2med", out / "r2med" / task)  # R2MED's native layout, the pipeline's loader
        assert len(ds.corpus) == max(20, round(n_docs * SCALE)) and len(ds.queries) == max(2, round(n_queries * SCALE))
        lo, mean, hi = mteb[task]["doc_chars"]
        lengths = [len(d["text"]) for d in ds.corpus.values()]
        assert lo <= min(lengths) and max(lengths) <= hi
        assert sum(lengths) / len(lengths) == pytest.approx(mean, rel=0.02)  # the location is solved for the mean
        grades = [g for docs in ds.qrels.values() for g in docs.values()]
        assert set(grades) <= {1, 2} and all(d in ds.corpus for docs in ds.qrels.values() for d in docs)
        rlo, _, rhi = mteb[task]["relevant"]
        assert all(rlo <= len(docs) <= rhi for docs in ds.qrels.values()) and set(ds.qrels) == set(ds.queries)


def test_the_real_sizes_are_the_papers():
    stats = fm.task_statistics()
    assert sum(s["documents"] for s in stats.values()) == 357_080
    assert sum(s["queries"] for s in stats.values()) == 876
    assert round(sum(s["documents"] * s["doc_chars"][1] for s in stats.values()) / 1e6) == 362  # M characters


def test_relevant_documents_share_the_querys_topic_words(generated):
    out, _ = generated
    ds = datasets.load("r2med", out / "r2med" / "Biology")
    for qid, docs in ds.qrels.items():
        query = set(ds.queries[qid].split())
        for d in docs:
            if len(ds.corpus[d]["text"]) > 200:  # long enough to hold the topic words
                rare = set(ds.corpus[d]["text"].split()) & query
                assert rare, (qid, d)


def test_expansions_for_the_15_pairs_in_r2meds_layout(generated):
    out, _ = generated
    task = out / "r2med" / "PMC-Clinical"
    queries = {q["id"]: q["text"] for q in map(json.loads, (task / "query.jsonl").read_text().splitlines())}
    assert len(fm.GAR_PAIRS) == 15
    for method, llm in fm.GAR_PAIRS:
        rows = gar.read_variant(gar.variant_path(task, method, llm), queries)
        fmt = reasoning.reasoning_format(llm)
        assert (fmt != "none") == (llm in fm.REASONING_MARKERS)
        for row in rows.values():
            answer = reasoning.split_reasoning(fmt, row["hy_doc"])
            assert answer.strip() and (fmt == "none" or len(answer) < len(row["hy_doc"]))


def test_cliniq_chunks_and_annotations_through_the_real_chunking(generated, tmp_path):
    out, stats = generated
    folder = out / "cliniq"
    chunked = cc.chunk_corpus(folder / "NOTEEVENTS.csv", folder / "annotations" / "test_hadm_ids.txt",
                              tmp_path / "corpus.jsonl", expected=None)
    assert chunked["chunks"] == stats["cliniq"]["chunks"] == round(fm.CLINIQ["chunks"] * SCALE)
    texts, types = cc.read_queries(folder / "annotations")
    assert len(texts) == stats["cliniq"]["queries"] == max(3, round(fm.CLINIQ["queries"] * SCALE))
    ids = set(chunked["chunk_ids"])
    for qtype in cc.QUERY_TYPES:
        for line in (folder / "annotations" / f"qrels_{qtype}.tsv").read_text().splitlines():
            qid, chunk, match = line.split("\t")
            assert chunk in ids and match in cc.MATCH_TYPES and f"{qtype}-{qid}" in texts


def test_full_size_notes_give_cliniqs_chunk_count(tmp_path):
    """The generator's notes, sized by the real chunking, give CliniQ's 16,550 chunks from 1,000 notes (checked on
    40 notes of the same sizes: 16,550 // 1,000 chunks each, one more for 16,550 % 1,000 of them)."""
    import random

    import cliniq_scale

    hadm = cliniq_scale.generate_notes(tmp_path / "n.csv", 40, random.Random(0), total_chunks=662)
    (tmp_path / "ids.txt").write_text("".join(h + "\n" for h in hadm))
    got = cc.chunk_corpus(tmp_path / "n.csv", tmp_path / "ids.txt", tmp_path / "c.jsonl", expected=None)
    assert got["chunks"] == 662  # 22 notes of 17 chunks, 18 of 16


def _merged(files) -> dict:
    from snakemake.utils import update_config

    cfg: dict = {}
    for f in files:
        update_config(cfg, yaml.safe_load(Path(f).read_text()))
    return cfg


def test_fragments_register_stand_ins_under_the_real_names(generated, tmp_path):
    """The generated fragments over the configuration of docs/reproducing-the-paper.md (and config/cliniq.yaml),
    merged as Snakemake merges config files, validate; every model entry reads its stand-in and no Hub download is
    planned; the matrix has about 55 runs per R2MED task."""
    from r2med_eval.workflow.control import Workflow

    out, _ = generated
    entries = {**yaml.safe_load((REPO / "config/r2med_models.yaml").read_text())["models"],
               **yaml.safe_load((REPO / "config/rerankers.yaml").read_text())["models"]}
    assert set(fm.ARCHITECTURES) == set(entries)  # a stand-in for every registry entry
    sources = {}
    for name, entry in entries.items():
        sources[name] = {side: {"path": str(tmp_path / name / side)} for side in ("source", "query_source",
                                                                                  "base_source") if side in entry}
    (out / "sources.json").write_text(json.dumps(sources))
    fm.generate(out, seed=3, scale=SCALE, parts=("config",))
    files = fm.config_files(out)
    wf = Workflow.load(_merged(files), files, base=REPO)
    reg = wf.registry
    assert reg.benchmarks == ["r2med", "cliniq"] and not reg.hub_models()
    for name in entries:
        spec = reg.cfg["models"][name]
        assert spec["source"]["path"] == str(tmp_path / name / "source") and spec["source"]["hf"]  # Hub id kept
    assert all(reg.cfg["benchmarks"]["r2med"]["tasks"][t]["local"] == str(out / "r2med" / t) for t in PAPER_STATS)
    runs = reg.runs_of("r2med")
    assert 50 <= len(runs) <= 60, len(runs)
    assert "nv-embed-v2--rankllama-7b@10" in runs and "bm25-paper+hyde-qwq-32b" in runs
    # the rehearsal: the same runs on one R2MED task
    files = files + [str(out / "rehearsal.yaml")]
    small = Workflow.load(_merged(files), files, base=REPO).registry
    assert small.tasks == [("r2med-rehearsal", "Biology"), ("cliniq", "cliniq")]
    assert small.runs_of("r2med-rehearsal") == runs and small.runs_of("cliniq") == reg.runs_of("cliniq")
    # the SLURM part: BM25, one dense model and one reranker at depth 10 over BM25 on R2MED (a file, since
    # Snakemake's --config reads a depth in rerank=[{...}] as a string, which the schema refused)
    files = fm.config_files(out) + [str(out / "slurm.yaml")]
    part = Workflow.load(_merged(files), files, base=REPO).registry
    assert part.benchmarks == ["r2med"]
    assert sorted(part.runs_of("r2med")) == ["bge-large-en-v1.5", "bm25", "bm25--bge-reranker-v2-m3@10", "rrf-bm25-bge"]
    slurm = fm.commands(out, tmp_path / "work")["slurm"]
    assert slurm[slurm.index("--max-threads") + 1] == "2" and slurm[-1] == str(out / "slurm.yaml")


def test_a_resumed_run_sums_the_walls_of_its_invocations(tmp_path):
    """bench/matrix_summary.py on a run resumed over invocations: the walls and plannings are summed (the time
    between invocations is not the run's), an --unlock or a start that ran no job is not an invocation, a job
    killed in flight counts as started, not finished."""
    import matrix_summary as ms

    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)

    def job(stamp, rule, jobid, bench, finished=None):
        text = f"[{stamp}]\nrule {rule}:\n    jobid: {jobid}\n    benchmark: {bench}\n    threads: 2\n"
        return text + (f"[{finished}]\nFinished jobid: {jobid} (Rule: {rule})\n" if finished else "")

    (logs / "2026-12-03T100000.000000.snakemake.log").write_text(
        "Building DAG of jobs...\n" + job("Thu Dec  3 10:00:04 2026", "a", 1, "benchmarks/a/1.tsv",
                                          "Thu Dec  3 10:01:00 2026")
        + job("Thu Dec  3 10:01:00 2026", "a", 2, "benchmarks/a/2.tsv"))  # killed in flight
    (logs / "2026-12-03T110000.000000.snakemake.log").write_text("Building DAG of jobs...\n"
                                                                  "Unlocked working directory.\n")
    (logs / "2026-12-03T120000.000000.snakemake.log").write_text(
        "Building DAG of jobs...\n" + job("Thu Dec  3 12:00:06 2026", "a", 1, "benchmarks/a/2.tsv",
                                          "Thu Dec  3 12:00:36 2026"))
    for name, wall in (("1", 50.0), ("2", 29.0)):
        bench = tmp_path / "benchmarks" / "a" / f"{name}.tsv"
        bench.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{wall}\t0:00:{int(wall)}\t100.0\t{wall}\n")
    found = ms.invocation_logs(tmp_path)
    assert [p.name[:17] for p in found] == ["2026-12-03T100000", "2026-12-03T120000"]
    s = ms.summarise(tmp_path, found, None, cores=2, top=5)
    assert s["wall_s"] == 60 + 36 and s["planning_s"] == 4 + 6
    assert [(i["jobs_started"], i["jobs_finished"]) for i in s["invocations"]] == [(2, 1), (1, 1)]
    assert s["job_wall_s"] == 79 and s["core_occupancy"] == round(79 * 2 / (2 * 96), 3)
    assert "| invocations (the run resumed with `--rerun-incomplete`; walls summed) | 2 |" in ms.markdown(s)
    with pytest.raises(SystemExit, match="one invocation"):
        ms.summarise(tmp_path, found, {"wall_s": 1.0, "start": 0.0, "cpu_s": 1.0}, cores=2, top=5)

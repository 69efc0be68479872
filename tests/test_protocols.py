"""Evaluation protocols (benchmarks/protocols.py) and the published sources of results/r2med_vs_paper.md: R2MED's
table and ReasonEmbed's Table 3, each run set against the numbers published under its own protocol (ReasonRank's
published mean, under its reranking protocol: tests/test_reasonrank.py)."""
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO, shared_dataset, snakemake, workflow_dir, write_jsonl

from r2med_eval.benchmarks import datasets, protocols
from r2med_eval.dense import encode as dense_encode
from r2med_eval.report import r2med_paper
from r2med_eval.workflow import config
from r2med_eval.workflow.params import Params
from r2med_eval.workflow.registry import Registry
from r2med_eval.workflow.schema import SCHEMA_PATH

REASONING = REPO / "config" / "r2med_reasoning_models.yaml"
ENTRIES = yaml.safe_load(REASONING.read_text())["models"]


def _cfg(models: dict, **extra) -> dict:
    return config.validate({"benchmarks": {"r": {"layout": "r2med", "ignore_identical_ids": "always",
                                                 "tasks": {"Biology": {"path": "x", "paper_task": "Biology"}}}},
                            "benchmarks_to_run": ["r"], "models": models, **extra})


DENSE = {"type": "dense", "source": {"path": "/m"}}


# ---------------------------------------------------------------- the published sources


def test_reasonembed_table_is_the_shared_transcription():
    """Every number of data/reference's copy is the shared file's, with its group/model row; the four rows the table
    took from the R2MED paper carry R2MED's protocol and equal R2MED's own numbers to 2 decimals."""
    table = r2med_paper.read_reasonembed_table(REPO / r2med_paper.DATA_FILES[1])
    r2med = r2med_paper.read_paper_table()
    rows = {row for row, _ in table}
    assert len(rows) == 19 and len(table) == 19 * 8
    taken = {row for (row, _), v in table.items() if v["protocol"] == "r2med"}
    assert taken == {"general/BM25", "general/OpenAI-3-Large", "general/GritLM-7B", "general/NV-Embed-v2"}
    for row, name in zip(sorted(taken), ("bm25", "grit", "nv", "openai")):
        for task in r2med_paper.R2MED_TASKS:
            assert f"{table[(row, task)]['ndcg_at_10'] * 100:.2f}" == \
                f"{r2med[('retriever', name, '-', '-', '-', '-', task)]['ndcg_at_10'] * 100:.2f}", (row, task)
    shared = shared_dataset("reference_scores") / "reasonembed_2510.08252_table3_r2med_ndcg10.tsv"
    lines = [line.split("\t") for line in shared.read_text().splitlines() if line and not line.startswith("#")]
    header = lines[0]
    for cells in lines[1:]:
        row = f"{cells[0]}/{cells[1]}"
        for task, value in zip(header[5:], cells[5:]):
            assert f"{table[(row, task)]['ndcg_at_10'] * 100:.2f}" == value, (row, task)


def test_every_entry_names_a_row_of_its_source():
    names = {(e.get("published_as") or {}).get("reasonembed") for e in ENTRIES.values()} - {None}
    assert names <= {row for row, _ in r2med_paper.read_reasonembed_table(REPO / r2med_paper.DATA_FILES[1])}
    assert len(names) == 12  # the twelve checkpoints Table 3 lists and the authors' scripts run (and gte-Qwen2)


def _metrics(path: Path, model: str, ndcg: float, protocol=None, benchmark="r", task="Biology") -> Path:
    record = {"benchmark": benchmark, "task": task, "model": model, "metrics": {"ndcg_at_10": ndcg}}
    path.write_text(json.dumps({**record, **({"protocol": protocol} if protocol else {})}))
    return path


def test_each_run_is_set_against_the_number_published_under_its_protocol(tmp_path):
    """A ReasonEmbed-protocol run against Table 3, its R2MED-protocol twin not (another protocol, said so), a run
    under R2MED's protocol against R2MED's table, a run without a protocol by its names alone."""
    cfg = _cfg({"bm25-paper": {"type": "bm25_paper", "paper_name": "bm25"},
                "q8": {**ENTRIES["qwen3-embedding-8b"], "source": {"path": "/m"}},
                "q8-r2med": {**ENTRIES["qwen3-embedding-8b-r2med"], "source": {"path": "/m"}},
                "bge": {**DENSE, "protocol": "r2med", "paper_name": "bge"}},
               models_to_run=["bm25-paper", "q8", "q8-r2med", "bge"])
    keys = Params(Registry(cfg)).r2med_vs_paper(None)["keys"]
    assert keys["q8"] == {"key": None, "type": "dense", "protocol": "reasonembed",
                          "published_as": {"reasonembed": "general/Qwen3-Embedding-8B"}}
    files = [_metrics(tmp_path / "a.json", "bm25-paper", 0.19188),
             _metrics(tmp_path / "b.json", "q8", 0.2137, "reasonembed"),
             _metrics(tmp_path / "c.json", "q8-r2med", 0.30, "r2med"),
             _metrics(tmp_path / "d.json", "bge", 0.12706, "r2med")]
    result = r2med_paper.compare(files, [], keys, {"r/Biology": "Biology"})
    rows = {r["model"]: r for r in result["rows"]}
    assert (rows["q8"]["source"], rows["q8"]["theirs"], rows["q8"]["published_protocol"]) == \
        ("reasonembed", 0.2137, "reasonembed") and not rows["q8"]["flag"]
    assert rows["q8-r2med"]["theirs"] is None and rows["q8-r2med"]["note"] == (
        "not compared, published under another protocol: q8-r2med (r2med) against reasonembed's "
        "general/Qwen3-Embedding-8B (reasonembed)")
    assert (rows["bge"]["source"], rows["bge"]["theirs"]) == ("r2med", 0.12706)
    assert (rows["bm25-paper"]["source"], rows["bm25-paper"]["protocol"]) == ("r2med", None)
    md = r2med_paper.to_markdown(result)
    assert "| r/Biology | Biology | q8 | reasonembed | 21.37 | 21.37 | reasonembed | reasonembed | +0.00 |  |" in md
    assert "| r/Biology | Biology | bge | r2med | 12.71 | 12.71 | r2med | r2med | +0.00 |  |" in md
    assert "- `reasonembed`: ReasonEmbed (arXiv 2510.08252), Table 3" in md and "ReasonEmbed's protocol" in md
    assert "- 1 (run, task) pair: published under another protocol: q8-r2med (r2med) against reasonembed's " \
        "general/Qwen3-Embedding-8B (reasonembed)." in md
    assert "- reasonembed: `arXiv 2510.08252 Table 3, general/Qwen3-Embedding-8B`" in md
    tex = r2med_paper.to_latex(result)
    assert r"Biology & q8 & reasonembed & reasonembed & 21.37 & 21.37 & +0.00 \\" in tex
    # the protocol the metrics record decides, not the configuration's
    moved = r2med_paper.compare([_metrics(tmp_path / "e.json", "q8", 0.2, "r2med")], [], keys, {"r/Biology": "Biology"})
    assert moved["rows"][0]["theirs"] is None and "another protocol" in moved["rows"][0]["note"]


def test_a_difference_under_reasonembeds_source_names_its_reasons(tmp_path):
    keys = {"q8": {"key": None, "type": "dense", "protocol": "reasonembed",
                   "published_as": {"reasonembed": "general/Qwen3-Embedding-8B"}}}
    result = r2med_paper.compare([_metrics(tmp_path / "a.json", "q8", 0.30, "reasonembed")], [], keys,
                                 {"r/Biology": "Biology"})
    row = result["rows"][0]
    assert row["flag"] and row["note"] == r2med_paper.KNOWN_BY_SOURCE["reasonembed"]


# ---------------------------------------------------------------- configuration and the jobs' params


def test_an_entry_declares_the_search_protocols_only_and_a_rerank_run_meets_a_reranking_one():
    """The schema's protocol enum is DECLARABLE (ReasonRank's reranking protocol is not an entry's); a rerank run of a
    first stage under R2MED's protocol is compared under ReasonRank's, a retriever's run or another protocol's not."""
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    assert tuple(schema["$defs"]["protocol"]["enum"]) == protocols.DECLARABLE
    assert set(protocols.PROTOCOLS) - set(protocols.DECLARABLE) == {"reasonrank"}
    assert protocols.compatible("r2med", "reasonrank", reranked=True) and protocols.compatible(None, "reasonrank")
    assert not protocols.compatible("r2med", "reasonrank") and not protocols.compatible("reasonembed", "reasonrank",
                                                                                        reranked=True)
    assert not protocols.compatible("reasonrank", "r2med", reranked=True)


def test_the_protocol_sets_top_k_and_refuses_a_contradiction():
    cfg = _cfg({"a": {**DENSE, "protocol": "reasonembed"}, "b": {**DENSE, "protocol": "r2med"}, "c": DENSE})
    assert [cfg["models"][m]["top_k"] for m in "abc"] == [2000, 100, 1000]
    with pytest.raises(config.ConfigError, match="models.a: top_k 1000 contradicts protocol: reasonembed, which keeps "
                                                 "the top 2000") as e:
        _cfg({"a": {**DENSE, "protocol": "reasonembed", "top_k": 1000}})
    assert "remove models.a.top_k (it defaults to 2000)" in str(e.value)


@pytest.mark.parametrize("published, message", [
    ({"reasonembd": "general/BM25"}, "names 'reasonembd', which is not a published source; did you mean 'reasonembed'"),
    ({"r2med": "bge"}, "R2MED's own table is named by paper_name"),
    ({"reasonembed": "general/Qwen3-Embedding-9B"}, "'general/Qwen3-Embedding-9B' is not a row of "
                                                   "data/reference/reasonembed_2510.08252_table3_r2med_ndcg10.tsv; did "
                                                   "you mean 'general/Qwen3-Embedding-8B'"),
])
def test_published_as_names_a_known_source_and_row(published, message):
    with pytest.raises(config.ConfigError, match="models.a.published_as") as e:
        _cfg({"a": {**DENSE, "protocol": "reasonembed", "published_as": published}})
    assert message in str(e.value)


def test_pool_prompt_model_needs_the_checkpoints_pooling():
    with pytest.raises(config.ConfigError, match="pool_prompt: model keeps the checkpoint's own Pooling config, but "
                                                 "pooling is lasttoken"):
        _cfg({"a": {**DENSE, "pooling": "lasttoken", "pool_prompt": "model"}})


def test_params_follow_the_protocol_and_leave_other_entries_alone():
    """Only a declared protocol adds to a job's params (the document text where it differs, the protocol, the
    identical-id rule): an entry without one keeps the params it had, so nothing of an existing results folder
    reruns. A derived run takes the protocol its first stages share."""
    cfg = _cfg({"re": {**DENSE, "protocol": "reasonembed"}, "r2": {**DENSE, "protocol": "r2med"}, "none": DENSE,
                "ce": {"type": "cross_encoder", "source": {"path": "/c"}}},
               rerank=[{"run": "re", "reranker": "ce", "depths": [10]}],
               fusion={"mix": {"method": "rrf", "runs": ["re", "r2"]}})
    params, reg = Params(Registry(cfg)), Registry(cfg)

    def w(model):
        return SimpleNamespace(benchmark="r", task="Biology", model=model)

    assert params.encode_corpus(w("re"))["doc_text"] == "text"
    assert "doc_text" not in params.encode_corpus(w("r2")) and "doc_text" not in params.encode_corpus(w("none"))
    assert params.retrieve_dense(w("re"))["protocol"] == "reasonembed"
    assert "drop_identical_ids" not in params.retrieve_dense(w("re"))
    assert params.retrieve_dense(w("r2"))["drop_identical_ids"] is True
    assert set(params.retrieve_dense(w("none"))) == {"top_k", "index"}
    # the benchmark says always; the protocols say otherwise, and are recorded
    assert params.score_run(w("re")) == {"ignore_identical_ids": False, "protocol": "reasonembed"}
    assert params.score_run(w("r2")) == {"ignore_identical_ids": True, "protocol": "r2med"}
    assert params.score_run(w("none")) == {"ignore_identical_ids": True}
    assert reg.protocol_of("re--ce@10") == "reasonembed" and reg.protocol_of("mix") is None
    assert params.score_run(w("re--ce@10")) == {"ignore_identical_ids": False, "protocol": "reasonembed"}


def test_reasonembeds_documents_are_the_text_without_the_title(tmp_path):
    """ReasonEmbed's data loader keeps a document's text alone; R2MED's BEIR search joins title and text."""
    root = tmp_path / "beir"
    write_jsonl(root / "corpus.jsonl", [{"_id": "d1", "title": "Aspirin", "text": "inhibits cyclooxygenase"},
                                        {"_id": "d2", "title": "", "text": "insulin lowers glucose"}])
    write_jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "aspirin"}])
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    datasets.write_internal(datasets.load("beir", root), tmp_path / "int")
    corpus = tmp_path / "int" / "corpus.jsonl"
    assert dense_encode.corpus_texts(corpus, {"doc_text": "text"}, "t")[1] == ["inhibits cyclooxygenase",
                                                                               "insulin lowers glucose"]
    assert dense_encode.corpus_texts(corpus, {}, "t")[1] == ["Aspirin inhibits cyclooxygenase",
                                                             "insulin lowers glucose"]
    assert protocols.PROTOCOLS["reasonembed"].doc_text == "text" and protocols.PROTOCOLS["r2med"].doc_text != "text"


# ---------------------------------------------------------------- end to end


@pytest.mark.slow
def test_r2med_local_with_a_reasoning_entry_shows_both_sources(tmp_path):
    """config/r2med-local.yaml (the demo as R2MED's Biology) with config/r2med_reasoning_models.yaml, one new entry
    and its R2MED twin pointed at a tiny local Qwen3: results/r2med_vs_paper.md sets bm25-paper against R2MED's table
    and qwen3-embedding-8b against ReasonEmbed's, each with its protocol; the run's info and metrics record it."""
    import torch
    from tiny_models import reasoning_decoder_dir

    texts = [json.loads(line)["text"] for name in ("corpus.jsonl", "query.jsonl")
             for line in (REPO / "data" / "demo" / name).read_text().splitlines()]
    model = reasoning_decoder_dir(tmp_path / "qwen3", "qwen3", 3, texts, dtype=torch.float32)
    base = (REPO / "config.yaml").read_text().replace("path: data/demo", f"path: {REPO / 'data' / 'demo'}")
    work = workflow_dir(tmp_path, base.replace("data/cliniq-demo", str(REPO / "data" / "cliniq-demo")))
    local = (REPO / "config" / "r2med-local.yaml").read_text().replace("local: data/demo",
                                                                       f"local: {REPO / 'data' / 'demo'}")
    (work / "local.yaml").write_text(local)
    (work / "mine.yaml").write_text(yaml.safe_dump({
        "models": {m: {"source": {"path": str(model)}, "device": "cpu", "dtype": "fp32", "batch_size": 16}
                   for m in ("qwen3-embedding-8b", "qwen3-embedding-8b-r2med")},
        "models_to_run": ["bm25-paper", "qwen3-embedding-8b", "qwen3-embedding-8b-r2med"],
        "report": {"baseline": "bm25-paper", "scatter": ["bm25-paper", "qwen3-embedding-8b"]}}))
    snakemake(work, "--cores", "2", "all", "--configfile", str(work / "config.yaml"), str(work / "local.yaml"),
              str(REASONING), str(work / "mine.yaml"), config=False)
    res = work / "results"
    metrics = json.loads((res / "metrics" / "r2med-local" / "Biology" / "qwen3-embedding-8b.json").read_text())
    info = json.loads((res / "runs" / "r2med-local" / "Biology" / "qwen3-embedding-8b.search.json").read_text())
    assert metrics["protocol"] == info["protocol"] == "reasonembed"
    twin = json.loads((res / "metrics" / "r2med-local" / "Biology" / "qwen3-embedding-8b-r2med.json").read_text())
    assert twin["protocol"] == "r2med" and twin["run_depth"] <= 100 < metrics["run_depth"] + 100
    paper = (res / "r2med_vs_paper.md").read_text()
    assert "| r2med-local/Biology | Biology | bm25-paper | - |" in paper and "| r2med | r2med |" in paper
    assert "| r2med-local/Biology | Biology | qwen3-embedding-8b | reasonembed |" in paper
    assert "| reasonembed | reasonembed |" in paper and "ReasonEmbed (arXiv 2510.08252), Table 3" in paper
    assert "published under another protocol: qwen3-embedding-8b-r2med (r2med) against reasonembed's " \
        "general/Qwen3-Embedding-8B (reasonembed)" in paper
    assert "**Not comparable:** r2med-local/Biology" in paper  # the demo is not R2MED's Biology
    tex = (res / "tables" / "r2med_vs_paper.tex").read_text()
    assert "qwen3-embedding-8b & reasonembed & reasonembed" in tex and "bm25-paper & r2med & r2med" in tex
    assert not math.isnan(metrics["metrics"]["ndcg_at_10"])

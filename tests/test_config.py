import copy

import pytest
import yaml

from conftest import REPO
from r2med_eval.workflow import config
from r2med_eval.workflow.registry import Registry
from r2med_eval.errors import ConfigError

BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def check(cfg):
    return config.validate(cfg, config_file="config.yaml")


def test_shipped_config_is_valid_and_defaults_filled():
    cfg = check(BASE)
    assert cfg["models"]["bm25"]["enabled"] is True
    assert cfg["benchmarks"]["demo"]["duplicate_qrels"] == "error"
    config.check_paths(cfg, base=REPO)
    medquad = yaml.safe_load((REPO / "config" / "medquad.yaml").read_text())
    merged = copy.deepcopy(BASE)
    merged["benchmarks"].update(medquad["benchmarks"])
    check(merged)


def test_unknown_key_is_named():
    cfg = copy.deepcopy(BASE)
    cfg["models"]["bm25"]["k3"] = 1.0
    with pytest.raises(ConfigError, match=r"unknown key 'models\.bm25\.k3'"):
        check(cfg)
    cfg = copy.deepcopy(BASE)
    cfg["modles"] = {}
    with pytest.raises(ConfigError, match=r"unknown key 'modles'"):
        check(cfg)


def test_misspelt_model_type_is_named():
    cfg = copy.deepcopy(BASE)
    cfg["models"]["bm25"]["type"] = "bm25_lucne"
    with pytest.raises(ConfigError, match=r"models\.bm25\.type: 'bm25_lucne' is not one of"):
        check(cfg)


def test_missing_dataset_path_is_named(tmp_path):
    cfg = copy.deepcopy(BASE)
    cfg["benchmarks"]["demo"]["tasks"]["demo"]["path"] = "no/such/folder"
    with pytest.raises(ConfigError, match=r"benchmarks\.demo\.tasks\.demo\.path: folder 'no/such/folder' does not exist"):
        config.check_paths(check(cfg), base=tmp_path)


def test_bad_values_and_selection():
    cfg = copy.deepcopy(BASE)
    cfg["models"]["bm25"]["b"] = 2
    with pytest.raises(ConfigError, match=r"models\.bm25\.b"):
        check(cfg)
    cfg = copy.deepcopy(BASE)
    cfg["benchmarks_to_run"] = ["nope"]
    with pytest.raises(ConfigError, match="benchmarks_to_run names 'nope'"):
        check(cfg)
    cfg = copy.deepcopy(BASE)
    cfg["models"]["bad/name"] = {"type": "bm25_lucene"}
    with pytest.raises(ConfigError, match="bad/name"):
        check(cfg)


def test_rerank_and_fusion_must_name_configured_runs():
    cfg = copy.deepcopy(BASE)
    cfg["rerank"] = [{"run": "bm26", "reranker": "minilm"}]
    with pytest.raises(ConfigError, match=r"rerank\[0\]\.run names 'bm26', which is not a configured run"):
        check(cfg)
    cfg = copy.deepcopy(BASE)
    cfg["rerank"] = [{"run": "bm25", "reranker": "bm25"}]
    with pytest.raises(ConfigError, match=r"rerank\[0\]\.reranker names 'bm25'"):
        check(cfg)
    cfg = copy.deepcopy(BASE)
    cfg["fusion"] = {"f": {"method": "rrf", "runs": ["bm25", "nope"]}}
    with pytest.raises(ConfigError, match=r"fusion\.f\.runs names 'nope'"):
        check(cfg)
    cfg = copy.deepcopy(BASE)
    cfg["fusion"] = {"f": {"method": "minmax", "runs": ["bm25", "minilm"], "weights": [1.0]}}
    with pytest.raises(ConfigError, match="weights has 1 values for 2 runs"):
        check(cfg)


def test_derived_runs_and_skipping():
    reg = Registry(check(BASE))
    assert list(reg.derived) == ["bm25--minilm@100", "rrf-bm25-minilm"]
    narrowed = copy.deepcopy(BASE)
    narrowed["models_to_run"] = ["bm25"]
    reg = Registry(check(narrowed))
    # the rerank's reranker (minilm) is not selected, so its run is skipped too
    assert reg.skipped == ["bm25--minilm@100", "rrf-bm25-minilm"]
    assert reg.all_runs == ["bm25", "bm25+hyde-handwritten"]
    assert list(reg.variants) == ["bm25+hyde-handwritten"]
    narrowed["models_to_run"] = ["bm25", "minilm"]
    assert Registry(check(narrowed)).skipped == []


def test_r2med_registry_fragment_is_valid():
    merged = copy.deepcopy(BASE)
    merged["models"].update(yaml.safe_load((REPO / "config" / "r2med_models.yaml").read_text())["models"])
    cfg = check(merged)
    assert {"medcpt", "medcpt-official", "bge-large-en-v1.5", "bmretriever-7b", "nv-embed-v2"} <= set(cfg["models"])
    assert cfg["models"]["medcpt"]["query_source"]["hf"] == "ncbi/MedCPT-Query-Encoder"
    assert "query_source" not in cfg["models"]["medcpt-official"]
    assert not any(cfg["models"][m]["enabled"] for m in cfg["models"] if m not in ("bm25", "bm25-paper", "minilm"))

import copy

import pytest
import yaml

from conftest import REPO
from r2med_eval import config
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

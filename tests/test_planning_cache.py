"""The planning cache (r2med_eval.workflow.cache): the code hashes and the schema check that Snakemake's planning
process keeps between calls. A stored value is used only under the key of everything it was computed from: each
test shows the value the cache gives is the one recomputing gives, that an edit of what it depends on misses, and
that a stored value is really what the next call uses (a planted value comes back)."""
import copy
import datetime
import json
import os
import shutil
import stat

import pytest
import yaml
from conftest import REPO

from r2med_eval.errors import ConfigError
from r2med_eval.workflow import cache as planning
from r2med_eval.workflow import config
from r2med_eval.workflow.code import CodeIndex
from r2med_eval.workflow.control import Workflow
from r2med_eval.workflow.schema import SCHEMA_PATH

BASE = yaml.safe_load((REPO / "config.yaml").read_text())


@pytest.fixture(scope="module")
def hashes():
    index = CodeIndex()
    return {r: index.hash(r) for r in index.rules()}


@pytest.fixture
def package(tmp_path):
    """A copy of the package and its data files: (package folder, repository folder)."""
    src = tmp_path / "repo" / "src" / "r2med_eval"
    shutil.copytree(REPO / "src" / "r2med_eval", src, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data" / "reference", tmp_path / "repo" / "data" / "reference")
    return src, tmp_path / "repo"


def test_code_hashes_from_the_cache_are_the_computed_ones(tmp_path, hashes):
    cache = planning.PlanningCache(tmp_path / "c")
    first = CodeIndex(cache=cache)
    assert {r: first.hash(r) for r in first.rules()} == hashes  # a miss: computed and stored
    stored = json.loads((tmp_path / "c" / "code.json").read_text())["entries"]
    assert stored == {first.fingerprint(): hashes}
    again = CodeIndex(cache=cache)
    assert again.hash("score_run") == hashes["score_run"]
    assert again._trees == {}  # a hit parses no stage module
    # what is stored is what is used: a planted table under the same fingerprint comes back
    cache.put("code", first.fingerprint(), {**hashes, "score_run": "planted"})
    assert CodeIndex(cache=cache).hash("score_run") == "planted"


def test_an_edit_of_any_module_or_data_file_changes_the_fingerprint(package, tmp_path, hashes):
    src, repo = package
    index = CodeIndex(src, repo)
    assert index.fingerprint() == CodeIndex().fingerprint()  # the location does not count, as for the hashes
    cache = planning.PlanningCache(tmp_path / "c")
    assert CodeIndex(src, repo, cache=cache).hash("score_run") == hashes["score_run"]
    for edit in (src / "scoring" / "metrics.py", src / "workflow" / "code.py", src / "stages" / "score.py",
                 repo / "data" / "reference" / "r2med_paper_ndcg10.tsv"):
        original = edit.read_bytes()
        edit.write_bytes(original + b"\n# an edit\n")
        edited = CodeIndex(src, repo, cache=cache)
        assert edited.fingerprint() != index.fingerprint(), edit
        if edit.name == "metrics.py":  # the edited module's rule gets the recomputed hash, not the stored one
            assert edited.hash("score_run") == CodeIndex(src, repo).hash("score_run") != hashes["score_run"]
        edit.write_bytes(original)
    assert CodeIndex(src, repo).fingerprint() == index.fingerprint()


@pytest.mark.parametrize("content", ["", "{", "[1, 2]", '{"format": 0, "entries": {}}', '{"format": 1}',
                                     '{"format": 1, "entries": {"%s": [1]}}'])
def test_a_broken_cache_file_is_a_miss(tmp_path, hashes, content):
    (tmp_path / "c").mkdir()
    key = CodeIndex().fingerprint()
    (tmp_path / "c" / "code.json").write_text(content.replace("%s", key))
    assert CodeIndex(cache=planning.PlanningCache(tmp_path / "c")).hash("score_run") == hashes["score_run"]


def test_cache_files_are_owner_only_and_bounded(tmp_path):
    cache = planning.PlanningCache(tmp_path / "c")
    for i in range(planning.ENTRIES + 3):
        assert cache.put("config", f"k{i}", {"i": i})
    entries = json.loads((tmp_path / "c" / "config.json").read_text())["entries"]
    assert list(entries) == [f"k{i}" for i in range(3, planning.ENTRIES + 3)]  # the newest ENTRIES
    assert cache.get("config", "k0") is None and cache.get("config", "k4") == {"i": 4}
    assert stat.S_IMODE(os.stat(tmp_path / "c").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "c" / "config.json").st_mode) == 0o600
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["config.json"]  # no temporary left


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path, hashes):
    (tmp_path / "file").write_text("")
    cache = planning.PlanningCache(tmp_path / "file" / "c")  # below a file: cannot be made
    assert cache.put("code", "k", {}) is False
    assert CodeIndex(cache=cache).hash("score_run") == hashes["score_run"]
    assert config.validate(copy.deepcopy(BASE), cache=cache) == config.validate(copy.deepcopy(BASE))


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert planning.PlanningCache.for_workdir({}).folder == tmp_path / ".snakemake" / "r2med-eval"
    for value in ("off", "0", "false", "OFF"):
        assert planning.PlanningCache.for_workdir({"R2MED_EVAL_PLANNING_CACHE": value}) is None


def test_plain_is_what_json_gives_back():
    assert planning.plain({"a": [1, 2.5, "x", None, True, {"b": []}]})
    for value in ({1: "a"}, (1, 2), {"a": {1, 2}}, {"a": datetime.date(2024, 1, 1)}, {"a": float("nan")},
                  {"a": float("inf")}, b"x"):
        assert not planning.plain(value), value
    assert planning.key_of("ab", "c") != planning.key_of("a", "bc")


# ---------------------------------------------------------------- the schema check


def _fragments(*names):
    raw = copy.deepcopy(BASE)
    for name in names:
        for key, value in yaml.safe_load((REPO / "config" / name).read_text()).items():
            raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return raw


@pytest.mark.parametrize("fragments", [(), ("rerankers.yaml",), ("r2med_models.yaml", "rerankers.yaml")])
def test_the_checked_configuration_from_the_cache_is_the_computed_one(tmp_path, fragments):
    raw = _fragments(*fragments)
    cache = planning.PlanningCache(tmp_path / "c")
    want = config.validate(copy.deepcopy(raw))
    assert config.validate(copy.deepcopy(raw), cache=cache) == want  # a miss: computed and stored
    assert len(json.loads((tmp_path / "c" / "config.json").read_text())["entries"]) == 1
    hit = config.validate(copy.deepcopy(raw), cache=cache)
    assert hit == want and json.dumps(hit) == json.dumps(want)  # the same keys in the same order
    # what is stored is what is used
    file = tmp_path / "c" / "config.json"
    data = json.loads(file.read_text())
    (key, stored), = data["entries"].items()
    stored["report"]["permutations"] = 7
    file.write_text(json.dumps(data))
    assert config.validate(copy.deepcopy(raw), cache=cache)["report"]["permutations"] == 7


def test_key_order_values_schema_and_code_each_change_the_key(tmp_path):
    cache = planning.PlanningCache(tmp_path / "c")
    raw = copy.deepcopy(BASE)
    config.validate(copy.deepcopy(raw), cache=cache)
    reordered = dict(reversed(list(raw.items())))
    assert list(config.validate(reordered, cache=cache)) == list(config.validate(copy.deepcopy(reordered)))
    changed = copy.deepcopy(raw)
    changed["report"] = {**changed.get("report", {}), "permutations": 999}
    assert config.validate(changed, cache=cache)["report"]["permutations"] == 999
    schema = copy.deepcopy(config.load_schema())
    schema["properties"]["report"]["properties"]["permutations"]["default"] = 123
    assert config.validate(copy.deepcopy(raw), schema=schema, cache=cache)["report"]["permutations"] == 123
    config.validate(copy.deepcopy(raw), cache=cache, code_key="another package")
    assert len(json.loads((tmp_path / "c" / "config.json").read_text())["entries"]) == 5


def test_an_invalid_configuration_is_never_stored_and_always_refused(tmp_path):
    cache = planning.PlanningCache(tmp_path / "c")
    bad = copy.deepcopy(BASE)
    bad["models"]["minilm"]["batch_size"] = "many"
    for _ in range(2):
        with pytest.raises(ConfigError, match="batch_size"):
            config.validate(copy.deepcopy(bad), cache=cache)
    assert not (tmp_path / "c" / "config.json").exists()
    # a check after the schema's still runs on a cached configuration
    config.validate(copy.deepcopy(BASE), cache=cache)
    unknown = copy.deepcopy(BASE)
    unknown["models_to_run"] = ["no-such-model"]
    with pytest.raises(ConfigError, match="no-such-model"):
        config.validate(unknown, cache=cache)
    with pytest.raises(ConfigError, match="no-such-model"):
        config.validate(copy.deepcopy(unknown), cache=cache)


def test_a_configuration_json_cannot_hold_is_checked_and_not_stored(tmp_path):
    """YAML gives dates (and FullLoader tuples), which JSON would give back as something else."""
    cache = planning.PlanningCache(tmp_path / "c")
    raw = copy.deepcopy(BASE)
    raw["report"] = {**raw.get("report", {}), "baseline": datetime.date(2024, 1, 1)}
    with pytest.raises(ConfigError, match="report.baseline"):
        config.validate(raw, cache=cache)
    raw = copy.deepcopy(BASE)
    raw["models"]["mine"] = {"type": "python", "factory": "my_models:build",
                             "kwargs": {"since": datetime.date(2024, 1, 1)}}
    assert config.validate(copy.deepcopy(raw), cache=cache) == config.validate(copy.deepcopy(raw))
    assert config.validate(raw, cache=cache)["models"]["mine"]["kwargs"]["since"] == datetime.date(2024, 1, 1)
    assert not (tmp_path / "c" / "config.json").exists()


def test_the_schema_from_the_cache_is_the_yaml(tmp_path, monkeypatch):
    from r2med_eval.workflow import schema as schema_module

    want = yaml.safe_load(SCHEMA_PATH.read_text())
    cache = planning.PlanningCache(tmp_path / "c")
    monkeypatch.setattr(schema_module, "_SCHEMAS", {})
    assert schema_module._load_schema(str(SCHEMA_PATH), cache) == want
    monkeypatch.setattr(schema_module, "_SCHEMAS", {})
    stored = json.loads((tmp_path / "c" / "schema.json").read_text())["entries"]
    assert list(stored.values()) == [want]
    assert schema_module._load_schema(str(SCHEMA_PATH), cache) == want


def test_a_workflow_loaded_through_the_cache_is_the_same(tmp_path):
    cache = planning.PlanningCache(tmp_path / "c")
    plain = Workflow.load(copy.deepcopy(BASE), base=REPO)
    for _ in range(2):  # a miss, then a hit
        cached = Workflow.load(copy.deepcopy(BASE), base=REPO, cache=cache)
        assert cached.cfg == plain.cfg and cached.targets() == plain.targets()
        assert {r: cached.params.code.hash(r) for r in cached.params.code.rules()} == \
               {r: plain.params.code.hash(r) for r in plain.params.code.rules()}
    assert {"code.json", "config.json"} <= {p.name for p in (tmp_path / "c").iterdir()}

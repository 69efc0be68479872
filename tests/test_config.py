import copy

import pytest
import yaml
from conftest import REPO

from r2med_eval.errors import ConfigError
from r2med_eval.workflow import config
from r2med_eval.workflow.registry import Registry

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
    with pytest.raises(ConfigError,
                       match=r"benchmarks\.demo\.tasks\.demo\.path: folder 'no/such/folder' does not exist"):
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


# ---------------------------------------------------------------- bounded inputs (issue 23, item 4)


def alias_bomb(kind: str, depth: int = 9, width: int = 9) -> str:
    """A YAML value of a few hundred bytes that expands to width**depth strings ("billion laughs"), built from
    lists or from mappings."""
    if kind == "list":
        levels = ["&a [" + ", ".join(['"lol"'] * width) + "]"]
        for prev, name in zip("abcdefghijklmno", "bcdefghijklmnop"[:depth - 1]):
            levels.append(f"&{name} [" + ", ".join([f"*{prev}"] * width) + "]")
        return "[" + ", ".join(levels) + "]"
    levels = ["&a {" + ", ".join(f"k{j}: lol" for j in range(width)) + "}"]
    for prev, name in zip("abcdefghijklmno", "bcdefghijklmnop"[:depth - 1]):
        levels.append(f"&{name} {{" + ", ".join(f"k{j}: *{prev}" for j in range(width)) + "}")
    return "{" + ", ".join(f"l{i}: {level}" for i, level in enumerate(levels)) + "}"


def bomb_config(kind: str, depth: int = 9) -> str:
    return f"""benchmarks:
  demo:
    layout: r2med
    tasks:
      demo: {{path: {REPO / 'data' / 'demo'}}}
models:
  bm25:
    type: bm25_lucene
    description: {alias_bomb(kind, depth)}
"""


@pytest.mark.parametrize("kind", ["list", "map"])
def test_an_alias_bomb_is_refused_before_anything_expands_it(tmp_path, kind):
    """9**9 values from 1 kB: the check counts each shared value once (linear in the file); JSON Schema's message
    rendered the whole value (8.4 GB, no message in 120 s) and Snakemake's merge copies every mapping."""
    text = bomb_config(kind)
    assert len(text) < 1500
    with pytest.raises(ConfigError) as err:
        check(yaml.safe_load(text))
    message = str(err.value)
    assert message.startswith("config.yaml: models.bm25.description") and "more than 100,000 values once YAML's " \
        "aliases (*name) are expanded (an alias bomb?)" in message and len(message) < 400
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"models\.bm25\.description.*alias bomb"):
        config.check_file(path)


def test_an_alias_bomb_in_the_workflows_config_file_stops_snakemake_with_one_message(tmp_path):
    """Before Snakemake merges config.yaml (its merge copies every mapping: 9**7 mappings would take about a minute
    and 2 GB; the timeout fails the test long before)."""
    from conftest import snakemake, workflow_dir

    work = workflow_dir(tmp_path, bomb_config("map", depth=8))
    proc = snakemake(work, "-n", check=False, config=False, timeout=40)
    assert proc.returncode != 0
    shown = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
    assert shown == ["r2med-eval: config.yaml: models.bm25.description.l5: more than 100,000 values once YAML's "
                     "aliases (*name) are expanded (an alias bomb?). Fix: write the values out without nested "
                     "aliases."], proc.stdout[-2000:]
    assert not (work / "results").exists()


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", ".NaN"])
def test_non_finite_numbers_are_refused_naming_the_key(value):
    cfg = yaml.safe_load(f"{{models: {{bm25: {{type: bm25_lucene, k1: {value}}}}}}}")
    with pytest.raises(ConfigError) as err:
        check({**copy.deepcopy(BASE), "models": cfg["models"]})
    assert str(err.value).startswith("config.yaml: models.bm25.k1: ") and "is not a finite number. Fix: write a " \
        "finite number (YAML's .nan and .inf are not)." in str(err.value)
    nested = copy.deepcopy(BASE)
    nested["models"]["enc"] = {"type": "python", "factory": "m:f", "kwargs": {"scale": [1.0, float("nan")]}}
    with pytest.raises(ConfigError, match=r"models\.enc\.kwargs\.scale\[1\]: nan is not a finite number"):
        check(nested)
    del nested["models"]["enc"]
    nested["rerank"] = [{"run": "bm25", "reranker": "minilm", "depths": [float("inf")]}]
    with pytest.raises(ConfigError, match=r"rerank\[0\]\.depths\[0\]: inf is not a finite number"):
        check(nested)


def test_what_no_configuration_can_hold_is_refused_naming_the_key():
    cases = [
        ("models: {bm25: {type: bm25_lucene, top_k: 99999999999999999999999}}", r"models\.bm25\.top_k: the integer "
         r"99999999999999999999999 is beyond 64 bits"),
        ("models: {bm25: {type: bm25_lucene, description: &d [1, *d]}}", r"models\.bm25\.description\[1\]: the value "
         "contains itself"),
        ("models: {1: {type: bm25_lucene}}", r"models: the key 1 is not a string"),
        ("models: {bm25: {type: bm25_lucene, description: " + "[" * 70 + "]" * 70 + "}}",
         r"models\.bm25\.description(\[0\])+: values nested more than 64 levels deep"),
    ]
    for text, pattern in cases:
        cfg = {**copy.deepcopy(BASE), **yaml.safe_load(text)}
        with pytest.raises(ConfigError, match=pattern):
            check(cfg)


def test_a_message_never_prints_more_than_a_few_hundred_characters_of_a_value(tmp_path):
    cfg = copy.deepcopy(BASE)
    cfg["models"]["bm25"]["description"] = ["x" * 1000] * 5000  # 5 MB, within the value count
    cases = [(cfg, r"models\.bm25\.description: \['xxx")]
    for key, value in (("models_to_run", ["bm25" * 100_000]), ("benchmarks_to_run", ["nope" + "y" * 100_000])):
        cases.append(({**copy.deepcopy(BASE), key: value}, key))
    long_name = copy.deepcopy(BASE)
    long_name["models"]["m" * 5000] = {"type": "bm25_lucene"}
    cases.append((long_name, r"models: 'mmm.*'\.\.\. \(5,000 characters\) is longer than 100 characters"))
    long_repo = copy.deepcopy(BASE)
    long_repo["benchmarks"]["demo"]["tasks"]["demo"] = {"source": {"hf": "R2MED/" + "x" * 100_000}}
    cases.append((long_repo, r"source\.hf: 'R2MED/xxx.*is longer than 200 characters"))
    long_path = copy.deepcopy(BASE)
    long_path["benchmarks"]["demo"]["tasks"]["demo"]["path"] = "missing/" + "p" * 100_000
    cases.append((long_path, r"benchmarks\.demo\.tasks\.demo\.path: folder 'missing/ppp"))
    for cfg, pattern in cases:
        with pytest.raises(ConfigError, match=pattern) as err:
            config.check_paths(check(cfg), base=REPO)
        assert len(str(err.value)) < 700, str(err.value)[:1000]


def _message(mutate) -> str:
    cfg = copy.deepcopy(BASE)
    mutate(cfg)
    with pytest.raises(ConfigError) as err:
        checked = check(cfg)
        config.check_paths(checked, base=REPO)
        config.check_mteb_models(checked)
    return str(err.value)


FIX = "Fix: see schemas/config.schema.yaml and docs/configuration.md."


def test_did_you_mean_for_keys_types_and_names():
    """Issue 26: a misspelt key, type or name gets MTEB-style "did you mean" (difflib), in one bounded message."""
    assert _message(lambda c: c["models"]["bm25"].update(k3=1.0)) == (
        "config.yaml: unknown key 'models.bm25.k3'; did you mean 'k1'? (allowed here: b, description, enabled, k1, "
        f"paper_name, tags, top_k, type). {FIX}")
    assert _message(lambda c: c.update(modles={})) == (
        "config.yaml: unknown key 'modles'; did you mean 'models'? (allowed here: benchmarks, benchmarks_to_run, "
        f"cliniq_completion, fusion, leaderboard, llms, models, models_to_run, phi_servers, query_variants, report, "
        f"rerank). {FIX}")
    assert _message(lambda c: c["models"]["bm25"].update(type="bm25_lucen")) == (
        "config.yaml: models.bm25.type: 'bm25_lucen' is not one of 'bm25_lucene', 'dense', 'cross_encoder', "
        f"'bm25_paper', 'rankllama', 'run', 'python', 'mteb', 'llm_listwise', 'llm_pointwise'; did you mean "
        f"'bm25_lucene'? {FIX}")
    assert _message(lambda c: c.update(models_to_run=["bm52"])) == (
        "config.yaml: models_to_run names 'bm52', which is not in models; did you mean 'bm25'? (known: bm25, "
        "bm25-paper, minilm). Fix: add 'bm52' to models or remove it from models_to_run.")
    assert _message(lambda c: c["fusion"]["rrf-bm25-minilm"].update(runs=["bm25", "minlm"])) == (
        "config.yaml: fusion.rrf-bm25-minilm.runs names 'minlm', which is not a configured run; did you mean "
        "'minilm'? (known: bm25, bm25+hyde-handwritten, bm25--minilm@100, bm25-paper, minilm, "
        "minilm+hyde-handwritten). Fix: name retrievers in models or derived runs.")
    assert _message(lambda c: c.update(report={"baseline": "bm25-papr"})).startswith(
        "config.yaml: report.baseline names 'bm25-papr', which is not a configured run; did you mean 'bm25-paper'? ")
    # nothing close: no guess
    assert "did you mean" not in _message(lambda c: c.update(models_to_run=["splade"]))


def test_name_lists_in_messages_are_bounded():
    many = {f"bm25-{i:03d}": {"type": "bm25_lucene"} for i in range(500)}
    text = _message(lambda c: (c["models"].update(many), c.update(models_to_run=["bm25-9999"])))
    first = ", ".join(["bm25"] + [f"bm25-{i:03d}" for i in range(19)])
    assert text == (f"config.yaml: models_to_run names 'bm25-9999', which is not in models; did you mean 'bm25-499'? "
                    f"(known: {first}, ... (503 in all)). Fix: add 'bm25-9999' to models or remove it from "
                    "models_to_run.")


MTEB_TASKS = {"demo": "R2MEDBiologyRetrieval", "cliniq": "R2MEDBiologyRetrieval"}


def test_mteb_names_revisions_and_tasks_are_checked_while_planning():
    """Issue 26: MTEB's registry (offline) knows the name, revision and task; MTEB's own suggestion is passed on."""
    pytest.importorskip("mteb")

    def mteb_model(**spec):
        return lambda c: c["models"].update(e5={"type": "mteb", "mteb_tasks": MTEB_TASKS, **spec})

    assert _message(mteb_model(name="intfloat/multilingual-e5-smal")) == (
        "config.yaml: models.e5: MTEB does not know the model 'intfloat/multilingual-e5-smal' (Model "
        "'intfloat/multilingual-e5-smal' not found in MTEB registry. Did you mean: 'intfloat/multilingual-e5-small' "
        "or intfloat/multilingual-e5-base?). Fix: set models.e5.name to a model in MTEB's registry "
        "(mteb.get_model_meta), or use type: dense with source: {hf: <repo>} for a sentence-transformers model MTEB "
        "does not list.")
    assert _message(mteb_model(name="intfloat/multilingual-e5-small", revision="main")) == (
        "config.yaml: models.e5: MTEB does not know the model 'intfloat/multilingual-e5-small' at revision 'main' "
        "(Model revision main not found for model intfloat/multilingual-e5-small. Expected "
        "fd1525a9fd15316a2d503bf26ab031a61d056e98.). Fix: remove models.e5.revision to use the revision MTEB pins, "
        "or set it to that one.")
    tasks = {**MTEB_TASKS, "demo": "R2MEDBiologyRetrival"}
    assert _message(lambda c: c["models"].update(e5={"type": "mteb", "name": "intfloat/multilingual-e5-small",
                                                     "mteb_tasks": tasks})) == (
        "config.yaml: models.e5: MTEB does not know the task 'R2MEDBiologyRetrival' ('R2MEDBiologyRetrival' not "
        "found. Did you mean: 'R2MEDBiologyRetrieval'?). Fix: set models.e5.mteb_tasks to MTEB retrieval task names.")
    # a known name at MTEB's revision passes; a model that is not selected is not checked
    cfg = copy.deepcopy(BASE)
    cfg["models"]["e5"] = {"type": "mteb", "name": "intfloat/multilingual-e5-small", "mteb_tasks": MTEB_TASKS,
                           "revision": "fd1525a9fd15316a2d503bf26ab031a61d056e98"}
    cfg["models"]["off"] = {"type": "mteb", "name": "no/such-model", "enabled": False, "mteb_tasks": MTEB_TASKS}
    config.check_mteb_models(check(cfg))

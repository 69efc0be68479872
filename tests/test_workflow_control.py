"""The control layer (r2med_eval.workflow) without Snakemake: registry, paths, params, code hashes, config."""
import copy
import os
import shutil
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO

from r2med_eval.workflow import config, paths
from r2med_eval.workflow.code import CodeIndex
from r2med_eval.workflow.control import Workflow
from r2med_eval.workflow.params import MODEL_KEYS
from r2med_eval.workflow.registry import Registry, job_benchmark_files, parse_rerank_name, rerank_name, variant_name

BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def load(*fragments, **overrides):
    raw = copy.deepcopy(BASE)
    for name in fragments:
        extra = yaml.safe_load((REPO / "config" / name).read_text())
        for key, value in extra.items():
            raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    raw.update(overrides)
    return config.validate(raw)


def wc(**kw):
    return SimpleNamespace(**kw)


# ---------------------------------------------------------------- config: defaults from the schema at every depth


def test_defaults_are_filled_at_every_depth_from_the_schema():
    cfg = load()
    minilm = cfg["models"]["minilm"]
    assert minilm["index"] == {"kind": "flat", "nprobe": 16, "max_train": 131072, "m": 32, "ef_construction": 200,
                               "ef_search": 256, "seed": 0}
    assert minilm["shards"] == 1 and minilm["embedding_dtype"] == "float32"
    assert cfg["rerank"][0]["depths"] == [100] and cfg["fusion"]["rrf-bm25-minilm"]["k"] == 60
    assert cfg["report"]["permutations"] == 10000 and cfg["leaderboard"]["metric"] == "ndcg_at_10"
    # CliniQ's defaults only where layout is cliniq
    assert cfg["benchmarks"]["cliniq-demo"]["pool_depth"] == 10
    assert cfg["benchmarks"]["cliniq-demo"]["annotations"]["download"] is False
    assert "pool_depth" not in cfg["benchmarks"]["demo"] and "annotations" not in cfg["benchmarks"]["demo"]
    # a Hub source gets its revision default; a nested default inside a default object too
    ce = load("rerankers.yaml")["models"]["bge-reranker-v2-m3"]
    assert ce["source"]["revision"] and ce["batch_size"] == config.schema_default("cross_encoder", "batch_size")
    # no default is written outside the schema: with_defaults gives the same entry as validation
    assert config.with_defaults("dense", BASE["models"]["minilm"]) == minilm


def test_schema_defaults_are_the_only_defaults():
    """The package's code reads config keys with [key], never .get(key, default)."""
    import re

    pattern = re.compile(r"spec\.get\(\"(\w+)\", [^)]")
    offenders = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in (REPO / "src" / "r2med_eval" / "stages").glob("*.py")
                 for m in pattern.finditer(p.read_text())]
    assert offenders == []


# ---------------------------------------------------------------- registry


def test_run_names_are_built_and_parsed_in_one_place():
    assert variant_name("bm25", "hyde", "gpt4") == "bm25+hyde-gpt4"
    name = rerank_name("bm25+hyde-gpt4", "bge-rr", 100)
    assert parse_rerank_name(name) == {"run": "bm25+hyde-gpt4", "reranker": "bge-rr", "depth": 100}
    assert parse_rerank_name("bm25") is None


def test_registry_selection_and_lineage():
    reg = Registry(load())
    assert reg.benchmarks == ["demo", "cliniq-demo"]
    assert reg.retrievers == ["bm25", "bm25-paper", "minilm"]
    assert reg.runs_of("cliniq-demo") == ["bm25", "bm25-paper", "minilm", "bm25--minilm@100", "rrf-bm25-minilm"]
    assert "minilm+hyde-handwritten" in reg.runs_of("demo")
    assert reg.encoders() == ["minilm"]
    assert reg.root_types("rrf-bm25-minilm") == {"bm25_lucene", "dense"}
    assert reg.root_types("bm25--minilm@100") == {"bm25_lucene"}
    assert reg.model_of("minilm+hyde-handwritten") == "minilm"
    assert reg.rerank_lineage("demo") == {"bm25--minilm@100": {"run": "bm25", "reranker": "minilm", "depth": 100}}


def test_a_rerank_needs_its_reranker_selected():
    """models_to_run=[bm25, bm25-paper] with the R2MED config: no MiniLM anywhere."""
    reg = Registry(load("r2med.yaml", models_to_run=["bm25", "bm25-paper"]))
    assert reg.encoders() == [] and reg.retriever_runs("dense") == []
    assert "bm25--minilm@100" in reg.skipped and "rrf-bm25-minilm" in reg.skipped
    reg = Registry(load("r2med.yaml", models_to_run=["bm25", "bm25-paper", "minilm"]))
    assert reg.skipped == []


def test_derived_runs_in_any_order():
    """A rerank of a fusion declared after it, a fusion of reranks: resolved to a fixed point."""
    raw = copy.deepcopy(BASE)
    raw["rerank"] = [{"run": "rrf-bm25-minilm", "reranker": "minilm", "depths": [10]}]
    raw["fusion"]["f2"] = {"method": "rrf", "runs": ["rrf-bm25-minilm--minilm@10", "bm25"]}
    reg = Registry(config.validate(raw))
    assert list(reg.derived) == ["rrf-bm25-minilm--minilm@10", "rrf-bm25-minilm", "f2"]
    assert reg.runs_of("demo")[-3:] == ["rrf-bm25-minilm--minilm@10", "rrf-bm25-minilm", "f2"]


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize("name", [n for n in dir(paths) if n.isupper() and isinstance(getattr(paths, n), str)])
def test_every_pattern_round_trips(name):
    pattern = getattr(paths, name)
    keys = sorted(set(__import__("re").findall(r"\{(\w+)\}", pattern)))
    values = {k: "png" if k == "ext" else f"{k}-x.1" for k in keys}  # names may hold dots, extensions not
    path = paths.fill(pattern, **values)
    assert paths.parse(pattern, path) == values
    assert paths.parse(pattern, "/some/where/" + path) == values
    assert paths.partial(pattern) == pattern


def test_rule_log_and_benchmark_files_come_from_one_table():
    smk = "".join(p.read_text() for p in (REPO / "rules").glob("*.smk"))
    for rule in paths.JOB_KEYS:
        assert f'paths.log_file("{rule}")' in smk and f'paths.benchmark_file("{rule}")' in smk, rule
    assert set(CodeIndex().rules()) == set(paths.JOB_KEYS)


def test_common_smk_only_delegates():
    lines = (REPO / "rules" / "common.smk").read_text().splitlines()
    assert len(lines) <= 150
    for rules_file in (REPO / "rules").glob("*.smk"):
        assert "lambda" not in rules_file.read_text(), rules_file.name


# ---------------------------------------------------------------- params: exactly what shapes an output


def all_params(cfg):
    """Every rule's params for every job of this configuration (wildcards from the registry)."""
    w = Workflow(cfg)
    reg = w.registry
    out = {}
    for b, t in reg.tasks:
        for rule in ("prepare_task", "lucene_index", "chunk_cliniq", "prepare_cliniq"):
            if (rule in ("chunk_cliniq", "prepare_cliniq")) == reg.is_cliniq(b):
                out[(rule, b, t)] = w.params.of(rule)(wc(benchmark=b, task=t))
        for m in reg.encoders():
            for rule in ("encode_corpus_shard", "encode_corpus", "encode_queries", "gather_embeddings"):
                out[(rule, b, t, m)] = w.params.of(rule)(wc(benchmark=b, task=t, model=m))
        for run in reg.runs_of(b):
            ww = wc(benchmark=b, task=t, model=run)
            out[("score_run", b, t, run)] = w.params.of("score_run")(ww)
            kind = (reg.derived.get(run) or {}).get("kind")
            if kind == "rerank":
                out[("rerank_run", b, t, run)] = w.params.of("rerank_run")(ww)
            elif kind == "fusion":
                out[("fuse_runs", b, t, run)] = w.params.of("fuse_runs")(ww)
            else:
                rule = {"bm25_lucene": "retrieve_bm25_lucene", "bm25_paper": "retrieve_bm25_paper",
                        "dense": "retrieve_dense"}[cfg["models"][reg.model_of(run)]["type"]]
                out[(rule, b, t, run)] = w.params.of(rule)(ww)
    for b in reg.benchmarks:
        for rule in ("collect_metrics", "leaderboard_benchmark", "plot_leaderboard", "plot_rerank_depth",
                     "plot_scatter"):
            if rule != "plot_scatter" or reg.scatter_runs(b):
                out[(rule, b)] = w.params.of(rule)(wc(benchmark=b))
    for rule in ("significance", "leaderboard", "provenance", "r2med_vs_paper"):
        out[(rule,)] = w.params.of(rule)(wc())
    return out


def test_descriptions_and_comments_change_no_params():
    before = all_params(load())
    raw = copy.deepcopy(BASE)
    for model in raw["models"].values():
        model["description"] = "edited: " + model.get("description", "")
    assert all_params(config.validate(raw)) == before


def test_a_model_change_reaches_its_branch_only():
    before = all_params(load())
    raw = copy.deepcopy(BASE)
    raw["models"]["bm25"]["k1"] = 1.2
    after = all_params(config.validate(raw))
    changed = {k for k in before if before[k] != after[k]}
    bm25_runs = {("retrieve_bm25_lucene", "demo", "demo", "bm25"),
                 ("retrieve_bm25_lucene", "cliniq-demo", "cliniq", "bm25"),
                 ("retrieve_bm25_lucene", "demo", "demo", "bm25+hyde-handwritten")}
    assert changed == bm25_runs | {("provenance",)}  # provenance records the branch of every run
    # a prompt for one task leaves the other tasks' embeddings alone
    raw = copy.deepcopy(BASE)
    raw["models"]["minilm"]["task_prompts"] = {"demo": {"query": "query: "}}
    after = all_params(config.validate(raw))
    changed = {k[:4] for k in before if before[k] != after[k] and k[0].startswith("encode")}
    assert changed == {("encode_queries", "demo", "demo", "minilm")}


def test_every_model_key_is_classified():
    """A key in the schema that no rule projection names would silently not rerun anything."""
    schema = config.load_schema()
    for mtype, keys in MODEL_KEYS.items():
        assert set(keys) == set(schema["$defs"][mtype]["properties"]), mtype


def test_params_hold_no_checkout_path():
    text = repr(all_params(load()))
    assert str(REPO) not in text


# ---------------------------------------------------------------- code hashes


def test_code_closure_of_each_rule():
    code = CodeIndex()
    has_metrics = {r for r in code.rules() if "src/r2med_eval/scoring/metrics.py" in code.closure(r)[1]}
    assert has_metrics == {"score_run"}
    assert "data/reference/r2med_paper_ndcg10.tsv" in code.closure("r2med_vs_paper")[1]
    assert "data/reference/r2med_paper_ndcg10.tsv" not in code.closure("prepare_task")[1]
    # dense retrieval's three concerns: model adapters and encoding reach the encoding jobs, search the search job
    reaches = {m: {r for r in code.rules() if f"src/r2med_eval/dense/{m}.py" in code.closure(r)[1]}
               for m in ("models", "encode", "embeddings", "search")}
    encoding = {"encode_corpus", "encode_corpus_shard", "encode_queries", "encode_query_variant"}
    assert reaches["encode"] == encoding
    assert reaches["models"] == encoding | {"rerank_run", "provenance"}  # load_model, resolve_source
    assert reaches["search"] == {"retrieve_dense"}
    assert reaches["embeddings"] == encoding | {"gather_embeddings", "retrieve_dense", "rerank_run"}
    # the control layer reaches jobs through their paths and params, which Snakemake tracks itself
    assert not any("/workflow/" in f for r in code.rules() for f in code.closure(r)[1])


def test_code_hash_follows_an_edit_and_not_the_location(tmp_path):
    src = tmp_path / "a" / "src" / "r2med_eval"
    shutil.copytree(REPO / "src" / "r2med_eval", src, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data" / "reference", tmp_path / "a" / "data" / "reference")
    here = CodeIndex()
    there = CodeIndex(src, tmp_path / "a")
    assert {r: here.hash(r) for r in here.rules()} == {r: there.hash(r) for r in there.rules()}
    with open(src / "scoring" / "metrics.py", "a") as handle:
        handle.write("\n# an edit\n")
    edited = CodeIndex(src, tmp_path / "a")
    assert {r for r in here.rules() if here.hash(r) != edited.hash(r)} == {"score_run"}
    # a helper function of the same stage module counts, another rule's function does not
    stage = src / "stages" / "data.py"
    stage.write_text(stage.read_text().replace('"""A downloaded task\'s files', '"""The downloaded task\'s files'))
    edited = CodeIndex(src, tmp_path / "a")
    assert {r for r in here.rules() if here.hash(r) != edited.hash(r)} == {"score_run", "prepare_task"}
    # an edit to the search code reruns the searches, not the encoding
    with open(src / "dense" / "search.py", "a") as handle:
        handle.write("\n# an edit\n")
    searched = CodeIndex(src, tmp_path / "a")
    assert {r for r in here.rules() if edited.hash(r) != searched.hash(r)} == {"retrieve_dense"}


# ---------------------------------------------------------------- inputs, resources, constraints


def test_inputs_and_targets():
    w = Workflow(load())
    reg = w.registry
    assert w.inputs.rerank_run(wc(benchmark="demo", task="demo", model="bm25--minilm@100")) == {
        "run": "results/runs/demo/demo/bm25.trec", "queries": "results/data/demo/demo/queries.jsonl",
        "corpus": "results/data/demo/demo/corpus.jsonl", "emb": "results/embeddings/demo/demo/minilm/corpus.npy",
        "ids": "results/embeddings/demo/demo/minilm/corpus_ids.txt",
        "emb_info": "results/embeddings/demo/demo/minilm/corpus.json",
        "query_emb": "results/embeddings/demo/demo/minilm/queries.npy",
        "query_ids": "results/embeddings/demo/demo/minilm/queries_ids.txt"}
    dense = w.inputs.retrieve_dense(wc(benchmark="demo", task="demo", model="minilm+hyde-handwritten"))
    assert dense["query_emb"] == "results/embeddings/demo/demo/minilm/variants/hyde--handwritten.npy"
    assert "corpus" not in dense  # the id order is checked against the hash gather_embeddings stored
    targets = w.targets()
    assert len(targets) == len(set(targets))
    assert "results/plots/demo/rerank_depth.png" in targets and "results/cliniq/cliniq-demo/pool.tsv" in targets
    assert len(w.inputs.metric_files()) == sum(len(reg.runs_of(b)) for b, _ in reg.tasks)
    assert w.constraint("encoder") == "minilm" and w.constraint("rerank") == r"bm25\-\-minilm@100"
    assert w.constraint("source_task") == "(?!)"
    assert w.gar_methods() == "hyde|lamer|query2doc"
    files = job_benchmark_files(reg, "demo", "demo", "rrf-bm25-minilm")
    assert ("fuse_runs", "benchmarks/fuse_runs/demo/demo/rrf-bm25-minilm.tsv") in files


def test_resources_come_from_the_data(tmp_path):
    w = Workflow(load())
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"x" * 2**20 + b"\n")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("a\nb\n")
    inp = SimpleNamespace(corpus=str(corpus), queries=str(queries))
    first = w.resources.rerank_mem_mb(wc(model="bm25--minilm@100"), inp, 1)
    assert w.resources.rerank_mem_mb(wc(model="bm25--minilm@100"), inp, 2) == 2 * first
    assert w.resources.rerank_gpu(wc(model="bm25--minilm@100")) == 1  # minilm's device is auto
    assert w.resources.encoder_gpu(wc(model="minilm")) == 1
    assert w.resources.lucene_index_runtime(wc(), inp, 4, 1) >= 10


def test_layers_have_no_upward_import():
    """stages -> workflow -> library: no library module imports workflow or stages, workflow never stages."""
    code = CodeIndex()
    package = REPO / "src" / "r2med_eval"
    import ast

    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).with_suffix("")
        module = "r2med_eval." + ".".join(rel.parts).replace(".__init__", "")
        layer = rel.parts[0] if rel.parts[0] in ("workflow", "stages") else "library"
        deps = code._imports(module, ast.parse(path.read_text()))
        for dep in deps:
            parts = dep.split(".")
            dep_layer = parts[1] if len(parts) > 1 and parts[1] in ("workflow", "stages") else "library"
            allowed = {"library": {"library"}, "workflow": {"library", "workflow"},
                       "stages": {"library", "workflow", "stages"}}[layer]
            assert dep_layer in allowed, f"{module} imports {dep}"


def test_tune_gc_raises_the_thresholds_unless_asked_not_to():
    import gc

    from r2med_eval.workflow import control
    from r2med_eval.workflow.control import PLANNING_GC_THRESHOLDS, tune_gc

    before = gc.get_threshold()
    registered = []
    try:
        gc.set_threshold(700, 10, 10)
        assert tune_gc({"R2MED_EVAL_GC": "default"}, at_exit=registered.append) == (700, 10, 10)
        assert registered == []
        assert tune_gc({}, at_exit=registered.append) == PLANNING_GC_THRESHOLDS != (700, 10, 10)
        assert tune_gc({}, at_exit=registered.append) == PLANNING_GC_THRESHOLDS
        assert registered == [gc.freeze]  # once a process
    finally:
        gc.set_threshold(*before)
        control._FREEZE_AT_EXIT.clear()
    smk = (REPO / "rules" / "common.smk").read_text()
    assert "    tune_gc()\n" in smk  # the planning process calls it before loading the configuration


@pytest.mark.parametrize("setting, frozen", [("", True), ("default", False)])
def test_the_planning_process_freezes_its_objects_at_exit(tmp_path, setting, frozen):
    """The collection at shutdown is skipped (gc.freeze after the other atexit handlers that were registered later,
    before those registered earlier), unless R2MED_EVAL_GC=default; the handlers registered before tune_gc still
    run, and a file they write is complete."""
    import subprocess
    import sys

    out = tmp_path / "at_exit.txt"
    program = (
        "import atexit, gc, sys\n"
        f"sys.path.insert(0, {str(REPO / 'src')!r})\n"
        "def report():\n"
        f"    with open({str(out)!r}, 'w') as handle:\n"
        "        handle.write(f'frozen={gc.get_freeze_count()}')\n"
        "atexit.register(report)  # registered first: runs last, after the freeze\n"
        "from r2med_eval.workflow.control import tune_gc\n"
        "tune_gc()\n"
        "garbage = [[i] for i in range(1000)]\n"
    )
    env = {**os.environ, "R2MED_EVAL_GC": setting}
    proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    count = int(out.read_text().split("=")[1])
    assert (count > 1000) is frozen, count

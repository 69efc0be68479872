"""CliniQ's default figures equal an independent transcription of the official eval.py (tests/cliniq_eval_py.py)
on random full-depth runs with many tied scores, through the library and through the score_cliniq stage with
the default configuration's params; the retrievers rank the whole corpus on a CliniQ benchmark by default."""
import copy
import json
import random
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

import cliniq_eval_py as ref
from conftest import REPO
from r2med_eval import cliniq, runs
from r2med_eval.stages import score as score_stage
from r2med_eval.workflow import Workflow, config

SINGLE = ("mrr", "ndcg", "map")
MULTI = ("mrr", "ndcg_at_10_cliniq", "recall_at_100")


def random_benchmark(seed: int):
    """Notes with 1-14 chunks (ids whose string order is not the corpus order: HADM_IDs shuffled, chunk
    numbers past 9), similarities on a coarse grid (many ties), judgments with repeats and all five types."""
    rng = random.Random(seed)
    hadms = rng.sample(range(100000, 999999), 12)
    corpus_ids = [f"{h}_{i}" for h in hadms for i in range(rng.randint(1, 14))]
    splits, run, rows, qtypes = {}, {}, [], {}
    for split in ref.SPLITS:
        queries, qrel_rows, sims = [], [], {}
        for n in range(rng.randint(2, 5)):
            qid = str(rng.randint(0, 10**6))
            while qid in dict(queries):
                qid = str(rng.randint(0, 10**6))
            queries.append((qid, f"{split} query {n}"))
            # a coarse grid: 0, 0.25, ..., 1.25 (exact in binary and at 6 decimals), so scores tie often
            sims[qid] = np.array([rng.randint(0, 5) / 4 for _ in corpus_ids])
            for h in rng.sample(hadms, rng.randint(1, 3)):
                note = [c for c in corpus_ids if c.startswith(f"{h}_")]
                for c in rng.sample(note, rng.randint(1, len(note))):
                    for typ in rng.sample(ref.TYPES, rng.choice([1, 1, 2])):  # a chunk under two types: a repeat
                        qrel_rows.append((qid, c, typ))
            rng.shuffle(qrel_rows)
            full = f"{split}-{qid}"
            qtypes[full] = split
            run[full] = {c: float(s) for c, s in zip(corpus_ids, sims[qid])}
        rows += [(f"{split}-{q}", c, t) for q, c, t in qrel_rows]
        splits[split] = (queries, qrel_rows, sims)
    return corpus_ids, splits, run, rows, qtypes


def assert_equal_to_eval_py(result, expected):
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731
    for j, m in enumerate(MULTI):
        assert result["multi"]["all"][m] == pytest.approx(mean(expected["inter"][j]), abs=1e-12), m
        for split in ref.SPLITS:
            got = result["multi"]["by_query_type"][split][m]
            assert got == pytest.approx(mean(expected["per_split"][split]["inter"][j]), abs=1e-12), (split, m)
    assert result["single"]["all"]["n"] == len(expected["inner"]["overall"][0])
    for j, m in enumerate(SINGLE):
        assert result["single"]["all"][m] == pytest.approx(mean(expected["inner"]["overall"][j]), abs=1e-12), m
        for split in ref.SPLITS:
            got = result["single"]["by_query_type"][split][m]
            assert got == pytest.approx(mean(expected["per_split"][split]["inner"][j]), abs=1e-12, nan_ok=True)
        for typ in ref.TYPES:
            assert result["single"]["by_match_type"][typ]["n"] == len(expected["inner"][typ][0]), typ
            got = result["single"]["by_match_type"][typ][m]
            assert got == pytest.approx(mean(expected["inner"][typ][j]), abs=1e-12, nan_ok=True), (typ, m)


@pytest.mark.parametrize("seed", range(40))
def test_default_figures_equal_eval_py_with_ties(seed):
    corpus_ids, splits, run, rows, qtypes = random_benchmark(seed)
    expected = ref.evaluate(corpus_ids, splits)
    result = cliniq.evaluate(run, rows, qtypes, corpus_ids)
    assert result["counts"]["unranked_chunks"] == 0
    assert_equal_to_eval_py(result, expected)


def test_the_chunk_id_tie_order_differs_from_eval_py():
    """The option keeps the chunk-id order; with ties it does not give eval.py's figures (so the test above can
    fail on a wrong tie order)."""
    differs = 0
    for seed in range(10):
        corpus_ids, splits, run, rows, qtypes = random_benchmark(seed)
        expected = ref.evaluate(corpus_ids, splits)
        result = cliniq.evaluate(run, rows, qtypes, corpus_ids, tie_order="doc_id")
        try:
            assert_equal_to_eval_py(result, expected)
        except AssertionError:
            differs += 1
    assert differs >= 8
    with pytest.raises(ValueError, match="tie_order"):
        cliniq.evaluate({}, [], {}, [], tie_order="score")


def test_ranking_of_is_a_stable_argsort_over_the_corpus():
    rng = np.random.default_rng(0)
    ids = [f"{h}_{i}" for h in (7, 3, 5) for i in range(12)]
    for _ in range(50):
        sims = rng.integers(0, 4, len(ids)) / 2
        position = {c: i for i, c in enumerate(ids)}
        expected = [ids[i] for i in np.argsort(-sims, kind="stable")]
        assert cliniq.ranking_of(dict(zip(ids, sims)), position) == expected


def default_workflow():
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    return Workflow(config.validate(copy.deepcopy(raw)))


def test_cliniq_defaults_rank_the_whole_corpus_and_score_ties_in_corpus_order():
    w = default_workflow()
    bench = w.registry.cfg["benchmarks"]["cliniq-demo"]
    assert bench["depth"] == "full" and bench["tie_order"] == "corpus"
    for rule, model in (("retrieve_bm25_lucene", "bm25"), ("retrieve_dense", "minilm")):
        assert w.params.of(rule)(SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model=model))["top_k"] is None
        # elsewhere the model's top_k
        assert w.params.of(rule)(SimpleNamespace(benchmark="demo", task="demo", model=model))["top_k"] == \
            w.registry.cfg["models"][model]["top_k"]
    spec = w.params.of("score_cliniq")(SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model="bm25"))
    assert spec["tie_order"] == "corpus"
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["benchmarks"]["cliniq-demo"].update(depth="top_k", tie_order="doc_id")
    w2 = Workflow(config.validate(raw))
    assert w2.params.of("retrieve_dense")(SimpleNamespace(benchmark="cliniq-demo", task="cliniq",
                                                          model="minilm"))["top_k"] == w2.registry.cfg["models"]["minilm"]["top_k"]
    assert w2.params.of("score_cliniq")(SimpleNamespace(benchmark="cliniq-demo", task="cliniq",
                                                        model="bm25"))["tie_order"] == "doc_id"


def test_score_cliniq_stage_with_default_params_equals_eval_py(tmp_path):
    """The stage reads a full-depth run file (written as the retrievers write it: ties by chunk id in the file)
    and, with the default params, gives eval.py's figures."""
    corpus_ids, splits, run, rows, qtypes = random_benchmark(123)
    expected = ref.evaluate(corpus_ids, splits)
    runs.write_run(run, tmp_path / "run.trec", tag="m")
    (tmp_path / "qrels.tsv").write_text("".join(f"{q}\t{c}\t{t}\n" for q, c, t in rows))
    (tmp_path / "types.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in qtypes.items()))
    (tmp_path / "ids.txt").write_text("\n".join(corpus_ids) + "\n")
    w = default_workflow()
    wildcards = SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model="m")
    sm = SimpleNamespace(
        input=SimpleNamespace(run=str(tmp_path / "run.trec"), cliniq_qrels=str(tmp_path / "qrels.tsv"),
                              query_types=str(tmp_path / "types.tsv"), ids=str(tmp_path / "ids.txt")),
        output=SimpleNamespace(metrics=str(tmp_path / "out.json")), wildcards=wildcards,
        params=SimpleNamespace(spec=w.params.of("score_cliniq")(wildcards)))
    score_stage.score_cliniq(sm)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["tie_order"] == "corpus" and out["run_depth"] == len(corpus_ids)

    def rounded(x):  # the stage's JSON rounds to 6 decimals and writes NaN as null
        return x if x is None else round(x, 6)

    mean = lambda xs: rounded(float(np.mean(xs))) if xs else None  # noqa: E731
    for j, m in enumerate(MULTI):
        assert out["multi"]["all"][m] == pytest.approx(mean(expected["inter"][j]), abs=1e-9)
    for j, m in enumerate(SINGLE):
        assert out["single"]["all"][m] == pytest.approx(mean(expected["inner"]["overall"][j]), abs=1e-9)
        for typ in ref.TYPES:
            assert out["single"]["by_match_type"][typ][m] == pytest.approx(mean(expected["inner"][typ][j]), abs=1e-9)


def test_the_pool_ranks_ties_as_the_scoring_does():
    ids = ["9_0", "9_1", "10_0", "10_1"]  # corpus order is not the id order
    run = {"q": {c: 1.0 for c in ids}}
    position = {c: i for i, c in enumerate(ids)}
    assert [p["chunk_id"] for p in cliniq.pool({"m": run}, {"q": set()}, 2, position=position)] == ["9_0", "9_1"]
    assert [p["chunk_id"] for p in cliniq.pool({"m": run}, {"q": set()}, 2)] == ["10_0", "10_1"]

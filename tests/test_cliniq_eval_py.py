"""CliniQ's figures against an independent transcription of the official eval.py (tests/cliniq_eval_py.py).

* Dense runs (the default ``tie_order: evalpy``): the retrieve_dense stage ranks the cached embeddings as eval.py
  does (scikit-learn's cosine, ``np.argsort(-sim)`` with numpy's default kind) and the score_cliniq stage keeps
  that order: rankings and figures equal eval.py's on embeddings with many exactly tied similarities, and differ
  from a stable order there (so the test can fail).
* Runs without eval.py's similarities (BM25, imported, fused, reranked): equal scores in corpus order, which is
  eval.py's scoring with a *stable* argsort; random full-depth runs with many ties, through the library and the
  stage with the default configuration's params.
"""
import copy
import itertools
import json
import random
from types import SimpleNamespace

import cliniq_eval_py as ref
import numpy as np
import pytest
import yaml
from conftest import REPO, fingerprint_file

from r2med_eval.cliniq import metrics as cliniq
from r2med_eval.dense import embeddings
from r2med_eval.dense import search as dense_search
from r2med_eval.scoring import identity, runs
from r2med_eval.stages import retrieve as retrieve_stage
from r2med_eval.stages import score as score_stage
from r2med_eval.workflow import config
from r2med_eval.workflow.control import Workflow

SINGLE = ("mrr", "ndcg", "map")
MULTI = ("mrr", "ndcg_at_10_cliniq", "recall_at_100")


def random_layout(rng):
    """Notes with 1-14 chunks (ids whose string order is not the corpus order: HADM_IDs shuffled, chunk numbers
    past 9), 2-5 queries per split, judgments with repeats and all five types."""
    hadms = rng.sample(range(100000, 999999), 12)
    corpus_ids = [f"{h}_{i}" for h in hadms for i in range(rng.randint(1, 14))]
    splits = {}
    for split in ref.SPLITS:
        queries, qrel_rows = [], []
        for n in range(rng.randint(2, 5)):
            qid = str(rng.randint(0, 10**6))
            while qid in dict(queries):
                qid = str(rng.randint(0, 10**6))
            queries.append((qid, f"{split} query {n}"))
            for h in rng.sample(hadms, rng.randint(1, 3)):
                note = [c for c in corpus_ids if c.startswith(f"{h}_")]
                for c in rng.sample(note, rng.randint(1, len(note))):
                    for typ in rng.sample(ref.TYPES, rng.choice([1, 1, 2])):  # a chunk under two types: a repeat
                        qrel_rows.append((qid, c, typ))
            rng.shuffle(qrel_rows)
        splits[split] = (queries, qrel_rows)
    return corpus_ids, splits


def ours_inputs(splits):
    """Our judgments and query types (query ids ``{split}-{id}``)."""
    rows = [(f"{s}-{q}", c, t) for s, (_, qrel_rows) in splits.items() for q, c, t in qrel_rows]
    qtypes = {f"{s}-{q}": s for s, (queries, _) in splits.items() for q, _ in queries}
    return rows, qtypes


def random_benchmark(seed: int):
    """Scores on a coarse grid (0, 0.25, ..., 1, exact in binary and at 6 decimals), so scores tie often."""
    rng = random.Random(seed)
    corpus_ids, layout = random_layout(rng)
    splits, run = {}, {}
    for split, (queries, qrel_rows) in layout.items():
        sims = {qid: np.array([rng.randint(0, 4) / 4 for _ in corpus_ids]) for qid, _ in queries}
        run.update({f"{split}-{qid}": {c: float(s) for c, s in zip(corpus_ids, sims[qid])} for qid, _ in queries})
        splits[split] = (queries, qrel_rows, sims)
    rows, qtypes = ours_inputs(layout)
    return corpus_ids, splits, run, rows, qtypes


def embedded_benchmark(seed: int, dim: int = 16):
    """Float32 embeddings whose cosines tie exactly: most rows have four entries of +-1 (norm 2, so the normalised
    entries are +-0.5 and every dot product is exact whatever the summation order), some are zero (scikit-learn
    leaves them zero), some are random. Queries have four +-1 entries."""
    rng = random.Random(seed)
    corpus_ids, layout = random_layout(rng)

    def sparse_sign(r):
        v = np.zeros(dim, dtype=np.float32)
        v[r.sample(range(dim), 4)] = [r.choice((-1.0, 1.0)) for _ in range(4)]
        return v

    pool = [sparse_sign(rng) for _ in range(5)]
    rows = []
    for _ in corpus_ids:
        kind = rng.random()
        rows.append(np.zeros(dim, np.float32) if kind < 0.05 else
                    np.array([rng.gauss(0, 1) for _ in range(dim)], np.float32) if kind < 0.15 else rng.choice(pool))
    corpus_emb = np.stack(rows).astype(np.float32)
    query_emb = {f"{s}-{q}": sparse_sign(rng) for s, (queries, _) in layout.items() for q, _ in queries}
    rows, qtypes = ours_inputs(layout)
    return corpus_ids, layout, corpus_emb, query_emb, rows, qtypes


def eval_py(corpus_ids, layout, corpus_emb, query_emb, kind=None):
    """The transcription on the embeddings: eval.py's similarities, its ranking (``kind`` None: numpy's default)."""
    splits = {s: (queries, qrel_rows, {q: ref.similarities(query_emb[f"{s}-{q}"], corpus_emb) for q, _ in queries})
              for s, (queries, qrel_rows) in layout.items()}
    return ref.evaluate(corpus_ids, splits, kind=kind)


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


def differs(result, expected) -> bool:
    try:
        assert_equal_to_eval_py(result, expected)
    except AssertionError:
        return True
    return False


def default_workflow():
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    return Workflow(config.validate(copy.deepcopy(raw)))


# ---------------------------------------------------------------- the transcription's two sort kinds


def test_numpy_default_argsort_does_not_keep_ties_in_corpus_order():
    """What makes tie_order evalpy necessary: on tied data eval.py's default argsort gives other figures than a
    stable one (the tests below that compare with the default kind would fail with a stable order)."""
    count = 0
    for seed in range(40):
        corpus_ids, splits, *_ = random_benchmark(seed)
        count += differs_runs(ref.evaluate(corpus_ids, splits), ref.evaluate(corpus_ids, splits, kind="stable"))
    assert count >= 30, count


def differs_runs(a, b) -> bool:
    return a["inter"] != b["inter"] or a["inner"] != b["inner"]


# ---------------------------------------------------------------- dense runs: eval.py's own order


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cosine_equals_scikit_learn_bit_for_bit(dtype):
    rng = np.random.default_rng(1)
    corpus = rng.standard_normal((300, 24)).astype(dtype)
    corpus[[3, 17]] = 0  # zero rows stay zero
    corpus[40] = 1e-9  # a norm below 10 machine epsilons (float32) is taken as 1
    normalized = dense_search.sklearn_normalize(corpus)
    for q in rng.standard_normal((20, 24)).astype(dtype):
        ours = (dense_search.sklearn_normalize(q[None, :]) @ normalized.T)[0]
        theirs = ref.similarities(q, corpus)
        assert ours.dtype == theirs.dtype == dtype
        assert np.array_equal(ours, theirs)


def write_embeddings(tmp_path, corpus_ids, corpus_emb, query_emb):
    """The cached embeddings as the encoding jobs leave them (corpus.npy, ids, corpus.json; queries)."""
    emb_dir = tmp_path / "emb"
    embeddings.write_gathered(corpus_ids, [{"rows": np.arange(len(corpus_ids)), "emb": corpus_emb}],
                              emb_dir / "corpus.npy", emb_dir / "corpus_ids.txt", "float32", emb_dir / "corpus.json")
    qids = sorted(query_emb)
    np.save(emb_dir / "queries.npy", np.stack([query_emb[q] for q in qids]).astype(np.float32))
    (emb_dir / "queries_ids.txt").write_text("\n".join(qids) + "\n")
    return SimpleNamespace(emb=str(emb_dir / "corpus.npy"), ids=str(emb_dir / "corpus_ids.txt"),
                           emb_info=str(emb_dir / "corpus.json"), query_emb=str(emb_dir / "queries.npy"),
                           query_ids=str(emb_dir / "queries_ids.txt"))


def run_stages(tmp_path, w, model, corpus_ids, corpus_emb, query_emb, rows, qtypes):
    """retrieve_dense, then score_cliniq, with the workflow's params for ``model`` on cliniq-demo."""
    wildcards = SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model=model)
    inputs = write_embeddings(tmp_path, corpus_ids, corpus_emb, query_emb)
    inputs.fingerprint = fingerprint_file(tmp_path, corpus_ids)
    sm = SimpleNamespace(input=inputs,
                         output=SimpleNamespace(run=str(tmp_path / "run.trec"), info=str(tmp_path / "info.json")),
                         params=SimpleNamespace(spec=w.params.of("retrieve_dense")(wildcards)), wildcards=wildcards,
                         threads=1)
    retrieve_stage.retrieve_dense(sm)
    return score(tmp_path, w, wildcards, corpus_ids, rows, qtypes)


def score(tmp_path, w, wildcards, corpus_ids, rows, qtypes):
    """The score_cliniq stage on ``tmp_path/run.trec`` with the workflow's params; its metrics JSON."""
    (tmp_path / "qrels.tsv").write_text("".join(f"{q}\t{c}\t{t}\n" for q, c, t in rows))
    (tmp_path / "types.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in qtypes.items()))
    (tmp_path / "chunk_ids.txt").write_text("\n".join(corpus_ids) + "\n")
    sm = SimpleNamespace(
        input=SimpleNamespace(run=str(tmp_path / "run.trec"), cliniq_qrels=str(tmp_path / "qrels.tsv"),
                              query_types=str(tmp_path / "types.tsv"), ids=str(tmp_path / "chunk_ids.txt")),
        output=SimpleNamespace(metrics=str(tmp_path / "out.json"), per_query=str(tmp_path / "by_match_type.tsv")),
        wildcards=wildcards,
        params=SimpleNamespace(spec=w.params.of("score_cliniq")(wildcards)))
    score_stage.score_cliniq(sm)
    return json.loads((tmp_path / "out.json").read_text())


def assert_stage_figures(out, expected):
    """The stage's JSON (6 decimals, NaN as null) against eval.py's overall and per match type figures."""
    rounded = lambda x: None if x is None else round(x, 6)  # noqa: E731
    mean = lambda xs: rounded(float(np.mean(xs))) if xs else None  # noqa: E731
    for j, m in enumerate(MULTI):
        assert out["multi"]["all"][m] == pytest.approx(mean(expected["inter"][j]), abs=1e-9)
    for j, m in enumerate(SINGLE):
        assert out["single"]["all"][m] == pytest.approx(mean(expected["inner"]["overall"][j]), abs=1e-9)
        for typ in ref.TYPES:
            assert out["single"]["by_match_type"][typ][m] == pytest.approx(mean(expected["inner"][typ][j]), abs=1e-9)


def file_rankings(path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in open(path):
        q, _, d, rank, _, _ = line.split()
        out.setdefault(q, []).append(d)
        assert len(out[q]) == int(rank)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_dense_run_is_eval_py_bit_for_bit(tmp_path, seed):
    """The default configuration's dense run on a CliniQ benchmark: the run file holds eval.py's ranking of
    every query (the same chunk at every place) and the scoring gives eval.py's figures; a stable order of the
    same similarities gives other figures."""
    corpus_ids, layout, corpus_emb, query_emb, rows, qtypes = embedded_benchmark(seed)
    w = default_workflow()
    out = run_stages(tmp_path, w, "minilm", corpus_ids, corpus_emb, query_emb, rows, qtypes)
    assert out["tie_order"] == "evalpy" and out["run_depth"] == len(corpus_ids)
    assert json.loads((tmp_path / "info.json").read_text())["kind"] == "evalpy"
    ranked = file_rankings(tmp_path / "run.trec")
    for qid, q_emb in query_emb.items():
        assert ranked[qid] == ref.ranking(corpus_ids, ref.similarities(q_emb, corpus_emb)), qid
    expected = eval_py(corpus_ids, layout, corpus_emb, query_emb)
    result = cliniq.evaluate_ranked(cliniq.read_ranked_run(tmp_path / "run.trec", corpus_ids, "evalpy"), rows,
                                    qtypes, corpus_ids)
    assert_equal_to_eval_py(result, expected)
    assert_equal_to_eval_py(cliniq.evaluate(runs.read_run(tmp_path / "run.trec"), rows, qtypes, corpus_ids,
                                            tie_order="evalpy"), expected)
    assert_stage_figures(out, expected)
    # the corpus order of the same run (tie_order: corpus) is eval.py's scoring with a stable argsort
    stable = eval_py(corpus_ids, layout, corpus_emb, query_emb, kind="stable")
    assert_equal_to_eval_py(cliniq.evaluate(runs.read_run(tmp_path / "run.trec"), rows, qtypes, corpus_ids,
                                            tie_order="corpus"), stable)


@pytest.mark.parametrize("seed", range(3))
def test_evaluate_cliniq_gives_score_cliniqs_figures_on_a_tie_heavy_run(tmp_path, seed):
    """The API (docs/api.md) scores as rule score_cliniq does: a dense run's equal scores in eval.py's order (the
    default tie_order, from the run file or from a dict in eval.py's order), another run's in corpus order
    (tie_order corpus); every figure equal to the stage's."""
    import r2med_eval
    from r2med_eval.cliniq.files import clean_json  # as the stage writes its figures

    figures = ("multi", "single", "condensed", "judged_at_10")
    corpus_ids, layout, corpus_emb, query_emb, rows, qtypes = embedded_benchmark(seed)
    dense = run_stages(tmp_path, default_workflow(), "minilm", corpus_ids, corpus_emb, query_emb, rows, qtypes)
    assert dense["tie_order"] == "evalpy"
    for run in (tmp_path / "run.trec", runs.read_run(tmp_path / "run.trec")):
        got = clean_json(r2med_eval.evaluate_cliniq(run, rows, qtypes, corpus_ids))
        assert {k: got[k] for k in figures} == {k: dense[k] for k in figures}
    lexical = tmp_path / "lexical"
    lexical.mkdir()
    corpus_ids, _, run, rows, qtypes = random_benchmark(seed)
    runs.write_run(run, lexical / "run.trec", tag="bm25",
                   identity=identity.make("bm25", "cliniq-demo", "cliniq", identity.fingerprint(corpus_ids)))
    stage = score(lexical, default_workflow(), SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model="bm25"),
                  corpus_ids, rows, qtypes)
    assert stage["tie_order"] == "corpus"
    got = clean_json(r2med_eval.evaluate_cliniq(lexical / "run.trec", rows, qtypes, corpus_ids, tie_order="corpus"))
    assert {k: got[k] for k in figures} == {k: stage[k] for k in figures}
    other = clean_json(r2med_eval.evaluate_cliniq(lexical / "run.trec", rows, qtypes, corpus_ids))  # the file's order
    assert {k: other[k] for k in figures} != {k: stage[k] for k in figures}


def test_the_stable_order_differs_from_eval_py_on_tied_embeddings(tmp_path):
    """So the test above can fail: on most seeds eval.py's figures are not those of the corpus order."""
    count = 0
    for seed in range(8):
        corpus_ids, layout, corpus_emb, query_emb, rows, qtypes = embedded_benchmark(seed)
        count += differs_runs(eval_py(corpus_ids, layout, corpus_emb, query_emb),
                              eval_py(corpus_ids, layout, corpus_emb, query_emb, kind="stable"))
    assert count >= 6, count


def test_a_file_in_eval_py_order_is_read_back_in_that_order(tmp_path):
    """The run file holds eval.py's order; the pyarrow reader and the reference reader keep it, however the lines
    of the queries are interleaved, and only tie_order evalpy does."""
    run = {"q": {"b_1": 0.5, "a_0": 0.5, "c_2": 0.5, "a_1": 0.25}, "p": {"c_2": 1.0, "b_1": 1.0, "a_0": 0.0}}
    runs.write_run(run, tmp_path / "r.trec", tag="t", keep_order=True)
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert [ln.split()[2] for ln in lines if ln.startswith("q ")] == ["b_1", "a_0", "c_2", "a_1"]
    ids = ["a_0", "a_1", "b_1", "c_2"]
    for path in (tmp_path / "r.trec", tmp_path / "shuffled.trec"):
        if path.name == "shuffled.trec":
            qs, ps = [ln for ln in lines if ln.startswith("q ")], [ln for ln in lines if ln.startswith("p ")]
            mixed = [ln for pair in itertools.zip_longest(qs, ps) for ln in pair if ln]  # each query in its order
            path.write_text("\n".join(mixed) + "\n")
        ranked = cliniq.read_ranked_run(path, ids, "evalpy")
        assert [ranked.vocab[i] for i in ranked.ranking("q")] == ["b_1", "a_0", "c_2", "a_1"]
        assert [ranked.vocab[i] for i in ranked.ranking("p")] == ["c_2", "b_1", "a_0"]
        corpus = cliniq.read_ranked_run(path, ids, "corpus")
        assert [corpus.vocab[i] for i in corpus.ranking("q")] == ["a_0", "b_1", "c_2", "a_1"]
    with pytest.raises(ValueError, match="do not increase"):
        runs.write_run({"q": {"a": 0.1, "b": 0.2}}, tmp_path / "bad.trec", tag="t", keep_order=True)


# ---------------------------------------------------------------- runs without embeddings: the corpus order


@pytest.mark.parametrize("seed", range(40))
def test_corpus_order_is_eval_py_scoring_with_a_stable_argsort(seed):
    corpus_ids, splits, run, rows, qtypes = random_benchmark(seed)
    expected = ref.evaluate(corpus_ids, splits, kind="stable")
    result = cliniq.evaluate(run, rows, qtypes, corpus_ids, tie_order="corpus")
    assert result["counts"]["unranked_chunks"] == 0
    assert_equal_to_eval_py(result, expected)


def test_the_chunk_id_tie_order_differs_from_the_corpus_order():
    """The option keeps the chunk-id order; with ties it does not give the corpus order's figures (so the test
    above can fail on a wrong tie order)."""
    count = 0
    for seed in range(10):
        corpus_ids, splits, run, rows, qtypes = random_benchmark(seed)
        expected = ref.evaluate(corpus_ids, splits, kind="stable")
        count += differs(cliniq.evaluate(run, rows, qtypes, corpus_ids, tie_order="doc_id"), expected)
    assert count >= 8
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


def test_cliniq_defaults_rank_the_whole_corpus_dense_runs_as_eval_py():
    w = default_workflow()
    bench = w.registry.cfg["benchmarks"]["cliniq-demo"]
    assert bench["depth"] == "full" and bench["tie_order"] == "evalpy"
    wc = lambda model, benchmark="cliniq-demo", task="cliniq": SimpleNamespace(  # noqa: E731
        benchmark=benchmark, task=task, model=model)
    for rule, model in (("retrieve_bm25_lucene", "bm25"), ("retrieve_dense", "minilm")):
        assert w.params.of(rule)(wc(model))["top_k"] is None
        # elsewhere the model's top_k
        assert w.params.of(rule)(wc(model, "demo", "demo"))["top_k"] == w.registry.cfg["models"][model]["top_k"]
    assert w.params.of("retrieve_dense")(wc("minilm"))["ranking"] == "evalpy"
    assert "ranking" not in w.params.of("retrieve_dense")(wc("minilm", "demo", "demo"))  # R2MED runs: unchanged
    score = w.params.of("score_cliniq")
    orders = {m: score(wc(m))["tie_order"] for m in w.registry.runs_of("cliniq-demo")}
    assert orders["minilm"] == "evalpy" and orders["bm25"] == "corpus"
    assert set(orders.values()) == {"evalpy", "corpus"}
    assert all(o == "corpus" for m, o in orders.items() if m not in w.registry.retriever_runs("dense"))
    assert w.params.of("report_cliniq")(wc(None))["tie_orders"] == orders
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["benchmarks"]["cliniq-demo"].update(depth="top_k", tie_order="doc_id")
    w2 = Workflow(config.validate(raw))
    assert w2.params.of("retrieve_dense")(wc("minilm"))["top_k"] == w2.registry.cfg["models"]["minilm"]["top_k"]
    assert "ranking" not in w2.params.of("retrieve_dense")(wc("minilm"))
    assert {w2.params.of("score_cliniq")(wc(m))["tie_order"] for m in ("bm25", "minilm")} == {"doc_id"}


def test_score_cliniq_stage_with_default_params_ranks_a_bm25_run_in_corpus_order(tmp_path):
    """The stage reads a full-depth BM25-like run file (ties by chunk id in the file) and, with the default
    params, gives eval.py's scoring with a stable argsort."""
    corpus_ids, splits, run, rows, qtypes = random_benchmark(123)
    expected = ref.evaluate(corpus_ids, splits, kind="stable")
    runs.write_run(run, tmp_path / "run.trec", tag="bm25",
                   identity=identity.make("bm25", "cliniq-demo", "cliniq", identity.fingerprint(corpus_ids)))
    out = score(tmp_path, default_workflow(), SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model="bm25"),
                corpus_ids, rows, qtypes)
    assert out["tie_order"] == "corpus" and out["run_depth"] == len(corpus_ids)
    assert_stage_figures(out, expected)


def test_the_pool_ranks_ties_as_the_scoring_does():
    ids = ["9_0", "9_1", "10_0", "10_1"]  # corpus order is not the id order
    run = {"q": {"10_1": 1.0, "9_1": 1.0, "10_0": 1.0, "9_0": 1.0}}  # the file's order (evalpy)
    position = {c: i for i, c in enumerate(ids)}
    assert [p["chunk_id"] for p in cliniq.pool({"m": run}, {"q": set()}, 2, position=position)] == ["9_0", "9_1"]
    assert [p["chunk_id"] for p in cliniq.pool({"m": run}, {"q": set()}, 2)] == ["10_0", "10_1"]
    assert [p["chunk_id"] for p in cliniq.pool({"m": run}, {"q": set()}, 2, position=position,
                                               in_order={"m"})] == ["10_1", "9_1"]

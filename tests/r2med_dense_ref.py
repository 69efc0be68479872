"""An independent transcription of R2MED's dense retrieval (github.com/R2MED/R2MED at 62b7074), written for the
tests from reading its code; it imports nothing of r2med_eval.

* ``src/utils.py``: the wrappers' ``encode`` (FlagDRESModel/HighScaleModel "Base" and "BMR", their pooling
  methods, BiEncoderModel's article encoder, InstructorModel, NVEmbedModel) and ``encode_queries`` for
  query variants: ``[text, hy_doc]`` pairs encoded and averaged as the wrapper returns them;
* gritlm's ``GritLM(mode="embedding").encode`` (GritModel);
* ``eval_retrieval.retrieval_by_dense``: BEIR's ``DenseRetrievalExactSearch`` (the corpus sorted longest first
  before ``encode_corpus``, ``cos_sim``, NaN scores set to -1, ``torch.topk`` of top_k + 1 per query, a heap of
  the top_k, the query's own id skipped) with top_k = 100, the largest of R2MED's k_values;
* trec_eval (pytrec_eval, as BEIR's evaluation calls it): each query's documents by score, stored as a C float,
  descending, equal scores by document id descending (``comp_sim_docno``: ``strcmp(ptr2->docno, ptr1->docno)``).
"""
import heapq

import numpy as np
import torch
import transformers

# ------------------------------------------------------------------ utils.py: FlagDRESModel / HighScaleModel

def pooling(method, last_hidden_state, attention_mask):
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
def encode(path, texts, *, mode, pooling_method, max_length, normalize=False, batch_size=3, tokenizer=None):
    """FlagDRESModel/HighScaleModel.encode: mode "Base" (tokenizer(padding, truncation, max_length), pooling,
    L2 when ``normalize_embeddings``) or "BMR" (truncate to max_length - 1 without padding, append the EOS id,
    tokenizer.pad, left padding with EOS when the tokenizer has no pad token; never normalised)."""
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
        emb = pooling(pooling_method, hidden, inputs["attention_mask"])
        if mode == "Base" and normalize:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        out.append(emb.numpy())
    return np.concatenate(out)


@torch.no_grad()
def medcpt_docs(path, texts, *, max_length, batch_size=3):
    """BiEncoderModel.encode(encode_mode="doc"): the pair ("", text), truncation longest_first, CLS, raw."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    out = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        inputs = tokenizer(["" for _ in batch], batch, padding=True, truncation="longest_first",
                           return_tensors="pt", max_length=max_length)
        out.append(model(**inputs).last_hidden_state[:, 0, :].numpy())
    return np.concatenate(out)


def llama_tokenizer_4_44(path):
    """The tokenizer R2MED's transformers 4.44.2 loads for a checkpoint whose tokenizer_config.json names
    LlamaTokenizer (e5-mistral-7b-instruct, SFR-Embedding-Mistral): LlamaTokenizerFast, whose ``__init__`` calls
    ``update_post_processor``, which replaces tokenizer.json's post-processor by one built from the config's
    ``add_bos_token`` (default True) and ``add_eos_token`` (default False): ``<s>:0 $A:0 </s>:0`` when both are
    set. Left padding, the class default."""
    import json
    from pathlib import Path

    from tokenizers import processors

    config = json.loads((Path(path) / "tokenizer_config.json").read_text())
    bos, eos = config.get("bos_token", "<s>"), config.get("eos_token", "</s>")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(Path(path) / "tokenizer.json"), bos_token=bos,
                                               eos_token=eos, unk_token=config.get("unk_token", "<unk>"),
                                               padding_side="left")
    add_bos, add_eos = config.get("add_bos_token", True), config.get("add_eos_token", False)
    single = f"{(bos + ':0 ') if add_bos else ''}$A:0{(' ' + eos + ':0') if add_eos else ''}"
    pair = f"{single}{(' ' + bos + ':1') if add_bos else ''} $B:1{(' ' + eos + ':1') if add_eos else ''}"
    special = ([(bos, tok.convert_tokens_to_ids(bos))] if add_bos else []) + \
        ([(eos, tok.convert_tokens_to_ids(eos))] if add_eos else [])
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(single=single, pair=pair,
                                                                         special_tokens=special)
    return tok


# ------------------------------------------------------------------ utils.py: InstructorModel, NVEmbedModel; gritlm

@torch.no_grad()
def instructor(path, instruction, texts, *, max_length):
    """InstructorModel: SentenceTransformer(path), set_pooling_include_prompt(False),
    encode(texts, prompt=instruction, normalize_embeddings=True) (R2MED keeps the checkpoint's
    max_seq_length; the tests set it to their small max_length on both sides)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu")
    model.set_pooling_include_prompt(False)
    model.max_seq_length = max_length
    return model.encode(texts, batch_size=3, prompt=instruction, normalize_embeddings=True)


@torch.no_grad()
def nv_embed(path, instruction, texts, *, max_length, batch_size=16):
    """NVEmbedModel: AutoModel.from_pretrained(trust_remote_code=True), model.encode(batch,
    instruction=prompt, max_length=self.max_length), then L2-normalisation (fp32 here: no GPU)."""
    model = transformers.AutoModel.from_pretrained(str(path), trust_remote_code=True).eval()
    out = []
    for start in range(0, len(texts), batch_size):
        emb = model.encode(texts[start:start + batch_size], instruction=instruction, max_length=max_length)
        out.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    return np.concatenate(out)


@torch.no_grad()
def gritlm_embedding_mode(path, instruction, texts, *, max_length, batch_size=64, bidirectional=True):
    """GritModel -> gritlm's GritLM(mode="embedding").encode(texts, instruction=..., max_length=...): tokenizer
    with right padding (pad = EOS when missing), instruction + text (embed_eos ""), truncation to max_length with
    the tokenizer's BOS, bidirectional attention (here: an explicit 4D padding-only mask, eager attention), the
    instruction's tokens (with the BOS) masked out, mean pooling (0/0 = NaN when nothing is left), L2."""
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
            pool[:, :len(tokenizer(instruction, padding=False, truncation=True,
                                   max_length=max_length)["input_ids"])] = 0
        s = torch.sum(hidden * pool.unsqueeze(-1).float(), dim=1)
        emb = s / pool.sum(dim=1, keepdim=True).float()
        out.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    return np.concatenate(out)


# ------------------------------------------------------------------ utils.py: encode_queries of a query variant

def encode_queries(encode_texts, queries, instruction, family):
    """A wrapper's ``encode_queries``. ``encode_texts(instruction, texts)`` is its ``encode`` (returning what the
    wrapper returns: raw or normalised). ``queries``: strings, or [text, hy_doc] pairs (HyDE, LameR, a reasoning
    LLM), whose two vectors are averaged as they are: ``(emb_base + emb_rewrite) / 2``. ``family`` "flag"
    (FlagDRESModel, HighScaleModel, BiEncoderModel): the instruction is a prefix of the base query only;
    "instructor" (InstructorModel, GritModel, NVEmbedModel): the instruction goes with both texts."""
    if isinstance(queries[0], str):
        return encode_texts(instruction, queries)
    base = encode_texts(instruction, [q[0] for q in queries])
    rewrite = encode_texts("" if family == "flag" else instruction, [q[1] for q in queries])
    return (base + rewrite) / 2


# ------------------------------------------------------------------ BEIR's exact search, trec_eval's order

def beir_corpus_order(texts):
    """DenseRetrievalExactSearch.search sorts the corpus by len(title + text), longest first (a stable sort), and
    hands it to encode_corpus in that order: the wrapper's batches are cut from it."""
    return sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)


def cos_sim(a, b):
    """beir.retrieval.search.dense.util.cos_sim: both sides L2-normalised (torch), then a matrix product."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    return torch.mm(torch.nn.functional.normalize(a, p=2, dim=1), torch.nn.functional.normalize(b, p=2, dim=1).T)


def exact_search(query_emb, query_ids, corpus_emb, corpus_ids, top_k=100):
    """DenseRetrievalExactSearch.search over one corpus chunk (R2MED's corpus_chunk_size is 100000)."""
    scores = cos_sim(query_emb, corpus_emb)
    scores[torch.isnan(scores)] = -1
    values, idx = torch.topk(scores, min(top_k + 1, len(scores[0])), dim=1, largest=True, sorted=False)
    results = {}
    for qi, qid in enumerate(query_ids):
        heap = []
        for j, score in zip(idx[qi].tolist(), values[qi].tolist()):
            if corpus_ids[j] != qid:
                if len(heap) < top_k:
                    heapq.heappush(heap, (score, corpus_ids[j]))
                else:
                    heapq.heappushpop(heap, (score, corpus_ids[j]))
        results[qid] = {d: s for s, d in heap}
    return results


def trec_eval_order(docs: dict) -> list:
    """A query's documents in trec_eval's order: score (as a C float) descending, then document id descending."""
    by_id = sorted(docs, reverse=True)
    return sorted(by_id, key=lambda d: -np.float32(docs[d]))

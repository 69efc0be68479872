"""Tiny randomly initialised checkpoints of the architecture classes R2MED's retrievers use, built and saved here
(no download): BERT (contriever, bge, MedCPT), GPT-NeoX / Gemma / Mistral decoders (BMRetriever, e5, SFR,
GritLM), an INSTRUCTOR-format T5 encoder, and a remote-code model with NV-Embed's ``encode`` interface. Each
builder takes the texts its tokenizer must cover (word-level tokenizers are trained on them)."""
from pathlib import Path

import torch
import transformers


def word_level(special: list[str], template: str | None, unk: str, texts):
    """A word-level tokenizer trained on ``texts`` (and its special tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(list(texts), trainers.WordLevelTrainer(special_tokens=special))
    if template:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[(t, tok.token_to_id(t)) for t in special if t in template])
    return tok


def vary_norms(model):
    """Random gains and shifts in every normalisation layer: freshly initialised (LayerNorm/RMSNorm with gain 1)
    every token's final state would have the same norm, which hides whether vectors are normalised."""
    for module in model.modules():
        if "Norm" in type(module).__name__:
            if getattr(module, "weight", None) is not None:
                module.weight.data.normal_(1.0, 0.5)
            if getattr(module, "bias", None) is not None:
                module.bias.data.normal_(0.0, 0.5)
    return model


def fast(tok, **special):
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def wordpiece(root: Path, texts, vocab_size: int):
    """A lower-casing WordPiece tokenizer trained on ``texts``, saved in ``root`` ([CLS] a [SEP] b [SEP])."""
    from tokenizers import BertWordPieceTokenizer

    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(list(texts), vocab_size=vocab_size, min_frequency=1)
    root.mkdir(parents=True, exist_ok=True)
    wp.save_model(str(root))
    # (vocab_file: all [UNK] in transformers 5)
    tokenizer = transformers.BertTokenizerFast(vocab=str(root / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(root)
    return tokenizer


# (hidden size, layers) of every checkpoint built here: heads of 16 dimensions, feed-forward twice the hidden size.
TINY = (32, 2)


def bert_config(vocab_size: int, max_positions: int, size=TINY, **extra):
    hidden, layers = size
    return transformers.BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                                   num_attention_heads=hidden // 16, intermediate_size=2 * hidden,
                                   max_position_embeddings=max_positions, type_vocab_size=2, **extra)


def bert_dir(root: Path, seed: int, texts, *, vocab_size: int = 400, max_positions: int = 64, size=TINY) -> Path:
    """A tiny BertModel with a WordPiece vocabulary trained here ([CLS] a [SEP] b [SEP], token types)."""
    tokenizer = wordpiece(root, texts, vocab_size)
    torch.manual_seed(seed)
    config = bert_config(tokenizer.vocab_size, max_positions, size, initializer_range=0.1)
    vary_norms(transformers.BertModel(config)).eval().save_pretrained(root)
    return root


def cross_encoder_dir(root: Path, kind: str, num_labels: int, seed: int, texts, *, vocab_size: int = 400,
                      max_positions: int = 64, size=TINY) -> Path:
    """A tiny cross-encoder with ``num_labels`` logits: ``bert`` (BertForSequenceClassification, a WordPiece
    vocabulary: MedCPT-Cross-Encoder, monoBERT) or ``xlm_roberta`` (XLMRobertaForSequenceClassification, a
    word-level vocabulary with RoBERTa's <s> a </s></s> b </s>: bge-reranker-v2-m3)."""
    torch.manual_seed(seed)
    if kind == "bert":
        tokenizer = wordpiece(root, texts, vocab_size)
        model = transformers.BertForSequenceClassification(
            bert_config(tokenizer.vocab_size, max_positions, size, num_labels=num_labels, initializer_range=0.5))
    else:
        from tokenizers import processors

        tok = word_level(["<s>", "<pad>", "</s>", "<unk>"], None, "<unk>", texts)
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
        tokenizer = fast(tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                         pad_token="<pad>", unk_token="<unk>")
        tokenizer.save_pretrained(root)
        config = transformers.XLMRobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=size[0],
                                               num_hidden_layers=size[1], num_attention_heads=size[0] // 16,
                                               intermediate_size=2 * size[0],
                                               max_position_embeddings=max_positions + 2, pad_token_id=1,
                                               num_labels=num_labels, initializer_range=0.5)
        model = transformers.XLMRobertaForSequenceClassification(config)
    model.eval().save_pretrained(root)
    return root


def rankllama_dirs(root: Path, seed: int = 0) -> tuple[Path, Path]:
    """A Llama-2-shaped causal LM (random), its tokenizer (Llama's: BOS before each segment; one token per
    character), and a LoRA adapter trained on nothing but given random non-zero weights, saved as RankLLaMA's is
    (task SEQ_CLS, the score head among the saved modules). Returns (base, adapter)."""
    import string

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification, LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    base, adapter = root / "llama-base", root / "rankllama-lora"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for ch in "▁" + string.ascii_letters + string.digits + string.punctuation:
        vocab.setdefault(ch, len(vocab))
    tokenizer = LlamaTokenizer(vocab=vocab, merges=[], add_bos_token=True)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).eval().save_pretrained(base)
    tokenizer.save_pretrained(base)
    seq = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    lora = LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, lora_dropout=0.0,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(seq, lora)
    torch.manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name or "score" in name:
                p.normal_(0.0, 0.3)
    model.save_pretrained(adapter)
    return base, adapter


def causal_dir(root: Path, kind: str, seed: int, texts, *, add_eos: bool = False, max_positions: int = 64,
               size=TINY) -> Path:
    """A tiny decoder (GPT-NeoX as BMRetriever-410M, Gemma as BMRetriever-2B, Mistral as e5/SFR/BMRetriever-7B/
    GritLM) with a word-level tokenizer: GPT-NeoX adds no special tokens and has no pad token; Gemma adds <bos>
    and pads with <pad>; Mistral adds <s> (and </s> when ``add_eos``) and has no pad token."""
    hidden, layers = size
    if kind == "gpt_neox":
        tok = fast(word_level(["<|endoftext|>", "<unk>"], None, "<unk>", texts), eos_token="<|endoftext|>",
                   unk_token="<unk>")
        config = transformers.GPTNeoXConfig(vocab_size=tok.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                                            num_attention_heads=hidden // 16, intermediate_size=2 * hidden,
                                            max_position_embeddings=max_positions, rotary_pct=0.5)
        cls = transformers.GPTNeoXModel
    elif kind == "gemma":
        tok = fast(word_level(["<pad>", "<eos>", "<bos>", "<unk>"], "<bos> $A", "<unk>", texts), bos_token="<bos>",
                   eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")
        config = transformers.GemmaConfig(vocab_size=tok.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                                          num_attention_heads=hidden // 16, num_key_value_heads=1, head_dim=16,
                                          intermediate_size=2 * hidden, max_position_embeddings=max_positions,
                                          pad_token_id=0)
        cls = transformers.GemmaModel
    else:
        tok = fast(word_level(["<unk>", "<s>", "</s>"], "<s> $A </s>" if add_eos else "<s> $A", "<unk>", texts),
                   bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        config = transformers.MistralConfig(vocab_size=tok.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                                            num_attention_heads=hidden // 16, num_key_value_heads=1, head_dim=16,
                                            intermediate_size=2 * hidden, max_position_embeddings=max_positions)
        cls = transformers.MistralModel
    torch.manual_seed(seed)
    vary_norms(cls(config)).eval().save_pretrained(root)
    tok.save_pretrained(root)
    return root


def instructor_dir(root: Path, seed: int, texts, *, size=TINY) -> Path:
    """A tiny INSTRUCTOR-format checkpoint: T5 encoder, mean Pooling, Dense (no bias, identity), Normalize,
    saved as sentence-transformers modules; its tokenizer ends every text with </s> as T5's does."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    hf = root / "hf"
    tok = fast(word_level(["<pad>", "</s>", "<unk>"], "$A </s>", "<unk>", texts), eos_token="</s>", pad_token="<pad>",
               unk_token="<unk>")
    torch.manual_seed(seed)
    hidden, layers = size
    config = transformers.T5Config(vocab_size=tok.vocab_size, d_model=hidden, d_kv=16, d_ff=2 * hidden,
                                   num_layers=layers, num_heads=hidden // 16, pad_token_id=0, eos_token_id=1,
                                   decoder_start_token_id=0)
    vary_norms(transformers.T5EncoderModel(config)).eval().save_pretrained(hf)
    tok.save_pretrained(hf)
    transformer = Transformer(str(hf))
    transformer.max_seq_length = 512
    torch.manual_seed(seed + 1)
    modules = [transformer, Pooling(hidden, pooling_mode="mean"),
               Dense(hidden, 24, bias=False, activation_function=torch.nn.Identity()), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(root / "st"))
    return root / "st"


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
        if getattr(self, "_tok", None) is None:  # loaded once, as NV-Embed keeps its tokenizer
            self._tok = AutoTokenizer.from_pretrained(self.config._name_or_path, trust_remote_code=True)
        tok = self._tok
        texts = [instruction + p + tok.eos_token for p in prompts]
        batch = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        mask = batch["attention_mask"].clone()
        n = len(tok(instruction)["input_ids"]) if instruction else 0
        mask[:, :n] = 0
        hidden = torch.tanh(self.mix(self.emb(batch["input_ids"])))
        return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
'''


def remote_code_dir(root: Path, seed: int, texts) -> Path:
    """A tiny model with remote code (config auto_map) whose ``encode`` has NV-Embed's interface."""
    import importlib.util
    import json

    from safetensors.torch import save_file

    root.mkdir(parents=True)
    (root / "configuration_tiny.py").write_text(NV_CONFIG)
    (root / "modeling_tiny.py").write_text(NV_MODEL)
    tok = fast(word_level(["<pad>", "</s>", "<unk>"], None, "<unk>", texts), eos_token="</s>", pad_token="<pad>",
               unk_token="<unk>")
    tok.save_pretrained(root)
    spec = importlib.util.spec_from_file_location("configuration_tiny", root / "configuration_tiny.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    weights = {"emb.weight": torch.randn(tok.vocab_size, 16), "mix.weight": torch.randn(16, 16),
               "mix.bias": torch.randn(16)}
    save_file(weights, str(root / "model.safetensors"))
    config = {"model_type": "tiny_embed_test", "vocab_size": tok.vocab_size, "hidden": 16,
              "architectures": ["TinyEmbedModel"],
              "auto_map": {"AutoConfig": "configuration_tiny.TinyEmbedConfig",
                           "AutoModel": "modeling_tiny.TinyEmbedModel"}}
    (root / "config.json").write_text(json.dumps(config))
    return root


# ------------------------------------------------------------------ decoders of the reasoning-intensive retrievers

BIDIRECTIONAL_QWEN2 = '''from transformers import Qwen2Model


class BidirectionalQwen2Model(Qwen2Model):
    """A stand-in for a checkpoint's own modeling code (gte-Qwen2 and RaDeR ship one): Qwen2 with bidirectional
    attention, so that loading it without the remote code gives other embeddings."""

    def __init__(self, config):
        config.is_causal = False
        super().__init__(config)
        for module in self.modules():
            if hasattr(module, "is_causal"):
                module.is_causal = False
'''


def byte_bpe(texts, special: list[str], template: str | None, vocab_size: int = 400):
    """A byte-level BPE tokenizer (Qwen's and Llama 3's kind) trained on ``texts``, its post-processor from
    ``template``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(list(texts), trainers.BpeTrainer(
        special_tokens=special, vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if template:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[(t, tok.token_to_id(t)) for t in special if t in template])
    return tok


def reasoning_decoder_dir(root: Path, kind: str, seed: int, texts, *, max_positions: int = 1024, size=TINY,
                          dtype=torch.float16) -> Path:
    """A tiny decoder of the kinds ReasonEmbed's R2MED table runs, with a byte-level BPE tokenizer:

    * ``qwen3`` (Qwen3-Embedding, DIVER, ReasonEmbed-Qwen3): Qwen3Model; the tokenizer (class Qwen2Tokenizer, as
      the checkpoints name it) appends ``<|endoftext|>``, pads with it on the left, EOS ``<|im_end|>``;
    * ``qwen2`` (gte-Qwen2, RaDeR): Qwen2Model behind remote code (``auto_map`` to a bidirectional subclass, as
      these checkpoints ship modeling code); the tokenizer appends ``<|endoftext|>`` and pads on the right;
    * ``llama`` (ReasonEmbed-Llama-3.1): LlamaModel; Llama 3's tokenizer (``<|begin_of_text|>`` first, nothing
      appended), padded with ``<|end_of_text|>`` on the right.

    The weights are stored in ``dtype``, float16 by default: FlagEmbedding loads them so (its use_fp16 default) before
    computing in float32 on a CPU, and the pipeline's fp32 reads them exactly."""
    import json

    hidden, layers = size
    common = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 16,
                  num_key_value_heads=1, head_dim=16, intermediate_size=2 * hidden,
                  max_position_embeddings=max_positions)
    if kind in ("qwen3", "qwen2"):
        tok = byte_bpe(texts, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "$A <|endoftext|>")
        eos = "<|im_end|>" if kind == "qwen3" else "<|endoftext|>"
        tokenizer = fast(tok, eos_token=eos, pad_token="<|endoftext|>",
                         padding_side="left" if kind == "qwen3" else "right")
        cfg_cls, model_cls = ((transformers.Qwen3Config, transformers.Qwen3Model) if kind == "qwen3" else
                              (transformers.Qwen2Config, transformers.Qwen2Model))
        config = cfg_cls(vocab_size=tokenizer.vocab_size + len(tokenizer.added_tokens_decoder), **common)
    else:
        tok = byte_bpe(texts, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], "<|begin_of_text|> $A")
        tokenizer = fast(tok, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>",
                         pad_token="<|end_of_text|>", padding_side="right")
        config = transformers.LlamaConfig(vocab_size=tokenizer.vocab_size + len(tokenizer.added_tokens_decoder),
                                          **common)
        model_cls = transformers.LlamaModel
    torch.manual_seed(seed)
    # stored in float16, as FlagEmbedding loads them (use_fp16): the same weights whichever dtype reads them
    vary_norms(model_cls(config)).eval().to(dtype).save_pretrained(root)
    tokenizer.save_pretrained(root)
    if kind.startswith("qwen"):  # the class the real checkpoints name (transformers 5 reads tokenizer.json as it is)
        path = root / "tokenizer_config.json"
        cfg = json.loads(path.read_text())
        path.write_text(json.dumps({**cfg, "tokenizer_class": "Qwen2Tokenizer"}))
    if kind == "qwen2":
        (root / "modeling_bidirectional.py").write_text(BIDIRECTIONAL_QWEN2)
        path = root / "config.json"
        cfg = json.loads(path.read_text())
        auto_map = {"AutoModel": "modeling_bidirectional.BidirectionalQwen2Model"}
        path.write_text(json.dumps({**cfg, "auto_map": auto_map}))
    return root


def sentence_transformer_dir(root: Path, seed: int, texts, *, include_prompt: bool, size=TINY) -> Path:
    """A sentence-transformers checkpoint standing in for ReasonIR-8B (whose remote code is not reachable offline): a
    tiny Llama (Llama 3's tokenizer) under mean Pooling with ``include_prompt`` as given, saved with modules.json."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    hf = reasoning_decoder_dir(root / "hf", "llama", seed, texts, size=size, dtype=torch.float32)  # "auto": fp32
    transformer = Transformer(str(hf))
    modules = [transformer, Pooling(size[0], pooling_mode="mean", include_prompt=include_prompt)]
    SentenceTransformer(modules=modules, device="cpu").save(str(root / "st"))
    return root / "st"

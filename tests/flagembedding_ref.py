"""ReasonEmbed's R2MED evaluation (github.com/VectorSpaceLab/agentic-search at b2f2e40, ReasonEmbed/evaluation_r2med/)
as the tests run it: FlagEmbedding 1.4.2's own code, and a transcription of the few lines of the authors' own.

* FlagEmbedding's modules are run, not transcribed: ``BaseLLMEmbedder`` (inference/embedder/decoder_only/base.py,
  over abc/inference/AbsEmbedder.py) and ``EvalDenseRetriever`` (abc/evaluation/searcher.py, with the FAISS
  ``index``/``search`` of abc/evaluation/utils.py). The package's ``__init__`` files are not executed: they import
  its rerankers, which need transformers 4. Each module is loaded from its file under its own dotted name, beneath
  empty stand-ins for the packages above it (FlagEmbedding 1.4.2 is installed with --no-deps by make setup,
  requirements-nodeps.txt).
* Transcribed from the authors' code (not a package): ``R2MED_INSTRUCTIONS`` (code/prompts.py, R2MEDInstructions);
  the scripts' embedder arguments (scripts/*/eval_*.sh: decoder-only-base, last_token, ``Instruct: {}\\nQuery: {}``,
  512 tokens both sides); the data loader's corpus, ``{"text": text}`` without a title (code/data_loader.py);
  ``ReasonIREncoder`` (code/reasonir_models.py: a SentenceTransformer with ``<|user|>\\n{instruction}\\n<|embed|>\\n``
  on queries and ``<|embed|>\\n`` on documents, normalised, 512 tokens).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np

# code/prompts.py, R2MEDInstructions: R2MED's instructions with a final period
R2MED_INSTRUCTIONS = {
    "Biology": "Given a Biology post, retrieve relevant passages that help answer the post.",
    "Medical-Sciences": "Given a Medical Science post, retrieve relevant passages that help answer the post.",
    "Bioinformatics": "Given a Bioinformatics post, retrieve relevant passages that help answer the post.",
    "MedXpertQA-Exam": "Given a Medical Exam, retrieve relevant passages that help answer the exam.",
    "MedQA-Diag": "Given a Medical Exam, retrieve relevant passages that help answer the exam.",
    "PMC-Treatment": "Given a Clinical Case, retrieve relevant passages that help answer the case.",
    "PMC-Clinical": "Given a Clinical Case, retrieve similar cases that help diagnose the case.",
    "IIYi-Clinical": "Given a Clinical Case, retrieve similar cases that help diagnose the case.",
}
QUERY_FORMAT = "Instruct: {}\nQuery: {}"  # --query_instruction_format_for_retrieval of every decoder-only script
SEARCH_TOP_K = 2000  # --search_top_k

MODULES = ("utils.tokenizer_compat", "abc.inference.AbsEmbedder", "abc.inference.AbsReranker",
           "inference.embedder.decoder_only.base", "abc.evaluation.utils", "abc.evaluation.searcher")


def _root() -> Path:
    spec = importlib.util.find_spec("FlagEmbedding")  # finds the package without running its __init__
    assert spec is not None and spec.submodule_search_locations, (
        "FlagEmbedding 1.4.2 is not installed: run `make setup` (it installs requirements-nodeps.txt with --no-deps)")
    return Path(list(spec.submodule_search_locations)[0])


def load() -> types.SimpleNamespace:
    """FlagEmbedding's embedder and searcher modules, loaded from their files (once per process)."""
    from importlib.metadata import version

    assert version("FlagEmbedding") == "1.4.2", version("FlagEmbedding")
    root = _root()
    if "FlagEmbedding.abc.evaluation.searcher" not in sys.modules:
        for dotted in MODULES:
            parts = dotted.split(".")
            for i in range(len(parts)):  # empty stand-ins for the packages, so their __init__ files never run
                name = ".".join(["FlagEmbedding", *parts[:i]])
                if name not in sys.modules:
                    package = types.ModuleType(name)
                    package.__path__ = [str(root.joinpath(*parts[:i]))]
                    package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
                    package.__spec__.submodule_search_locations = package.__path__
                    sys.modules[name] = package
            name = f"FlagEmbedding.{dotted}"
            spec = importlib.util.spec_from_file_location(name, root.joinpath(*parts).with_suffix(".py"))
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            parent = sys.modules[name.rsplit(".", 1)[0]]
            setattr(parent, parts[-1], module)
            for attr in ("AbsEmbedder", "AbsReranker"):  # what `from FlagEmbedding.abc.inference import X` needs
                if hasattr(module, attr) and parent.__name__ == "FlagEmbedding.abc.inference":
                    setattr(parent, attr, getattr(module, attr))
    get = sys.modules.get
    return types.SimpleNamespace(
        BaseLLMEmbedder=get("FlagEmbedding.inference.embedder.decoder_only.base").BaseLLMEmbedder,
        EvalDenseRetriever=get("FlagEmbedding.abc.evaluation.searcher").EvalDenseRetriever,
        files={d: str(root.joinpath(*d.split(".")).with_suffix(".py")) for d in MODULES})


def embedder(path, task: str, *, trust_remote_code: bool = False, batch_size: int = 256, max_length: int = 512):
    """The embedder of a decoder-only script (runner.get_models: FlagAutoModel.from_finetuned with the script's
    arguments), R2MEDInstructions[task] set as runner.run does with --use_special_instructions True. FlagAutoModel's
    ``decoder-only-base`` class is BaseLLMEmbedder; ``devices="cpu"`` (its fp16 default becomes fp32 there:
    encode_single_device calls ``model.float()`` on the CPU)."""
    fe = load()
    return fe.BaseLLMEmbedder(str(path), normalize_embeddings=True, use_fp16=True, pooling_method="last_token",
                              query_instruction_for_retrieval=R2MED_INSTRUCTIONS[task],
                              query_instruction_format=QUERY_FORMAT, devices="cpu",
                              trust_remote_code=trust_remote_code, batch_size=batch_size,
                              query_max_length=max_length, passage_max_length=max_length)


def r2med_corpus(docs: list[dict]) -> dict[str, dict]:
    """R2MEDEvalDataLoader's corpus: ``{"text": text}`` per document, the title (if any) dropped."""
    return {d["id"]: {"text": d["text"]} for d in docs}


def search(embedder_, docs: list[dict], queries: dict[str, str], top_k: int = SEARCH_TOP_K):
    """EvalDenseRetriever as the evaluator calls it (ignore_identical_ids=False, AbsEvalArgs' default): results
    {qid: {docid: score}}, plus the corpus and query embeddings its embedder returns for the same texts."""
    fe = load()
    retriever = fe.EvalDenseRetriever(embedder_, search_top_k=top_k)
    corpus = r2med_corpus(docs)
    results = retriever(corpus=corpus, queries=queries, ignore_identical_ids=False)
    d = np.asarray(embedder_.encode_corpus([c["text"] for c in corpus.values()]))
    q = np.asarray(embedder_.encode_queries(list(queries.values())))
    return results, d, q


class ReasonIREncoder:
    """code/reasonir_models.py, on one process (its MultiGPUModel pool only spreads batches over GPUs):
    ``SentenceTransformer(path, trust_remote_code=..., model_kwargs={"torch_dtype": "auto"})``; documents with
    the prompt ``<|embed|>\\n``, queries with ``<|user|>\\n{instruction}\\n<|embed|>\\n``; ``max_seq_length`` set to the
    side's length before each call; normalised (AbsEvalModelArgs.normalize_embeddings defaults to True)."""

    def __init__(self, path, instruction: str, *, trust_remote_code: bool = True, max_length: int = 512,
                 batch_size: int = 8):
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(path), trust_remote_code=trust_remote_code, device="cpu",
                                         model_kwargs={"dtype": "auto"})
        self.instruction, self.max_length, self.batch_size = instruction, max_length, batch_size

    def encode_corpus(self, texts):
        self.model.max_seq_length = self.max_length
        return self.model.encode(list(texts), prompt="<|embed|>\n", batch_size=self.batch_size,
                                 normalize_embeddings=True)

    def encode_queries(self, texts):
        self.model.max_seq_length = self.max_length
        return self.model.encode(list(texts), prompt=f"<|user|>\n{self.instruction}\n<|embed|>\n",
                                 batch_size=self.batch_size, normalize_embeddings=True)


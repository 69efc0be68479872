"""Fidelity of config/r2med_reasoning_models.yaml to ReasonEmbed's R2MED evaluation, proven by running its code.

For each entry under ReasonEmbed's protocol this builds a tiny randomly initialised model of the architecture the
checkpoint uses (tests/tiny_models.py: Qwen3 for Qwen3-Embedding, DIVER and ReasonEmbed-Qwen3; Qwen2 behind
remote code for gte-Qwen2 and RaDeR; Llama 3 for ReasonEmbed-Llama-3.1; Mistral with e5's tokenizer files for
e5-mistral) and compares, on an R2MED-layout task whose texts run past 512 tokens and where a query shares its id
with a document:

* ours: the entry as the workflow hands it to its jobs (``Params``' projections of a validated configuration: the
  task's prompt, the protocol's document text, depth and identical-id rule), through the jobs' own functions
  (``encode_corpus``, ``encode_queries``, the ``retrieve_dense`` and ``score_run`` stages);
* theirs: FlagEmbedding 1.4.2's own ``BaseLLMEmbedder`` and ``EvalDenseRetriever`` (loaded by tests/flagembedding_ref.py
  under this environment's transformers) with the script's arguments and ``R2MEDInstructions``, over the corpus
  R2MED's data loader builds; ReasonIR through the authors' ``ReasonIREncoder`` (transcribed) on a stand-in
  sentence-transformers model.

Equality: embeddings within 1e-5, and per query the same top 100 in trec_eval's order.
"""
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import flagembedding_ref as fe  # noqa: E402
import r2med_dense_ref as ref  # noqa: E402
from conftest import fingerprint_file, make_r2med  # noqa: E402
from tiny_models import causal_dir, reasoning_decoder_dir, sentence_transformer_dir  # noqa: E402

from r2med_eval.benchmarks import datasets  # noqa: E402
from r2med_eval.dense import encode as dense_encode  # noqa: E402
from r2med_eval.errors import InputError  # noqa: E402
from r2med_eval.scoring import identity  # noqa: E402
from r2med_eval.stages import retrieve, score  # noqa: E402
from r2med_eval.workflow import config  # noqa: E402
from r2med_eval.workflow.params import Params  # noqa: E402
from r2med_eval.workflow.registry import Registry  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ENTRIES = yaml.safe_load((REPO / "config" / "r2med_reasoning_models.yaml").read_text())["models"]
TASK = "PMC-Clinical"  # a patient-to-patient task: a query may be a document of the corpus
LONG = " ".join(["the patient presented with fever cough and joint pain after travel; blood cultures grew gram "
                 "negative rods and the fever resolved on ceftriaxone"] * 30)  # about 700 tokens: cut at 512
DOCS = [
    {"id": "p1", "text": "aspirin inhibits cyclooxygenase and platelet aggregation"},
    {"id": "p2", "text": "a woman with fever cough and joint pain after travel to a malaria region"},
    {"id": "p3", "text": LONG},
    {"id": "p4", "text": "insulin lowers blood glucose in muscle and fat"},
    {"id": "p5", "text": "gout is caused by urate crystals in the joints of the foot"},
    {"id": "p6", "text": "a child with bleeding gums and vitamin deficiency causing scurvy"},
    {"id": "p7", "text": "warfarin inhibits clotting factors"},
    {"id": "p8", "text": ""},  # R2MED keeps empty documents (empty_text: keep)
]


def _generated(n: int = 120) -> list[dict]:
    """More documents than R2MED's depth of 100, so that both depths cut: distinct texts of 3 to 12 words."""
    import random

    rng = random.Random(44)
    words = " ".join(d["text"] for d in DOCS[:3]).replace(";", "").replace(",", "").split()
    texts: dict[str, None] = {}
    while len(texts) < n:
        texts[" ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))] = None
    return [{"id": f"g{i:03d}", "text": t} for i, t in enumerate(texts)]


DOCS += _generated()
QUERIES = [
    {"id": "q1", "text": "fever cough and joint pain after travel, what is the diagnosis"},
    {"id": "p2", "text": "a woman with fever cough and joint pain after travel to a malaria region"},  # its own id
    {"id": "q3", "text": LONG + " what antibiotic"},
]
QRELS = [{"q_id": "q1", "p_id": "p2", "score": 1}, {"q_id": "p2", "p_id": "p3", "score": 1},
         {"q_id": "q3", "p_id": "p3", "score": 1}]
INSTRUCTION_TEXTS = [fe.QUERY_FORMAT.format(i, "") for i in fe.R2MED_INSTRUCTIONS.values()]
TEXTS = [d["text"] for d in DOCS] + [q["text"] for q in QUERIES] + INSTRUCTION_TEXTS + ["<|user|>\n<|embed|>\n"] * 3

# the tiny model standing in for each checkpoint, by the architecture of its Hub repository
ARCH = {"Qwen/Qwen3-Embedding-4B": "qwen3", "Qwen/Qwen3-Embedding-8B": "qwen3", "AQ-MedAI/Diver-Retriever-4B": "qwen3",
        "hanhainebula/reason-embed-qwen3-4b-0928": "qwen3", "hanhainebula/reason-embed-qwen3-8b-0928": "qwen3",
        "hanhainebula/reason-embed-basic-qwen3-4b-0928": "qwen3",
        "hanhainebula/reason-embed-basic-qwen3-8b-0928": "qwen3",
        "Alibaba-NLP/gte-Qwen2-7B-instruct": "qwen2", "Raderspace/RaDeR_gte_Qwen2-7B_MATH_LLMq_CoT_lexical": "qwen2",
        "hanhainebula/reason-embed-llama-3.1-8b-0928": "llama",
        "hanhainebula/reason-embed-basic-llama-3.1-8b-0928": "llama",
        "intfloat/e5-mistral-7b-instruct": "mistral", "reasonir/ReasonIR-8B": "reasonir"}
FLAG = sorted(n for n, e in ENTRIES.items() if e["protocol"] == "reasonembed" and e["pooling"] == "lasttoken")


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """The R2MED-layout task (raw and normalised) and one tiny model per architecture, built once."""
    root = tmp_path_factory.mktemp("reasonembed")
    raw = make_r2med(root / "raw", corpus=DOCS, queries=QUERIES, qrels=QRELS)
    datasets.write_internal(datasets.load("r2med", raw, empty_text="keep"), root / "int")
    models = {kind: reasoning_decoder_dir(root / kind, kind, seed, TEXTS)
              for seed, kind in enumerate(("qwen3", "qwen2", "llama"), start=1)}
    mistral = causal_dir(root / "mistral", "mistral", 4, TEXTS, max_positions=1024)
    cfg = json.loads((mistral / "tokenizer_config.json").read_text())  # e5's files: add_eos_token in the config
    (mistral / "tokenizer_config.json").write_text(json.dumps({**cfg, "add_eos_token": True,
                                                               "tokenizer_class": "LlamaTokenizer"}))
    transformers.MistralModel.from_pretrained(mistral).to(torch.float16).save_pretrained(mistral)  # as the others
    models["mistral"] = mistral
    return SimpleNamespace(raw=raw, int=root / "int", models=models, root=root)


def test_texts_run_past_512_tokens_and_a_query_is_a_document(task):
    tok = transformers.AutoTokenizer.from_pretrained(task.models["qwen3"])
    lengths = [len(tok(d["text"])["input_ids"]) for d in DOCS]
    assert max(lengths) > 512 > min(lengths)
    assert {q["id"] for q in QUERIES} & {d["id"] for d in DOCS} == {"p2"}


def test_every_entry_carries_the_authors_instructions_and_format():
    """Each decoder-only entry's query prompt is ``Instruct: {}\\nQuery: {}`` of R2MEDInstructions (with the period
    R2MED's own e5 instructions lack), for the eight tasks; ReasonIR's is its template around the same
    instruction; documents get none (ReasonIR: ``<|embed|>\\n``)."""
    for name, entry in ENTRIES.items():
        prompts = entry["task_prompts"]
        assert set(prompts) == set(fe.R2MED_INSTRUCTIONS), name
        for t, instruction in fe.R2MED_INSTRUCTIONS.items():
            if entry["source"]["hf"] == "reasonir/ReasonIR-8B":
                assert prompts[t] == {"query": f"<|user|>\n{instruction}\n<|embed|>\n", "doc": "<|embed|>\n"}, name
            else:
                assert prompts[t] == {"query": fe.QUERY_FORMAT.format(instruction, ""), "doc": ""}, (name, t)
                assert instruction.endswith(".")
        assert entry["max_length"] == 512 and entry["normalize"] is True, name
        assert entry["trust_remote_code"] == (ARCH[entry["source"]["hf"]] in ("qwen2", "reasonir")), name


def ours(task, tmp: Path, name: str, entry: dict, path: Path):
    """The entry as the jobs get it (the params projections of a validated configuration), through the jobs'
    functions: corpus and query embeddings, the run file in trec_eval's order, the metrics JSON, the run's info."""
    tmp.mkdir(parents=True, exist_ok=True)
    # fp32 on the CPU, as FlagEmbedding computes there (encode_single_device: model.float()); the entries' fp16 is
    # what it used on the authors' GPUs, and ReasonIR's bf16 its checkpoint's dtype (the stand-in's is fp32)
    raw = {**entry, "source": {"path": str(path)}, "device": "cpu", "dtype": "fp32"}
    cfg = config.validate({"benchmarks": {"r": {"layout": "r2med", "empty_text": "keep",
                                                "tasks": {TASK: {"path": str(task.raw), "paper_task": TASK}}}},
                           "benchmarks_to_run": ["r"], "models": {name: raw}})
    params = Params(Registry(cfg))
    w = SimpleNamespace(benchmark="r", task=TASK, model=name)
    doc = params.encode_corpus(w)
    dense_encode.encode_corpus(task.int / "corpus.jsonl", tmp / "c.npy", tmp / "c.ids", tmp / "c.json", doc, name,
                               TASK, storage=doc["storage"])
    dense_encode.encode_queries(task.int / "queries.jsonl", tmp / "q.npy", tmp / "q.ids", params.encode_queries(w),
                                name, TASK)
    fingerprint = fingerprint_file(tmp, identity.corpus_ids(task.int / "corpus.jsonl"))
    sm = SimpleNamespace(
        input=SimpleNamespace(emb=str(tmp / "c.npy"), ids=str(tmp / "c.ids"), emb_info=str(tmp / "c.json"),
                              query_emb=str(tmp / "q.npy"), query_ids=str(tmp / "q.ids"), fingerprint=fingerprint),
        output=SimpleNamespace(run=str(tmp / "run.trec"), info=str(tmp / "run.json")),
        params=SimpleNamespace(spec=params.retrieve_dense(w)), wildcards=w, threads=1)
    retrieve.retrieve_dense(sm)
    scored = SimpleNamespace(input=SimpleNamespace(run=str(tmp / "run.trec"), qrels=str(task.int / "qrels.tsv"),
                                                   queries=str(task.int / "queries.jsonl"), fingerprint=fingerprint),
                             output=SimpleNamespace(metrics=str(tmp / "m.json"), per_query=str(tmp / "pq.tsv")),
                             params=SimpleNamespace(spec=params.score_run(w)), wildcards=w)
    score.score_run(scored)
    run: dict[str, dict[str, float]] = {}
    for line in (tmp / "run.trec").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    return SimpleNamespace(docs=np.load(tmp / "c.npy"), queries=np.load(tmp / "q.npy"),
                           ranking={q: ref.trec_eval_order(ds)[:100] for q, ds in run.items()},
                           metrics=json.loads((tmp / "m.json").read_text()),
                           info=json.loads((tmp / "run.json").read_text()))


def theirs_ranking(results: dict) -> dict[str, list[str]]:
    """FlagEmbedding's top 100 per query as trec_eval ranks it at the run file's precision: its scores rounded to the 6
    decimals our run files keep (two documents within 5e-7 are then tied and ranked by id, on both sides; at full
    precision such a pair may come in the other order: docs/models.md)."""
    return {q: ref.trec_eval_order({d: round(s, 6) for d, s in ds.items()})[:100] for q, ds in results.items()}


def _check(mine, results, d, q):
    assert np.allclose(mine.docs, d, atol=1e-5), np.abs(mine.docs - d).max()
    assert np.allclose(mine.queries, q, atol=1e-5), np.abs(mine.queries - q).max()
    theirs = theirs_ranking(results)
    for qid in theirs:  # where they part, with both scores
        if mine.ranking.get(qid) != theirs[qid]:
            i = next(i for i, (x, y) in enumerate(zip(mine.ranking[qid], theirs[qid])) if x != y)
            pytest.fail(f"{qid} parts at rank {i + 1}: ours {mine.ranking[qid][i:i + 3]}, theirs "
                        f"{[(d, results[qid][d]) for d in theirs[qid][i:i + 3]]}")


def flag_embedder(task, entry: dict, path: Path):
    """The script's BaseLLMEmbedder; for e5 with the tokenizer transformers 4 gave it (</s> from add_eos_token)."""
    emb = fe.embedder(path, TASK, trust_remote_code=entry["trust_remote_code"], batch_size=entry["batch_size"],
                      max_length=entry["max_length"])
    if ARCH[entry["source"]["hf"]] == "mistral":
        emb.tokenizer = ref.llama_tokenizer_4_44(path)
        emb.tokenizer.pad_token = emb.tokenizer.eos_token  # e5's special_tokens_map: pad </s>
    return emb


@pytest.mark.parametrize("name", FLAG)
def test_entry_equals_flagembedding(task, tmp_path, name):
    """The entry under ReasonEmbed's protocol against FlagEmbedding's BaseLLMEmbedder + EvalDenseRetriever: the
    same vectors, the same top 100, the document sharing the query's id kept, the protocol recorded."""
    entry = ENTRIES[name]
    path = task.models[ARCH[entry["source"]["hf"]]]
    mine = ours(task, tmp_path, name, entry, path)
    results, d, q = fe.search(flag_embedder(task, entry, path), DOCS, {x["id"]: x["text"] for x in QUERIES})
    _check(mine, results, d, q)
    assert "p2" in mine.ranking["p2"] and len(results["q1"]) == len(DOCS) > 100  # kept; depth 2000 > the corpus
    assert mine.info["protocol"] == mine.metrics["protocol"] == "reasonembed"
    assert "identical_ids_dropped" not in mine.metrics["counts"]


def test_the_r2med_twin_drops_the_querys_own_id(task, tmp_path):
    """The same checkpoint under R2MED's protocol: the same vectors (an R2MED task has no titles), BEIR's search
    (the top 100 of the other documents), the protocol recorded; FlagEmbedding's run keeps the document."""
    entry = ENTRIES["qwen3-embedding-8b-r2med"]
    path = task.models["qwen3"]
    mine = ours(task, tmp_path, "qwen3-embedding-8b-r2med", entry, path)
    results, d, q = fe.search(flag_embedder(task, entry, path), DOCS, {x["id"]: x["text"] for x in QUERIES})
    assert np.allclose(mine.docs, d, atol=1e-5) and np.allclose(mine.queries, q, atol=1e-5)
    theirs = theirs_ranking(results)
    full = ref.trec_eval_order({d: round(s, 6) for d, s in results["p2"].items()})
    assert "p2" in full[:100] and mine.ranking["p2"] == [x for x in full if x != "p2"][:100]
    assert mine.ranking["q1"] == theirs["q1"] and len(mine.ranking["q1"]) == 100
    assert mine.metrics["run_depth"] == 100
    assert mine.info == {**mine.info, "protocol": "r2med", "identical_ids_dropped": 1}
    assert mine.metrics["protocol"] == "r2med" and mine.metrics["counts"]["identical_ids_dropped"] == 0


def test_without_the_period_or_the_remote_code_the_vectors_differ(task, tmp_path):
    """What the tests above would catch: R2MED's own e5 instruction (no final period) moves the query vectors, and
    gte-Qwen2/RaDeR's checkpoint code (here bidirectional attention) is not optional."""
    entry = ENTRIES["qwen3-embedding-4b"]
    path = task.models["qwen3"]
    emb = flag_embedder(task, entry, path)
    q = np.asarray(emb.encode_queries([x["text"] for x in QUERIES]))
    without = {t: {"query": p["query"].replace(".\nQuery: ", "\nQuery: "), "doc": ""}
               for t, p in entry["task_prompts"].items()}
    mine = ours(task, tmp_path / "a", "no-period", {**entry, "task_prompts": without}, path)
    assert np.abs(mine.queries - q).max() > 1e-3
    rader = ENTRIES["rader-gte-qwen2-7b"]
    with pytest.raises(InputError, match="trust_remote_code"):
        ours(task, tmp_path / "b", "rader", {**rader, "trust_remote_code": False}, task.models["qwen2"])
    plain = transformers.Qwen2Model.from_pretrained(task.models["qwen2"]).eval()  # the weights without the code
    remote = transformers.AutoModel.from_pretrained(task.models["qwen2"], trust_remote_code=True).eval()
    ids = transformers.AutoTokenizer.from_pretrained(task.models["qwen2"])(["fever and cough"], return_tensors="pt")
    with torch.no_grad():
        assert not torch.allclose(plain(**ids).last_hidden_state, remote(**ids).last_hidden_state, atol=1e-4)


@pytest.mark.parametrize("include_prompt", [False, True])
def test_reasonir_prompts_and_pooling_as_reasonir_encoder(task, tmp_path, include_prompt):
    """ReasonIR-8B's path (runner.get_models: ReasonIREncoder, a SentenceTransformer with its remote code) on a
    stand-in sentence-transformers checkpoint whose Pooling leaves the prompt out of the mean or not: the entry
    (``pooling: model``, ``pool_prompt: model``, the template prompts) gives ReasonIREncoder's vectors and
    EvalDenseRetriever's top 100 either way; forcing ``pool_prompt: true`` would not. Not proven: ReasonIR's own
    modeling code (bidirectional Llama), its real Pooling config and dtype, which need its files."""
    entry = ENTRIES["reasonir-8b"]
    path = sentence_transformer_dir(tmp_path / "st", 7, TEXTS, include_prompt=include_prompt)
    mine = ours(task, tmp_path / "ours", "reasonir-8b", entry, path)
    encoder = fe.ReasonIREncoder(path, fe.R2MED_INSTRUCTIONS[TASK], max_length=entry["max_length"],
                                 batch_size=entry["batch_size"])
    results, d, q = fe.search(encoder, DOCS, {x["id"]: x["text"] for x in QUERIES})
    _check(mine, results, d, q)
    assert mine.info["protocol"] == "reasonembed"
    if not include_prompt:
        forced = ours(task, tmp_path / "forced", "reasonir-forced", {**entry, "pool_prompt": True}, path)
        assert np.abs(forced.queries - q).max() > 1e-3


def test_every_entry_is_proven_or_the_twin_of_one():
    """An entry under ReasonEmbed's protocol is run against FlagEmbedding above (or ReasonIR's encoder); an entry under
    R2MED's is `<name>-r2med`, the same settings as `<name>` but the protocol (what the twin test shows it changes)."""
    for name, entry in ENTRIES.items():
        if entry["protocol"] == "reasonembed":
            assert name in FLAG or entry["source"]["hf"] == "reasonir/ReasonIR-8B", name
            continue
        base = ENTRIES[name.removesuffix("-r2med")]
        assert name.endswith("-r2med") and base["protocol"] == "reasonembed", name
        assert {k: v for k, v in entry.items() if k not in ("protocol", "description")} == \
            {k: v for k, v in base.items() if k not in ("protocol", "description")}, name

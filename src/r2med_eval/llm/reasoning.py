"""A reasoning LLM's output cut to its answer, as R2MED's ``split_response_for_r1`` (src/base.py at commit 62b7074)
cuts it: the query expansions, the LLM rerankers and the CliniQ judge read LLM output through it.

An LLM that writes its reasoning before the answer (R2MED's ``r1_model_list``) is a *reasoning* LLM; its format
(``REASONING_FORMATS``) says where the answer starts. ``reasoning_format`` reads an ``llms.<llm>.reasoning``
setting (``r2med``: R2MED's own table of LLM names), ``split_reasoning`` cuts a text.
"""

from __future__ import annotations

import re

# How a reasoning LLM's output is cut to its answer (R2MED base.py split_response_for_r1, one format a branch).
REASONING_FORMATS = ("none", "think", "huatuo-o1", "sky-t1", "answer-tag")
# R2MED's r1_model_list, by the branch of split_response_for_r1 each name takes. ``reasoning: r2med`` (the
# default of an ``llms`` entry) looks a name up here; a name not listed is a plain LLM, as in R2MED.
R2MED_REASONING = {
    **dict.fromkeys(("r1-llama-8b", "r1-qwen-32b", "r1-llama-70b", "qwq-32b", "qwen3-32b", "qwen3-8b"), "think"),
    **dict.fromkeys(("huatuo-o1-8b", "huatuo-o1-70b"), "huatuo-o1"),
    "sky-32b": "sky-t1",
    **dict.fromkeys(("qwen-7b-ins", "qwen-3b-ins"), "answer-tag"),
}


def reasoning_format(llm: str, setting: str = "r2med") -> str:
    """The reasoning format of an LLM: its ``llms.<llm>.reasoning`` setting, ``r2med`` meaning R2MED's table."""
    if setting == "r2med":
        return R2MED_REASONING.get(llm, "none")
    if setting not in REASONING_FORMATS:
        raise ValueError(f"unknown reasoning format {setting!r}")
    return setting


def split_reasoning(fmt: str, text: str) -> str:
    """The answer part of an LLM output; the whole text when the format's markers are not found."""
    if fmt == "none":
        return text
    if fmt == "think":
        head, sep, tail = text.partition("</think>")
        return tail.strip() if sep else text
    if fmt == "huatuo-o1":
        # HuatuoGPT-o1 writes "## Thinking ... ## Final Response ...": everything after the first
        # "Final Response" (and the whitespace after it) is the answer.
        found = re.search(r"Final Response\s*", text)
        return text[found.end():].strip() if found else text
    if fmt == "sky-t1":
        found = re.search(r"<\|begin_of_solution\|>\s*([\s\S]*?)\s*<\|end_of_solution\|>", text)
        return found.group(1).strip() if found else text
    if fmt == "answer-tag":
        found = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
        return found.group(1).strip() if found else text
    raise ValueError(f"unknown reasoning format {fmt!r}")

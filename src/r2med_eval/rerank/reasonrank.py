"""ReasonRank's reasoning listwise prompt and its answer (``llm_listwise`` with ``prompt_mode: rank_GPT_reasoning``,
or ``rank_GPT_qwen3`` for reasonrank-8B on Qwen3), as github.com/8421BCD/ReasonRank (commit 06721fd) runs it with
``run_rank_llm.sh``: ``create_prompt`` (``rerank/rank_listwise_os_llm.py``), ``add_prefix_prompt``,
``add_post_prompt``, ``convert_doc_to_prompt_content`` and ``replace_number`` (``utils.py``), the prompts and
``pattern`` of ``listwise_prompt_r1.toml``, ``_clean_response`` and ``receive_permutation`` (``rerank/rankllm.py``),
``sliding_windows_batched`` as ``Reranker.rerank_batch`` calls it, and ``run_llm_batched``'s sampling:

* **Windows** (``windows``): RankLLM's loop over a top n (``rank_end`` = n, the window cut to n): the bottom
  ``window`` first, each next ``step`` higher, until a window would start exactly ``step`` above the top; the last
  one is clipped at the top, so the top of a list that is not ``window`` plus a multiple of ``step`` is still
  covered (unlike RankGPT's loop).
* **Prompt** (``messages``): a system message (``system_prompt_reasoning``, asking for ``<think> ... </think>
  <answer> ... </answer>``; ``rank_GPT_qwen3``: the plain ``system_prompt``) and one user message: RankGPT's prefix
  with the query, a blank line, ``[i] <passage>`` per line, then the post prompt (``rank_GPT_qwen3``: asking for
  the list inside ``<answer>`` tags). ``[n]`` in the query and passages becomes ``(n)``. A passage is its text
  (``Title: <title> Content: <text>`` when titled), stripped, fixed by ftfy, cut to ``passage_tokens`` tokens of
  the model's tokenizer (``passage_content``; ReasonRank: 512 on R2MED and BRIGHT). ReasonRank applies ftfy's
  ``fix_text`` to the whole prompt after the chat template; the first line of a chat-templated prompt holds a
  ``<``, which turns ftfy's HTML unescaping off for the rest, and ftfy fixes line by line, so fixing each message
  with HTML unescaping off gives the same prompt once the server applies the template (``tests/
  test_reasonrank.py`` checks it on passages with entities, mojibake, curly quotes and carriage returns).
* **Answer** (``extract``): ``pattern`` (``<think>.*?</think>\\s*<answer>(.*?)</answer>``, searched in the lower-cased
  answer), else the text after the last ``<answer>``; then RankGPT's digit runs (repeats and numbers outside the
  window dropped, the passages not named after the named ones in their previous order), which
  ``listwise.parse_permutation`` reads.
* **Sampling** (``SAMPLING``): temperature 0 (``rank_GPT_qwen3``: 0.6, top_p 0.95, top_k 20, min_p 0) and
  ``max_tokens`` = the reasoning budget (``reasoning_maxlen``, 3072) + 100.

Where ReasonRank's code reads an answer without ``<answer>`` (a reasoning cut at ``max_tokens``), it reads the
passage numbers of the reasoning itself; an answer naming no passage, or a digit Python cannot read as a number
(where its ``int()`` raises), leaves the window as it was. Here such an answer is unusable (``Unusable``): it is
asked again ``reasks`` times (a new attempt, cached apart), then counted, and its window keeps its order.
"""

from __future__ import annotations

import re

MODES = ("rank_GPT_reasoning", "rank_GPT_qwen3")
SYSTEM_PROMPT = ("You are RankLLM, an intelligent assistant that can rank passages based on their relevance to the "
                 "query.")
SYSTEM_PROMPT_REASONING = (
    SYSTEM_PROMPT + " Given a query and a passage list, you first thinks about the reasoning process in the mind and "
    "then provides the answer (i.e., the reranked passage list). The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> "
    "<answer> answer here </answer>.")
PATTERN = r"<think>.*?</think>\s*<answer>(.*?)</answer>"
ANSWER_TOKENS = 100  # run_llm_batched: max_tokens = reasoning_maxlen + 100
SAMPLING = {"rank_GPT_reasoning": {"temperature": 0},
            "rank_GPT_qwen3": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0}}
_EXAMPLE = "[2] > [1]"


class Unusable(ValueError):
    """An answer whose ranking cannot be read: ``kind`` is ``missing_answer`` (no ``<answer>``), ``no_passage`` (an
    answer naming no passage of the window) or ``unreadable`` (a digit Python cannot read as a number)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


def load_tokenizer(source: dict, model_name: str):
    """The served model's tokenizer (transformers' ``AutoTokenizer``; no remote code) from ``tokenizer``: a local
    folder (``path``) or a Hub repo at a revision (fetched ahead by rule prefetch_model: only its tokenizer and
    configuration files)."""
    from pathlib import Path

    from transformers import AutoTokenizer

    from ..errors import InputError

    if "path" in source:
        where, revision = str(Path(source["path"]).expanduser()), None
        if not Path(where).is_dir():
            raise InputError(f"model {model_name!r}: the tokenizer folder {where!r} does not exist.",
                             fix=f"set models.{model_name}.tokenizer.path to a folder holding the served model's "
                                 "tokenizer (tokenizer.json, tokenizer_config.json).")
    else:
        where, revision = source["hf"], source.get("revision") or "main"
    try:
        return AutoTokenizer.from_pretrained(where, revision=revision, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"model {model_name!r}: cannot load the tokenizer of {where!r}"
                         f"{f' at revision {revision}' if revision else ''} ({type(exc).__name__}: {first[:200]}).",
                         fix="run `snakemake --cores 1 prefetch` on a machine with network first, or set "
                             f"models.{model_name}.tokenizer.path to a local copy.") from None


def count_tokens(tokenizer):
    """A function giving the number of ``tokenizer``'s tokens in a text (no special tokens added)."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def replace_number(text: str) -> str:
    """``[n]`` written ``(n)``, so that a query or passage cannot name a passage identifier."""
    return re.sub(r"\[(\d+)\]", r"(\1)", text)


def fix_text(text: str, unescape_html: bool | str = "auto") -> str:
    """ftfy's ``fix_text`` (ReasonRank's ``fix_text``)."""
    import ftfy

    return ftfy.fix_text(text, unescape_html=unescape_html)


def passage_content(doc: dict, tokenizer, max_tokens: int) -> str:
    """A document as ReasonRank's ``convert_doc_to_prompt_content(..., truncate_by_word=False)`` gives it: ``Title:
    <title> Content: <text>`` when it has a title, else its text; stripped, fixed by ftfy, cut to ``max_tokens``
    tokens of ``tokenizer`` (a transformers tokenizer), ``[n]`` written ``(n)``."""
    content = doc["text"]
    if doc.get("title"):
        content = "Title: " + doc["title"] + " " + "Content: " + content
    content = fix_text(content.strip())
    content = tokenizer.convert_tokens_to_string(tokenizer.tokenize(content)[:max_tokens])
    return replace_number(content)


def prefix(query: str, num: int) -> str:
    return (f"I will provide you with {num} passages, each indicated by a numerical identifier []. Rank the passages "
            f"based on their relevance to the search query: {query}.\n")


def post(mode: str, query: str, num: int) -> str:
    head = (f"Search Query: {query}.\nRank the {num} passages above based on their relevance to the search query. "
            "All the passages should be included and listed using identifiers, in descending order of relevance. ")
    if mode == "rank_GPT_reasoning":
        return head + f"The format of the answer should be [] > [], e.g., {_EXAMPLE}."
    if mode == "rank_GPT_qwen3":
        return head + ("The final ranked list should be enclosed within <answer> </answer> tags, i.e., <answer> "
                       f"ranked list here </answer>. The format of ranked list should be [] > [], e.g., {_EXAMPLE}. "
                       "Only respond with the ranking results, do not say any word or explain.")
    raise ValueError(f"unknown ReasonRank prompt mode {mode!r}")


def messages(mode: str, query: str, passages: list[str]) -> list[dict]:
    """The chat of one window (``create_prompt`` before the chat template): ``passages`` as ``passage_content``
    gives them. Each message is fixed by ftfy with HTML unescaping off (see the module's docstring)."""
    query = replace_number(query).strip()
    num = len(passages)
    system = SYSTEM_PROMPT_REASONING if mode == "rank_GPT_reasoning" else SYSTEM_PROMPT
    user = f"{prefix(query, num)}\n" + "".join(f"[{i}] {p}\n" for i, p in enumerate(passages, start=1))
    user += post(mode, query, num)
    return [{"role": "system", "content": fix_text(system, unescape_html=False)},
            {"role": "user", "content": fix_text(user, unescape_html=False)}]


def windows(n: int, window: int, step: int) -> list[tuple[int, int]]:
    """(start, end) of the windows over a top n in the order they are asked: ``Reranker.rerank_batch`` cuts
    ``rank_end`` and the window to n, then ``sliding_windows_batched`` loops."""
    size = min(window, n)
    out = []
    end, start = n, n - size
    while end > 0 and start + step != 0:
        start = max(start, 0)
        out.append((start, end))
        end, start = end - step, start - step
    return out


def full_text(content: str, reasoning: str | None = None) -> str:
    """The model's output as ReasonRank's code reads it: a server that split the reasoning off (vLLM's reasoning
    parsers) has it put back between ``<think>`` and ``</think>``."""
    return content if reasoning is None else f"<think>{reasoning}</think>{content}"


def extract(text: str) -> tuple[str | None, str]:
    """(the answer part, how it was found): ``pattern`` in the lower-cased text, else the text after the last
    ``<answer>`` (``answer_tag``), else (None, ``missing``)."""
    found = re.search(PATTERN, text.lower(), re.DOTALL)
    if found:
        return found.group(1).strip(), "pattern"
    if "<answer>" in text:
        return text.split("<answer>")[-1], "answer_tag"
    return None, "missing"


def reasoning_part(text: str) -> str:
    """The reasoning of an output: up to ``</think>``, else up to the first ``<answer>``, else all of it."""
    for marker in ("</think>", "<answer>"):
        head, sep, _ = text.partition(marker)
        if sep:
            return head
    return text


def sampling(mode: str, reasoning_tokens: int) -> dict:
    """ReasonRank's sampling parameters for a mode and a reasoning budget."""
    return {**SAMPLING[mode], "max_tokens": int(reasoning_tokens) + ANSWER_TOKENS}


def _spread(values: list[int]) -> dict:
    """count, total, mean, median, 95th percentile (nearest rank) and maximum of token counts."""
    if not values:
        return {"count": 0, "total": 0, "mean": None, "median": None, "p95": None, "max": None}
    ordered = sorted(values)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {"count": n, "total": sum(ordered), "mean": round(sum(ordered) / n, 1), "median": median,
            "p95": ordered[max(0, -(-95 * n // 100) - 1)], "max": ordered[-1]}


def token_summary(records: list[dict]) -> dict:
    """What the windows cost (``listwise.reasoning_listwise``'s records): reasoning and completion tokens per window
    and per query (the sum of its windows), and the windows cut at ``max_tokens``."""
    out = {"windows": len(records), "windows_cut_at_max_tokens": sum(r["finish_reason"] == "length" for r in records)}
    for key in ("reasoning_tokens", "completion_tokens", "prompt_tokens"):
        if any(r[key] is None for r in records):
            continue
        per_query: dict[str, int] = {}
        for r in records:
            per_query[r["query"]] = per_query.get(r["query"], 0) + r[key]
        out[key] = {"per_window": _spread([r[key] for r in records]), "per_query": _spread(list(per_query.values()))}
    return out


RECORD_COLUMNS = ("query", "window", "start", "end", "attempts", "found", "finish_reason", "prompt_tokens",
                  "completion_tokens", "reasoning_tokens")


def records_tsv(records: list[dict]) -> str:
    """The windows' records as a tab-separated table, one row per window in the order they were asked."""
    rows = ["\t".join(RECORD_COLUMNS)]
    rows += ["\t".join("" if r[c] is None else str(r[c]) for c in RECORD_COLUMNS) for r in records]
    return "\n".join(rows) + "\n"

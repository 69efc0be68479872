"""A transcription of ReasonRank's listwise inference (github.com/8421BCD/ReasonRank at 06721fd), written here from
reading its files: the prompts and ``pattern`` of ``listwise_prompt_r1.toml``; ``add_prefix_prompt``,
``add_post_prompt``, ``convert_doc_to_prompt_content`` and ``replace_number`` (``utils.py``);
``RankListwiseOSLLM.create_prompt`` (``rerank/rank_listwise_os_llm.py``); ``RankLLM._clean_response``,
``_remove_duplicate``, ``receive_permutation``, ``permutation_pipeline_batched`` and ``sliding_windows_batched``
(``rerank/rankllm.py``) with ``Reranker.rerank_batch``'s cut of ``rank_end`` and the window (``rerank/reranker.py``).
It imports nothing of r2med_eval. The changes: a request is a dict {query: {qid, text}, candidates: [{docid, score,
doc}]} rather than a dataclass; the model call (``run_llm_batched``) is a function the test passes in, which gets the
window's prompts and returns the model's outputs; the tokenizer (ReasonRank's ``self._tokenizer``) and the prompt
mode are parameters."""
import copy
import re

from ftfy import fix_text

SYSTEM_PROMPT = ("You are RankLLM, an intelligent assistant that can rank passages based on their relevance to the "
                 "query.")
SYSTEM_PROMPT_REASONING = (
    "You are RankLLM, an intelligent assistant that can rank passages based on their relevance to the query. Given a "
    "query and a passage list, you first thinks about the reasoning process in the mind and then provides the answer "
    "(i.e., the reranked passage list). The reasoning process and answer are enclosed within <think> </think> and "
    "<answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> <answer> answer here "
    "</answer>.")
PROMPT_INFO = {"system_prompt": SYSTEM_PROMPT, "system_prompt_reasoning": SYSTEM_PROMPT_REASONING,
               "pattern": r"<think>.*?</think>\s*<answer>(.*?)</answer>"}


def replace_number(s):
    return re.sub(r"\[(\d+)\]", r"(\1)", s)


def add_prefix_prompt(promptmode, query, num):
    if promptmode in ("rank_GPT", "rank_GPT_qwen3", "rank_GPT_reasoning"):
        return (f"I will provide you with {num} passages, each indicated by a numerical identifier []. Rank the "
                f"passages based on their relevance to the search query: {query}.\n")
    raise ValueError("not supported promptmode")


def add_post_prompt(promptmode, query, num):
    example_ordering = "[2] > [1]"
    if promptmode == "rank_GPT_reasoning":
        return (f"Search Query: {query}.\nRank the {num} passages above based on their relevance to the search query. "
                "All the passages should be included and listed using identifiers, in descending order of relevance. "
                f"The format of the answer should be [] > [], e.g., {example_ordering}.")
    if promptmode == "rank_GPT_qwen3":
        return (f"Search Query: {query}.\nRank the {num} passages above based on their relevance to the search query. "
                "All the passages should be included and listed using identifiers, in descending order of relevance. "
                "The final ranked list should be enclosed within <answer> </answer> tags, i.e., <answer> ranked list "
                f"here </answer>. The format of ranked list should be [] > [], e.g., {example_ordering}. Only respond "
                "with the ranking results, do not say any word or explain.")
    raise ValueError("not supported promptmode")


def convert_doc_to_prompt_content(tokenizer, doc, max_length, truncate_by_word=True):
    if "text" in doc:
        content = doc["text"]
    elif "segment" in doc:
        content = doc["segment"]
    elif "contents" in doc:
        content = doc["contents"]
    elif "body" in doc:
        content = doc["body"]
    else:
        content = doc["passage"]
    if "title" in doc and doc["title"]:
        content = "Title: " + doc["title"] + " " + "Content: " + content
    content = content.strip()
    content = fix_text(content)
    if truncate_by_word:
        content = " ".join(content.split()[: int(max_length)])
    else:
        content = tokenizer.convert_tokens_to_string(tokenizer.tokenize(content)[:max_length])
    return replace_number(content)


def create_messages(request, rank_start, rank_end, *, tokenizer, prompt_mode, max_length=512):
    """The chat messages of create_prompt, before the chat template."""
    query = replace_number(request["query"]["text"]).strip()
    num = len(request["candidates"][rank_start:rank_end])
    messages = []
    if prompt_mode == "rank_GPT_reasoning":
        messages.append({"role": "system", "content": PROMPT_INFO["system_prompt_reasoning"]})
    elif prompt_mode in ("rank_GPT", "rank_GPT_qwen3"):
        messages.append({"role": "system", "content": PROMPT_INFO["system_prompt"]})
    prefix = add_prefix_prompt(prompt_mode, query, num)
    rank = 0
    input_context = f"{prefix}\n"
    for cand in request["candidates"][rank_start:rank_end]:
        rank += 1
        content = convert_doc_to_prompt_content(tokenizer, cand["doc"], max_length, truncate_by_word=False)
        input_context += f"[{rank}] {content}\n"
    input_context += add_post_prompt(prompt_mode, query, num)
    messages.append({"role": "user", "content": input_context})
    return messages


def create_prompt(request, rank_start, rank_end, *, tokenizer, prompt_mode, max_length=512):
    messages = create_messages(request, rank_start, rank_end, tokenizer=tokenizer, prompt_mode=prompt_mode,
                               max_length=max_length)
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return fix_text(prompt)


def clean_response(response, prompt_mode):
    if prompt_mode in ("rank_GPT_qwen3", "rank_GPT_reasoning"):
        pattern = rf'{PROMPT_INFO["pattern"]}'
        match = re.search(pattern, response.lower(), re.DOTALL)
        if match:
            response = match.group(1).strip()
        else:
            if "<answer>" in response:
                response = response.split("<answer>")[-1]
    new_response = ""
    for c in response:
        if not c.isdigit():
            new_response += " "
        else:
            new_response += c
    return new_response.strip()


def remove_duplicate(response):
    new_response = []
    for c in response:
        if c not in new_response:
            new_response.append(c)
    return new_response


def receive_permutation(result, permutation, rank_start, rank_end, prompt_mode):
    response = clean_response(permutation, prompt_mode)
    try:
        response = [int(x) - 1 for x in response.split()]
    except ValueError:
        return result  # 'unexcepted output!': the window stays as it was
    response = remove_duplicate(response)
    cut_range = copy.deepcopy(result["candidates"][rank_start:rank_end])
    original_rank = [tt for tt in range(len(cut_range))]
    response = [ss for ss in response if ss in original_rank]
    response = response + [tt for tt in original_rank if tt not in response]
    for j, x in enumerate(response):
        result["candidates"][rank_start + j] = copy.deepcopy(cut_range[x])
        result["candidates"][rank_start + j]["score"] = cut_range[j]["score"]
    return result


def sliding_windows_batched(requests, rank_start, rank_end, window_size, step, *, run_llm_batched, tokenizer,
                            prompt_mode, max_length=512):
    results = [{"query": copy.deepcopy(r["query"]), "candidates": copy.deepcopy(r["candidates"])} for r in requests]
    windows_end = rank_end
    windows_start = rank_end - window_size
    while windows_end > rank_start and windows_start + step != rank_start:
        windows_start = max(windows_start, rank_start)
        prompts = [create_prompt(r, windows_start, windows_end, tokenizer=tokenizer, prompt_mode=prompt_mode,
                                 max_length=max_length) for r in results]
        outputs = run_llm_batched(prompts)
        for result, permutation in zip(results, outputs):
            receive_permutation(result, permutation, windows_start, windows_end, prompt_mode)
        windows_end = windows_end - step
        windows_start = windows_start - step
    return results


def rerank_batch(requests, rank_start=0, rank_end=100, window_size=20, step=10, **kwargs):
    """Reranker.rerank_batch with vllm_batched: one batch of requests with the same number of candidates."""
    return sliding_windows_batched(requests, rank_start=max(rank_start, 0),
                                   rank_end=min(rank_end, len(requests[0]["candidates"])),
                                   window_size=min(window_size, len(requests[0]["candidates"])), step=step, **kwargs)


def rerank(requests, retrieval_num=100, window_size=20, step=10, **kwargs):
    """run_rank_llm.py's loop for one pass: queries with retrieval_num candidates in one batch, every other query in
    a batch of its own."""
    full = [r for r in requests if len(r["candidates"]) >= retrieval_num]
    short = [[r] for r in requests if len(r["candidates"]) < retrieval_num]
    out = []
    for batch in ([full] if full else []) + short:
        out.extend(rerank_batch(batch, 0, retrieval_num, window_size, step, **kwargs))
    return out

"""Writing expansion files (``query_with_hydoc.jsonl``) with an LLM behind an OpenAI-compatible server.

R2MED's prompts (src/instrcution.py and src/generate_hypothetical_doc.py at commit 62b7074), written out here
from a table of how each task names its query: a system message "You are a helpful assistant." and one user
message per query, for HyDE, query2doc (few-shot: the examples come from a file, ``examples``) and LameR
(the top passages of a first retrieval run, each cut to 512 words, numbered ``\\n[1]. ...``).

The prompts go to the server through the pipeline's one LLM client (``r2med_eval.llm``: cache, server policy,
deadline and bounds, retries, concurrency, accounting); the expansion file is written (atomically) by the stage
only when every query has its answer.
"""

from __future__ import annotations

import hashlib
import json

from ..errors import InputError
from ..llm.client import Client
from ..llm.policy import ServerPolicy

# R2MED task -> (what the query is, its label in the prompt, what the answer helps with, similar-case task)
TASKS = {
    "Biology": ("Biology post", "Post", "post", False),
    "Bioinformatics": ("Bioinformatics post", "Post", "post", False),
    "Medical-Sciences": ("Medical Science post", "Post", "post", False),
    "MedXpertQA-Exam": ("Medical Exam", "Exam", "exam", False),
    "MedQA-Diag": ("Medical Exam", "Exam", "exam", False),
    "PMC-Treatment": ("Clinical Case", "Case", "case", False),
    "PMC-Clinical": ("Clinical Case", "Case", "case", True),
    "IIYi-Clinical": ("Clinical Case", "Case", "case", True),
}
SYSTEM_PROMPT = "You are a helpful assistant."


def prompt_template(method: str, task: str) -> str:
    """R2MED's user prompt for a method and task, with ``{TEXT}`` (the query), ``{EXAMPLE}`` (query2doc) and
    ``{PASSAGE}`` (LameR) left to fill."""
    if task not in TASKS:
        raise InputError(f"no R2MED prompt for task {task!r} (R2MED's tasks: {', '.join(TASKS)}).",
                         fix="set prompt_task in the query_variants entry to the R2MED task whose prompt fits.")
    noun, label, goal, similar = TASKS[task]
    if method == "hyde":
        if similar:
            return f"Please write a similar case to help diagnose the {noun}.\n{label}: {{TEXT}}\nSimilar Case: "
        return f"Please write a passage to help answer the {noun}.\n{label}: {{TEXT}}\nPassage: "
    if method == "query2doc":
        head = "Write a similar case to help diagnose" if similar else \
            ("Write a passage that help answer" if task == "Biology" else "Write a passage to help answer")
        tail = "Similar Case: " if similar else "Passage: "
        return (f"{head} the {noun}.\n\n###Examples:###\n{{EXAMPLE}}\n\n###Real Test:###\n"
                f"{label}: {{TEXT}}\n{tail}")
    if method == "lamer":
        if similar:
            return (f"Give a {noun} and its possible similar cases (most of these cases are non-similar). Please "
                    f"write a correct similar case that help diagnose the {goal}.\nJust output the correct case, "
                    f"don't explanation.\n\n{label}: {{TEXT}}\n\nPossible Similar Cases: {{PASSAGE}}")
        return (f"Give a {noun} and its possible relevant passages (most of these passages are wrong). Please write "
                f"a correct passage that help answer the {goal}.\nJust output the correct passage, don't "
                f"explanation.\n\n{label}: {{TEXT}}\n\nPossible Relevant Passages: {{PASSAGE}}")
    raise ValueError(f"unknown method {method!r}")


def template_sha256(method: str, task: str, examples: str | None = None) -> str:
    text = prompt_template(method, task)
    if examples is not None:
        text = text.replace("{EXAMPLE}", examples)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lamer_passages(doc_ids: list[str], corpus: dict[str, str], words: int = 512) -> str:
    """The top documents as R2MED's LameR prompt lists them: newlines to spaces, cut to ``words`` words."""
    out = ""
    for i, d in enumerate(doc_ids, start=1):
        text = " ".join(corpus[d].replace("\n", " ").split()[:words])
        out += f"\n[{i}]. {text}"
    return out


def build_prompts(method: str, task: str, queries: dict[str, str], *, examples: str | None = None,
                  passages: dict[str, str] | None = None) -> dict[str, str]:
    """{query id: user prompt}."""
    template = prompt_template(method, task)
    if method == "query2doc":
        if examples is None:
            raise InputError("query2doc needs few-shot examples, and none are configured.",
                             fix="set llms.<llm>.generate.examples to a JSON file {R2MED task: examples text}.")
        template = template.replace("{EXAMPLE}", examples)
    out = {}
    for q, text in queries.items():
        prompt = template.replace("{PASSAGE}", passages[q]) if method == "lamer" else template
        out[q] = prompt.replace("{TEXT}", text)
    return out


def read_examples(path, task: str) -> str:
    from ..io import read_json

    try:
        data = read_json(path)
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the query2doc examples ({exc}).", path=path,
                         fix="give a JSON file {R2MED task: examples text}.") from None
    if not isinstance(data, dict) or not isinstance(data.get(task), str):
        raise InputError(f"no examples text for task {task!r}.", path=path,
                         fix=f"add a key {task!r} with the few-shot examples as one string.")
    return data[task]


# ------------------------------------------------------------------ asking the LLM (r2med_eval.llm)

# Methods whose prompts quote the corpus (LameR lists the top passages of a first retrieval): on a MIMIC-derived
# benchmark their prompts carry note text, so the server policy applies (llm.ServerPolicy).
CORPUS_METHODS = ("lamer",)


def generate(prompts: dict[str, str], settings: dict, cache_path, *, private: bool = False,
             policy: ServerPolicy | None = None) -> tuple[dict[str, str], dict]:
    """{query id: answer} for every prompt (after the system message), and the counts: queries, requested, cached,
    tokens, cost."""
    client = Client(settings, cache_path, private=private, policy=policy, unit="query")
    requests = {q: client.request([{"role": "system", "content": settings["system_prompt"]},
                                   {"role": "user", "content": p}]) for q, p in prompts.items()}
    answers, usage = client.ask(requests)
    return {q: a.content for q, a in answers.items()}, {"queries": len(prompts), **usage.as_dict()}

"""A reranked run from a first-stage run and a reranker's scores or order: the documents below the reranked top k
keep their first-stage order beneath it, or are dropped (``truncate``). Shared by every reranker (``rerank``: models
run in the job; ``llm_rerank``: LLMs behind a server), so a job of one kind does not load the other's code."""

from __future__ import annotations

from ..scoring.runs import ranked


def check_depth(run: dict, k: int, name: str) -> str | None:
    """A note when ``k`` is deeper than the run (its longest ranking): then the whole run is re-scored, which
    is what the depth asks for on a shorter run."""
    return depth_note(max((len(d) for d in run.values()), default=0), k, name)


def depth_note(depth: int, k: int, name: str) -> str | None:
    """:func:`check_depth` for a run whose depth (its longest ranking) is ``depth``."""
    if k > depth:
        return (f"rerank depth {k} is larger than the depth {depth} of run {name!r}: the whole run is re-scored "
                f"(retrieve at least {k} documents with {name!r}, top_k, for a true top-{k} rerank).")
    return None


def merge(original: dict[str, float], rescored: dict[str, float], truncate: bool = False) -> dict[str, float]:
    """Re-scored documents first (by new score), then the rest in their original order.

    With ``truncate`` (R2MED's reranked runs) only the re-scored documents, equal scores in the order trec_eval
    gives them (doc id descending), which is how R2MED's evaluation ranks the raw scores it hands to
    pytrec_eval; otherwise equal scores by doc id. The written score is ``n - rank + 1`` (n = run length),
    so any reader that sorts by score sees exactly this order; the re-scorer's own scores go to the rule's
    side file."""
    if truncate:
        return {did: float(len(rescored) - i) for i, (did, _) in
                enumerate(sorted(rescored.items(), key=lambda x: (x[1], x[0]), reverse=True))}
    head = sorted(rescored.items(), key=lambda x: (-x[1], x[0]))
    tail = [d for d, _ in ranked(original) if d not in rescored]
    n = len(head) + len(tail)
    out = {}
    for i, (did, _) in enumerate(head):
        out[did] = float(n - i)
    for j, did in enumerate(tail):
        out[did] = float(n - len(head) - j)
    return out

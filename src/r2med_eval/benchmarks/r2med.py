"""R2MED specifics: which configured task is which R2MED task and the paper's dataset statistics (the
published scores are in ``r2med_paper``)."""

from __future__ import annotations

import logging

from ..hub.datasets import R2MED_TASKS, resolve_source

log = logging.getLogger(__name__)


# Queries / documents per task, as the paper reports them.
PAPER_STATS = {
    "Biology": (103, 57359), "Bioinformatics": (77, 47473), "Medical-Sciences": (88, 34810),
    "MedXpertQA-Exam": (97, 61379), "MedQA-Diag": (118, 56250), "PMC-Treatment": (150, 28954),
    "PMC-Clinical": (114, 60406), "IIYi-Clinical": (129, 10449),
}

# Known reasons for a difference, by the paper's model name ...
def paper_task(task_cfg: dict) -> str | None:
    """The R2MED task a configured task holds: from source R2MED/<Task>, or its paper_task key."""
    if "source" in task_cfg:
        found = resolve_source(task_cfg["source"], "source")["r2med_task"]
        if found:
            return found
    return task_cfg.get("paper_task")


def check_stats(task: str, stats: dict) -> dict:
    """Loaded counts against the paper's; a mismatch is logged as a warning."""
    queries, documents = PAPER_STATS[task]
    check = {"paper_task": task, "paper_queries": queries, "paper_documents": documents,
             "queries": stats["queries"], "documents": stats["documents"],
             "match": stats["queries"] == queries and stats["documents"] == documents}
    if not check["match"]:
        log.warning("R2MED %s: loaded %d queries / %d documents, the paper reports %d / %d", task,
                    stats["queries"], stats["documents"], queries, documents)
    else:
        log.info("R2MED %s: %d queries / %d documents, as in the paper", task, queries, documents)
    return check


__all__ = ["R2MED_TASKS", "PAPER_STATS", "paper_task", "check_stats"]

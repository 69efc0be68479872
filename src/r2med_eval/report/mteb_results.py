"""Results in MTEB's results layout, both ways (no mteb import: plain JSON).

Export: ``<out>/results/<model name, '/' as '__'>/<revision>/<MTEB task>.json`` per run and R2MED task, beside
``model_meta.json`` ({name, revision}), as MTEB's ``ResultCache`` reads them. A task file is MTEB's
``TaskResult``: ``{dataset_revision, task_name, mteb_version, evaluation_time, kg_co2_emissions, scores: {test:
[{hf_subset: default, languages: [eng-Latn], main_score, ndcg_at_10, ...}]}}``, ``main_score`` being nDCG@10 as
for MTEB's retrieval tasks. Only the measures whose definition is MTEB's under the same name are written
(nDCG, MAP, recall and precision at our cut-offs, all trec_eval's, as MTEB's retrieval evaluator computes
them with pytrec_eval); our ``mrr`` (no cut-off) is not MTEB's ``mrr_at_k`` and is left out.

Import: ``read`` collects ``{model name: {MTEB task: main_score}}`` from such a folder (MTEB's own results
repository or an export), for reference rows in our leaderboard.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import InputError
from ..io import write_text

SPLIT = "test"
SUBSET = "default"
LANGUAGES = ["eng-Latn"]
NO_REVISION = "no_revision_available"  # MTEB's revision folder for a model without one
MEASURE_PREFIXES = ("ndcg_at_", "map_at_", "recall_at_", "precision_at_")


def model_dir(name: str) -> str:
    return name.replace("/", "__")


def task_result(metrics: dict, task_name: str, dataset_revision: str | None, evaluation_time: float | None = None,
                mteb_version: str | None = None) -> dict:
    """MTEB's TaskResult JSON of one run on one task, from our metrics (``ndcg_at_10``, ...)."""
    scores = {k: v for k, v in sorted(metrics.items()) if k.startswith(MEASURE_PREFIXES)}
    if "ndcg_at_10" not in scores:
        raise InputError(f"{task_name}: the metrics hold no ndcg_at_10, MTEB's main score for retrieval.",
                         fix="score the run with r2med_eval's metrics (ndcg_at_10 among them).")
    scores.update(main_score=scores["ndcg_at_10"], hf_subset=SUBSET, languages=LANGUAGES)
    return {"dataset_revision": dataset_revision or NO_REVISION, "task_name": task_name,
            "mteb_version": mteb_version, "evaluation_time": evaluation_time, "kg_co2_emissions": None,
            "scores": {SPLIT: [scores]}}


def export(entries, out_dir) -> list[str]:
    """Write MTEB's layout under ``out_dir``; ``entries``: dicts {name, revision, task_name, dataset_revision,
    metrics, evaluation_time}. Returns the files written, relative to ``out_dir``, sorted."""
    out_dir = Path(out_dir)
    written = []
    seen = set()
    for e in entries:
        folder = Path("results") / model_dir(e["name"]) / (e.get("revision") or NO_REVISION)
        key = (str(folder), e["task_name"])
        if key in seen:
            raise InputError(f"two runs export {e['name']} on {e['task_name']}.", fix="name each run once.")
        seen.add(key)
        doc = task_result(e["metrics"], e["task_name"], e.get("dataset_revision"), e.get("evaluation_time"),
                          e.get("mteb_version"))
        write_text(out_dir / folder / f"{e['task_name']}.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
        meta = out_dir / folder / "model_meta.json"
        write_text(meta, json.dumps({"name": e["name"], "revision": e.get("revision") or NO_REVISION},
                                    indent=2, sort_keys=True) + "\n")
        written += [str(folder / f"{e['task_name']}.json"), str(folder / "model_meta.json")]
    return sorted(set(written))


def read(folder, tasks=None) -> dict[str, dict[str, float]]:
    """``{model name: {MTEB task: main score}}`` of every ``<model>/<revision>/<task>.json`` under ``folder`` (or
    its ``results/``), the test split's ``default`` subset (else the mean over its subsets); ``tasks``: keep
    only these MTEB task names. A file that is not a TaskResult stops with one message naming it."""
    root = Path(folder)
    if (root / "results").is_dir():
        root = root / "results"
    if not root.is_dir():
        raise InputError("MTEB results folder not found.", path=folder,
                         fix="point it at MTEB's results layout: <model>/<revision>/<task>.json.")
    out: dict[str, dict[str, float]] = {}
    for path in sorted(root.glob("*/*/*.json")):
        if path.name == "model_meta.json":
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            task = doc["task_name"]
            rows = doc["scores"][SPLIT]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise InputError(f"not an MTEB task result ({type(exc).__name__}: {exc}).", path=path,
                             fix="keep only MTEB result files (task_name, scores.test) in the folder.") from None
        if tasks is not None and task not in tasks:
            continue
        meta = path.parent / "model_meta.json"
        name = json.loads(meta.read_text(encoding="utf-8"))["name"] if meta.is_file() else \
            path.parent.parent.name.replace("__", "/")
        chosen = [r for r in rows if r.get("hf_subset") == SUBSET] or rows
        values = [float(r["main_score"]) for r in chosen if r.get("main_score") is not None]
        if values and all(math.isfinite(v) for v in values):
            out.setdefault(name, {})[task] = math.fsum(values) / len(values)
    return out

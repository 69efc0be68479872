"""The Python API of docs/api.md: every ```python block of the page runs (from the repository root), and
the API gives the pipeline's numbers."""
import json
import os
import re

import pytest

from conftest import REPO

PAGE = REPO / "docs" / "api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_docs_example_runs(index, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    exec(compile(BLOCKS[index], f"docs/api.md block {index + 1}", "exec"), {"__name__": "docs_api"})
    assert capsys.readouterr().out.strip()  # each example prints what it found


def test_package_import_stays_free():
    import r2med_eval

    assert "evaluate" in dir(r2med_eval)
    with pytest.raises(AttributeError):
        r2med_eval.no_such_function


def test_api_gives_the_pipelines_numbers():
    """evaluate() on a TREC run equals what rule score_run computes (stages.score.score_run on the same files)."""
    import r2med_eval
    from r2med_eval import datasets, metrics, runs

    task = r2med_eval.load_task(REPO / "data" / "demo")
    run = {q: {d: float(len(set(t.split()) & set(doc["text"].split()))) for d, doc in task.corpus.items()}
           for q, t in task.queries.items()}
    result = r2med_eval.evaluate(task.qrels, run, task.queries, ignore_identical_ids=True)
    dropped, n = runs.drop_identical_ids(run)
    assert result["metrics"] == metrics.evaluate(dropped, task.qrels, list(task.queries))["metrics"]
    assert result["counts"]["identical_ids_dropped"] == n
    assert isinstance(task, datasets.Dataset)

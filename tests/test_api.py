"""The Python API of docs/api.md: every ```python block of the page runs (from the repository root), and
the API gives the pipeline's numbers."""
import json
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


def test_api_gives_the_pipelines_numbers(tmp_path):
    """evaluate() on a TREC run file equals what rule score_run writes (its stage function on the same task,
    prepared as rule prepare_task does), ignore_identical_ids included."""
    from types import SimpleNamespace

    import r2med_eval
    from r2med_eval import datasets
    from r2med_eval.stages.score import score_run

    task = r2med_eval.load_task(REPO / "data" / "demo")
    datasets.write_internal(task, tmp_path / "task")
    run = {q: {d: float(len(set(t.split()) & set(doc["text"].split()))) for d, doc in task.corpus.items()}
           for q, t in task.queries.items()}
    r2med_eval.write_run(run, tmp_path / "run.trec", tag="overlap")
    sm = SimpleNamespace(
        input=SimpleNamespace(run=str(tmp_path / "run.trec"), qrels=str(tmp_path / "task" / "qrels.tsv"),
                              queries=str(tmp_path / "task" / "queries.jsonl")),
        output=SimpleNamespace(metrics=str(tmp_path / "m.json"), per_query=str(tmp_path / "pq.tsv")),
        params=SimpleNamespace(spec={"ignore_identical_ids": True}),
        wildcards=SimpleNamespace(benchmark="demo", task="demo", model="overlap"))
    score_run(sm)
    pipeline = json.loads((tmp_path / "m.json").read_text())
    mine = r2med_eval.evaluate(tmp_path / "task" / "qrels.tsv", tmp_path / "run.trec", task.queries,
                               ignore_identical_ids=True)
    assert {k: round(v, 6) for k, v in mine["metrics"].items()} == pipeline["metrics"]
    assert mine["counts"] == pipeline["counts"]

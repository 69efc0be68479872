"""rule collect_metrics (r2med_eval.metric_table): a benchmark's metric JSONs in one file, read by the reports."""
import hashlib
import json

import pytest

from r2med_eval.errors import InputError
from r2med_eval.report import leaderboard, r2med_paper
from r2med_eval.scoring import metric_table


def metrics_file(folder, bench, task, model, ndcg):
    path = folder / bench / task / f"{model}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": bench, "task": task, "model": model, "run": f"results/runs/{bench}/{task}/{model}.trec",
            "metrics": {"ndcg_at_10": ndcg, "recall_at_100": ndcg / 2}, "counts": {"judged_queries_scored": 3}}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    folder = tmp_path / "metrics"
    return [metrics_file(folder, "demo", t, m, v) for t, m, v in
            [("biology", "bm25", 0.25), ("biology", "minilm", 0.5), ("bioinfo", "bm25", 0.125),
             ("bioinfo", "minilm", 0.75)]]


def test_records_keep_order_content_and_digest(tmp_path, files):
    table = tmp_path / "demo.jsonl"
    assert metric_table.write(files, table) == 4
    recs = metric_table.read(table)
    assert [r["file"] for r in recs] == [str(f) for f in files]
    for rec, f in zip(recs, files):
        assert rec["data"] == json.loads(f.read_text(encoding="utf-8"))
        assert rec["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert list(metric_table.records([table])) == list(metric_table.records(files))


def test_reports_read_the_table_as_the_files(tmp_path, files):
    table = tmp_path / "demo.jsonl"
    metric_table.write(files, table)
    assert leaderboard.collect([table]) == leaderboard.collect(files)
    assert leaderboard.collect([table], "recall_at_100") == leaderboard.collect(files, "recall_at_100")
    keys = {"bm25": {"key": "bm25", "type": "bm25"}, "minilm": {"key": None, "type": "dense"}}
    tasks = {"demo/biology": "Biology", "demo/bioinfo": "Bioinformatics"}
    assert r2med_paper.compare([table], [], keys, tasks, sources={}) == r2med_paper.compare(files, [], keys, tasks,
                                                                                             sources={})


def test_empty_benchmark_gives_an_empty_table(tmp_path):
    table = tmp_path / "none.jsonl"
    assert metric_table.write([], table) == 0
    assert table.read_text() == "" and metric_table.read(table) == []


def test_a_broken_metrics_file_is_named(tmp_path, files):
    files[1].write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError) as err:
        metric_table.write(files, tmp_path / "demo.jsonl")
    assert str(files[1]) in str(err.value) and "score rule writes it again" in str(err.value)
    assert not (tmp_path / "demo.jsonl").exists()


def test_a_record_without_data_is_named_with_its_line(tmp_path, files):
    table = tmp_path / "demo.jsonl"
    metric_table.write(files, table)
    lines = table.read_text().splitlines()
    lines[2] = json.dumps({"file": "x"})
    table.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        metric_table.read(table)
    assert "line 3" in str(err.value) and "collect_metrics" in str(err.value)

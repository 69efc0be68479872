import math

import pytest

from r2med_eval.scoring import metrics


def dcg(gains):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


QRELS = {"q1": {"a": 2, "b": 1, "c": 0, "z": 1}, "q2": {"x": 1}, "q3": {"n": 0}}
RUN = {
    "q1": {"a": 0.5, "b": 0.9, "c": 0.7, "d": 0.1},  # ranking: b, c, a, d
    "q2": {"y": 2.0, "x": 1.0},                      # ranking: y, x
    "q4": {"a": 1.0},                                # unjudged query
}


def test_hand_computed_values():
    rows = metrics.per_query(RUN, QRELS)
    q1 = rows["q1"]
    # nDCG@10 with graded gains (trec_eval uses gain = grade): ranking b(1), c(0), a(2), d(-)
    ideal = dcg([2, 1, 1])
    assert q1["ndcg_at_10"] == pytest.approx(dcg([1, 0, 2]) / ideal, abs=1e-9)
    assert q1["ndcg_at_1"] == pytest.approx(1 / 2, abs=1e-9)  # b has gain 1, ideal top-1 gain 2
    # relevant: a, b, z (grade >= 1); retrieved relevant at ranks 1 and 3
    assert q1["precision_at_1"] == 1.0
    assert q1["precision_at_10"] == pytest.approx(2 / 10)
    assert q1["recall_at_1"] == pytest.approx(1 / 3)
    assert q1["recall_at_10"] == pytest.approx(2 / 3)
    assert q1["map_at_10"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert q1["mrr"] == 1.0
    q2 = rows["q2"]
    assert q2["mrr"] == 0.5
    assert q2["ndcg_at_10"] == pytest.approx(1 / math.log2(3))
    assert q2["map_at_10"] == pytest.approx(0.5)


def test_unjudged_and_empty_runs_are_counted():
    result = metrics.evaluate(RUN, QRELS, queries=["q1", "q2", "q3", "q4"])
    counts = result["counts"]
    assert counts["judged_queries_scored"] == 3
    assert counts["unjudged_query_ids"] == ["q4"]
    assert counts["judged_queries_with_empty_run_ids"] == ["q3"]
    assert counts["judged_queries_without_relevant"] == 1
    assert result["per_query"]["q3"]["ndcg_at_10"] == 0.0
    rows = metrics.per_query(RUN, QRELS)
    mean = (rows["q1"]["ndcg_at_10"] + rows["q2"]["ndcg_at_10"] + 0.0) / 3
    assert result["metrics"]["ndcg_at_10"] == pytest.approx(mean)


def test_metric_names_follow_r2med():
    names = metrics.metric_names()
    for expected in ("ndcg_at_10", "map_at_10", "recall_at_100", "precision_at_1", "mrr", "ndcg_at_25"):
        assert expected in names
    assert len(names) == 21


def test_per_query_tsv_has_every_judged_query():
    rows = metrics.per_query(RUN, QRELS)
    tsv = metrics.per_query_tsv(rows, metrics.metric_names())
    lines = tsv.strip().split("\n")
    assert lines[0].split("\t")[:2] == ["query_id", "ndcg_at_1"]
    assert [line.split("\t")[0] for line in lines[1:]] == ["q1", "q2", "q3"]

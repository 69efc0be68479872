"""CliniQ metric functions against hand-computed cases (formulas of CliniQ's eval.py)."""
import math

import pytest

from r2med_eval.cliniq import metrics as cliniq
from r2med_eval.errors import InputError

L2 = math.log2


def test_mrr():
    assert cliniq.mrr(["a", "b", "c", "d"], ["c"]) == pytest.approx(1 / 3)
    assert cliniq.mrr(["a", "b"], ["z"]) == 0.0
    assert cliniq.mrr([], ["z"]) == 0.0


def test_two_ndcg_variants_differ_as_documented():
    ranking = ["x", "r1", "y"] + [f"n{i}" for i in range(20)]
    relevant = ["r1", "r2", "r3"]
    # one relevant chunk at rank 2: DCG = 1/log2(3)
    dcg = 1 / L2(3)
    # CliniQ's ideal DCG comes from the retrieved top 10 (one relevant): 1
    assert cliniq.ndcg_cliniq(ranking, relevant, 10) == pytest.approx(dcg / 1.0)
    # trec_eval's ideal DCG puts all three judged relevant chunks first
    assert cliniq.ndcg_standard(ranking, relevant, 10) == pytest.approx(dcg / (1 + 1 / L2(3) + 1 / L2(4)))
    # nothing relevant in the top 10: both 0
    assert cliniq.ndcg_cliniq(["x"] * 1 + ["y"], relevant, 10) == 0.0
    assert cliniq.ndcg_standard(["x", "y"], relevant, 10) == 0.0
    # all relevant first: both 1
    assert cliniq.ndcg_cliniq(["r1", "r2", "r3", "x"], relevant, 10) == pytest.approx(1.0)
    assert cliniq.ndcg_standard(["r1", "r2", "r3", "x"], relevant, 10) == pytest.approx(1.0)
    # the CliniQ variant gives 1.0 to a single relevant chunk at rank 1 however many were missed
    assert cliniq.ndcg_cliniq(["r1", "x"], relevant, 10) == 1.0
    assert cliniq.ndcg_standard(["r1", "x"], relevant, 10) == pytest.approx(1 / (1 + 1 / L2(3) + 1 / L2(4)))


def test_recall_and_ap_divide_by_the_list_with_repeats():
    # eval.py's list of relevant chunks repeats a chunk judged under two match types
    assert cliniq.recall_at_k(["r1", "x", "r2"], ["r1", "r2", "r3", "r1"], 100) == pytest.approx(2 / 4)
    assert cliniq.recall_at_k(["x", "r1"], ["r1"], 1) == 0.0
    assert cliniq.recall_at_k(["x"], [], 1) == 0.0
    assert cliniq.average_precision(["a", "r1", "b", "r2"], ["r1", "r2", "r3"]) == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert cliniq.average_precision(["a"], []) == 0.0


def test_note_ranking_follows_the_corpus_wide_order_then_chunk_order():
    rank_of = {"A_3": 0, "Z_0": 1, "A_0": 2, "A_5": 3}
    order, unranked = cliniq.note_ranking([f"A_{i}" for i in range(6)], rank_of)
    assert order == ["A_3", "A_0", "A_5", "A_1", "A_2", "A_4"]
    assert unranked == 3


def _notes(**sizes):
    return {n: [f"{n}_{i}" for i in range(k)] for n, k in sizes.items()}


def test_single_patient_scores_a_note_and_its_match_types():
    rank_of = {"A_3": 0, "Z_0": 1, "A_0": 2, "A_5": 3}
    rows = [("A_0", "string"), ("A_2", "synonym"), ("A_4", "implication")]
    scored, per_type, counts = cliniq.single_patient(rank_of, rows, _notes(A=6, Z=1))
    # note order: A_3 A_0 A_5 A_1 A_2 A_4; relevant at ranks 2, 5, 6
    assert len(scored) == 1 and scored[0]["note"] == "A"
    assert scored[0]["mrr"] == pytest.approx(1 / 2)
    assert scored[0]["map"] == pytest.approx((1 / 2 + 2 / 5 + 3 / 6) / 3)
    idcg = 1 + 1 / L2(3) + 1 / L2(4)
    assert scored[0]["ndcg"] == pytest.approx((1 / L2(3) + 1 / L2(6) + 1 / L2(7)) / idcg)
    # string: A_2, A_4 removed -> A_3 A_0 A_5 A_1, relevant at 2
    s = per_type["string"][0]
    assert (s["mrr"], s["map"]) == (pytest.approx(0.5), pytest.approx(0.5))
    assert s["ndcg"] == pytest.approx(1 / L2(3))
    # synonym: A_0, A_4 removed -> A_3 A_5 A_1 A_2, relevant at 4
    s = per_type["synonym"][0]
    assert (s["mrr"], s["map"], s["ndcg"]) == (pytest.approx(0.25), pytest.approx(0.25), pytest.approx(1 / L2(5)))
    assert per_type["implication"][0]["mrr"] == pytest.approx(0.25)
    assert set(per_type) == {"string", "synonym", "implication"}
    assert counts["unranked_chunks"] == 3 and counts["skipped_fewer_than_5_chunks"] == 0


def test_single_patient_skips_notes_with_fewer_than_5_chunks():
    rows = [("B_0", "string")]
    scored, per_type, counts = cliniq.single_patient({}, rows, _notes(B=4))
    assert scored == [] and per_type == {} and counts["skipped_fewer_than_5_chunks"] == 1
    # 5 chunks is enough
    scored, _, counts = cliniq.single_patient({}, rows, _notes(B=5))
    assert len(scored) == 1 and counts["skipped_fewer_than_5_chunks"] == 0
    assert scored[0]["mrr"] == 1.0  # unranked chunks follow in chunk order: B_0 first


def test_single_patient_skips_notes_whose_chunks_are_all_relevant():
    rows = [(f"C_{i}", "synonym") for i in range(5)]
    scored, _, counts = cliniq.single_patient({}, rows, _notes(C=5))
    assert scored == [] and counts["skipped_all_relevant"] == 1


def test_all_relevant_is_eval_py_length_comparison_with_repeats():
    # D_4 is not relevant, but D_3 judged twice makes the list as long as the note: eval.py skips it
    rows = [("D_0", "string"), ("D_1", "string"), ("D_2", "string"), ("D_3", "string"), ("D_3", "synonym")]
    scored, _, counts = cliniq.single_patient({}, rows, _notes(D=5))
    assert scored == [] and counts["skipped_all_relevant"] == 1


def test_match_type_skip_when_what_remains_is_all_relevant():
    ranking = ["N_5", "N_0", "N_1", "N_2", "N_3", "N_4"]
    rank_of = {d: i for i, d in enumerate(ranking)}
    rows = [("N_0", "string"), ("N_0", "string"), ("N_1", "synonym"), ("N_2", "synonym"), ("N_3", "synonym"),
            ("N_4", "synonym"), ("N_1", "synonym")]
    scored, per_type, counts = cliniq.single_patient(rank_of, rows, _notes(N=6))
    # the note: 7 listed against 6 chunks, scored; relevant at ranks 2..6, AP over the 7 entries
    assert len(scored) == 1
    assert scored[0]["mrr"] == pytest.approx(0.5)
    assert scored[0]["map"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 4 + 4 / 5 + 5 / 6) / 7)
    # string: others removed leaves N_5, N_0 against [N_0, N_0]: lengths equal, skipped; synonym likewise
    assert per_type == {} and counts["type_skipped_all_relevant"] == 2


def test_single_patient_chunk_missing_from_corpus_counts_in_the_list():
    rows = [("E_0", "string"), ("E_9", "string")]  # E_9 is not in the corpus
    scored, _, _ = cliniq.single_patient({}, rows, _notes(E=5))
    assert scored[0]["map"] == pytest.approx(1 / 2)  # E_0 at rank 1 over a list of two


def test_multi_by_match_type_removes_other_types():
    ranking = ["s1", "y1", "x", "y2"]
    rows = [("s1", "string"), ("y1", "synonym"), ("y2", "synonym")]
    out = cliniq.multi_by_match_type(ranking, rows)
    assert set(out) == {"string", "synonym"}
    assert out["string"]["mrr"] == 1.0
    # synonym: s1 removed -> y1 x y2
    assert out["synonym"]["mrr"] == 1.0
    assert out["synonym"]["ndcg_at_10_cliniq"] == pytest.approx((1 + 1 / L2(4)) / (1 + 1 / L2(3)))
    assert out["synonym"]["recall_at_100"] == 1.0


def test_judged_at_10_and_pool():
    assert cliniq.judged_at_k(["a", "b", "c"], {"a", "c"}, 10) == pytest.approx(0.2)
    runs = {"m1": {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, "m2": {"q": {"c": 5.0, "d": 4.0, "a": 1.0}},
            "m3": {"other": {"z": 1.0}}}
    pooled = cliniq.pool(runs, {"q": {"a"}}, depth=2)
    assert [(p["chunk_id"], p["best_rank"], p["systems"]) for p in pooled] == [
        ("c", 1, ["m2"]), ("b", 2, ["m1"]), ("d", 2, ["m2"])]
    assert cliniq.pool(runs, {"q": {"a"}}, depth=1)[0]["systems"] == ["m2"]
    # a query without any judgment is pooled when listed
    assert [p["chunk_id"] for p in cliniq.pool(runs, {"q": {"a"}}, 1, queries=["q", "other"])] == ["z", "c"]
    both = cliniq.pool({"m1": {"q": {"b": 1.0}}, "m2": {"q": {"b": 1.0}}}, {"q": set()}, depth=1)
    assert both == [{"query_id": "q", "chunk_id": "b", "best_rank": 1, "systems": ["m1", "m2"]}]


def test_evaluate_counts_groups_and_condensed_lists():
    chunk_ids = [f"A_{i}" for i in range(6)] + [f"B_{i}" for i in range(3)]
    rows = [("disease-0", "A_1", "string"), ("disease-0", "B_0", "synonym"), ("drug-0", "A_2", "implication")]
    qtypes = {"disease-0": "disease", "drug-0": "drug", "drug-1": "drug"}
    run = {"disease-0": {"A_0": 3.0, "A_1": 2.0, "B_2": 1.0}, "drug-0": {}}
    res = cliniq.evaluate(run, rows, qtypes, chunk_ids, irrelevant={("disease-0", "A_0")})
    c = res["counts"]
    assert c["unjudged_query_ids"] == ["drug-1"] and c["judged_queries"] == 2
    assert c["judged_queries_with_empty_run"] == 1
    assert res["multi"]["by_query_type"]["disease"]["mrr"] == pytest.approx(0.5)
    assert res["multi"]["by_query_type"]["drug"]["mrr"] == 0.0
    assert res["multi"]["all"]["n"] == 2 and res["multi"]["all"]["mrr"] == pytest.approx(0.25)
    assert res["multi"]["by_query_type"]["procedure"]["n"] == 0
    # condensed: the unjudged B_2 dropped; A_0 is judged (not relevant) and stays: A_0, A_1
    assert res["condensed"]["by_query_type"]["disease"]["mrr"] == pytest.approx(0.5)
    assert res["judged_at_10"]["by_query_type"]["disease"]["judged_at_10"] == pytest.approx(0.2)
    # single-patient: note A (6 chunks) scored for both queries; note B (3 chunks) skipped
    assert c["single_patient_notes_scored"] == 2 and c["skipped_fewer_than_5_chunks"] == 1
    rows_out = cliniq.table_rows("m", res, "by_match_type")
    assert {r["setting"] for r in rows_out} == {"multi", "single"}
    assert {r["group"] for r in rows_out} == {"all", *cliniq.MATCH_TYPES}


def _random_case(seed: int):
    import random

    from r2med_eval.cliniq.corpus import MATCH_TYPES, QUERY_TYPES

    rng = random.Random(seed)
    n_notes = 50 if seed < 6 else 400  # larger corpora: first relevant chunks far below the top 100
    chunk_ids = [f"{100 + n}_{i}" for n in range(n_notes) for i in range(rng.randint(1, 12))]
    qtypes = {f"q{i:02d}": QUERY_TYPES[i % 3] for i in range(30)}
    rows = []
    for q in list(qtypes)[:26]:
        for c in rng.sample(chunk_ids, rng.randint(1, 15)):
            rows.append((q, c, rng.choice(MATCH_TYPES)))
            if rng.random() < 0.2:  # a chunk judged under a second match type
                rows.append((q, c, rng.choice(MATCH_TYPES)))
    rows.append(("q05", "999_0", MATCH_TYPES[0]))  # a judged chunk missing from the corpus
    irrelevant = {(q, c) for q in qtypes for c in rng.sample(chunk_ids, 3)}
    run = {}
    for q in list(qtypes)[2:]:
        docs = rng.sample(chunk_ids, rng.randint(0, len(chunk_ids)))
        run[q] = {d: round(rng.choice([0.5, 0.25, rng.random()]), 6) for d in docs}  # many ties
        if rng.random() < 0.3:
            run[q]["not-a-chunk"] = 0.5
    return chunk_ids, qtypes, rows, irrelevant, run


@pytest.mark.parametrize("tie_order", ["corpus", "doc_id"])
@pytest.mark.parametrize("seed", range(9))
def test_vectorised_scoring_equals_the_reference_implementation(tmp_path, seed, tie_order):
    """read_ranked_run + evaluate_ranked (pyarrow + numpy, the score_cliniq rule) against read_run +
    evaluate (the implementation they replace, kept as the reference): the same result, every figure equal;
    a file in ranking order, one shuffled, and one pyarrow does not take (tabs: the reference reader)."""
    import json
    import random

    from r2med_eval.scoring import runs

    chunk_ids, qtypes, rows, irrelevant, run = _random_case(seed)
    runs.write_run(run, tmp_path / "run.trec", tag="x")
    lines = (tmp_path / "run.trec").read_text().splitlines(keepends=True)
    random.Random(seed).shuffle(lines)
    (tmp_path / "shuffled.trec").write_text("".join(lines))
    (tmp_path / "tabs.trec").write_text("".join(line.replace(" ", "\t", 1) for line in lines))
    reference = cliniq.evaluate(runs.read_run(tmp_path / "run.trec"), rows, qtypes, chunk_ids, irrelevant,
                                tie_order=tie_order)
    for name in ("run.trec", "shuffled.trec", "tabs.trec"):
        ranked = cliniq.read_ranked_run(tmp_path / name, chunk_ids, tie_order)
        assert ranked.depth() == runs.run_depth(run)
        result = cliniq.evaluate_ranked(ranked, rows, qtypes, chunk_ids, irrelevant)
        assert json.dumps(result, sort_keys=True) == json.dumps(reference, sort_keys=True), name
    assert reference["counts"]["judged_queries_with_empty_run"] >= 2
    if seed >= 6:  # the prefix cut is exercised: some query's first relevant chunk lies beyond it
        ranked = cliniq.read_ranked_run(tmp_path / "run.trec", chunk_ids)
        rel = {}
        for q, c, _ in rows:
            rel.setdefault(q, set()).add(c)
        assert any(min((i for i, d in enumerate(ranked.ranking(q).tolist()) if ranked.vocab[d] in rel[q]),
                       default=0) > 100 + len(rel[q]) for q in rel if q in ranked.row)


def test_vectorised_reader_sends_a_repeated_document_to_the_reference_error(tmp_path):
    (tmp_path / "r.trec").write_text("q1 Q0 A_0 1 0.5 x\nq1 Q0 A_0 2 0.4 x\n")
    with pytest.raises(InputError, match="appears twice"):
        cliniq.read_ranked_run(tmp_path / "r.trec", ["A_0"])

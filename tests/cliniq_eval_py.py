"""An independent transcription of the scoring part of CliniQ's official eval.py (github.com/zhao-zy15/CliniQ),
written for the tests from reading that script; it is the reference our ``r2med_eval.cliniq`` is compared with.

What eval.py does once it has the embeddings, transcribed step by step:

* the corpus is a list of chunk ids in corpus.jsonl order;
* per split (disease, procedure, drug): judgments are keyed by query *text*; every row of qrels_<split>.tsv
  appends its chunk to the query's list of its match type and to the query's ``overall`` list (repeats kept);
* each query's similarities are ``cosine_similarity([q_emb], corpus_embeds)[0]`` (scikit-learn, on the float32
  embeddings) and its ranking is ``[corpus_ids[i] for i in np.argsort(-similarities)]`` over the whole corpus,
  with numpy's default sort kind, which does not keep equal similarities in corpus order (``kind`` below runs
  the same scoring with another sort kind: ``"stable"`` is eval.py's scoring of a run that has no similarities
  of eval.py's own, e.g. BM25, with equal scores kept in corpus order);
* multi-patient ("inter"): MRR, nDCG@10 (ideal DCG from the retrieved top-10 relevances), recall@100 over the
  ``overall`` list; one value per query;
* single-patient ("inner"): for each HADM_ID holding a relevant chunk (set order does not matter: only means
  are reported), the note's chunks in ranking order; skip when fewer than 5 chunks or as many relevant
  entries as chunks; MRR, nDCG at the list length, AP; per match type: keep the type's relevant chunks of the
  note, remove the note's other relevant chunks from the ranking, skip when all that is left is relevant.
"""
import numpy as np

TYPES = ["string", "synonym", "abbreviation", "hyponym", "implication"]
SPLITS = ["disease", "procedure", "drug"]


def calculate_mrr(predicted_ranks, correct_ranks):
    for idx, pr in enumerate(predicted_ranks):
        if pr in correct_ranks:
            return 1.0 / (idx + 1)
    return 0


def calculate_ndcg_at_k(predicted_ranks, correct_ranks, k):
    def dcg_at_k(r, k):
        r = np.asarray(r)[:k]
        return np.sum(r / np.log2(np.arange(2, r.size + 2)))

    relevances = [1 if d in correct_ranks else 0 for d in predicted_ranks[:k]]
    if 1 not in relevances:
        return 0
    return dcg_at_k(relevances, k) / dcg_at_k(sorted(relevances, reverse=True), k)


def recall_at_k(predicted_ranks, correct_ranks, k):
    hits = sum(1 for d in predicted_ranks[:k] if d in correct_ranks)
    if len(correct_ranks) == 0:
        return 0
    return hits / len(correct_ranks)


def average_precision(predicted_ranks, correct_ranks):
    if not correct_ranks:
        return 0.0
    score, num_hits = 0.0, 0.0
    for i, p in enumerate(predicted_ranks):
        if p in correct_ranks:
            num_hits += 1.0
            score += num_hits / (i + 1.0)
    return score / len(correct_ranks)


def similarities(q_emb, corpus_embeds):
    """eval.py's ``process_query``, its first line."""
    from sklearn.metrics.pairwise import cosine_similarity

    return cosine_similarity([q_emb], corpus_embeds)[0]


def ranking(corpus_ids, sims, kind=None):
    """eval.py's ``process_query``, its second line; ``kind=None`` calls ``np.argsort`` as eval.py does."""
    order = np.argsort(-sims) if kind is None else np.argsort(-sims, kind=kind)
    return [corpus_ids[r] for r in order]


def evaluate(corpus_ids, splits, kind=None):
    """``splits``: split -> (queries: list of (id, text) in file order, qrels rows: (query id, chunk id, match type)
    in file order, similarities: query id -> array over ``corpus_ids``). ``kind``: the sort kind of the ranking
    (None: numpy's default, as eval.py).

    Returns eval.py's lists: ``inter`` (3 lists: MRR, nDCG@10, R@100), ``inner`` (match type or overall ->
    3 lists: MRR, nDCG, AP) and per split ``inter``/``inner`` (the per-split prints)."""
    inner = {t: [[], [], []] for t in TYPES + ["overall"]}
    inter = [[], [], []]
    per_split = {}
    for split in SPLITS:
        queries, qrel_rows, sims = splits[split]
        text_of = dict(queries)
        qrels = {}
        for qid, chunk, typ in qrel_rows:
            q = text_of[qid]
            if q not in qrels:
                qrels[q] = {t: [] for t in TYPES + ["overall"]}
            qrels[q][typ].append(chunk)
            qrels[q]["overall"].append(chunk)
        query_list = [text for _, text in queries]
        results = [ranking(corpus_ids, sims[qid], kind) for qid, _ in queries]
        tmp_inner, tmp_inter = [[], [], []], [[], [], []]
        for i in range(len(queries)):
            predicted_ranks = results[i]
            correct_ranks = qrels[query_list[i]]["overall"]
            tmp_inter[0].append(calculate_mrr(predicted_ranks, correct_ranks))
            tmp_inter[1].append(calculate_ndcg_at_k(predicted_ranks, correct_ranks, 10))
            tmp_inter[2].append(recall_at_k(predicted_ranks, correct_ranks, 100))
            for note in set(d.split("_")[0] for d in correct_ranks):
                tmp_pred = [d for d in predicted_ranks if d.split("_")[0] == note]
                tmp_corr = [d for d in correct_ranks if d.split("_")[0] == note]
                if len(tmp_pred) < 5 or len(tmp_pred) == len(tmp_corr):
                    continue
                tmp_inner[0].append(calculate_mrr(tmp_pred, tmp_corr))
                tmp_inner[1].append(calculate_ndcg_at_k(tmp_pred, tmp_corr, len(tmp_pred)))
                tmp_inner[2].append(average_precision(tmp_pred, tmp_corr))
                for typ in TYPES:
                    typ_corr = [d for d in qrels[query_list[i]][typ] if d in tmp_corr]
                    if not typ_corr:
                        continue
                    remove = [x for x in tmp_corr if x not in typ_corr]
                    typ_pred = [x for x in tmp_pred if x not in remove]
                    if len(typ_pred) == len(typ_corr):
                        continue
                    inner[typ][0].append(calculate_mrr(typ_pred, typ_corr))
                    inner[typ][1].append(calculate_ndcg_at_k(typ_pred, typ_corr, len(typ_pred)))
                    inner[typ][2].append(average_precision(typ_pred, typ_corr))
        for j in range(3):
            inner["overall"][j] += tmp_inner[j]
            inter[j] += tmp_inter[j]
        per_split[split] = {"inter": tmp_inter, "inner": tmp_inner}
    return {"inter": inter, "inner": inner, "per_split": per_split}

"""An independent transcription of R2MED's reranking (src/utils.py ``RerankerModel`` and src/eval_reranker.py
``reranker_by_dense`` at commit 62b7074), written for the tests from reading that code; the reference our
``r2med_eval.rerank`` scorers are compared with. Also MedCPT-Cross-Encoder's model-card usage (R2MED has no
MedCPT reranker).

RerankerModel.predict takes all pairs of one query at once (eval_reranker passes the top k of a query):

* ``bge``: ``tokenizer(pairs, padding=True, truncation=True, max_length=...)``, ``logits.view(-1).float()``;
* ``mono``: ``tokenizer(queries, passages, truncation=True, padding="longest", max_length=...)``, ``logits[:, 1]``;
* ``llama``: the base model as ``AutoModelForSequenceClassification(num_labels=1)`` (fp16 there), the PEFT
  adapter applied and merged; per pair ``tokenizer(f"query: {q}", f"document: {p}", max_length=...)`` (no
  padding; ``max_length`` alone truncates longest_first), ``logits[0][0]``.

reranker_by_dense: for each query the first ``top_k`` documents of the first-stage run (its file order), scored,
sorted by score descending and cut at top_k; the raw scores go to pytrec_eval, so the ranking the figures come
from is trec_eval's order of them (``trec_eval_order``).
"""
import torch


class R2MEDReranker:
    def __init__(self, mode: str, model_dir, base_dir=None, max_length: int = 512, dtype=torch.float32):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.mode, self.max_length = mode, max_length
        if mode == "llama":
            from peft import PeftModel

            self.tokenizer = AutoTokenizer.from_pretrained(base_dir)
            base = AutoModelForSequenceClassification.from_pretrained(base_dir, num_labels=1, dtype=dtype)
            self.model = PeftModel.from_pretrained(base, model_dir).merge_and_unload()
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
            self.model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
        self.model.eval()

    @torch.no_grad()
    def predict(self, sentence_pairs):
        if self.mode == "bge":
            inputs = self.tokenizer(sentence_pairs, padding=True, truncation=True, return_tensors="pt",
                                    max_length=self.max_length)
            return self.model(**inputs, return_dict=True).logits.view(-1, ).float().tolist()
        if self.mode == "mono":
            queries, passages = zip(*sentence_pairs)
            inputs = self.tokenizer(list(queries), list(passages), return_tensors="pt", truncation=True,
                                    padding="longest", max_length=self.max_length)
            return self.model(**inputs).logits[:, 1].squeeze(-1).tolist()
        scores = []
        for q, p in sentence_pairs:
            inputs = self.tokenizer(f"query: {q}", f"document: {p}", return_tensors="pt", max_length=self.max_length)
            scores.append(self.model(**inputs).logits[0][0].float().item())
        return scores


@torch.no_grad()
def medcpt_card_scores(model_dir, pairs, max_length=512):
    """MedCPT-Cross-Encoder's model card: tokenizer(pairs, truncation, padding, max_length 512),
    ``logits.squeeze(dim=1)``."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    encoded = tokenizer(pairs, truncation=True, padding=True, return_tensors="pt", max_length=max_length)
    return model(**encoded).logits.squeeze(dim=1).tolist()


def trec_eval_order(results):
    """The ranking pytrec_eval (trec_eval's code) evaluates for a query's {pid: score}: score descending, equal
    scores by document id descending (trec_eval's comparison of two results falls back to the reversed docno)."""
    return [pid for pid, _ in sorted(results.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def reranker_by_dense(queries, corpus, init_results, model, top_k):
    """``init_results``: qid -> {pid: score} in the first-stage file order; returns qid -> {pid: score}, ordered."""
    new_results = {}
    for qid in init_results:
        topk_pids = list(init_results[qid].keys())
        pairs = [[queries[qid], corpus[pid]["text"]] for pid in topk_pids[:top_k]]
        scores = model.predict(pairs)
        ranking = {pid: score for pid, score in zip(topk_pids[:top_k], scores)}
        new_results[qid] = dict(sorted(ranking.items(), key=lambda item: item[1], reverse=True)[:top_k])
    return new_results

"""Paper-faithful BM25 (R2MED's eval_BM25.py): against gensim itself and an independent per-query loop."""
import json
import math
from collections import Counter

import numpy as np
import pytest
from conftest import REPO, shared_dataset

from r2med_eval.benchmarks import datasets
from r2med_eval.lexical import bm25_paper


@pytest.fixture(scope="module")
def analyzer():
    return bm25_paper.LuceneAnalyzer()


def reference_bm25(doc_tokens, query_tokens, k1=0.9, b=0.4):
    """Straightforward LuceneBM25Model in pure Python: per query, an accumulator over the postings of its
    terms. Scores in float64 (the pipeline's are float32, as gensim's index)."""
    n = len(doc_tokens)
    tfs = [Counter(toks) for toks in doc_tokens]
    df = Counter(t for tf in tfs for t in tf)
    avgdl = sum(len(toks) for toks in doc_tokens) / n
    idf = {t: math.log(n + 1.0) - math.log(f + 0.5) for t, f in df.items()}
    postings = {}
    for d, tf in enumerate(tfs):
        dl = len(doc_tokens[d])
        for t, f in tf.items():
            postings.setdefault(t, []).append((d, idf[t] * f / (f + k1 * (1 - b + b * dl / avgdl))))
    out = []
    for toks in query_tokens:
        q = Counter(t for t in toks if t in df)
        qlen = sum(q.values())
        scores = [0.0] * n
        for t, f in q.items():
            wq = idf[t] * f / (f + k1 * (1 - b + b * qlen / avgdl))
            for d, wd in postings[t]:
                scores[d] += wd * wq
        out.append(scores)
    return out


def official_gensim(doc_tokens, query_tokens, k=100):
    """R2MED's retrieval_bm25 loop with gensim, on the same tokens: [(doc index, score)] per query."""
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    dictionary = Dictionary(doc_tokens)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    bm25_corpus = model[list(map(dictionary.doc2bow, doc_tokens))]
    index = SparseMatrixSimilarity(bm25_corpus, num_docs=len(doc_tokens), num_terms=len(dictionary),
                                   normalize_queries=False, normalize_documents=False)
    out = []
    for toks in query_tokens:
        sims = index[model[dictionary.doc2bow(toks)]].tolist()
        out.append(sorted(enumerate(sims), key=lambda x: x[1], reverse=True)[:k])
    return out


def check_against_reference(model, hits, doc_tokens, query_tokens, k):
    ref = reference_bm25(doc_tokens, query_tokens)
    for (idx, val), scores in zip(hits, ref):
        scores = np.asarray(scores)
        np.testing.assert_allclose(val, scores[idx], rtol=2e-6, atol=1e-6)
        kth = np.sort(scores)[::-1][min(k, len(scores)) - 1]
        assert (scores[idx] >= kth - 1e-5 * max(1.0, kth)).all()  # the top k, up to float32 ties
        assert len(set(idx.tolist())) == len(idx) == min(k, len(scores))


def load_texts(path, layout):
    ds = datasets.load(layout, path, duplicate_qrels="max", unknown_qrels="keep")
    ids = list(ds.corpus)
    return ids, [datasets.doc_contents(ds.corpus[d]) for d in ids], list(ds.queries), list(ds.queries.values())


def test_batched_analyzer_equals_pyserini_per_text(analyzer):
    _, docs, _, queries = load_texts(REPO / "data" / "demo", "r2med")
    tricky = ["", "   ", "Aspirin's effects\r\n on COX-1, 1,000 mg", bm25_paper.MARKER + " inside a text",
              "naïve café — ünïcödé\u200dzwj", "x" * 600, "\n\n", "The and of"]
    texts = docs + queries + tricky
    analyzer.batch_docs, analyzer.batch_chars = 7, 5000
    try:
        per_text = [analyzer.analyze_one(t) for t in texts]
        analyzer.fallback_batches = 0
        assert analyzer.analyze(texts) == per_text
        assert analyzer.fallback_batches == 1  # the batch holding the marker was analysed text by text
        assert analyzer.analyze(texts * 5, threads=3) == per_text * 5  # Java threads: same tokens, same order
        assert analyzer.fallback_batches == 6
        # the stored corpus (tokens read in one pass over each batch, marker between texts) is that of the
        # per-text token lists; with the marker in a text it comes from the per-text lists themselves
        for subset, threads in ((texts, 1), ([t for t in texts if bm25_paper.MARKER not in t] * 3, 2)):
            ids = [f"d{i}" for i in range(len(subset))]
            got = bm25_paper.analyse_corpus(ids, subset, analyzer, threads=threads)
            want = bm25_paper.encode_tokens([analyzer.analyze_one(t) for t in subset], ids)
            assert got.doc_ids == ids and got.terms == want.terms and got.tokens() == [
                analyzer.analyze_one(t) for t in subset]
            assert got.token_ids.tolist() == want.token_ids.tolist() and got.lengths.tolist() == want.lengths.tolist()
            assert got.fallback_batches == (threads == 1)  # the batch holding the marker, counted once
        assert bm25_paper.analyse_corpus([], [], analyzer).lengths.tolist() == []
    finally:
        analyzer.batch_docs, analyzer.batch_chars = 128, 200_000
    assert analyzer.analyze_one("Running runners ran") == ["run", "runner", "ran"]  # Porter, as Lucene's default


def test_weights_follow_lucene_bm25_formula():
    docs = [["a", "b", "b"], ["b", "c"], ["c", "c", "c", "d"]]
    m = bm25_paper.BM25Paper(k1=0.9, b=0.4).fit(docs)
    assert m.avgdl == 9 / 3
    assert m.terms == ["a", "b", "c", "d"]  # gensim's numbering: first document, then string order
    ids, w = m.query_weights(["b", "b", "zzz"])  # unknown term dropped; the repeated term has tf 2
    idf_b = math.log(4.0) - math.log(2.5)
    assert ids == [1]
    assert w[0] == idf_b * (2 / (2 + 0.9 * (1 - 0.4 + 0.4 * 2 / 3.0)))
    _, w1 = m.query_weights(["b"])
    assert w1[0] != w[0]


def test_term_numbering_is_gensims():
    from gensim.corpora import Dictionary

    docs = [["zeta", "alpha", "zeta"], ["beta", "alpha", "omega"], [], ["delta", "beta", "aardvark"]]
    m = bm25_paper.BM25Paper().fit(docs)
    assert m.term_ids == Dictionary(docs).token2id


def test_ties_keep_corpus_order_and_zero_fill():
    docs = [["x"], ["y", "q"], ["y", "q"], ["z"], ["y", "q"]]
    m = bm25_paper.BM25Paper().fit(docs)
    (idx, val), (idx2, val2) = m.search([["q"], ["unknown"]], k=4)
    assert idx.tolist() == [1, 2, 4, 0]  # three tied matches in corpus order, then score-0 documents
    assert val[0] == val[1] == val[2] > 0 and val[3] == 0
    assert idx2.tolist() == [0, 1, 2, 3] and not val2.any()  # a query without known terms
    (idx3, _), = m.search([["q"]], k=4, fill_zero=False)
    assert idx3.tolist() == [1, 2, 4]


def test_demo_equals_gensim_and_reference(analyzer):
    ids, docs, qids, queries = load_texts(REPO / "data" / "demo", "r2med")
    doc_tokens, query_tokens = analyzer.analyze(docs), analyzer.analyze(queries)
    model = bm25_paper.BM25Paper().fit(doc_tokens)
    hits = model.search(query_tokens, k=100)
    check_against_reference(model, hits, doc_tokens, query_tokens, 100)
    for (idx, val), theirs in zip(hits, official_gensim(doc_tokens, query_tokens)):
        assert [(i, float(v)) for i, v in zip(idx.tolist(), val.tolist())] == theirs  # bit-identical, same order


def test_r2med_biology_demo_equals_gensim(analyzer):
    data = shared_dataset("r2med-biology-demo")
    ids, docs, qids, queries = load_texts(data, "r2med")
    run, info = bm25_paper.retrieve(ids, docs, qids, queries, analyzer=analyzer)
    theirs = official_gensim([analyzer.analyze_one(d) for d in docs], [analyzer.analyze_one(q) for q in queries])
    for qid, top in zip(qids, theirs):
        assert list(run[qid].items()) == [(ids[i], s) for i, s in top]
    assert info["documents"] == 2 and all(len(r) == 2 for r in run.values())


@pytest.mark.slow
def test_medquad_equals_gensim_and_reference(analyzer):
    """The whole official path (per-text pyserini analysis, gensim) against ours (batched analysis, sparse products)."""
    data = shared_dataset("medquad-liveqa")
    ids, docs, qids, queries = load_texts(data, "beir")
    assert (len(ids), len(qids)) == (17908, 104)
    analyzer.fallback_batches = 0
    run, info = bm25_paper.retrieve(ids, docs, qids, queries, analyzer=analyzer)
    per_text_docs = [analyzer.analyze_one(d) for d in docs]
    per_text_queries = [analyzer.analyze_one(q) for q in queries]
    theirs = official_gensim(per_text_docs, per_text_queries)
    for qid, top in zip(qids, theirs):
        assert list(run[qid].items()) == [(ids[i], s) for i, s in top]
    model = bm25_paper.BM25Paper().fit(per_text_docs)
    check_against_reference(model, model.search(per_text_queries, k=100), per_text_docs, per_text_queries, 100)
    assert info["terms"] > 20000 and info["tokenizer_fallback_batches"] == 0


def test_run_file_keeps_float32_order(tmp_path):
    """The run file holds 8 decimals: reading it back gives the same ranking as the in-memory scores (trec_eval's
    order of them: equal scores by id descending)."""
    from r2med_eval.scoring import runs

    docs = [["a"] * n + ["b"] * (7 - n) for n in range(1, 7)] + [["c"]]
    m = bm25_paper.BM25Paper().fit(docs)
    (idx, val), = m.search([["a", "b", "c"]], k=7)
    run = {"q": {f"d{i}": float(v) for i, v in zip(idx.tolist(), val.tolist())}}
    runs.write_run(run, tmp_path / "r.trec", tag="bm25-paper", decimals=8)
    back = runs.read_run(tmp_path / "r.trec")
    exact = sorted(sorted(run["q"], reverse=True), key=lambda d: run["q"][d], reverse=True)  # full precision
    assert list(back["q"]) == exact
    assert json.dumps(sorted(back["q"].values())) == json.dumps(sorted(round(v, 8) for v in run["q"].values()))


class _Named(dict):
    """Snakemake's named input/output lists, as far as the stage functions use them."""

    __getattr__ = dict.__getitem__

    def __iter__(self):
        return iter(self.values())


def _job(inputs, outputs, spec, **wildcards):
    from types import SimpleNamespace

    wildcards = {"benchmark": "demo", "task": "demo", "model": "bm25-paper", **wildcards}
    return SimpleNamespace(input=_Named(inputs), output=_Named(outputs), params=SimpleNamespace(spec=spec),
                           wildcards=SimpleNamespace(**wildcards), threads=1)


def test_cached_analysis_and_fit_give_the_official_run_byte_for_byte(tmp_path, analyzer):
    """The three jobs (analyse the corpus once per task, fit per (k1, b), search the queries) against R2MED's
    gensim loop on per-text analysis, and against the one-shot in-memory path: identical run files; a second
    search of the same fit (a cached run) gives the same bytes again."""
    from r2med_eval import io
    from r2med_eval.scoring import runs
    from r2med_eval.stages import index, retrieve

    ds = datasets.load("r2med", REPO / "data" / "demo")
    datasets.write_internal(ds, tmp_path / "task")
    corpus, queries = tmp_path / "task" / "corpus.jsonl", tmp_path / "task" / "queries.jsonl"
    tokens, fit = tmp_path / "bm25_paper" / "tokens.npz", tmp_path / "bm25_paper" / "k1-0.9_b-0.4.npz"
    query_tokens = tmp_path / "bm25_paper" / "query_tokens.npz"
    index.analyse_bm25_paper(_job({"corpus": corpus, "queries": queries},
                                  {"tokens": tokens, "query_tokens": query_tokens}, {"private": False}))
    index.fit_bm25_paper(_job({"tokens": tokens}, {"model": fit}, {"k1": 0.9, "b": 0.4, "private": False},
                              k1="0.9", b="0.4"))
    spec = {"k1": 0.9, "b": 0.4, "top_k": 100, "fill_zero": True}
    for name in ("cached.trec", "cached-again.trec"):
        retrieve.retrieve_bm25_paper(_job({"model": fit, "queries": queries, "query_tokens": query_tokens},
                                          {"run": tmp_path / name, "info": tmp_path / (name + ".json")}, spec))
    ids, qids = list(ds.corpus), list(ds.queries)
    texts = [datasets.doc_contents(ds.corpus[d]) for d in ids]
    theirs = official_gensim([analyzer.analyze_one(t) for t in texts],
                             [analyzer.analyze_one(ds.queries[q]) for q in qids])
    runs.write_run({q: {ids[i]: s for i, s in top} for q, top in zip(qids, theirs)}, tmp_path / "official.trec",
                   tag="bm25-paper", decimals=8)
    one_shot, _ = bm25_paper.retrieve(ids, texts, qids, [ds.queries[q] for q in qids])
    runs.write_run(one_shot, tmp_path / "one-shot.trec", tag="bm25-paper", decimals=8)
    cached = (tmp_path / "cached.trec").read_bytes()
    assert cached.count(b"\n") == 100 * len(qids)
    assert cached == (tmp_path / "official.trec").read_bytes() == (tmp_path / "one-shot.trec").read_bytes()
    assert cached == (tmp_path / "cached-again.trec").read_bytes()
    info = io.read_json(tmp_path / "cached.trec.json")
    assert info["documents"] == len(ids) and info["k1"] == 0.9 and info["tokenizer_fallback_batches"] == 0

    # a fit for other (k1, b) reads the same analysed corpus; a mismatched fit file is refused
    other = tmp_path / "bm25_paper" / "k1-1.2_b-0.75.npz"
    index.fit_bm25_paper(_job({"tokens": tokens}, {"model": other}, {"k1": 1.2, "b": 0.75, "private": False},
                              k1="1.2", b="0.75"))
    model, doc_ids, _ = bm25_paper.BM25Paper.load(other)
    assert doc_ids == ids and (model.k1, model.b) == (1.2, 0.75)
    with pytest.raises(ValueError, match="fitted with k1=1.2"):
        retrieve.retrieve_bm25_paper(_job({"model": other, "queries": queries, "query_tokens": query_tokens},
                                          {"run": tmp_path / "x.trec", "info": tmp_path / "x.json"}, spec))


def test_analysed_corpus_round_trip(tmp_path):
    docs = [["b", "a", "b"], [], ["c", "a"], ["d"]]
    enc = bm25_paper.encode_tokens(docs, ["d1", "d2", "d3", "d4"], fallback_batches=2)
    enc.save(tmp_path / "t.npz")
    back = bm25_paper.AnalysedCorpus.load(tmp_path / "t.npz")
    assert back.doc_ids == ["d1", "d2", "d3", "d4"] and back.terms == ["b", "a", "c", "d"]
    assert back.token_ids.tolist() == [0, 1, 0, 2, 1, 3] and back.lengths.tolist() == [3, 0, 2, 1]
    assert back.fallback_batches == 2
    fitted = bm25_paper.BM25Paper().fit_encoded(back)
    direct = bm25_paper.BM25Paper().fit(docs)
    assert fitted.terms == direct.terms and (fitted.doc_matrix_t != direct.doc_matrix_t).nnz == 0
    with pytest.raises(ValueError, match="newline"):
        bm25_paper.encode_tokens([["a\nb"]]).save(tmp_path / "bad.npz")


def test_short_job_jvm_analyses_as_the_default_jvm(analyzer):
    """The pipeline's jobs start their JVM with ``java.SHORT_JOB_OPTIONS`` (serial collector, C1 only) for
    corpora up to ``QUICK_JVM_MAX_CHARS``: in a fresh process that does so, the same tokens as the per-text
    analysis on this process's JVM (started with the defaults)."""
    import subprocess
    import sys

    _, docs, _, queries = load_texts(REPO / "data" / "demo", "r2med")
    texts = docs + queries + ["Aspirin's effects\r\n on COX-1, 1,000 mg", "naïve café — ünïcödé", ""]
    code = r"""
import json, sys
from r2med_eval.lexical import bm25_paper
texts = json.load(sys.stdin)
corpus = bm25_paper.analyse_corpus([str(i) for i in range(len(texts))], texts, threads=2)
from jnius import autoclass
args = list(autoclass("java.lang.management.ManagementFactory").getRuntimeMXBean().getInputArguments())
ends = [int(e) for e in corpus.lengths.cumsum()]
ids = corpus.token_ids.tolist()
tokens = [[corpus.terms[t] for t in ids[a:b]] for a, b in zip([0] + ends[:-1], ends)]
print(json.dumps({"args": args, "tokens": tokens}))
"""
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "-XX:TieredStopAtLevel=1" in out["args"] and "-XX:+UseSerialGC" in out["args"]
    assert out["tokens"] == [analyzer.analyze_one(t) for t in texts]


def _demo_task(tmp_path):
    """The demo task's internal files, analysed and fitted by the stage functions (k1 0.9, b 0.4)."""
    from r2med_eval.stages import index

    ds = datasets.load("r2med", REPO / "data" / "demo")
    datasets.write_internal(ds, tmp_path / "task")
    files = {"corpus": tmp_path / "task" / "corpus.jsonl", "queries": tmp_path / "task" / "queries.jsonl",
             "tokens": tmp_path / "bm25_paper" / "tokens.npz", "query_tokens": tmp_path / "bm25_paper" / "qt.npz",
             "model": tmp_path / "bm25_paper" / "k1-0.9_b-0.4.npz"}
    index.analyse_bm25_paper(_job({k: files[k] for k in ("corpus", "queries")},
                                  {k: files[k] for k in ("tokens", "query_tokens")}, {"private": False}))
    index.fit_bm25_paper(_job({"tokens": files["tokens"]}, {"model": files["model"]},
                              {"k1": 0.9, "b": 0.4, "private": False}, k1="0.9", b="0.4"))
    return ds, files


SEARCH_SPEC = {"k1": 0.9, "b": 0.4, "top_k": 100, "fill_zero": True}


def test_stored_query_tokens_are_pyserinis_and_the_search_starts_no_jvm(tmp_path, analyzer):
    """The analyse job stores the queries' tokens (pyserini's per-text analysis, same ids and order); the
    search of the plain queries, in a fresh process, reads them: it imports neither pyserini nor jnius, and
    its run file is byte-identical to R2MED's gensim loop (independent transcription above)."""
    import subprocess
    import sys

    from r2med_eval.scoring import runs

    ds, files = _demo_task(tmp_path)
    qids = list(ds.queries)
    stored = bm25_paper.AnalysedQueries.load(files["query_tokens"])
    assert stored.doc_ids == qids and stored.fallback_batches == 0
    assert stored.tokens() == [analyzer.analyze_one(ds.queries[q]) for q in qids]
    assert stored.texts_sha256 == bm25_paper.texts_sha256(qids, [ds.queries[q] for q in qids])

    code = r"""
import json, sys
from types import SimpleNamespace
from r2med_eval.stages import retrieve

class Named(dict):
    __getattr__ = dict.__getitem__

files, out = json.loads(sys.argv[1]), sys.argv[2]
sm = SimpleNamespace(input=Named(model=files["model"], queries=files["queries"], query_tokens=files["query_tokens"]),
                     output=Named(run=out, info=out + ".json"),
                     params=SimpleNamespace(spec={"k1": 0.9, "b": 0.4, "top_k": 100, "fill_zero": True}),
                     wildcards=SimpleNamespace(benchmark="demo", task="demo", model="bm25-paper"), threads=1)
retrieve.retrieve_bm25_paper(sm)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("jnius", "pyserini", "jnius_config"))))
"""
    out = tmp_path / "stored.trec"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps({k: str(v) for k, v in files.items()}), str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []

    ids = list(ds.corpus)
    theirs = official_gensim([analyzer.analyze_one(datasets.doc_contents(ds.corpus[d])) for d in ids],
                             [analyzer.analyze_one(ds.queries[q]) for q in qids])
    runs.write_run({q: {ids[i]: s for i, s in top} for q, top in zip(qids, theirs)}, tmp_path / "official.trec",
                   tag="bm25-paper", decimals=8)
    assert out.read_bytes() == (tmp_path / "official.trec").read_bytes()
    assert out.read_bytes().count(b"\n") == 100 * len(qids)


def test_query_variant_search_analyses_its_texts(tmp_path, analyzer):
    """A query-variant run has no stored tokens: its combined texts are analysed in the job, as R2MED's code
    analyses them (per text), and the run equals the gensim loop on those texts."""
    from r2med_eval import io
    from r2med_eval.expansion import gar
    from r2med_eval.scoring import runs
    from r2med_eval.stages import retrieve

    ds, files = _demo_task(tmp_path)
    qids, ids = list(ds.queries), list(ds.corpus)
    variant = tmp_path / "variant.jsonl"
    io.write_jsonl(variant, [{"id": q, "text": ds.queries[q], "hy_doc": f"hypothetical passage {i} on aspirin"}
                             for i, q in enumerate(qids)])
    spec = {**SEARCH_SPEC, "variant": {"method": "query2doc", "llm": "handwritten", "reasoning": "none"}}
    retrieve.retrieve_bm25_paper(_job({"model": files["model"], "queries": files["queries"], "variant": variant},
                                      {"run": tmp_path / "v.trec", "info": tmp_path / "v.json"}, spec,
                                      model="bm25-paper+query2doc-handwritten"))
    texts = [gar.lexical_query("query2doc", ds.queries[q], f"hypothetical passage {i} on aspirin", "none")
             for i, q in enumerate(qids)]
    theirs = official_gensim([analyzer.analyze_one(datasets.doc_contents(ds.corpus[d])) for d in ids],
                             [analyzer.analyze_one(t) for t in texts])
    runs.write_run({q: {ids[i]: s for i, s in top} for q, top in zip(qids, theirs)}, tmp_path / "official.trec",
                   tag="bm25-paper+query2doc-handwritten", decimals=8)
    assert (tmp_path / "v.trec").read_bytes() == (tmp_path / "official.trec").read_bytes()


def test_mismatched_or_malformed_query_tokens_stop_with_one_input_error(tmp_path):
    """Stored query tokens that are not those of the task's queries file (other ids, other order, other texts)
    or no such file at all stop the search with one InputError naming the file and the fix; no run is written."""
    from r2med_eval import io
    from r2med_eval.errors import InputError
    from r2med_eval.stages import retrieve

    ds, files = _demo_task(tmp_path)
    rows = list(io.iter_jsonl(files["queries"]))
    edited = {
        "other ids": [{**r, "id": r["id"] + "x"} if i == 0 else r for i, (_, r) in enumerate(rows)],
        "other order": [r for _, r in reversed(rows)],
        "other texts": [{**r, "text": r["text"] + " again"} if i == 0 else r for i, (_, r) in enumerate(rows)],
    }
    expected = {"other ids": "1 ids not in the queries file", "other order": "another order",
                "other texts": "other query texts"}
    for name, lines in edited.items():
        qfile = tmp_path / f"{name}.jsonl"
        io.write_jsonl(qfile, lines)
        with pytest.raises(InputError) as err:
            retrieve.retrieve_bm25_paper(_job({"model": files["model"], "queries": qfile,
                                               "query_tokens": files["query_tokens"]},
                                              {"run": tmp_path / "x.trec", "info": tmp_path / "x.json"}, SEARCH_SPEC))
        msg = str(err.value)
        assert msg.startswith(str(files["query_tokens"]) + ": ") and expected[name] in msg, msg
        assert "Fix: delete" in msg and "analyse_bm25_paper" in msg and str(qfile) in msg
    for bad in (files["tokens"], files["corpus"], tmp_path / "absent.npz"):  # the corpus's tokens, not npz, none
        with pytest.raises(InputError, match="not a readable file of analysed queries") as err:
            retrieve.retrieve_bm25_paper(_job({"model": files["model"], "queries": files["queries"],
                                               "query_tokens": bad},
                                              {"run": tmp_path / "x.trec", "info": tmp_path / "x.json"}, SEARCH_SPEC))
        assert str(err.value).startswith(f"{bad}: ") and "Fix: delete" in str(err.value)
    assert not (tmp_path / "x.trec").exists()


def test_numpy_postings_search_sums_as_scipys_product():
    """The search adds the float32 products per query over its terms' postings (no scipy): bit for bit the
    row of scipy's float32 sparse product (what gensim's SparseMatrixSimilarity computes), on random corpora
    with repeated terms, empty documents and queries with unknown terms."""
    rng = np.random.default_rng(7)
    for trial in range(6):
        # a small vocabulary: many postings per query (the scores are scanned); a large one: few (sorted)
        n_terms = 300 if trial % 2 else 30000
        docs = [[f"t{i}" for i in rng.integers(0, n_terms, int(rng.integers(0, 60)))]
                for _ in range(400 if trial % 2 else 3000)]
        queries = [[f"t{i}" for i in rng.integers(0, n_terms + 1, int(rng.integers(0, 12)))] for _ in range(50)]
        model = bm25_paper.BM25Paper(k1=0.9 + 0.1 * trial, b=0.4).fit(docs)
        product = model.scores(queries)
        acc = np.zeros(model.n_docs, dtype=np.float32)
        for i, toks in enumerate(queries):
            idx, val = model.score_query(toks, acc)
            row = slice(product.indptr[i], product.indptr[i + 1])
            order = np.argsort(product.indices[row])
            assert idx.tolist() == product.indices[row][order].tolist()
            assert val.tobytes() == product.data[row][order].tobytes()
            assert not acc.any()


def test_stored_index_is_gensims_similarity_index(analyzer):
    """The fitted index (numpy only, no scipy) holds exactly the float32 matrix gensim's SparseMatrixSimilarity
    stores for R2MED's code (documents x terms, here transposed), and gensim's document frequencies: on the
    demo corpus and on random corpora with empty documents and repeated terms."""
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    _, docs, _, _ = load_texts(REPO / "data" / "demo", "r2med")
    rng = np.random.default_rng(3)
    corpora = [[analyzer.analyze_one(t) for t in docs]] + [
        [[f"t{i}" for i in rng.integers(0, n, int(rng.integers(0, 40)))] for _ in range(300)] for n in (50, 5000)]
    for doc_tokens in corpora:
        for k1, b in ((0.9, 0.4), (1.2, 0.75)):
            dictionary = Dictionary(doc_tokens)
            model = LuceneBM25Model(dictionary=dictionary, k1=k1, b=b)
            index = SparseMatrixSimilarity(model[list(map(dictionary.doc2bow, doc_tokens))], num_docs=len(doc_tokens),
                                           num_terms=len(dictionary), normalize_queries=False,
                                           normalize_documents=False)
            theirs = index.index.T.tocsr()
            theirs.sort_indices()
            ours = bm25_paper.BM25Paper(k1, b).fit(doc_tokens)
            assert ours.terms == [dictionary[i] for i in range(len(dictionary))]
            assert ours.df.tolist() == [dictionary.dfs.get(i, 0) for i in range(len(dictionary))]
            assert ours.t_indptr.tolist() == theirs.indptr.tolist()
            assert ours.t_indices.tolist() == theirs.indices.tolist()
            assert ours.t_data.dtype == np.float32 and ours.t_data.tobytes() == theirs.data.astype(np.float32).tobytes()


def test_search_job_gets_the_query_tokens_only_for_the_plain_queries():
    """Control layer: retrieve_bm25_paper's inputs hold the analysed queries (an output of analyse_bm25_paper)
    for the task's own queries, and a query variant's file instead for a query-variant run."""
    from r2med_eval.workflow import paths
    from r2med_eval.workflow.config import validate
    from r2med_eval.workflow.inputs import Inputs
    from r2med_eval.workflow.registry import Registry

    cfg = validate({
        "benchmarks": {"r": {"layout": "r2med", "tasks": {"Biology": {"path": "data/demo", "paper_task": "Biology"}}}},
        "models": {"bm25": {"type": "bm25_paper", "paper_name": "bm25"}},
        "query_variants": [{"benchmark": "r", "method": "hyde", "llm": "qwq-32b", "models": ["bm25"]}],
    })
    inputs = Inputs(Registry(cfg))
    plain = inputs.retrieve_bm25_paper(_Named(benchmark="r", task="Biology", model="bm25"))  # as Snakemake's
    assert plain == {"model": "results/index/r/Biology/bm25_paper/k1-0.9_b-0.4.npz",
                     "queries": "results/data/r/Biology/queries.jsonl",
                     "query_tokens": "results/index/r/Biology/bm25_paper/query_tokens.npz"}
    assert paths.parse(paths.BM25_PAPER_QUERY_TOKENS, plain["query_tokens"]) == {"benchmark": "r", "task": "Biology"}
    variant = inputs.retrieve_bm25_paper(_Named(benchmark="r", task="Biology", model="bm25+hyde-qwq-32b"))
    assert "query_tokens" not in variant and variant["model"] == plain["model"] and "variant" in variant
    smk = (REPO / "rules" / "index.smk").read_text()
    assert "query_tokens=paths.BM25_PAPER_QUERY_TOKENS" in smk and "queries=paths.QUERIES" in smk


def test_bench_times_the_analyse_job_with_its_rules_threads():
    """bench/bm25_paper.py measures the jobs as Snakemake runs them: with analyse_bm25_paper's threads."""
    import re

    smk = (REPO / "rules" / "index.smk").read_text()
    block = smk.split("rule analyse_bm25_paper:")[1].split("\nrule ")[0]
    threads = int(re.search(r"^    threads: (\d+)$", block, re.M).group(1))
    assert re.search(rf"^RULE_THREADS = {threads}\b", (REPO / "bench" / "bm25_paper.py").read_text(), re.M)

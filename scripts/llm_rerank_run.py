"""Snakemake adapter: rule llm_rerank_run (r2med_eval.stages.rerank.llm_rerank_run)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import rerank  # noqa: E402

smk.run(snakemake, rerank.llm_rerank_run)

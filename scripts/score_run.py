"""Snakemake adapter: rule score_run (r2med_eval.stages.score.score_run)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import score  # noqa: E402

smk.run(snakemake, score.score_run)

"""Snakemake adapter: rule cliniq_completion_judge (r2med_eval.stages.score.cliniq_completion_judge)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import score  # noqa: E402

smk.run(snakemake, score.cliniq_completion_judge)

"""Snakemake adapter: rule claims_cliniq_run (r2med_eval.stages.report.claims_cliniq_run)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import report  # noqa: E402

smk.run(snakemake, report.claims_cliniq_run)

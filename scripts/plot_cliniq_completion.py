"""Snakemake adapter: rule plot_cliniq_completion (r2med_eval.stages.report.plot_cliniq_completion)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import report  # noqa: E402

smk.run(snakemake, report.plot_cliniq_completion)

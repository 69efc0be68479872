"""Snakemake adapter: rule mteb_export (r2med_eval.stages.report.mteb_export)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import report  # noqa: E402

smk.run(snakemake, report.mteb_export)

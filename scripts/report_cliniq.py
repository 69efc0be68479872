"""Snakemake adapter: report_cliniq."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import cliniq_pipeline, smk  # noqa: E402

smk.run(snakemake, cliniq_pipeline.report)

"""Snakemake adapter: rule export_trec_run (r2med_eval.stages.retrieve.export_trec_run)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import retrieve  # noqa: E402

smk.run(snakemake, retrieve.export_trec_run)

"""Snakemake adapter: download_task."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import stages, smk  # noqa: E402

smk.run(snakemake, stages.download_task)

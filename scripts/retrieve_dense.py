"""Snakemake adapter: rule retrieve_dense (r2med_eval.stages.retrieve.retrieve_dense)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import retrieve  # noqa: E402

smk.run(snakemake, retrieve.retrieve_dense)

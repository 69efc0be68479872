"""Snakemake adapter: rule fingerprint_corpus (r2med_eval.stages.data.fingerprint_corpus)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import data  # noqa: E402

smk.run(snakemake, data.fingerprint_corpus)

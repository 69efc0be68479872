"""Snakemake adapter: rule fuse_runs (r2med_eval.stages.fuse.fuse_runs)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from r2med_eval import smk  # noqa: E402
from r2med_eval.stages import fuse  # noqa: E402

smk.run(snakemake, fuse.fuse_runs)

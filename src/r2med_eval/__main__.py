"""``python -m r2med_eval``: the ``r2med-eval`` command (r2med_eval.cli)."""
import sys

from r2med_eval.cli import main

sys.exit(main())

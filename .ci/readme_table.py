#!/usr/bin/env python3
"""The README's sample leaderboard is the default run's ``results/leaderboard.md`` table, copied between the
README's ``<!-- leaderboard:begin ... -->`` and ``<!-- leaderboard:end -->`` markers.

    make readme                                   # after `make`: write the table into README.md
    python .ci/readme_table.py --check            # exit 1 (with a diff) when README.md differs

tests/test_workflow.py runs ``--check`` on its run of the shipped default config, so the README cannot drift.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- leaderboard:begin[^>]*-->\n)(.*?)(<!-- leaderboard:end -->)", re.S)


def table(leaderboard_md: str) -> str:
    """The Markdown table of a leaderboard page (its lines starting with ``|``)."""
    rows = [line for line in leaderboard_md.splitlines() if line.startswith("|")]
    if not rows:
        raise SystemExit("readme_table: the leaderboard holds no table")
    return "\n".join(rows) + "\n"


def with_table(readme: str, rows: str) -> str:
    if not BLOCK.search(readme):
        raise SystemExit("readme_table: README.md has no <!-- leaderboard:begin --> ... <!-- leaderboard:end --> block")
    return BLOCK.sub(lambda m: m.group(1) + "\n" + rows + "\n" + m.group(3), readme, count=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaderboard", default=str(REPO / "results" / "leaderboard.md"),
                        help="the default run's leaderboard (default: results/leaderboard.md)")
    parser.add_argument("--readme", default=str(REPO / "README.md"))
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 with a diff when they differ")
    args = parser.parse_args(argv)
    readme = Path(args.readme).read_text(encoding="utf-8")
    wanted = with_table(readme, table(Path(args.leaderboard).read_text(encoding="utf-8")))
    if wanted == readme:
        return 0
    if args.check:
        diff = difflib.unified_diff(readme.splitlines(), wanted.splitlines(), "README.md", args.leaderboard,
                                    lineterm="")
        print("README.md's sample table differs from the default run's leaderboard (make readme updates it):\n"
              + "\n".join(diff), file=sys.stderr)
        return 1
    Path(args.readme).write_text(wanted, encoding="utf-8")
    print(f"README.md: sample table updated from {args.leaderboard}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The marker of a synthetic benchmark (``benchmarks.<name>.synthetic: true``, the shipped demos): every table and
claim heading that shows one says so, in these words, so that no verdict or figure of a demo reads as one about the
real benchmark."""

from __future__ import annotations

MARK = "synthetic: says nothing about the real benchmark"


def titled(benchmark: str, synthetic) -> str:
    """A benchmark's name as a heading shows it: with the marker when it is synthetic."""
    return f"{benchmark} ({MARK})" if benchmark in set(synthetic or ()) else benchmark


def note(benchmarks, synthetic) -> list[str]:
    """The note a table showing ``benchmarks`` carries: [] when none of them is synthetic."""
    shown = [b for b in dict.fromkeys(benchmarks) if b in set(synthetic or ())]
    if not shown:
        return []
    return [f"{', '.join(shown)}: {MARK}{'s' if len(shown) > 1 else ''} (data written for the project's demos)."]

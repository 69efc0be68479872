"""Helpers shared by the paired benchmarks: the anchor commit's package source, and timing a child process.

``anchor_src(commit, dest)`` extracts ``src/`` of an earlier commit with ``git archive`` (nothing is added to
the repository's worktree list); a child run with ``PYTHONPATH=<that>/src`` runs the anchor's code beside
this checkout's in the same benchmark process. ``timed(cmd)`` runs one child and returns its wall time and
peak resident memory (``wait4``'s ``ru_maxrss`` of that child alone).
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def anchor_src(commit: str, dest: Path, paths=("src",)) -> Path:
    """``src/`` of ``commit`` extracted under ``dest`` (with the other top-level ``paths`` asked for: ``schemas``
    for the control layer, ``()`` for the whole tree); returns the folder to put on PYTHONPATH."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, *paths], check=True,
                          stdout=subprocess.PIPE).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src"


def env_with(pythonpath: Path | str | None = None, **extra) -> dict:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def timed(cmd, env=None, cwd=None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, output) of one child; raises with the output tail if it fails.

    The child is started by a small fresh Python process (this file run as a script) that times it and
    reads its ``ru_maxrss``: a child forked straight from a large benchmark process would count the
    parent's pages it held between fork and exec in its own peak."""
    import json
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        proc = subprocess.run([sys.executable, __file__, report.name, *map(str, cmd)], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
        measured = json.loads(Path(report.name).read_text())
    return measured["wall"], measured["maxrss_kb"] / 1024, proc.stdout


def _measure(report: str, cmd: list[str]) -> int:
    import json

    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    Path(report).write_text(json.dumps({"wall": wall, "maxrss_kb": usage.ru_maxrss}))
    return os.waitstatus_to_exitcode(status)


def median(values) -> float:
    return statistics.median(values)


def summary(name: str, walls: dict[str, list[float]], rss: dict[str, list[float]], base: str, others) -> list[str]:
    """Lines: each side's median wall and peak RSS, the median of the paired ratios side/base (wall as a
    fraction of the base's) and its inverse (speed-up over the base)."""
    lines = [f"{name}: medians of {len(walls[base])} paired repeats"]
    lines.append(f"{'side':<30}{'wall s':>9}{'peak MB':>9}{'wall/' + base:>22}{'speed-up':>10}")
    for side in [base, *others]:
        ratios = [w / b for w, b in zip(walls[side], walls[base])]
        lines.append(f"{side:<30}{median(walls[side]):>9.2f}{median(rss[side]):>9.0f}{median(ratios):>21.2f}x"
                     f"{median([1 / r for r in ratios]):>9.2f}x")
    return lines


if __name__ == "__main__":
    import sys

    sys.exit(_measure(sys.argv[1], sys.argv[2:]))

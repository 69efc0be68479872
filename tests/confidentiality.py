"""The confidentiality probe (issue 23): a word planted in a copy of the CliniQ demo notes must reach no file
outside ``resources/`` and ``data/`` (the work directory is walked whole: results/, logs/, benchmarks/,
.snakemake/ ...), every file that holds it must be owner-only (0600, in a 0700 folder), and the terminal output
must not hold it. Each part of the probe (an LLM echoing its prompt, user code quoting its input, ...) adds its
models to one Snakemake run and checks it with ``assert_confined``."""
from __future__ import annotations

import csv
import os
import stat
from pathlib import Path

PLANTED = "Zyxwquartzplanted"  # a word only the planted notes hold
# the CliniQ demo over planted notes, as a config block ({notes}: planted_notes's copy, {demo}: the demo's folder)
BENCHMARK = """
benchmarks:
  cliniq-demo:
    layout: cliniq
    noteevents: {notes}
    expected_chunks: 203
    tasks:
      cliniq: {{path: {demo}}}
"""
ALLOWED = ("resources", "data")


def planted_notes(src: Path, dest: Path, word: str = PLANTED) -> Path:
    """A copy of a NOTEEVENTS.csv whose discharge summaries say ``word`` wherever they said "the": every chunk
    holds it, and the chunks are the same as the original's (the word count is unchanged). Owner-only, in an
    owner-only folder (the user's MIMIC copy would be)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(dest.parent, 0o700)
    with open(src, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    text, category = header.index("TEXT"), header.index("CATEGORY")
    for row in rows[1:]:
        if len(row) == len(header) and row[category] == "Discharge summary":
            row[text] = " ".join(word if w == "the" else w for w in row[text].split(" "))
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    return dest


def files_holding(root: Path, word: str = PLANTED) -> list[Path]:
    """Every regular file under ``root`` whose bytes hold ``word`` (a symbolic link is not followed: the retrievers'
    ``results/data/.../corpus.jsonl`` links to the chunks under resources/, which are checked where they lie)."""
    out = []
    needle = word.encode("utf-8")
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            with open(path, "rb") as handle:
                if needle in handle.read():
                    out.append(path)
    return sorted(out)


def assert_confined(work: Path, terminal: str, word: str = PLANTED) -> list[Path]:
    """The probe's assertions on a finished run in ``work`` with its terminal output; returns the files that hold
    the word (relative to ``work``), for the caller to check that the expected ones do."""
    assert word not in terminal, "the terminal output holds the planted word"
    work = Path(work).resolve()
    holders = files_holding(work, word)
    for path in holders:
        rel = path.relative_to(work)
        assert rel.parts[0] in ALLOWED, f"{rel} holds the planted word outside {' and '.join(ALLOWED)}/"
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == 0o600, f"{rel} holds the planted word and is {oct(mode)}, not 0600"
        folder = stat.S_IMODE(os.stat(path.parent).st_mode)
        assert folder == 0o700, f"{rel.parent} holds a file with the planted word and is {oct(folder)}, not 0700"
    return [p.relative_to(work) for p in holders]

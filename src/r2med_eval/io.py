"""Strict readers and atomic writers.

Every reader names the file and line of the first problem it meets; every writer writes to a
temporary file beside the target and renames it into place, so that a killed job never leaves a
file that looks complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator


def iter_jsonl(path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a UTF-8 JSONL file."""
    from .errors import InputError

    path = Path(path)
    if not path.is_file():
        raise InputError("file not found.", path=path, fix="check the path in config.yaml.")
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"bytes that are not UTF-8 at column {exc.start + 1}.",
                    path=path,
                    line=lineno,
                    fix="re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8).",
                ) from None
            if lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"malformed JSON ({exc.msg} at column {exc.colno}).",
                    path=path,
                    line=lineno,
                    fix="make every line one complete JSON object.",
                ) from None
            if not isinstance(obj, dict):
                raise InputError(
                    f"expected a JSON object, found {type(obj).__name__}.",
                    path=path,
                    line=lineno,
                    fix="make every line one JSON object.",
                )
            yield lineno, obj


@contextlib.contextmanager
def atomic_path(target, suffix: str = ""):
    """Give a temporary path beside ``target``; rename it onto ``target`` when the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(target, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target, obj) -> None:
    write_text(target, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl(target, rows) -> int:
    count = 0
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
                count += 1
    return count


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def read_lines(path) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle if line.rstrip("\n")]


def sha256_file(path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def protect_dir(folder) -> None:
    """An output folder of MIMIC-derived data (index, embeddings): created owner-only (0700)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)

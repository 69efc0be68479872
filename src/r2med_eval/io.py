"""Strict readers and atomic writers.

Every reader names the file and line of the first problem it meets; every writer writes to a
temporary file beside the target and renames it into place, so that a killed job never leaves a
file that looks complete. Written files follow the umask (0644 under umask 022), as files that
``open`` creates do; MIMIC-derived data is owner-only (``private=True``, ``protect_tree``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path


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
def atomic_path(target, suffix: str = "", private: bool = False):
    """Give a temporary path beside ``target``; rename it onto ``target`` when the block succeeds.

    The file gets the mode a new file gets under the umask, or 0600 if ``private``."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    except OSError as exc:
        raise unwritable(target, exc) from None
    os.close(fd)
    os.chmod(tmp, file_mode(private))  # mkstemp makes 0600 whatever the umask
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in FULL:
            raise unwritable(target, exc) from None
        raise


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)  # a full disk, a quota, a read-only file system


def unwritable(target, exc: OSError):
    """The one error (``InputError``) for an output that could not be written: the file and the system's reason."""
    from .errors import InputError

    return InputError(f"cannot write the file ({exc.strerror or type(exc).__name__}); nothing of it was left.",
                      path=target, fix="free space on the disk that holds it (or fix its permissions), then rerun.")


def write_text(target, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target, obj) -> None:
    """Strict JSON: a NaN or infinity stops here (ValueError) instead of reaching a result file."""
    write_text(target, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")


def write_jsonl(target, rows) -> int:
    count = 0
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
                count += 1
    return count


def tsv_text(header, rows: list[dict]) -> str:
    """A per-query TSV file's text: a header and one row per dict (its values under the header's names), a float
    with 6 decimals, an undefined value (None) as an empty cell."""
    def cell(v):
        return "" if v is None else (f"{v:.6f}" if isinstance(v, float) else str(v))

    return "\n".join(["\t".join(header)] + ["\t".join(cell(r[h]) for h in header) for r in rows]) + "\n"


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


def current_umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def file_mode(private: bool = False) -> int:
    """0600 for MIMIC-derived data, else what the umask gives a new file (0644 under 022)."""
    return 0o600 if private else 0o666 & ~current_umask()


def dir_mode(private: bool = False) -> int:
    return 0o700 if private else 0o777 & ~current_umask()


def set_tree_mode(root, private: bool = False) -> None:
    """Every folder and file under ``root`` (``root`` included) to the modes of ``file_mode``/``dir_mode``:
    for trees built in a ``mkdtemp`` folder (0700) or by a tool, before they are renamed into place."""
    root = Path(root)
    fmode, dmode = file_mode(private), dir_mode(private)
    if root.is_file():
        os.chmod(root, fmode)
        return
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, dmode)
        for name in files:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), fmode)


# ---------------------------------------------------------------- owner-only files (MIMIC-derived text)
# The one set of helpers every module that writes MIMIC-derived text uses: 0600 files in 0700 folders, whatever
# the umask (``atomic_path(..., private=True)`` for outputs written atomically).


def private_folder(folder, top=None) -> Path:
    """``folder`` made (missing folders too) and set owner-only (0700), and with ``top`` every folder between it
    and ``top`` (``top`` included; ``top`` not above ``folder``: only ``folder``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    if top is not None:
        top = Path(top).resolve()
        current = folder.resolve().parent
        while current == top or top in current.parents:
            os.chmod(current, 0o700)
            current = current.parent
    return folder


def open_private(path, top=None):
    """A new text file (UTF-8, line-buffered) readable by its owner only (0600), in owner-only folders
    (``private_folder(parent, top)``): a log that may carry MIMIC-derived text."""
    path = Path(path)
    private_folder(path.parent, top)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def protect_tree(root) -> None:
    """MIMIC-derived output (a file, or a folder and all it holds): owner-only (0600 files, 0700 folders)."""
    set_tree_mode(root, private=True)


def protect_up_to(path, top) -> None:
    """MIMIC-derived output ``path`` (a file or a folder tree) owner-only, and every folder between it and ``top``
    (``top`` included): the folders Snakemake made for a job's outputs under ``resources/cliniq/<benchmark>``."""
    protect_tree(path)
    private_folder(Path(path).parent, top)


def remove_stale(folder, prefix: str) -> list[str]:
    """Remove the temporaries ``prefix*`` that a killed job left in ``folder`` (only its own job writes
    them: Snakemake runs one job per output at a time). Returns the names removed."""
    import shutil

    folder = Path(folder)
    removed = []
    if folder.is_dir():
        for path in sorted(folder.glob(prefix + "*")):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            removed.append(path.name)
    return removed


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def finite_number(cell: str, *, path, line: int, column: str, fix: str) -> float:
    """A cell of a per-query file as a finite float: ASCII decimal notation only (``0.5``, ``-1e-3``). Python's
    ``float()`` also takes ``nan``, ``inf``, ``1_000`` and full-width or other Unicode digits, and a NaN reaching a
    test makes every comparison false; each of these stops with one message naming the file, line and column, the
    value cut to a few characters (``errors.as_id``)."""
    from .errors import InputError, as_id

    value = float(cell) if _DECIMAL.fullmatch(cell) else math.nan
    if not math.isfinite(value):
        raise InputError(f"column {column}: {as_id(cell)} is not a finite number in decimal notation (nan, inf, "
                         "digit separators and non-ASCII digits are refused).", path=path, line=line, fix=fix)
    return value

"""The answers' cache: append-only JSON lines keyed by sha256(model, messages, sampling[, logprobs][, attempt]).

Every answer is appended (flushed and fsynced): a crash or a rerun asks only what the cache lacks; a torn last
line (a crash while writing) is ignored. ``Request.attempt`` re-asks a request whose cached answer the caller
could not use (a malformed answer at temperature 0 would come back the same) as a new entry; the earlier entries
stay, so a rerun replays the same attempts without asking. ``private=True`` (a MIMIC-derived benchmark): the file
is owner-only (0600, folder 0700)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

from ..errors import LLMError
from ..io import private_folder
from .requests import Answer

log = logging.getLogger(__name__)


class Cache:
    """Append-only JSON lines {key, content, usage[, reasoning, logprobs, finish_reason]}; safe against a crash at
    any point. ``private``: the file is 0600 and its folder 0700."""

    def __init__(self, path, private: bool = False):
        self.path = Path(path)
        self.private = private
        self.entries: dict[str, dict] = {}
        self.torn = 0
        self._lock = threading.Lock()
        if self.path.is_file():
            if private:
                os.chmod(self.path, 0o600)
            with open(self.path, "rb") as handle:
                for raw in handle:
                    try:
                        obj = json.loads(raw.decode("utf-8"))
                        if not isinstance(obj["content"], str):
                            raise TypeError
                        self.entries[obj["key"]] = obj
                    except (ValueError, KeyError, TypeError):
                        self.torn += 1
            if self.torn:
                log.warning("%s: %d unreadable cache lines (a crash while writing) ignored", self.path, self.torn)

    def get(self, key: str) -> Answer | None:
        obj = self.entries.get(key)
        return None if obj is None else Answer.from_entry(obj)

    def add(self, key: str, answer: Answer) -> None:
        """Append one answer, flushed and fsynced. A write that fails (a full disk, a quota, a read-only file system)
        is taken back (the file cut to its length before it) and stops with one LLMError naming the cache: the
        answers before it stay, so a rerun asks only what the cache lacks."""
        obj = {"key": key, **answer.entry()}
        line = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            try:
                append_synced(self.path, line, self.private, torn=bool(self.torn))
            except OSError as exc:
                raise self._unwritable(exc) from None
            self.torn = 0
            self.entries[key] = obj

    def _unwritable(self, exc: OSError) -> LLMError:
        return LLMError(f"cannot add an answer to the LLM answers' cache ({exc.strerror or type(exc).__name__}); the "
                        f"{len(self.entries)} answers before it are kept, nothing half-written.", path=self.path,
                        fix="free space on the disk that holds it (or fix its permissions), then rerun: only what "
                            "the cache lacks is asked again.")


def append_synced(path: Path, data: bytes, private: bool, torn: bool = False) -> int:
    """Append ``data`` to ``path`` and fsync it (the folder made first: owner-only when ``private``, as the file);
    ``torn``: the file may end in a torn line, which a line break closes first. Returns the offset ``data`` starts
    at. A failed write (a full disk) cuts the file back to its old length, so nothing half-written stays, and raises
    the ``OSError``."""
    if private:
        private_folder(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600 if private else 0o666)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        prefix = b"\n" if size and torn else b""  # a torn last line must not swallow this one
        rest = memoryview(prefix + data)
        try:
            while rest:
                rest = rest[os.write(fd, rest):]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
    return size + len(prefix)

"""The answers' cache: append-only JSON lines keyed by sha256(model, messages, sampling[, logprobs][, attempt]).

Every answer is appended (flushed and fsynced): a crash or a rerun asks only what the cache lacks; a torn last
line (a crash while writing) is ignored. ``Request.attempt`` re-asks a request whose cached answer the caller
could not use (a malformed answer at temperature 0 would come back the same) as a new entry; the earlier entries
stay, so a rerun replays the same attempts without asking. ``private=True`` (a MIMIC-derived benchmark): the file
is owner-only (0600, folder 0700)."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

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
        obj = {"key": key, **answer.entry()}
        line = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            append_synced(self.path, line, self.private, torn=bool(self.torn))
            self.torn = 0
            self.entries[key] = obj


def append_synced(path: Path, data: bytes, private: bool, torn: bool = False) -> int:
    """Append ``data`` to ``path`` and fsync it (the folder made first: owner-only when ``private``, as the file);
    ``torn``: the file may end in a torn line, which a line break closes first. Returns the offset ``data`` starts
    at."""
    if private:
        private_folder(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600 if private else 0o666)
    with open(fd, "ab") as handle:
        offset = os.fstat(handle.fileno()).st_size
        if offset and torn:
            handle.write(b"\n")  # a torn last line must not swallow this one
            offset += 1
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return offset

"""The vectors' cache of the embeddings requests: what ``cache.Cache`` is for answers, for arrays of float32.

Two append-only files under one stem: ``<stem>.f32`` holds the vectors of each answered batch as raw little-endian
float32, ``<stem>.jsonl`` one line per batch {key, content, served_model, offset, rows, dim, tokens, sha256}. A
batch's vectors are written and fsynced before its line, so a crash (a kill -9 included) at any point leaves
either a complete entry or none: a torn last line is ignored, and so is a line whose vectors are not all on disk
or do not match their sha256 (the batch is asked again). ``private=True`` (a MIMIC-derived benchmark): both files
are owner-only (0600, folder 0700). The vectors are read back when asked for, so the index is all that is held in
memory (a 357,080-document corpus at 4,096 dimensions is 5.9 GB of vectors)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

from .cache import append_synced

log = logging.getLogger(__name__)


class VectorCache:
    def __init__(self, stem, private: bool = False):
        self.stem = Path(stem)
        self.data = self.stem.with_name(self.stem.name + ".f32")
        self.index = self.stem.with_name(self.stem.name + ".jsonl")
        self.private = private
        self.entries: dict[str, dict] = {}
        self.torn = 0
        self._lock = threading.Lock()
        size = self.data.stat().st_size if self.data.is_file() else 0
        if self.index.is_file():
            for path in (self.index, self.data):
                if private and path.is_file():
                    os.chmod(path, 0o600)
            with open(self.index, "rb") as handle:
                for raw in handle:
                    try:
                        obj = json.loads(raw.decode("utf-8"))
                        end = int(obj["offset"]) + 4 * int(obj["rows"]) * int(obj["dim"])
                        if not isinstance(obj["key"], str) or end > size:
                            raise ValueError
                        self.entries[obj["key"]] = obj
                    except (ValueError, KeyError, TypeError):
                        self.torn += 1
            if self.torn:
                log.warning("%s: %d unreadable cache lines (a crash while writing) ignored", self.index, self.torn)

    def get(self, key: str) -> np.ndarray | None:
        """The batch's vectors (rows x dim, float32), or None when absent or damaged (then it is asked again)."""
        obj = self.entries.get(key)
        if obj is None:
            return None
        nbytes = 4 * int(obj["rows"]) * int(obj["dim"])
        with open(self.data, "rb") as handle:
            handle.seek(int(obj["offset"]))
            raw = handle.read(nbytes)
        if len(raw) != nbytes or hashlib.sha256(raw).hexdigest() != obj["sha256"]:
            log.warning("%s: the vectors of one cached batch are damaged; it is asked again", self.data)
            del self.entries[key]
            return None
        return np.frombuffer(raw, dtype="<f4").reshape(int(obj["rows"]), int(obj["dim"])).astype(np.float32)

    def add(self, key: str, vectors: np.ndarray, **fields) -> None:
        """Append one batch's vectors, then its index line (``fields``: content, served_model, tokens)."""
        raw = np.ascontiguousarray(vectors, dtype="<f4").tobytes()
        with self._lock:
            offset = append_synced(self.data, raw, self.private)
            obj = {"key": key, **fields, "offset": offset, "rows": int(vectors.shape[0]),
                   "dim": int(vectors.shape[1]), "sha256": hashlib.sha256(raw).hexdigest()}
            append_synced(self.index, (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"), self.private,
                          torn=bool(self.torn))
            self.torn = 0
            self.entries[key] = obj

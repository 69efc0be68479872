"""The planning cache: what Snakemake's planning process derives from files alone, kept between ``snakemake`` calls.

Two things the control layer computes on every ``snakemake`` call depend only on file contents: the code hash of each
rule (``workflow/code.py``: every package module read, the stage modules parsed) and the configuration checked
against the schema with its defaults filled (``workflow/config.py``: jsonschema imported and run). On a no-op call
they were most of the control layer's time. Each is stored here under a key that is a sha256 over everything it was
computed from, so an entry is used only where recomputing would give the same value:

* ``code``: the rule -> hash table, keyed by ``CodeIndex.fingerprint()`` (every ``.py`` file of the package,
  ``workflow/code.py`` itself included, and the data files modules declare, as bytes);
* ``config``: the configuration after the schema check and the schema's defaults, keyed by the package's
  fingerprint, the schema, the installed jsonschema (its file's path, size and modification time) and the
  configuration as Snakemake merged it. The checks that read the disk or warn (paths, sources) run on every call.

Files: ``.snakemake/r2med-eval/<kind>.json`` in the working directory, owner-only (the configuration names local
paths), written atomically, at most ``ENTRIES`` keys each (several configurations used in turn all stay cached).
A missing, unreadable or malformed file is a miss; a cache that cannot be written is skipped. Nothing in it is an
output: deleting the folder costs one slower call. ``R2MED_EVAL_PLANNING_CACHE=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

FOLDER = Path(".snakemake") / "r2med-eval"
ENTRIES = 8
FORMAT = 1


def key_of(*parts) -> str:
    """sha256 over the parts (str or bytes), each framed by its length so that no two lists of parts collide."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else bytes(part)
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def plain(value) -> bool:
    """Whether ``value`` is made of what JSON keeps exactly: dicts with string keys, lists, strings, finite
    numbers, booleans and None (a tuple, a date or a set would come back as something else)."""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    return False


class PlanningCache:
    def __init__(self, folder):
        self.folder = Path(folder)

    @classmethod
    def for_workdir(cls, environ=None) -> PlanningCache | None:
        """The cache of the working directory Snakemake runs in, or None where ``R2MED_EVAL_PLANNING_CACHE=off``."""
        environ = os.environ if environ is None else environ
        if environ.get("R2MED_EVAL_PLANNING_CACHE", "").strip().lower() in ("off", "0", "false", "no"):
            return None
        return cls(FOLDER.resolve())

    def _file(self, kind: str) -> Path:
        return self.folder / f"{kind}.json"

    def _entries(self, kind: str) -> dict:
        try:
            with open(self._file(kind), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
            return {}
        return data["entries"]

    def get(self, kind: str, key: str):
        """The value stored under ``key``, or None."""
        return self._entries(kind).get(key)

    def put(self, kind: str, key: str, value) -> bool:
        """Store ``value`` (made of JSON's types: ``plain``) under ``key``, the newest of at most ``ENTRIES``;
        False where the folder cannot be written (the call goes on without the cache)."""
        from ..io import atomic_path, private_folder

        entries = {k: v for k, v in self._entries(kind).items() if k != key}
        entries[key] = value
        entries = dict(list(entries.items())[-ENTRIES:])
        text = json.dumps({"format": FORMAT, "entries": entries}, ensure_ascii=False, allow_nan=False)
        try:
            private_folder(self.folder)
            with atomic_path(self._file(kind), private=True) as tmp:
                tmp.write_text(text, encoding="utf-8")
        except OSError:
            return False
        return True

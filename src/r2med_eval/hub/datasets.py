"""Download of Hugging Face dataset repos (R2MED/<Task>) at pinned revisions, checksummed and atomic.

A task with ``source: {hf: R2MED/Biology, revision: <commit>}`` is fetched into
``resources/<benchmark>/<task>/`` (``corpus.jsonl``, ``query.jsonl``, ``qrels.jsonl`` and a
``manifest.json``) by the ``download_task`` rule:

* through ``huggingface_hub.snapshot_download`` (repo_type="dataset") into the ordinary Hugging Face
  cache (``HF_HUB_CACHE``; with ``HF_HUB_OFFLINE=1`` only the cache is read), then copied;
* or, with the task's ``local:`` override, from a plain folder (no network at all).

Every file is checked before it is placed: its sha256 against the Hub's own LFS checksum (the cache
stores an LFS file under its sha256; a small file under its git blob id, which is checked too),
against ``sha256:`` pins from config, and its JSON lines are parsed. The files are written to a
temporary folder beside the target, checked, and renamed into place: a failure leaves no
half-written dataset. The manifest records repo, revision and the sha256 of each file; the
``prepare_task`` rule checks the files against it on every reuse.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

from .. import io
from ..errors import InputError
from ..io import iter_jsonl, read_json, sha256_file, write_json

log = logging.getLogger(__name__)

CORE_FILES = ("corpus.jsonl", "query.jsonl", "qrels.jsonl")

# R2MED's eight tasks and the dataset revisions MTEB pins for them.
R2MED_REVISIONS = {
    "Biology": "8b9fec2db9eda4b5742d03732213fbaee8169556",
    "Bioinformatics": "6021fce366892cbfd7837fa85a4128ea93315e18",
    "Medical-Sciences": "7f11654e9aed0c6fa99784641c8880f87ad62930",
    "MedXpertQA-Exam": "b457ea43db9ae5db74c3a3e5be0a213d0f85ac3a",
    "MedQA-Diag": "78b585990279cc01a493f876c1b0cf09557fba57",
    "PMC-Treatment": "53c489a44a3664ba352c07550b72b4525a5968d5",
    "PMC-Clinical": "812829522f7eaa407ef82b96717be85788a50f7e",
    "IIYi-Clinical": "974abbc9bc281c3169180a6aa5d7586cfd2f5877",
}
R2MED_TASKS = tuple(R2MED_REVISIONS)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def r2med_task_of(repo: str) -> str | None:
    """The R2MED task a repo id names (``R2MED/Biology`` -> ``Biology``), None for other owners.
    An R2MED repo that is not one of the eight tasks stops with the list of the eight."""
    owner, _, name = repo.partition("/")
    if owner.lower() != "r2med":
        return None
    for task in R2MED_TASKS:
        if task.lower() == name.lower():
            return task
    raise InputError(f"source {repo!r}: {name!r} is not one of R2MED's eight tasks ({', '.join(R2MED_TASKS)}).",
                     fix="use one of R2MED/" + ", R2MED/".join(R2MED_TASKS) + ".")


def resolve_source(source: dict, where: str) -> dict:
    """{hf, revision, r2med_task} with the pinned revision filled in for R2MED repos."""
    repo = source["hf"]
    try:
        task = r2med_task_of(repo)
    except InputError as exc:
        raise InputError(f"{where}: {exc.problem}", fix=exc.fix) from None
    revision = source.get("revision") or (R2MED_REVISIONS[task] if task else None)
    if revision is None:
        raise InputError(f"{where}: source {repo!r} has no revision.",
                         fix="pin the dataset's commit hash as source.revision.")
    if task and revision != R2MED_REVISIONS[task]:
        log.warning("%s: %s at revision %s, not the revision MTEB pins (%s)", where, repo, revision,
                    R2MED_REVISIONS[task])
    return {"hf": repo, "revision": revision, "r2med_task": task}


sha256 = sha256_file  # one implementation, in io


def git_blob_sha1(path) -> str:
    size = os.path.getsize(path)
    digest = hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _what_to_do(task: str) -> str:
    return (f"set benchmarks.<benchmark>.tasks.{task}.local to a folder holding corpus.jsonl, query.jsonl and "
            "qrels.jsonl, or run with HF_HUB_OFFLINE=1 and HF_HUB_CACHE pointing at a Hugging Face cache that "
            "holds this revision.")


def _hub_errors():
    from huggingface_hub import errors

    return errors


def snapshot(repo: str, revision: str, task: str, files=CORE_FILES, cache_dir=None) -> Path:
    """The snapshot folder of ``repo`` at ``revision`` in the Hugging Face cache (downloading what is
    missing unless offline). Errors become one InputError naming the task and what to do."""
    from huggingface_hub import snapshot_download

    errors = _hub_errors()
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    cache_dir = cache_dir or os.environ.get("HF_HUB_CACHE") or None
    where = f"task {task} ({repo} at revision {revision})"
    try:
        folder = snapshot_download(repo, repo_type="dataset", revision=revision, allow_patterns=list(files),
                                   cache_dir=cache_dir, local_files_only=offline)
    except errors.RevisionNotFoundError:
        raise InputError(f"{where}: the revision does not exist in the dataset repo.",
                         fix="pin an existing commit hash as source.revision (see the repo's history on the "
                             "Hub).") from None
    except errors.GatedRepoError:
        raise InputError(f"{where}: the dataset repo is gated.",
                         fix="accept its terms on the Hub and export HF_TOKEN, or " + _what_to_do(task)) from None
    except errors.RepositoryNotFoundError:
        raise InputError(f"{where}: the dataset repo does not exist (or is private).",
                         fix="check source.hf, or " + _what_to_do(task)) from None
    except errors.LocalEntryNotFoundError as exc:
        if offline:
            problem = (f"{where}: HF_HUB_OFFLINE is set and the Hugging Face cache "
                       f"({cache_dir or 'the default'}) does not hold this revision.")
        else:
            problem = f"{where}: the Hugging Face Hub cannot be reached and the cache does not hold this revision."
        raise InputError(problem + f" ({type(exc).__name__})", fix=_what_to_do(task)) from None
    except errors.HfHubHTTPError as exc:
        raise InputError(f"{where}: the Hub answered with an error ({exc}).", fix=_what_to_do(task)) from None
    except (OSError, ConnectionError) as exc:
        raise InputError(f"{where}: download failed ({type(exc).__name__}: {exc}).", fix=_what_to_do(task)) from None
    folder = Path(folder)
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise InputError(f"{where}: the snapshot {folder} lacks {', '.join(missing)}.",
                         fix="delete that snapshot folder from the cache and download again, or " + _what_to_do(task))
    return folder


def _hub_checksum(path: Path) -> tuple[str, str] | None:
    """(kind, value) the Hub recorded for a cached file: its blob's name is the LFS sha256 (64 hex) or
    the git blob id (40 hex). None for a file that is not a link into a cache's blobs/ folder."""
    if not path.is_symlink():
        return None
    blob = Path(os.readlink(path)).name
    if _HEX64.match(blob):
        return "sha256", blob
    if _HEX40.match(blob):
        return "git-sha1", blob
    return None


def check_file(path: Path, task: str, name: str, expected: str | None = None, hub: tuple[str, str] | None = None,
               origin: str = "") -> dict:
    """sha256 (and the Hub's checksum, and a pinned one) of one file, and that its JSON lines parse."""
    digest = sha256(path)
    where = f"task {task}: {name}{origin}"
    if hub is not None:
        kind, value = hub
        actual = digest if kind == "sha256" else git_blob_sha1(path)
        if actual != value:
            raise InputError(f"{where}: checksum mismatch: the Hub recorded {kind} {value}, the file has {actual}.",
                             path=path, fix="the cached copy is damaged: delete it from the Hugging Face cache and "
                                            "download again, or " + _what_to_do(task))
    if expected is not None and digest != expected:
        raise InputError(f"{where}: checksum mismatch: config pins sha256 {expected}, the file has {digest}.",
                         path=path, fix="use the files of the pinned revision, or update the sha256 pin in config.")
    lines = 0
    try:
        for _ in iter_jsonl(path):
            lines += 1
    except InputError as exc:
        raise InputError(f"{where}: corrupt file: {exc.problem}", path=path, line=exc.line,
                         fix="download the file again (delete it from the cache), or " + _what_to_do(task)) from None
    if lines == 0:
        raise InputError(f"{where}: corrupt file: no JSON lines.", path=path, fix=_what_to_do(task))
    return {"sha256": digest, "bytes": path.stat().st_size, "lines": lines,
            **({"hub_" + hub[0].replace("-", "_"): hub[1]} if hub else {})}


def _place(tmp: Path, target: Path) -> None:
    """Rename the checked folder onto ``target`` (an empty folder Snakemake made, or an old download)."""
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / "x")
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


def fetch_task(target, *, task: str, source: dict, local=None, sha256_pins: dict | None = None,
               cache_dir=None) -> dict:
    """Fetch one task into ``target`` (a folder) and return its manifest."""
    target = Path(target)
    pins = sha256_pins or {}
    repo, revision = source["hf"], source["revision"]
    if local:
        origin_dir = Path(local)
        if not origin_dir.is_dir():
            raise InputError(f"task {task}: the local override folder {local!r} does not exist.",
                             fix="point tasks.<task>.local at a folder holding corpus.jsonl, query.jsonl, qrels.jsonl.")
        missing = [f for f in CORE_FILES if not (origin_dir / f).is_file()]
        if missing:
            raise InputError(f"task {task}: the local override folder lacks {', '.join(missing)}.", path=origin_dir,
                             fix="use R2MED's layout: corpus.jsonl, query.jsonl, qrels.jsonl.")
        origin = {"kind": "local", "path": str(origin_dir)}
    else:
        origin_dir = snapshot(repo, revision, task, cache_dir=cache_dir)
        origin = {"kind": "huggingface_hub", "snapshot": str(origin_dir)}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.download-", dir=target.parent))
    try:
        files = {}
        for name in CORE_FILES:
            src = origin_dir / name
            hub = None if local else _hub_checksum(src)
            shutil.copyfile(src, tmp / name)
            files[name] = check_file(tmp / name, task, name, expected=pins.get(name), hub=hub,
                                     origin=f" (from {src})")
            log.info("task %s: %s: %d lines, %d bytes, sha256 %s%s", task, name, files[name]["lines"],
                     files[name]["bytes"], files[name]["sha256"], " (matches the Hub's checksum)" if hub else "")
        manifest = {"task": task, "repo": repo, "revision": revision, "origin": origin, "files": files}
        write_json(tmp / "manifest.json", manifest)
        io.set_tree_mode(tmp)  # mkdtemp made it 0700: the download follows the umask
        _place(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def verify_manifest(manifest_path, files: dict[str, str]) -> dict:
    """On reuse: every file's sha256 (``files``: name -> path) must equal the manifest's."""
    manifest = read_json(manifest_path)
    for name, path in files.items():
        recorded = manifest["files"].get(name, {}).get("sha256")
        actual = sha256(path)
        if recorded != actual:
            raise InputError(f"task {manifest['task']}: checksum mismatch: {name} changed since it was downloaded "
                             f"(manifest sha256 {recorded}, file {actual}).", path=path,
                             fix=f"delete {Path(manifest_path).parent} and run again to download it afresh.")
    return manifest


def fetch_variant(target, *, task: str, source: dict, relpath: str, local=None, cache_dir=None) -> dict:
    """One expansion file (``<method>/<llm>/query_with_hydoc.jsonl``) of the repo, checked and atomic."""
    from .. import io

    target = Path(target)
    if local:
        src = Path(local) / relpath
        if not src.is_file():
            raise InputError(f"task {task}: the local override folder has no {relpath}.", path=src,
                             fix="copy the expansion file there, or drop this query variant from config.")
        hub = None
    else:
        src = snapshot(source["hf"], source["revision"], task, files=(relpath,), cache_dir=cache_dir) / relpath
        hub = _hub_checksum(src)
    with io.atomic_path(target) as tmp:
        shutil.copyfile(src, tmp)
        info = check_file(tmp, task, relpath, hub=hub, origin=f" (from {src})")
    return info

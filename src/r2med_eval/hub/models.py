"""Model weights from the Hugging Face Hub, fetched ahead of the jobs that load them (rule prefetch_model).

Compute nodes are often offline, so ``snakemake prefetch`` on a login node downloads every Hub snapshot a
configuration needs into the normal Hugging Face cache (``HF_HOME``); the encoding and reranking jobs then
load them from there. Each model gets a manifest, ``resources/models/<model>.json``: the repo, the requested
revision, the commit it resolved to and the files with their sizes.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..errors import InputError

log = logging.getLogger("r2med_eval")

SIDES = ("source", "query_source", "base_source", "tokenizer")
# The files of a ``tokenizer`` side (an LLM reranker reads only the served model's tokenizer, never its weights): the
# tokenizer and configuration files, not the weight shards.
TOKENIZER_FILES = ["*.json", "*.txt", "*.model", "*.tiktoken", "*.jinja"]


def is_hub_source(source) -> bool:
    """Weights downloaded from the Hub: ``{hf, revision}`` without a local copy (``path``)."""
    return isinstance(source, dict) and "hf" in source and "path" not in source


def hub_sources(spec: dict) -> dict[str, dict]:
    """The Hub sources of a model entry: side (source, query_source, base_source, tokenizer) -> {hf, revision}."""
    return {side: spec[side] for side in SIDES if is_hub_source(spec.get(side))}


def _offline_fix(model_name: str) -> str:
    return (f"run `snakemake --cores 1 prefetch` on a machine with network (a login node) before the jobs, or set "
            f"models.{model_name}.source.path to a local folder holding the weights.")


def download(repo: str, revision: str | None, model_name: str, allow_patterns: list[str] | None = None) -> dict:
    """Snapshot ``repo`` at ``revision`` into the Hugging Face cache (only the files ``allow_patterns`` match, when
    given); its commit and files (path, size)."""
    from huggingface_hub import snapshot_download

    revision = revision or "main"
    where = f"{repo} at revision {revision}"
    only = {"allow_patterns": allow_patterns} if allow_patterns else {}
    try:
        folder = snapshot_download(repo, revision=revision, token=os.environ.get("HF_TOKEN") or None, **only)
    except Exception as exc:  # noqa: BLE001 -- every failure (network, unknown repo or revision) is one message
        reason = _reason(exc)
        raise InputError(f"model {model_name!r}: cannot download {where} from the Hugging Face Hub "
                         f"({os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'}): {reason}",
                         fix=_offline_fix(model_name)) from None
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {"repo": repo, "revision": revision, "commit": root.name,
            "files": [{"path": p.relative_to(root).as_posix(), "size": p.stat().st_size} for p in files]}


def _reason(exc: Exception) -> str:
    """One line naming what went wrong."""
    name = type(exc).__name__
    if name == "RevisionNotFoundError":
        return "no such revision."
    if name in ("RepositoryNotFoundError", "GatedRepoError"):
        return "no such repository, or it is private or gated (set HF_TOKEN)."
    if name == "LocalEntryNotFoundError" or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        offline = " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") else ""
        return f"no network here{offline}, and the snapshot is not in the cache."
    first = (str(exc).strip().splitlines() or [name])[0]
    return f"{name}: {first}"


def prefetch(model_name: str, sources: dict[str, dict], manifest_path) -> dict:
    """Download each Hub source of a model and write its manifest (atomically)."""
    from ..io import write_json

    manifest = {"model": model_name, "snapshots": {}}
    for side, source in sources.items():
        snap = download(source["hf"], source.get("revision"), model_name,
                        TOKENIZER_FILES if side == "tokenizer" else None)
        size = sum(f["size"] for f in snap["files"])
        log.info("%s: %s at %s (commit %s): %d files, %.1f MB", side, snap["repo"], snap["revision"], snap["commit"],
                 len(snap["files"]), size / 2**20)
        manifest["snapshots"][side] = snap
    write_json(manifest_path, manifest)
    return manifest

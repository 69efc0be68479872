"""What made a run, carried with it and checked wherever the pipeline reads it.

A run's identity is its run name, its benchmark, its task and the fingerprint of the corpus whose ids it ranks
(``fingerprint``: the number of documents and the sha256 of their ids, sorted, one per line; rule
``fingerprint_corpus`` writes each task's to ``results/data/<benchmark>/<task>/corpus_ids.json``). Every run the
pipeline writes carries it: a binary run in its metadata (``binrun``: with the sha256 of its id table), a TREC run
in a sidecar ``<run>.trec.json`` that also holds the sha256 and size of the TREC file, so that a file replaced
after it was written (another run's, a run of another corpus) no longer matches its sidecar.

``verify`` is the one check every reader of the pipeline calls before it reads a run (scoring, CliniQ's tables and
pool, the judgment completion, the rerankers, fusion, LameR's first stage, the TREC export; the claims read what
these wrote); the command line calls it when given ``--benchmark``. A mismatch stops with one ``InputError``
naming the file, what it holds and what was expected. A run made outside the pipeline is imported by rule
``import_run``, which checks its ids against the corpus and then writes it with its identity.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..bounds import shown
from ..errors import InputError
from ..io import sha256_file, write_json
from . import binrun

FORMAT = "r2med-eval run identity 1"
FIELDS = ("run", "benchmark", "task", "corpus")
_FIX = ("delete the file and rerun the rule that wrote it (snakemake --forcerun <rule> or --rerun-incomplete); "
        "never copy run files between names, tasks or benchmarks: add a type: run model to import a run.")


def fingerprint(ids) -> dict:
    """The fingerprint of a corpus's document ids: {documents, sha256 of the ids sorted, one per line}; the same
    for any order of the same ids."""
    ids = sorted(ids)
    digest = hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()
    return {"documents": len(ids), "sha256": digest}


def corpus_ids(path) -> list[str]:
    """The document ids of a corpus file: the internal ``corpus.jsonl`` (its ``id`` fields) or a list of ids, one per
    line (CliniQ's ``chunk_ids.txt``)."""
    from ..io import iter_jsonl, read_lines

    if str(path).endswith(".jsonl"):
        return [str(obj["id"]) for _, obj in iter_jsonl(path)]
    return read_lines(path)


def read_fingerprint(path) -> dict:
    """A task's corpus fingerprint as rule ``fingerprint_corpus`` wrote it."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return {"documents": int(data["documents"]), "sha256": str(data["sha256"])}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read the corpus fingerprint ({type(exc).__name__}).", path=path,
                         fix="delete it and rerun: rule fingerprint_corpus writes it from the task's corpus.") from None


def make(run: str, benchmark: str, task: str, corpus: dict) -> dict:
    """An identity: the run's name, its benchmark and task, the corpus fingerprint (``fingerprint``) it ranks."""
    return {"run": run, "benchmark": benchmark, "task": task, "corpus": corpus["sha256"],
            "documents": int(corpus["documents"])}


def of_task(run: str, benchmark: str, task: str, fingerprint_file) -> dict:
    """``make`` with the corpus fingerprint read from the task's fingerprint file."""
    return make(run, benchmark, task, read_fingerprint(fingerprint_file))


def of_job(wildcards, fingerprint_file) -> dict | None:
    """The identity of the run a job writes: its ``model``, ``benchmark`` and ``task`` wildcards and the task's
    fingerprint file (every rule that writes a run has it as input; None without one: the stage called outside a
    rule, by a test or a script, writes the run without an identity, which no reader of the pipeline accepts)."""
    if fingerprint_file is None:
        return None
    return of_task(wildcards.model, wildcards.benchmark, wildcards.task, fingerprint_file)


def verify_job_run(path, wildcards, fingerprint_file) -> dict:
    """``verify`` the run a job reads as the run its ``model``, ``benchmark`` and ``task`` wildcards name (scoring,
    the TREC export), over the corpus of the task's fingerprint file."""
    return verify(path, of_task(wildcards.model, wildcards.benchmark, wildcards.task, fingerprint_file))


def verify_files(files, names, benchmark: str, task: str, corpus: dict) -> None:
    """``verify`` each run file of ``files`` against the run of ``names`` at its place (the names the job's
    params and wildcards give), ``benchmark``, ``task`` and the ``corpus`` fingerprint."""
    files, names = list(files), list(names)
    if len(files) != len(names):
        raise ValueError(f"{len(files)} run files for {len(names)} run names")
    for path, name in zip(files, names):
        verify(path, make(name, benchmark, task, corpus))


def sidecar(path) -> Path:
    """The identity sidecar of a TREC run: ``<run>.trec.json`` beside ``<run>.trec``."""
    return Path(str(path) + ".json")


def write_sidecar(run_path, identity: dict) -> None:
    """The sidecar of a TREC run just written: its identity, the file's sha256 and size (atomically)."""
    write_json(sidecar(run_path), {"format": FORMAT, **identity, "sha256": sha256_file(run_path),
                                   "bytes": Path(run_path).stat().st_size})


def _shown(identity: dict) -> str:
    return (f"run {shown(identity.get('run'), 80)} of {shown(identity.get('benchmark'), 80)}/"
            f"{shown(identity.get('task'), 80)}, a corpus of {shown(identity.get('documents'), 20)} documents (ids "
            f"sha256 {str(identity.get('corpus'))[:12]})")


def recorded(path) -> dict:
    """The identity a run file carries: a binary run's metadata (with its tag and id count), a TREC run's sidecar
    (checked against the file's sha256 and size). A run without one, or a TREC file that no longer matches its
    sidecar, stops with one InputError naming the file."""
    path = Path(path)
    if binrun.is_binary(path):
        meta = binrun.read_meta(path)
        identity = meta.get("identity")
        if not identity:
            raise InputError("the run carries no record of what made it (a binary run written before r2med-eval "
                             "checked runs, or by another tool).", path=path, fix=_FIX)
        if meta.get("tag") != identity.get("run"):
            raise InputError(f"the run's tag {shown(meta.get('tag'), 80)} is not the run its metadata names "
                             f"({shown(identity.get('run'), 80)}).", path=path, fix=_FIX)
        if meta.get("ids_count", 0) > int(identity.get("documents", 0)):
            raise InputError(f"the run's id table holds {meta['ids_count']:,} ids, more than its corpus's "
                             f"{identity.get('documents')} documents.", path=path, fix=_FIX)
        return identity
    side = sidecar(path)
    try:
        with open(side, encoding="utf-8") as handle:
            identity = json.load(handle)
    except FileNotFoundError:
        raise InputError(f"the run has no identity sidecar {side.name} (written before r2med-eval checked runs, or "
                         "copied here without it).", path=path, fix=_FIX) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"its identity sidecar {side.name} is not readable JSON ({type(exc).__name__}).", path=path,
                         fix=_FIX) from None
    if not isinstance(identity, dict) or identity.get("format") != FORMAT:
        raise InputError(f"its identity sidecar {side.name} is not in the format {FORMAT!r}.", path=path, fix=_FIX)
    size = path.stat().st_size
    if size != identity.get("bytes") or sha256_file(path) != identity.get("sha256"):
        raise InputError(f"the file is not the one its sidecar {side.name} describes ({_shown(identity)}): it was "
                         f"replaced or changed after it was written ({size:,} bytes, the sidecar says "
                         f"{identity.get('bytes')}).", path=path, fix=_FIX)
    return identity


def verify(path, expected: dict) -> dict:
    """Stop with one InputError naming ``path``, what it holds and what was expected unless the run it holds is
    ``expected`` (``make``): the same run name, benchmark, task and corpus fingerprint (a field that ``expected``
    leaves None is not compared). Returns the identity."""
    identity = recorded(path)
    differ = [f for f in (*FIELDS, "documents") if expected.get(f) is not None
              and str(identity.get(f)) != str(expected[f])]
    if differ:
        what = ", ".join("corpus size" if f == "documents" else f for f in differ)
        wanted = {**identity, **{k: v for k, v in expected.items() if v is not None}}
        raise InputError(f"the file holds {_shown(identity)}, not {_shown(wanted)} (its {what} differ"
                         f"{'s' if len(differ) == 1 else ''}).", path=path, fix=_FIX)
    return identity


def name_of(path) -> str:
    """The run a file is named after: ``bm25.trec`` and ``bm25.run.npz`` are ``bm25``."""
    name = Path(path).name
    if name.endswith(binrun.SUFFIX):
        return name[:-len(binrun.SUFFIX)]
    return name.rsplit(".", 1)[0] if "." in name else name


def fingerprint_beside(qrels) -> dict | None:
    """The corpus fingerprint of the task whose judgments are ``qrels``, where the pipeline wrote one beside them
    (``results/data/<benchmark>/<task>/qrels.tsv`` and ``corpus_ids.json``); None elsewhere."""
    path = Path(qrels)
    candidate = (path if path.is_dir() else path.parent) / "corpus_ids.json"
    return read_fingerprint(candidate) if candidate.is_file() else None


def carries(path) -> bool:
    """Whether a run file carries an identity (a binary run's metadata, a TREC run's sidecar beside it)."""
    if binrun.is_binary(path):
        return bool(binrun.read_meta(path).get("identity"))
    return sidecar(path).exists()


def verify_given(path, run: str | None = None, benchmark: str | None = None, task: str | None = None,
                 corpus: dict | None = None) -> dict | None:
    """The command line's check, when it is told the benchmark: a run that carries an identity must be the run
    ``run`` (its file's name), of ``benchmark`` (and ``task``, ``corpus`` where known); a run made elsewhere, which
    carries none, is read as it is (None)."""
    if not carries(path):
        return None
    return verify(path, {"run": run, "benchmark": benchmark, "task": task,
                         "corpus": corpus["sha256"] if corpus else None,
                         "documents": corpus["documents"] if corpus else None})

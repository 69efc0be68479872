"""One benchmark's metric JSONs in one file, for the reports.

Rule ``collect_metrics`` writes ``results/metrics/<benchmark>.jsonl``: a line per scored run, in the order of its
inputs (the registry's), holding the metrics JSON's path, its sha256 and its content unchanged. The report rules
read that one file per benchmark instead of every run's JSON: each report job then has one input per benchmark
rather than one per run, which keeps Snakemake's DAG (and so every dry run of a large matrix) smaller; what the
reports compute is the same, as each record is the JSON the score rule wrote.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import InputError
from ..io import atomic_path, iter_jsonl, read_json

SUFFIX = ".jsonl"


def write(metric_files: Iterable, target) -> int:
    """Collect metric JSONs (in the given order) into ``target``; returns the number of records."""
    count = 0
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for path in metric_files:
                raw = Path(path).read_bytes()
                try:
                    data = json.loads(raw)
                except ValueError as err:
                    raise InputError(f"not a JSON document ({err}).", path=path,
                                     fix="delete the file; the score rule writes it again.") from None
                for key in ("benchmark", "task", "model", "metrics"):
                    if key not in data:
                        raise InputError(f"no {key!r} in a metrics file.", path=path,
                                         fix="delete the file; the score rule writes it again.")
                record = {"file": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "data": data}
                handle.write(json.dumps(record, ensure_ascii=False, allow_nan=False, sort_keys=True) + "\n")
                count += 1
    return count


def read(table) -> list[dict]:
    """The records of a collected file: {file, sha256, data}."""
    records = []
    for lineno, rec in iter_jsonl(table):
        if not isinstance(rec, dict) or not {"file", "sha256", "data"} <= set(rec):
            raise InputError("a record without file, sha256 and data.", path=table, line=lineno,
                             fix="delete the file; rule collect_metrics writes it again.")
        records.append(rec)
    return records


def records(sources: Iterable) -> Iterator[tuple[str, dict]]:
    """(metrics file, its content) for each source: a collected ``.jsonl`` file (each of its records) or a metrics
    JSON itself."""
    for source in sources:
        if str(source).endswith(SUFFIX):
            for rec in read(source):
                yield rec["file"], rec["data"]
        else:
            yield str(source), read_json(source)


def by_run(tables: Iterable) -> dict[tuple[str, str, str], dict]:
    """(benchmark, task, model) -> record ({file, sha256, data}) over collected files."""
    return {(r["data"]["benchmark"], r["data"]["task"], r["data"]["model"]): r for t in tables for r in read(t)}


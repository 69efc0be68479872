"""Stored corpus embeddings: ``corpus.npy`` (rows in corpus order), ``corpus_ids.txt`` and ``corpus.json`` (counts
and the sha256 of the id list), gathered from shard files or written by one encoding job, and read back
(memory-mapped) with the id order checked."""

from __future__ import annotations

import numpy as np

from ..benchmarks.datasets import read_corpus
from ..errors import InputError
from ..progress import phase


def ids_digest(ids: list[str]) -> str:
    """sha256 of the document id list as the ids file holds it (one id a line)."""
    import hashlib

    return hashlib.sha256(("\n".join(ids) + "\n").encode("utf-8")).hexdigest()


def gather(shard_files, corpus_path, out_npy, out_ids, storage: str = "float32", out_info=None) -> dict:
    """Join shard outputs into corpus order; check every document is encoded exactly once. ``out_info`` gets
    the counts and the sha256 of the corpus's id list, which the search checks instead of re-reading the
    corpus."""
    return write_gathered(list(read_corpus(corpus_path)), [np.load(f) for f in shard_files], out_npy, out_ids,
                           storage, out_info)


def write_gathered(ids: list[str], parts, out_npy, out_ids, storage: str, out_info) -> dict:
    from ..io import atomic_path, write_text

    phase(f"gathering {len(parts)} shards of {len(ids)} documents")
    rows = np.concatenate([p["rows"] for p in parts])
    dims = {p["emb"].shape[1] for p in parts if p["emb"].size}
    if len(dims) != 1:
        raise InputError(f"shards disagree on the embedding dimension ({sorted(dims)}).",
                         fix="delete the shard files of this model and rerun (a type: python or mteb encoder must "
                             "return the same width for every text).")
    dim = dims.pop()
    if len(rows) != len(ids) or len(np.unique(rows)) != len(ids):
        raise InputError(f"shards cover {len(np.unique(rows))} distinct of {len(ids)} documents.",
                         fix="delete the shard files of this model and rerun.")
    emb = np.zeros((len(ids), dim), dtype=np.float32)
    for p in parts:
        if p["emb"].size:
            emb[p["rows"]] = p["emb"]
    emb = emb.astype(np.float16 if storage == "float16" else np.float32)
    with atomic_path(out_npy, suffix=".npy") as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, emb)
    write_text(out_ids, "\n".join(ids) + "\n")
    info = {"documents": len(ids), "dim": int(dim), "dtype": str(emb.dtype), "ids_sha256": ids_digest(ids)}
    if out_info is not None:
        from ..io import write_json

        write_json(out_info, info)
    return info


def load_corpus_embeddings(npy, ids_file, corpus_path=None, dim: int | None = None, info_path=None):
    """The corpus embeddings, memory-mapped (float32 storage; float16 is converted to a float32 copy), and
    their document ids. The id order is checked against ``info_path`` (the sha256 of the corpus's id list
    that ``gather`` stored; the corpus is not read) or, without it, against the corpus file itself."""
    emb = np.load(npy, mmap_mode="r")
    from ..io import read_json, read_lines, sha256_file

    ids = read_lines(ids_file)
    if emb.shape[0] != len(ids):
        raise InputError(f"cached embeddings have {emb.shape[0]} rows for {len(ids)} document ids.", path=npy,
                         fix="delete the cached embeddings of this model and rerun.")
    if info_path is not None:
        info = read_json(info_path)
        if info.get("ids_sha256") != sha256_file(ids_file) or info.get("documents") != len(ids):
            raise InputError("the document ids of the cached embeddings are not those their gather job stored "
                             "(a different corpus or order).", path=ids_file,
                             fix="delete the cached embeddings of this model and rerun.")
    elif corpus_path is not None and ids != list(read_corpus(corpus_path)):
        raise InputError("cached embeddings are in a different document order than the corpus.", path=ids_file,
                         fix="delete the cached embeddings of this model and rerun.")
    if dim is not None and emb.shape[1] != dim:
        raise InputError(f"cached embeddings have dimension {emb.shape[1]}, the query encoder gives {dim}.",
                         path=npy, fix="delete the cached embeddings of this model and rerun (a type: python "
                                       "encoder's encode_queries and encode_corpus must return the same width).")
    return np.ascontiguousarray(emb, dtype=np.float32), ids  # float32: a view of the memory map, no copy

"""Rank fusion of runs: reciprocal rank fusion and linear fusion of normalised scores.

Linear fusion normalises each run's scores per query, then sums them with the weights. Two conventions
(``CONVENTIONS``), set per fused run (``fusion.<name>.convention``):

* ``floor`` (the default): min-max gives (s - min) / (max - min), every score 1 when a query's scores are all equal;
  zscore (s - mean) / std with the population standard deviation, every score 0 when it is 0. A document missing
  from a run gets that run's lowest normalised score for the query: 0 for min-max, the lowest z-score for zscore
  (a missing document counts as the run's worst).
* ``ranx`` (ranx 0.3's ``min-max`` and ``zmuv`` norms with ``wsum``): the same formulas with the denominator at
  least 1e-9, so equal scores give 0 under min-max as well; a missing document contributes 0: the minimum for
  min-max (as ``floor``) but the mean for zscore (a missing document counts as the run's average).
"""

from __future__ import annotations

import math

from ..errors import InputError
from .runs import ranked


def rrf(runs: list[dict], k: int = 60, depth: int | None = None) -> dict:
    """Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum over runs of 1 / (k + rank(d)).

    Ranks are 1-based and taken from each run's own order (score descending, ties by doc id descending: trec_eval's)."""
    fused: dict[str, dict[str, float]] = {}
    for run in runs:
        for qid, docs in run.items():
            out = fused.setdefault(qid, {})
            for rank, (did, _) in enumerate(ranked(docs, decimals=12), start=1):
                if depth is not None and rank > depth:
                    break
                out[did] = out.get(did, 0.0) + 1.0 / (k + rank)
    return fused


CONVENTIONS = ("floor", "ranx")
RANX_FLOOR = 1e-9  # ranx: max(max - min, 1e-9) and max(std, 1e-9)


def _normalise(docs: dict[str, float], how: str, convention: str = "floor") -> dict[str, float]:
    if not docs:
        return {}
    values = list(docs.values())
    ranx = convention == "ranx"
    if how == "minmax":
        lo, hi = min(values), max(values)
        span = hi - lo
        if ranx:
            return {d: (s - lo) / max(span, RANX_FLOOR) for d, s in docs.items()}
        return {d: (s - lo) / span if span > 0 else 1.0 for d, s in docs.items()}
    if how == "zscore":
        if ranx:  # numba's np.mean and np.std: sums from left to right, population deviation
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
            return {d: (s - mean) / max(std, RANX_FLOOR) for d, s in docs.items()}
        mean = math.fsum(values) / len(values)
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
        return {d: (s - mean) / std if std > 0 else 0.0 for d, s in docs.items()}
    raise ValueError(f"unknown normalisation {how!r}")


def linear(runs: list[dict], weights: list[float], how: str = "minmax", depth: int | None = None,
           convention: str = "floor") -> dict:
    """Weighted sum of per-query normalised scores; a document missing from a run gets that run's minimum
    normalised score for the query (``floor``), or 0 (``ranx``: the mean for zscore); see the module's docstring."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown fusion convention {convention!r} (one of {', '.join(CONVENTIONS)})")
    fused: dict[str, dict[str, float]] = {}
    qids = sorted({q for run in runs for q in run})
    for qid in qids:
        parts = []
        for run in runs:
            docs = run.get(qid, {})
            if depth is not None:
                docs = dict(ranked(docs, decimals=12)[:depth])
            parts.append(_normalise(docs, how, convention))
        all_docs = sorted({d for p in parts for d in p})
        floors = [min(p.values()) if p and convention == "floor" else 0.0 for p in parts]  # once per query and run
        out = {}
        for did in all_docs:
            total = 0.0
            for w, p, floor in zip(weights, parts, floors):
                total += w * p.get(did, floor)
            out[did] = total
        fused[qid] = out
    return fused


METHODS = ("rrf", "minmax", "zscore")


def fuse(runs: list[dict], method: str = "rrf", k: int = 60, weights: list[float] | None = None,
         depth: int | None = None, convention: str = "floor") -> dict:
    """The fused run of rule ``fuse_runs``: ``rrf`` (constant ``k``), or ``minmax`` / ``zscore`` linear fusion with
    ``weights`` (equal by default) under ``convention`` (``CONVENTIONS``); ``depth``: only the top ``depth`` of each
    run."""
    check_options(method, len(runs), k, weights, depth)
    if method == "rrf":
        return rrf(runs, k=k, depth=depth)
    weights = list(weights) if weights else [1.0] * len(runs)
    return linear(runs, weights, how=method, depth=depth, convention=convention)


def cut(runs: list[dict], depth: int | None) -> list[dict]:
    """Each run's top ``depth`` per query in trec_eval's order (all of it for None)."""
    if depth is None:
        return runs
    return [{q: dict(ranked(docs, decimals=12)[:depth]) for q, docs in run.items()} for run in runs]


def check_options(method: str, n_runs: int, k=60, weights=None, depth=None) -> None:
    """Stop with one InputError on options no fusion can use: an unknown method, a negative or non-finite RRF
    constant, weights that are not one finite number per run, a depth below 1."""
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    if method not in METHODS:
        raise InputError(f"unknown fusion method {method!r}.", fix=f"use one of {', '.join(METHODS)}.")
    if method == "rrf" and not (number(k) and k >= 0):
        raise InputError(f"the RRF constant k={k!r} is not a finite number of 0 or more.", fix="use k=60 (RRF's).")
    if weights is not None:
        weights = list(weights)
        if len(weights) != n_runs or not all(number(w) for w in weights):
            raise InputError(f"weights {weights!r} are not one finite number for each of the {n_runs} runs.",
                             fix="give one finite weight per run, in the order of the runs.")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InputError(f"depth {depth!r} is not a whole number of 1 or more.", fix="use each run's top N, N >= 1.")

"""trec_eval's ``-Z``: each query's value of each measure as a z-score against a given mean and standard deviation.

The file has lines ``qid measure mean stddev`` (trec_eval 10.0's ``get_zscores.c``; ``measure`` as trec_eval names it:
``P_10``, ``map``). A query's value becomes (value - mean) / stddev; where the file lacks the query or the measure, or
the standard deviation is 0 and the value is not the mean, the value is -1,000,000 (trec_eval's
``MISSING_ZSCORE_VALUE``); with a standard deviation of 0 and the value equal to the mean, 0. The figures on the
``all`` line are then the measures' usual means (sums for counts, geometric means of the converted logs for
``gm_map`` and ``gm_bpref``) of the converted values, as trec_eval accumulates them (``convert_zscores.c``).
"""

from __future__ import annotations

import math

from ..errors import InputError
from . import trec_all

FIX = "write one line per query and measure: `qid measure mean stddev` (trec_eval's -Z file)."


def read(path) -> dict[tuple[str, str], tuple[float, float]]:
    """{(qid, measure): (mean, stddev)}; a line without 4 fields or with a number that is not finite stops."""
    from .runfile import regular_file

    path = regular_file(path, "z-score file")
    out = {}
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise InputError(f"expected 4 fields (qid measure mean stddev), found {len(parts)}.", path=path,
                                 line=lineno, fix=FIX)
            try:
                mean, std = float(parts[2]), float(parts[3])
            except ValueError:
                mean = std = math.nan
            if not (math.isfinite(mean) and math.isfinite(std)):
                raise InputError("the mean or standard deviation is not a finite number.", path=path, line=lineno,
                                 fix=FIX)
            out[(parts[0].decode("utf-8", "replace"), parts[1].decode("utf-8", "replace"))] = (mean, std)
    return out


def convert(values, qids: list[str], name: str, table: dict, family: str):
    """The z-scores of one measure's per-query ``values`` (numpy, ``qids`` order), ``name`` its trec_eval name; for
    the geometric measures the logs trec_eval keeps (floored at 1e-5) are converted."""
    import numpy as np

    known = {q for q, _ in table}
    internal = np.log(np.maximum(values, trec_all.MIN_GEO_MEAN)) if family in ("gm_map", "gm_bpref") else values
    out = np.empty(len(qids), dtype=np.float64)
    for i, (q, v) in enumerate(zip(qids, internal.tolist())):
        entry = table.get((q, name)) if q in known else None
        if entry is None:
            out[i] = trec_all.MISSING_ZSCORE
        elif entry[1]:
            out[i] = (v - entry[0]) / entry[1]
        else:
            out[i] = 0.0 if v == entry[0] else trec_all.MISSING_ZSCORE
    return out

"""ir_measures' names that the fast path does not compute, through ir_measures itself and its providers.

``metrics.measure`` reads the names it knows (ir_measures' common ones, trec_eval's, the pipeline's) itself; any other
name goes to :func:`parse`, which asks ``ir_measures.parse_measure`` (imported only then, so the fast path never
loads it): whatever ir_measures accepts (``nDCG(judged_only=True)@10``, ``nDCG(dcg='exp-log2')@10``,
``nDCG(gains={0:0,1:1,2:3})@10``, ``SetF(beta=0.5)``, ``ERR@10``, ``RBP(p=0.5)``, ``alpha_nDCG@20``, ``Compat(p=0.9)``,
``INST(T=2)``, ...) is a measure, computed by :func:`compute` with ``ir_measures.iter_calc`` and the provider
ir_measures picks (pytrec_eval, pyndeval, cwl_eval, gdeval, msmarco, judged, compat, accuracy, ranx: those installed
with the pinned requirements). A query a provider yields no value for (a judged query the run misses) scores 0, as
under trec_eval's ``-c``. The figure is ir_measures' own aggregate: the mean over the scored queries, or the sum for
its summed measures (``NumRet``, ``NumRel``, ...).
"""

from __future__ import annotations

import math

FAMILY = "ir_measures"


def outside(m) -> bool:
    """Whether the measure ``m`` (a ``metrics.Measure``) is computed here."""
    return m.family == FAMILY


def parse(text: str):
    """A ``metrics.Measure`` for an ir_measures name, or None where ir_measures does not know it. Its parameters are
    checked against the measure's documented ones (an unknown parameter or value is None too)."""
    from .metrics import Measure

    measure = _parsed(text)
    if measure is None:
        return None
    agg = "sum" if type(measure.aggregator()).__name__ == "SumAgg" else "mean"
    return Measure(text, FAMILY, None, None, None, (measure,), agg)


def _parsed(text: str):
    try:
        import ir_measures
    except ImportError:  # not installed: the caller's refusal names the known measures
        return None
    try:
        measure = ir_measures.parse_measure(text)
    except (ValueError, NameError, SyntaxError, TypeError, KeyError):
        return None
    for key, given in measure.params.items():
        info = measure.SUPPORTED_PARAMS.get(key)
        if info is None or not _valid(info, given):
            return None
    return measure


def _valid(info, given) -> bool:
    if isinstance(info.choices, (list, tuple)):
        return given in info.choices
    if info.dtype is float:
        return isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given)
    if info.dtype is int:
        return isinstance(given, int) and not isinstance(given, bool)
    if info.dtype is bool:
        return isinstance(given, bool)
    if info.dtype is dict:
        return isinstance(given, dict) and all(isinstance(k, int) and isinstance(v, (int, float))
                                               for k, v in given.items())
    return isinstance(given, info.dtype)


def compute(table, qrels: dict, measures, qids: list[str]) -> dict:
    """{measure name: per judged query value (numpy float64, ``qids`` order)} by ``ir_measures.iter_calc`` on the
    run ``table`` (a ``runfile.RunTable``) and ``qrels``."""
    import ir_measures
    import numpy as np

    from .runs import table_to_dict

    run = table_to_dict(table)
    wanted = {m.params[0]: m.name for m in measures}
    index = {q: i for i, q in enumerate(qids)}
    out = {m.name: np.zeros(len(qids), dtype=np.float64) for m in measures}
    for row in ir_measures.iter_calc(list(wanted), qrels, run):
        i = index.get(row.query_id)
        if i is not None and row.measure in wanted:
            out[wanted[row.measure]][i] = float(row.value)
    return out


def aggregate(m, values, scored) -> float:
    """ir_measures' aggregate of the scored queries' values: their sum or their mean."""

    chosen = values[scored].tolist()
    if m.label == "sum":
        return float(math.fsum(chosen))
    return math.fsum(chosen) / len(chosen) if chosen else float("nan")


def names() -> list[str]:
    """Every measure name of ir_measures' registry (``ir_measures.measures.registry``), for suggestions."""
    try:
        import ir_measures
    except ImportError:
        return []
    return sorted(ir_measures.measures.registry)


def in_registry(text: str) -> bool:
    """Whether ``text`` starts with a measure name ir_measures registers (then a refusal explains its parameters)."""
    import re

    head = re.match(r"[^\W\d]\w*", text)
    return bool(head) and head.group(0) in names()

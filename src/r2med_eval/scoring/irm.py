"""ir_measures' names that the fast path does not compute, through ir_measures itself and its providers.

``metrics.measure`` reads the names it knows (ir_measures' common ones, trec_eval's, the pipeline's) itself; any other
name goes to :func:`parse`, which asks ``ir_measures.parse_measure`` (imported only then, so the fast path never
loads it): whatever ir_measures accepts (``nDCG(judged_only=True)@10``, ``nDCG(dcg='exp-log2')@10``,
``nDCG(gains={0:0,1:1,2:3})@10``, ``SetF(beta=0.5)``, ``ERR@10``, ``RBP(p=0.5)``, ``alpha_nDCG@20``, ``Compat(p=0.9)``,
``INST(T=2)``, ...) is a measure, computed by :func:`compute` with ``ir_measures.iter_calc`` and the provider
ir_measures picks (pytrec_eval, pyndeval, cwl_eval, gdeval, trectools, msmarco, judged, compat, accuracy, ranx: those
installed with the pinned requirements), each query's documents handed over in trec_eval's order (providers that take
equal scores in the order given see that order, whatever order the run came in). A judged query the run misses scores 0
(trec_eval's ``-c``); a query of the run the provider gives no value for (``Accuracy`` where it is undefined) has
none (nan) and, as in ir_measures, no part in the figure, which is ir_measures' own aggregate: the mean over the
scored queries with a value, or the sum for its summed measures (``NumRet``, ``NumRel``, ...).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math

log = logging.getLogger(__name__)

FAMILY = "ir_measures"


def outside(m) -> bool:
    """Whether the measure ``m`` (a ``metrics.Measure``) is computed here."""
    return m.family == FAMILY


def parse(text: str):
    """(ir_measures' measure, its aggregate: ``mean`` or ``sum``) for an ir_measures name, or None where ir_measures
    does not know the name (``metrics.measure`` makes it a Measure of family ``FAMILY``). A known name whose
    parameters ir_measures' own check refuses (a required one missing, an unknown one, a value of the wrong type)
    stops with one InputError saying which."""
    from ..errors import InputError

    try:
        import ir_measures
    except ImportError:  # not installed: the caller's refusal names the known measures
        return None
    try:
        measure = ir_measures.parse_measure(text)
    except NameError:
        return None
    except (ValueError, SyntaxError, TypeError, KeyError) as exc:
        if not in_registry(text):
            return None
        raise InputError(f"ir_measures cannot read the measure {text!r}: {exc}.", fix=_FIX) from None
    try:
        measure.validate_params()
    except (AssertionError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"ir_measures refuses the measure {text!r}: {_said(exc)}.", fix=_FIX) from None
    return measure, "sum" if type(measure.aggregator()).__name__ == "SumAgg" else "mean"


_FIX = ("give the parameters ir_measures documents for it, with their types (https://ir-measur.es; e.g. P@10, "
        "nDCG(dcg='exp-log2')@10, RBP(rel=1,p=0.8), INST(T=2.0)).")


def _said(exc) -> str:
    """ir_measures' own check, in words: ``invalid param cutoff=<object ...>`` is a required parameter missing."""
    import re

    text = str(exc)
    m = re.match(r"invalid param (\w+)=<object object", text)
    if m:
        return f"its parameter {m.group(1)} is required"
    m = re.match(r"invalid param (\w+)=(.*)", text)
    if m:
        return f"{m.group(1)}={m.group(2)} is not a value it accepts"
    return text or type(exc).__name__


def compute(table, qrels: dict, measures, qids: list[str]) -> dict:
    """{measure name: per judged query value (numpy float64, ``qids`` order)} by ``ir_measures.iter_calc`` on the
    run ``table`` (a ``runfile.RunTable``) and ``qrels``."""
    import ir_measures
    import numpy as np

    from ..errors import InputError
    from .runs import table_to_dict

    run = {q: _trec_order(docs) for q, docs in table_to_dict(table).items()}
    index = {q: i for i, q in enumerate(qids)}
    # a query the run misses scores 0 (trec_eval's -c); one the provider gives no value for has none (nan), left out
    # of the mean as ir_measures leaves it out
    absent = np.asarray([q not in run for q in qids], dtype=bool)
    out = {m.name: np.where(absent, 0.0, np.nan) for m in measures}
    for m in measures:  # one measure at a time: a provider's failure names its measure
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                rows = list(ir_measures.iter_calc([m.params[0]], qrels, run))
        except Exception as exc:  # a provider that cannot compute it here (gdeval: numeric query ids, ...)
            raise InputError(f"ir_measures could not compute {m.name!r} on these inputs ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:160]}).",
                             fix="use a measure its installed providers compute here (see docs/api.md).") from None
        for line in dict.fromkeys(said.getvalue().splitlines()):  # a provider's own warnings, once each
            if line.strip():
                log.warning("%s (ir_measures, %s)", line.strip(), m.name)
        for row in rows:
            i = index.get(row.query_id)
            if i is not None:
                out[m.name][i] = float(row.value)
    return out


def _trec_order(docs: dict) -> dict:
    """A query's documents in trec_eval's order (score descending, then id descending): the order providers that
    read ties in the order given (cwl_eval, accuracy) see, whatever order the run came in."""
    items = sorted(docs.items(), key=lambda x: x[0], reverse=True)
    items.sort(key=lambda x: x[1], reverse=True)
    return dict(items)


def aggregate(m, values, scored) -> float:
    """ir_measures' aggregate of the scored queries' values: their sum or their mean."""

    chosen = [v for v in values[scored].tolist() if v == v]
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

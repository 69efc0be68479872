"""ranx's fusion methods and normalisations, through ranx itself (``ranx.fuse``, ``ranx.optimize_fusion``).

``METHODS`` are ranx 0.3's 25 fusion methods under ranx's names (``wsum``, ``mnz``, ``isr``, ``bordafuse``,
``condorcet``, ``probfuse``, ...; ``rrf`` is ranx's too, but the pipeline's own ``rrf`` of ``scoring.fusion`` is used
under that name: the same sums, tested equal), ``NORMS`` its 7 normalisations and ``none``. Each method's parameters
are ranx's (``weights`` for ``wsum``, ``gamma`` for ``gmnz``, ``phi`` for ``rbc``, ``k`` for ``rrf``, ...); a missing
or unknown one stops with one line naming what the method takes.

**Ties.** ranx sorts each query's documents by score with numba's ``argsort`` (not stable), so its rank-based
methods and norms (``rrf``, ``isr``, ``bordafuse``, ``rank``, ...) give equal scores an order of ranx's own, which is
not trec_eval's (id descending) and not always the order given. Every fusion here is ranx's own computation on the
runs, handed over in trec_eval's order, and the fused run is written in trec_eval's order like every run; the
pipeline's ``rrf`` ranks each input in trec_eval's order, so it is ranx's ``rrf`` wherever no scores tie
(``tests/test_ranx_fusion.py``) and differs where ranx orders a tie otherwise. ranx lists each query's candidate
documents (borda's normalisation, ``bordafuse``, ``condorcet`` and their weighted forms) from a Python set, whose order
follows the interpreter's hash seed, so that on ties ranx's own output changes from process to process; here that list
is sorted (document id descending) while ranx runs, so the same runs give the same fused run every time.

**Learned fusions.** ``optimize`` runs ``ranx.optimize_fusion`` (the weights of ``wsum``, ``mnz``, ``w_bordafuse``,
...; the probabilities of ``probfuse``, ``slidefuse``, ``bayesfuse``, ``mapfuse``, ``posfuse``, ``segfuse``) on the
training queries only, the queries of the training judgments: :func:`split` checks that they are declared, judged and
retrieved, and the fused run holds the other queries only, so that nothing is evaluated on the queries its
parameters were learned on.
"""

from __future__ import annotations

import math

from ..errors import InputError

METHODS = ("anz", "bayesfuse", "bordafuse", "condorcet", "gmnz", "isr", "log_isr", "logn_isr", "mapfuse", "max", "med",
           "min", "mixed", "mnz", "posfuse", "probfuse", "rbc", "rrf", "segfuse", "slidefuse", "sum", "w_bordafuse",
           "w_condorcet", "wmnz", "wsum")
NORMS = ("min-max", "min-max-inverted", "max", "sum", "zmuv", "rank", "borda", "none")
# methods whose parameters ranx learns from judgments (optimize_fusion), and the hyper-parameter search of the others
TRAINED = ("bayesfuse", "mapfuse", "posfuse", "probfuse", "segfuse", "slidefuse")
FIX = "see ranx's fusion docs (https://amenra.github.io/ranx/fusion/) and docs/api.md#fusion."


# each method's parameters in ranx 0.3.21 (its functions' signatures, tests/test_ranx_fusion.py checks them):
# (required, optional); read without importing ranx, so that the configuration's check stays fast
PARAMS = {
    "anz": ((), ()), "bayesfuse": (("log_odds",), ()), "bordafuse": ((), ()), "condorcet": ((), ()),
    "gmnz": (("gamma",), ()), "isr": ((), ()), "log_isr": ((), ()), "logn_isr": ((), ("sigma",)),
    "mapfuse": (("map_scores",), ()), "max": ((), ()), "med": ((), ()), "min": ((), ()), "mixed": (("weights",), ()),
    "mnz": ((), ()), "posfuse": (("probs",), ()), "probfuse": (("probs",), ()), "rbc": (("phi",), ()),
    "rrf": ((), ("k",)), "segfuse": (("probs",), ()), "slidefuse": (("probs", "w"), ()), "sum": ((), ()),
    "w_bordafuse": (("weights",), ()), "w_condorcet": (("weights",), ()), "wmnz": (("weights",), ()),
    "wsum": (("weights",), ()),
}


def check(method: str, norm: str, params: dict | None, n_runs: int) -> dict:
    """``params`` for ranx's ``method`` checked without running it (nor importing ranx): known method and norm,
    every required parameter given and no unknown one, weights one finite number per run."""
    names(method, norm)
    params = dict(params or {})
    required, optional = PARAMS[method]
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        raise InputError(f"ranx's {method} takes no parameter {', '.join(unknown)} (it takes "
                         f"{', '.join(required + optional) or 'none'}).", fix=FIX)
    missing = [n for n in required if n not in params]
    if missing:
        learned = " (learned: --optimize with training judgments)" if method in TRAINED else ""
        raise InputError(f"ranx's {method} needs {', '.join(missing)}{learned}.", fix=FIX)
    weights = params.get("weights")
    if weights is not None and (not isinstance(weights, (list, tuple)) or len(weights) != n_runs or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in weights)):
        raise InputError(f"weights {weights!r} are not one finite number for each of the {n_runs} runs.",
                         fix="give one finite weight per run, in the order of the runs.")
    return params


def check_entry(spec: dict) -> None:
    """A ``fusion:`` entry of the configuration as ranx would take it (no import of ranx): the pipeline's own methods
    take no ``norm``, ``params`` or ``optimize``; ranx's take their parameters (``check``) or learn them
    (``optimize``, then no ``params``); a learned fusion is refused where ``spec["cliniq"]`` names CliniQ benchmarks
    (their scoring does not leave training queries out)."""
    from . import fusion

    if spec["method"] in fusion.METHODS:
        extra = [k for k in ("params", "optimize") if spec.get(k)] + (
            ["norm"] if spec.get("norm", "min-max") != "min-max" else [])
        if extra:
            raise InputError(f"{' and '.join(extra)} apply to ranx's methods, not to {spec['method']}.",
                             fix=f"drop {' and '.join(extra)}.")
        return
    if not spec.get("optimize"):
        try:
            check(spec["method"], spec.get("norm", "min-max"), spec.get("params"), len(spec["runs"]))
        except InputError as exc:
            if spec["method"] not in TRAINED:
                raise
            raise InputError(exc.problem, fix="add optimize: {metric: ndcg@10, train_qrels: <the training queries' "
                                              "judgments>}.") from None
        return
    if spec.get("params"):
        raise InputError("optimize learns the parameters; params would be overwritten.",
                         fix="drop params, or drop optimize and give them all.")
    names(spec["method"], spec.get("norm", "min-max"))
    if spec.get("cliniq"):
        raise InputError(f"a learned fusion (optimize) is scored without its training queries by score_run only, and "
                         f"{spec['cliniq'][0]} is a CliniQ benchmark (score_cliniq).",
                         fix="learn it with r2med-eval fuse --optimize and add its run as a type: run model, or drop "
                             "optimize.")


def names(method: str, norm: str) -> None:
    """Stop with one line on a method or normalisation ranx does not have."""
    if method not in METHODS:
        from ..errors import did_you_mean

        hint = did_you_mean(method, METHODS)
        raise InputError(f"unknown fusion method {method!r}" + (f"; {hint}" if hint else "."),
                         fix="use rrf, minmax, zscore or one of ranx's: " + ", ".join(METHODS) + ".")
    if norm not in NORMS:
        raise InputError(f"unknown normalisation {norm!r}.", fix="use one of ranx's: " + ", ".join(NORMS) + ".")


def _ranx_runs(runs: list[dict]):
    """The runs as ranx ``Run`` s over the same queries (a query a run lacks: no documents), each query's documents
    in trec_eval's order."""
    from ranx import Run

    qids = sorted({q for run in runs for q in run})
    out = []
    for i, run in enumerate(runs):
        ranked = {}
        for q in qids:
            items = sorted(run.get(q, {}).items(), key=lambda x: x[0], reverse=True)
            items.sort(key=lambda x: x[1], reverse=True)
            ranked[q] = {d: float(s) for d, s in items}
        out.append(Run(ranked, name=f"run_{i}"))
    return out


def fuse(runs: list[dict], method: str, norm: str = "min-max", params: dict | None = None) -> dict:
    """``ranx.fuse`` of the runs ({qid: {docid: score}} each, in the order the method reads them) with ranx's
    ``method``, ``norm`` and ``params``, as {qid: {docid: fused score}}."""
    import ranx

    if len(runs) < 2:
        raise InputError(f"fusion needs at least 2 runs, got {len(runs)}.", fix="name two or more runs.")
    params = check(method, norm, params, len(runs))
    with _quiet():
        fused = ranx.fuse(_ranx_runs(runs), norm=None if norm == "none" else norm, method=method, params=params)
    return {q: dict(docs) for q, docs in fused.to_dict().items()}


def _quiet():
    """numba's type-safety warnings from ranx's kernels (an index cast) are not the user's to read; and ranx's
    candidate lists in a fixed order (:func:`_candidates`) while it runs."""
    import contextlib
    import importlib
    import warnings

    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.filterwarnings("ignore", module="numba")
    warnings.filterwarnings("ignore", message=".*unsafe cast.*")
    for name in CANDIDATE_MODULES:
        module = importlib.import_module(name)
        stack.enter_context(_patched(module, "get_candidates", _candidates(module.get_candidates)))
    return stack


# ranx's modules that list each query's candidate documents (every document of any run) from a Python set
CANDIDATE_MODULES = ("ranx.normalization.borda_norm", "ranx.fusion.bordafuse", "ranx.fusion.weighted_bordafuse",
                     "ranx.fusion.condorcet", "ranx.fusion.weighted_condorcet")


def _candidates(original):
    """ranx's ``get_candidates`` with each query's list in a fixed order (document id descending, trec_eval's order of
    ties) instead of the set's, whose order follows the interpreter's hash seed: borda's normalisation, bordafuse and
    condorcet then give the same fused run in every process."""
    from numba.typed import List as TypedList
    from numba.types import unicode_type

    def fixed(runs):
        out = TypedList()
        for found in original(runs):
            ordered = sorted(found, reverse=True)
            out.append(TypedList(ordered) if ordered else TypedList.empty_list(unicode_type))
        return out

    return fixed


class _patched:
    def __init__(self, module, name, value):
        self.module, self.name, self.value = module, name, value

    def __enter__(self):
        self.before = getattr(self.module, self.name)
        setattr(self.module, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.before)


def split(qrels_train: dict, runs: list[dict]) -> tuple[list[str], list[str]]:
    """(training queries, the other queries of the runs): the training queries are those of the training judgments
    (each must be judged with a relevant document and retrieved by every run); the fused run holds the others."""
    train = sorted(q for q, docs in qrels_train.items() if docs)
    if not train:
        raise InputError("the training judgments hold no query.", fix="give the judgments of the training queries.")
    lacking = [q for q in train if not all(q in run and run[q] for run in runs)]
    if lacking:
        raise InputError(f"{len(lacking)} training queries are not in every run (e.g. {lacking[0]!r}).",
                         fix="train on queries every run retrieved for.")
    others = sorted({q for run in runs for q in run} - set(train))
    if not others:
        raise InputError("every query of the runs is a training query: nothing would be left to evaluate.",
                         fix="hold out the queries you evaluate on: give only the training queries' judgments.")
    return train, others


def optimize(qrels_train: dict, runs: list[dict], method: str, norm: str = "min-max", metric: str = "ndcg@10",
             **options) -> dict:
    """ranx's ``optimize_fusion`` on the training queries only (those of ``qrels_train``, see :func:`split`):
    the parameters ``fuse`` then takes (weights, probabilities, a constant)."""
    import ranx

    names(method, norm)
    train, _ = split(qrels_train, runs)
    chosen = set(train)
    train_runs = [{q: docs for q, docs in run.items() if q in chosen} for run in runs]
    qrels = ranx.Qrels({q: {d: int(g) for d, g in qrels_train[q].items()} for q in train})
    import inspect

    from ranx.fusion_optimization import optimization_switch

    if "show_progress" in inspect.signature(optimization_switch(method)).parameters:
        options.setdefault("show_progress", False)  # a progress bar on standard output, where a fused run may go
    try:
        with _quiet():
            params = ranx.optimize_fusion(qrels, _ranx_runs(train_runs), norm=None if norm == "none" else norm,
                                          method=method, metric=metric, **options)
    except (ValueError, AssertionError, KeyError) as exc:
        raise InputError(f"ranx could not optimise {method} for {metric!r}: {' '.join(str(exc).split())[:160]}.",
                         fix=FIX) from None
    return {k: _plain(v) for k, v in dict(params).items()}


def _plain(value):
    """A learned parameter as plain lists and floats (numpy arrays of probabilities: JSON, the run's lineage)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def fuse_trained(qrels_train: dict, runs: list[dict], method: str, norm: str = "min-max", metric: str = "ndcg@10",
                 **options) -> tuple[dict, dict]:
    """(the fused run of the queries that are not training queries, the learned parameters)."""
    params = optimize(qrels_train, runs, method, norm, metric, **options)
    _, others = split(qrels_train, runs)
    keep = set(others)
    fused = fuse([{q: d for q, d in run.items() if q in keep} for run in runs], method, norm, params)
    return fused, params

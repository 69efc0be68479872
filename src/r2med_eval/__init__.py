"""r2med-eval: reproducible evaluation of retrieval models on reasoning-driven medical retrieval.

Without Snakemake (docs/api.md)::

    import r2med_eval
    task = r2med_eval.load_task("data/demo")
    result = r2med_eval.evaluate(task.qrels, "my_run.trec", task.queries)
    result["metrics"]["ndcg_at_10"]

The library is grouped by concern (docs/development.md): ``benchmarks``, ``hub``, ``cliniq``, ``lexical``,
``dense``, ``rerank``, ``llm``, ``expansion``, ``scoring``, ``report``; ``workflow`` and ``stages`` serve the
Snakemake rules.
"""

__version__ = "0.2.0"

_API = ("compare", "compare_pairs", "evaluate", "evaluate_cliniq", "fuse", "load_task", "optimize_fusion", "read_qrels",
        "read_run", "write_run")

# The flat module names of version 0.1 (``from r2med_eval import significance``), for users' scripts: each is the
# module of the subpackage it moved to (``cliniq``, ``llm`` and ``rerank`` are the subpackages now: their modules
# are ``cliniq.metrics``, ``llm.client`` and ``rerank.scorers``). The package's own code imports the new names
# only (tests/test_layout.py).
MOVED = {
    "bm25_paper": "lexical.bm25_paper",
    "cliniq_completion": "cliniq.completion",
    "cliniq_completion_report": "cliniq.completion_report",
    "cliniq_corpus": "cliniq.corpus",
    "cliniq_files": "cliniq.files",
    "cliniq_judge": "cliniq.judge",
    "cliniq_tables": "cliniq.tables",
    "datasets": "benchmarks.datasets",
    "dense_encode": "dense.encode",
    "dense_models": "dense.models",
    "dense_search": "dense.search",
    "embeddings": "dense.embeddings",
    "encoders": "dense.encoders",
    "factories": "dense.factories",
    "fusion": "scoring.fusion",
    "gar": "expansion.gar",
    "generate": "expansion.generate",
    "hfdata": "hub.datasets",
    "hfmodels": "hub.models",
    "htmlreport": "report.html",
    "java": "lexical.java",
    "leaderboard": "report.leaderboard",
    "llm_rerank": "rerank.llm_rerank",
    "lucene": "lexical.lucene",
    "medquad": "benchmarks.medquad",
    "metric_table": "scoring.metric_table",
    "metrics": "scoring.metrics",
    "mteb_results": "report.mteb_results",
    "palette": "report.palette",
    "plots": "report.plots",
    "provenance": "report.provenance",
    "r2med": "benchmarks.r2med",
    "r2med_paper": "report.r2med_paper",
    "rerank_merge": "rerank.merge",
    "runs": "scoring.runs",
    "significance": "report.significance",
    "stats": "scoring.stats",
    "tables": "report.tables",
}


class _MovedFinder:
    """``import r2med_eval.stats`` (0.1's spelling) imports the module ``MOVED`` names: the same module object, found
    by this finder on ``sys.meta_path`` (attribute access, ``from r2med_eval import stats``, goes through
    ``__getattr__``)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        import importlib.util

        head, _, tail = fullname.partition(".")
        if head != __name__ or tail not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedFinder)

    specs: dict = {}  # the real module's name -> its own spec, which the import system replaces by the alias's

    @staticmethod
    def create_module(spec):
        import importlib

        module = importlib.import_module(f"{__name__}.{MOVED[spec.name.partition('.')[2]]}")
        _MovedFinder.specs[module.__name__] = module.__spec__
        return module

    @staticmethod
    def exec_module(module):
        module.__spec__ = _MovedFinder.specs[module.__name__]


def _install_finder():
    import sys

    if not any(isinstance(f, type) and f.__name__ == "_MovedFinder" for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder)


_install_finder()


def __getattr__(name):
    """The functions of ``r2med_eval.api`` and the modules of ``MOVED``, imported on first use (importing the
    package stays free)."""
    import importlib

    if name in _API:
        return getattr(importlib.import_module(f"{__name__}.api"), name)
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{MOVED[name]}")
    raise AttributeError(f"module 'r2med_eval' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API) + list(MOVED))

"""r2med-eval: reproducible evaluation of retrieval models on reasoning-driven medical retrieval.

Without Snakemake (docs/api.md)::

    import r2med_eval
    task = r2med_eval.load_task("data/demo")
    result = r2med_eval.evaluate(task.qrels, "my_run.trec", task.queries)
    result["metrics"]["ndcg_at_10"]
"""

__version__ = "0.1.0"

_API = ("compare", "evaluate", "evaluate_cliniq", "fuse", "load_task", "read_qrels", "read_run", "write_run")


def __getattr__(name):
    """The functions of ``r2med_eval.api``, imported on first use (importing the package stays free)."""
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'r2med_eval' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API))

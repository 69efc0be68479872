"""Where a ``type: python`` model's code lies and which MTEB task an ``mteb`` model encodes a task with, read
without importing the user's module or mteb (the control layer and the provenance use it); ``mteb_problem``
(which imports mteb) checks an ``mteb`` model's name, revision and tasks against MTEB's registry."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

MTEB_R2MED = "R2MED{}Retrieval"  # MTEB's task name of an R2MED task, hyphens dropped (R2MEDMedQADiagRetrieval)


def split_factory(factory: str) -> tuple[str, str]:
    module, _, attr = factory.partition(":")
    return module, attr


def module_file(factory: str, python_path: str | None = None) -> Path | None:
    """The source file of ``factory``'s module, found on ``python_path`` then ``sys.path`` without importing
    anything (a package's ``__init__.py`` for a package); None when it cannot be found."""
    module, _ = split_factory(factory)
    search = ([str(Path(python_path).expanduser())] if python_path else []) + [p or "." for p in sys.path]
    locations = search
    spec = None
    for part in module.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, locations)
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and Path(origin).is_file() else None


def mteb_task_name(spec: dict, task: str, paper_task: str | None) -> str | None:
    """The MTEB task whose metadata (and so prompts) an ``mteb`` model encodes a task with: ``mteb_tasks[task]``,
    else MTEB's R2MED task for an R2MED task; None when neither applies."""
    named = (spec.get("mteb_tasks") or {}).get(task)
    if named:
        return named
    return MTEB_R2MED.format(paper_task.replace("-", "")) if paper_task else None


def mteb_problem(name: str, revision: str | None, tasks=()) -> tuple[str, str] | None:
    """Whether MTEB knows model ``name`` at ``revision`` and the MTEB ``tasks``, from MTEB's own registry offline
    (``mteb.get_model_meta``, ``mteb.get_task``): None, or (the problem in MTEB's own words with its suggestion,
    the key to fix: ``name``, ``revision`` or ``mteb_tasks``). Imports mteb (seconds)."""
    import mteb

    def words(exc: BaseException) -> str:
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        return text.removeprefix("KeyError: ").strip()

    try:
        mteb.get_model_meta(name, revision)
    except KeyError as exc:  # an unknown name; MTEB suggests close ones
        return f"MTEB does not know the model {name!r} ({words(exc)})", "name"
    except ValueError as exc:  # a known name at a revision MTEB does not pin
        return f"MTEB does not know the model {name!r} at revision {revision!r} ({words(exc)})", "revision"
    for task in tasks:
        try:
            mteb.get_task(task)
        except KeyError as exc:
            return f"MTEB does not know the task {task!r} ({words(exc)})", "mteb_tasks"
    return None

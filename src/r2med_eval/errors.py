"""One error type for bad input: it names the file, the line (where there is one) and the fix."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input that stops the pipeline with one clear message."""

    def __init__(self, problem: str, *, path=None, line: int | None = None, fix: str | None = None):
        self.problem = problem
        self.path = None if path is None else str(path)
        self.line = line
        self.fix = fix
        where = ""
        if self.path is not None:
            where = self.path + (f", line {line}" if line is not None else "") + ": "
        message = where + problem
        if fix:
            message += f" Fix: {fix}"
        super().__init__(message)


class ConfigError(InputError):
    """config.yaml does not match the schema or names something that does not exist."""


class LLMError(InputError):
    """An LLM server could not give a usable answer, or may not be asked: one message, the job stops."""


def close_names(word: str, choices, n: int = 1) -> list[str]:
    """The names of ``choices`` closest to ``word`` (difflib, case ignored), best first; [] when none is close."""
    import difflib

    lowered: dict[str, str] = {}
    for name in sorted({str(c) for c in choices}):
        lowered.setdefault(name.lower(), name)
    return [lowered[c] for c in difflib.get_close_matches(str(word).lower(), list(lowered), n=n, cutoff=0.5)]


def did_you_mean(word: str, choices, n: int = 1) -> str:
    """``did you mean 'x'?`` (or ``'x' or 'y'``) for the names of ``choices`` closest to ``word``, or "" when none
    is close."""
    close = close_names(word, choices, n)
    return "did you mean " + " or ".join(map(repr, close)) + "?" if close else ""


def name_list(names, limit: int = 20) -> str:
    """``a, b, c`` for at most ``limit`` names, then ``... (N in all)``: a message stays short for a registry of
    thousands of runs."""
    names = [str(n) for n in names]
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", ... ({len(names)} in all)"


def as_id(value, *, ids=(), shape: str | None = None, keep: int = 3) -> str:
    """A value of a user's file as a message may show it: whole (quoted) when it is one of ``ids`` or has the shape
    of an id (``shape``, a regular expression the whole value must match), otherwise cut to its first ``keep``
    characters and its length, ``'Pat…' (41 characters)``. A file typed beside clinical notes may hold note text in
    any field (a sentence pasted into the wrong column), and a message reaches the terminal and the logs: it names
    ids, never text."""
    import re

    value = str(value)
    if value in ids or (shape is not None and re.fullmatch(shape, value)):
        return repr(value)
    if not value:
        return "an empty value"
    if len(value) <= keep:
        return f"{value!r} (a value of {len(value)} characters)"
    return f"{value[:keep]!r}\u2026 ({len(value)} characters)"

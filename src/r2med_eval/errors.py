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

"""Bounds on what an input may cost before it is checked.

* ``shown(value)``: a value as a message prints it, at most a few hundred characters, built without rendering the
  whole value (a message about a huge or deeply nested value stays short and fast).
* ``check_tree(tree)``: a configuration (or any tree of mappings and lists) measured as its consumers would see
  it: every YAML alias (``*name``) counted as often as it is used, but each shared value measured once, so that an
  alias bomb ("billion laughs": a few hundred bytes that expand to billions of values) is found in time linear in
  the file, before anything expands it (JSON Schema's messages render the whole value, a deep walk visits every
  copy). It also refuses what no consumer can use: a value that contains itself, nesting deeper than
  ``MAX_DEPTH``, more than ``MAX_VALUES`` values once expanded, a mapping key that is not a string, a number that
  is not finite (``.nan``, ``.inf``) or an integer beyond 64 bits.
"""

from __future__ import annotations

import math
import reprlib

SHOW_LIMIT = 200
# a real configuration holds about a thousand values (config.yaml and every config/*.yaml together: 725)
MAX_VALUES = 100_000
MAX_DEPTH = 64
INT_LIMIT = 2 ** 63

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 8, 8, 8, 8
_REPR.maxstring = _REPR.maxother = SHOW_LIMIT
_REPR.maxlong = 40


def shown(value, limit: int = SHOW_LIMIT) -> str:
    """``repr(value)`` cut to about ``limit`` characters: a long string keeps its start and says how long it is; a
    container shows its first items and levels only (``reprlib``), so nothing large is ever rendered."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return repr(value[:limit]) + f"... ({len(value):,} characters)"
    text = _REPR.repr(value)
    return text if len(text) <= limit + 20 else text[:limit] + "..."


def key_path(parts) -> str:
    """``models.bm25.k1``, ``rerank[0].run``: the path of a value in a configuration."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            text = str(part)
            out += ("." if out else "") + (text if len(text) <= 80 else text[:80] + "...")
    return out or "(top level)"


class TreeProblem(ValueError):
    """What ``check_tree`` refuses: ``path`` (the keys down to the value), ``problem`` and ``fix`` (sentences)."""

    def __init__(self, path: list, problem: str, fix: str):
        self.path = list(path)
        self.problem = problem
        self.fix = fix
        super().__init__(f"{key_path(self.path)}: {problem}")


def check_tree(tree, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> int:
    """The number of values of ``tree`` with every shared (aliased) mapping or list counted as often as it appears;
    raises TreeProblem at the first thing it refuses (see the module's docstring). Each distinct mapping or list is
    visited once, so the time is linear in the loaded file whatever its aliases expand to."""
    sizes: dict[int, int | None] = {}  # id of a mapping or list -> expanded size (None: being measured)

    def measure(node, path: list, depth: int) -> int:
        if isinstance(node, dict):
            children = node.items()
        elif isinstance(node, (list, tuple)):
            children = enumerate(node)
        else:
            scalar(node, path)
            return 1
        key = id(node)
        if key in sizes:
            if sizes[key] is None:
                raise TreeProblem(path, "the value contains itself (a YAML anchor used inside its own value).",
                                  "write the value out without referring to itself.")
            return sizes[key]
        if depth > max_depth:
            raise TreeProblem(path, f"values nested more than {max_depth} levels deep.", "flatten the value.")
        sizes[key] = None
        total = 1
        for name, child in children:
            if isinstance(node, dict) and not isinstance(name, str):
                raise TreeProblem(path, f"the key {shown(name)} is not a string (YAML reads unquoted numbers, "
                                        "true/false/yes/no/on/off and null as such).", "quote the key.")
            total += measure(child, path + [name], depth + 1)
            if total > max_values:
                raise TreeProblem(path, f"more than {max_values:,} values once YAML's aliases (*name) are expanded "
                                        "(an alias bomb?).", "write the values out without nested aliases.")
        sizes[key] = total
        return total

    def scalar(value, path: list) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise TreeProblem(path, f"{shown(value)} is not a finite number.",
                              "write a finite number (YAML's .nan and .inf are not).")
        if isinstance(value, int) and not isinstance(value, bool) and not -INT_LIMIT <= value < INT_LIMIT:
            raise TreeProblem(path, f"the integer {shown(value)} is beyond 64 bits.", "write a smaller number.")

    return measure(tree, [], 0)

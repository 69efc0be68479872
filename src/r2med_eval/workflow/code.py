"""Which package code each rule runs, as a hash that goes into the rule's params.

Snakemake reruns a ``script:`` rule when its script changes, but our scripts are 8-line adapters: the logic
is in this package. So every rule's params carry ``code``: a hash of

* the rule's stage function (``stages/<stage>.py``, function name = rule name) and the helper functions of
  the same module it calls, as source text;
* every package module those import (at module level or inside functions), and every package module those
  import in turn, as whole files;
* the data files such a module declares in a module-level ``DATA_FILES`` tuple (paths relative to the
  repository root, e.g. R2MED's published table).

A module that declares ``SHAPES_OUTPUTS = False`` (``progress``: log and terminal lines only) is left out, so
that editing it reruns nothing.

The control layer itself (``workflow/``, e.g. ``paths.parse`` in a stage) is left out: it decides which jobs
exist, where their files lie and what their params hold, and Snakemake sees all of that directly, so adding
a path pattern or a rule reruns nothing.

Editing ``metrics.py`` thus changes the code hash of ``score_run`` (and of any rule whose closure holds it)
and of nothing else. Only the source is read (``ast``), nothing is imported. The hash does not depend on
where the checkout lies.

With a ``PlanningCache`` (Snakemake's planning process: ``rules/common.smk``) the table of every rule's hash is
computed once per state of the package: ``fingerprint()`` reads the package's files as bytes (no parsing), and a
stored table under that key is used as it is.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

PACKAGE = "r2med_eval"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = PACKAGE_DIR.parents[1]
STAGES = f"{PACKAGE}.stages"


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(?P<level>\.*)(?P<stem>[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#]*)"
                     r"|import[ \t]+(?P<plain>[\w., \t]+))", re.M)
_DATA_FILES = re.compile(r"^DATA_FILES = (?P<value>\([^)]*\))", re.M)
_DATA_FILES_BYTES = re.compile(_DATA_FILES.pattern.encode(), re.M)
_NEUTRAL = re.compile(r"^SHAPES_OUTPUTS = False\b", re.M)


def _statements(node: ast.AST):
    """Every statement below ``node`` (imports are statements: no need to visit expressions)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(current, name, None)
            if isinstance(children, list):
                todo.extend(c for c in children if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case)))


class CodeIndex:
    def __init__(self, package_dir: Path = PACKAGE_DIR, repo_dir: Path = REPO_DIR, cache=None):
        self.package_dir = Path(package_dir)
        self.repo_dir = Path(repo_dir)
        self.cache = cache  # a workflow.cache.PlanningCache, or None
        self._fingerprint: str | None = None
        self._cache_read = False
        self._sources: dict[str, str] = {}
        self._files: dict[str, Path | None] = {}
        self._call_graph: dict[str, dict] = {}
        self._trees: dict[str, tuple[str, ast.Module]] = {}
        self._closure: dict[str, set[str]] = {}
        self._rules: dict[str, str] | None = None
        self._hashes: dict[str, str] = {}

    # ------------------------------------------------------------ modules

    def _file(self, module: str) -> Path | None:
        if module not in self._files:
            self._files[module] = self._find(module)
        return self._files[module]

    def _find(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] != PACKAGE:
            return None
        base = self.package_dir.joinpath(*parts[1:])
        if base.with_suffix(".py").is_file() and len(parts) > 1:
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        return None

    def _source(self, module: str) -> str:
        if module not in self._sources:
            self._sources[module] = self._file(module).read_text(encoding="utf-8")
        return self._sources[module]

    def _tree(self, module: str) -> tuple[str, ast.Module]:
        """Source and syntax tree of a stage module (library modules are only read as text)."""
        if module not in self._trees:
            self._trees[module] = (self._source(module), ast.parse(self._source(module)))
        return self._trees[module]

    def _package_of(self, module: str) -> str:
        path = self._file(module)
        return module if path is not None and path.name == "__init__.py" else module.rsplit(".", 1)[0]

    def _resolve(self, module: str, level: int, stem: str | None, names: list[str] | None) -> set[str]:
        """The package modules one import statement of ``module`` needs (names None: ``import stem``)."""
        if names is None:
            return {stem} if self._file(stem) is not None else set()
        if level:
            base = self._package_of(module).split(".")
            base = base[: len(base) - (level - 1)]
            stem = ".".join(base + ([stem] if stem else []))
        # ``from pkg import mod`` needs mod's file; pkg's __init__ only for names that are not modules
        subs = [f"{stem}.{n}" for n in names]
        found = {n for n in subs if self._file(n) is not None}
        if len(found) < len(subs) and self._file(stem) is not None:
            found.add(stem)
        return found

    def _imports(self, module: str, node: ast.AST) -> set[str]:
        """Package modules imported by the statements below ``node`` (a stage function)."""
        found: set[str] = set()
        for sub in _statements(node):
            if isinstance(sub, ast.Import):
                for a in sub.names:
                    found |= self._resolve(module, 0, a.name, None)
            elif isinstance(sub, ast.ImportFrom):
                found |= self._resolve(module, sub.level, sub.module, [a.name for a in sub.names])
        return found

    def _module_imports(self, module: str) -> set[str]:
        """Package modules a whole module imports, anywhere in it (read from the text: no parsing needed)."""
        found: set[str] = set()
        for m in _IMPORT.finditer(self._source(module)):
            if m["stem"] is not None:
                names = [n.split(" as ")[0].strip()
                         for n in m["names"].strip().strip("()").replace("\\\n", " ").split(",")]
                found |= self._resolve(module, len(m["level"]), m["stem"], [n for n in names if n])
            else:
                for name in m["plain"].split(","):
                    found |= self._resolve(module, 0, name.split(" as ")[0].strip(), None)
        return found

    def module_closure(self, module: str) -> set[str]:
        """``module`` and every package module it imports, transitively."""
        if module not in self._closure:
            self._closure[module] = {module}
            todo = [module]
            while todo:
                current = todo.pop()
                for dep in self._module_imports(current):
                    if dep not in self._closure[module]:
                        self._closure[module].add(dep)
                        todo.append(dep)
        return self._closure[module]

    def _neutral(self, module: str) -> bool:
        return _NEUTRAL.search(self._source(module)) is not None

    def _data_files(self, module: str) -> list[Path]:
        m = _DATA_FILES.search(self._source(module))
        return [self.repo_dir / p for p in ast.literal_eval(m["value"])] if m else []

    # ------------------------------------------------------------ rules

    def rules(self) -> dict[str, str]:
        """Rule name -> its stage module (every top-level public function of ``stages/*.py``)."""
        if self._rules is None:
            self._rules = {}
            for path in sorted((self.package_dir / "stages").glob("*.py")):
                if path.name == "__init__.py":
                    continue
                module = f"{STAGES}.{path.stem}"
                for node in self._tree(module)[1].body:
                    if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                        self._rules[node.name] = module
        return self._rules

    def _calls(self, module: str) -> dict[str, tuple[ast.FunctionDef, set[str]]]:
        """Top-level functions of a stage module: name -> (node, the other top-level functions it names)."""
        if module not in self._call_graph:
            top = {n.name: n for n in self._tree(module)[1].body if isinstance(n, ast.FunctionDef)}
            self._call_graph[module] = {name: (node, {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                                                      and n.id in top and n.id != name})
                                        for name, node in top.items()}
        return self._call_graph[module]

    def _functions(self, module: str, name: str) -> list[ast.FunctionDef]:
        """The function and the same-module functions it refers to, transitively."""
        graph = self._calls(module)
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen and current in graph:
                seen.add(current)
                todo.extend(graph[current][1])
        return [graph[n][0] for n in sorted(seen)]

    def closure(self, rule: str) -> tuple[list[str], list[str]]:
        """(the functions, the package modules and data files) a rule's code hash covers."""
        module = self.rules()[rule]
        funcs = self._functions(module, rule)
        tree = self._tree(module)[1]
        top_imports = self._imports(module, ast.Module(body=[n for n in tree.body if isinstance(
            n, (ast.Import, ast.ImportFrom))], type_ignores=[]))
        modules: set[str] = set()
        for dep in top_imports.union(*(self._imports(module, f) for f in funcs)):
            modules |= self.module_closure(dep)
        modules.discard(module)
        modules = {m for m in modules if not m.startswith(f"{PACKAGE}.workflow") and not self._neutral(m)}
        files = [self._file(m) for m in sorted(modules)]
        data = [p for m in sorted(modules) for p in self._data_files(m)]
        return [f"{module}.{f.name}" for f in funcs], [self._rel(p) for p in files + data]

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.repo_dir).as_posix()

    def fingerprint(self) -> str:
        """sha256 over everything a code hash reads: every ``.py`` file under the package (by its path in the
        package, as bytes; ``workflow/code.py`` itself among them), where the package lies in the repository, and
        the data files modules declare. Equal fingerprints give equal hashes for every rule."""
        if self._fingerprint is None:
            from .cache import key_of

            parts = [self._rel(self.package_dir)]
            for path in sorted(self.package_dir.rglob("*.py")):
                data = path.read_bytes()
                parts += [path.relative_to(self.package_dir).as_posix(), data]
                # a substring test first: the multi-line regex alone takes milliseconds over the whole package
                m = _DATA_FILES_BYTES.search(data) if b"DATA_FILES = " in data else None
                for rel in ast.literal_eval(m["value"].decode("utf-8")) if m else ():
                    parts += [f"data {rel}", (self.repo_dir / rel).read_bytes()]
            self._fingerprint = key_of(*parts)
        return self._fingerprint

    def _from_cache(self) -> None:
        """Every rule's hash from the planning cache, or computed and stored there."""
        key = self.fingerprint()
        table = self.cache.get("code", key)
        if isinstance(table, dict) and all(isinstance(v, str) for v in table.values()):
            self._hashes.update(table)
            return
        self.cache.put("code", key, {r: self.hash(r) for r in self.rules()})

    def hash(self, rule: str) -> str:
        if self.cache is not None and not self._cache_read:
            self._cache_read = True
            self._from_cache()
        if rule not in self._hashes:
            self._hashes[rule] = self._compute(rule)
        return self._hashes[rule]

    def _compute(self, rule: str) -> str:
        module = self.rules()[rule]
        lines = self._tree(module)[0].splitlines()
        digest = hashlib.sha256()
        for func in self._functions(module, rule):
            digest.update(f"def {module}.{func.name}\0".encode())
            digest.update("\n".join(lines[func.lineno - 1: func.end_lineno]).encode("utf-8"))
        for rel in self.closure(rule)[1]:
            digest.update(f"\0file {rel}\0".encode())
            digest.update((self.repo_dir / rel).read_bytes())
        return digest.hexdigest()[:16]

"""Which package code each rule runs, as a hash that goes into the rule's params.

Snakemake reruns a ``script:`` rule when its script changes, but our scripts are 8-line adapters: the logic
is in this package. So every rule's params carry ``code``: a hash of

* the rule's stage function (``stages/<stage>.py``, function name = rule name) and the helper functions of
  the same module it calls, as source text;
* every package module those import (at module level or inside functions), and every package module those
  import in turn, as whole files;
* the data files such a module declares in a module-level ``DATA_FILES`` tuple (paths relative to the
  repository root, e.g. R2MED's published table).

Editing ``metrics.py`` thus changes the code hash of ``score_run`` (and of any rule whose closure holds it)
and of nothing else. Only the source is read (``ast``), nothing is imported. The hash does not depend on
where the checkout lies.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

PACKAGE = "r2med_eval"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = PACKAGE_DIR.parents[1]
STAGES = f"{PACKAGE}.stages"


class CodeIndex:
    def __init__(self, package_dir: Path = PACKAGE_DIR, repo_dir: Path = REPO_DIR):
        self.package_dir = Path(package_dir)
        self.repo_dir = Path(repo_dir)
        self._trees: dict[str, tuple[str, ast.Module]] = {}
        self._closure: dict[str, set[str]] = {}
        self._rules: dict[str, str] | None = None
        self._hashes: dict[str, str] = {}

    # ------------------------------------------------------------ modules

    def _file(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] != PACKAGE:
            return None
        base = self.package_dir.joinpath(*parts[1:])
        if base.with_suffix(".py").is_file() and len(parts) > 1:
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        return None

    def _tree(self, module: str) -> tuple[str, ast.Module]:
        if module not in self._trees:
            source = self._file(module).read_text(encoding="utf-8")
            self._trees[module] = (source, ast.parse(source))
        return self._trees[module]

    def _package_of(self, module: str) -> str:
        path = self._file(module)
        return module if path is not None and path.name == "__init__.py" else module.rsplit(".", 1)[0]

    def _imports(self, module: str, node: ast.AST) -> set[str]:
        """Package modules imported anywhere below ``node`` (``module`` resolves relative imports)."""
        found: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                names = [a.name for a in sub.names]
            elif isinstance(sub, ast.ImportFrom):
                if sub.level:
                    base = self._package_of(module).split(".")
                    base = base[: len(base) - (sub.level - 1)]
                    stem = ".".join(base + ([sub.module] if sub.module else []))
                else:
                    stem = sub.module or ""
                # ``from pkg import mod`` needs mod's file; pkg's __init__ only for names that are not modules
                subs = [f"{stem}.{a.name}" for a in sub.names]
                names = [n for n in subs if self._file(n) is not None]
                if len(names) < len(subs):
                    names.append(stem)
            else:
                continue
            found |= {n for n in names if self._file(n) is not None}
        return found

    def module_closure(self, module: str) -> set[str]:
        """``module`` and every package module it imports, transitively."""
        if module not in self._closure:
            self._closure[module] = {module}
            todo = [module]
            while todo:
                current = todo.pop()
                for dep in self._imports(current, self._tree(current)[1]):
                    if dep not in self._closure[module]:
                        self._closure[module].add(dep)
                        todo.append(dep)
        return self._closure[module]

    def _data_files(self, module: str) -> list[Path]:
        for node in self._tree(module)[1].body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "DATA_FILES"
                                                    for t in node.targets):
                return [self.repo_dir / p for p in ast.literal_eval(node.value)]
        return []

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

    def _functions(self, module: str, name: str) -> list[ast.FunctionDef]:
        """The function and the same-module functions it refers to, transitively."""
        top = {n.name: n for n in self._tree(module)[1].body if isinstance(n, ast.FunctionDef)}
        seen, todo = [], [name]
        while todo:
            current = todo.pop()
            if current in seen or current not in top:
                continue
            seen.append(current)
            todo += [n.id for n in ast.walk(top[current]) if isinstance(n, ast.Name) and n.id in top]
        return [top[n] for n in sorted(seen)]

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
        files = [self._file(m) for m in sorted(modules)]
        data = [p for m in sorted(modules) for p in self._data_files(m)]
        return [f"{module}.{f.name}" for f in funcs], [self._rel(p) for p in files + data]

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.repo_dir).as_posix()

    def hash(self, rule: str) -> str:
        if rule not in self._hashes:
            module = self.rules()[rule]
            source, _ = self._tree(module)
            digest = hashlib.sha256()
            for func in self._functions(module, rule):
                digest.update(f"def {module}.{func.name}\0".encode())
                digest.update(ast.get_source_segment(source, func).encode("utf-8"))
            for rel in self.closure(rule)[1]:
                digest.update(f"\0file {rel}\0".encode())
                digest.update((self.repo_dir / rel).read_bytes())
            self._hashes[rule] = digest.hexdigest()[:16]
        return self._hashes[rule]

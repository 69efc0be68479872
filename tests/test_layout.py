"""The package's layout shows its architecture (issue 36): a few modules at the top, the rest grouped by concern in
subpackages whose ``__init__.py`` holds a docstring only, no module over 600 lines, no import cycle, the package's
own code importing modules by their real names (never through the root's names of version 0.1, which would hide a
module from the code hash: ``workflow/code.py``), and docs/development.md's tree naming every subpackage."""
import ast
import importlib
import re

import pytest
from conftest import REPO

from r2med_eval.workflow.code import CodeIndex

PACKAGE = REPO / "src" / "r2med_eval"
MAX_TOP_MODULES = 10
MIN_SUBPACKAGES = 8
MAX_LINES = 600


def modules() -> dict[str, object]:
    """Dotted name -> path of every module of the package (``__init__`` files as their package)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def subpackages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def test_few_modules_at_the_top_and_the_rest_in_subpackages():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, top
    assert len(subpackages()) >= MIN_SUBPACKAGES, subpackages()
    assert not [p for p in PACKAGE.iterdir() if p.is_dir() and p.name not in ("__pycache__", "prompts")
                and not (p / "__init__.py").is_file()]


def test_no_module_over_600_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long


@pytest.mark.parametrize("sub", subpackages())
def test_subpackage_init_holds_a_docstring_only(sub):
    tree = ast.parse((PACKAGE / sub / "__init__.py").read_text())
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value.value, str)
    assert len(tree.body[0].value.value.strip()) > 40, f"{sub}/__init__.py: say what the subpackage holds"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of ``graph`` (node -> the nodes it imports) meets, each as its path back to
    where it started."""
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_import_cycle_between_modules():
    """Imports anywhere in a module count (a function's import too), as the code hash reads them."""
    code = CodeIndex()
    graph = {m: {d for d in code._module_imports(m) if d != m} for m in modules()}
    cycles = _cycles(graph)
    assert not cycles, cycles


def test_no_cycle_between_subpackages():
    """The concerns stand in layers: between subpackages (and top-level modules) the imports form no cycle, so no
    arrow runs back up (scoring/ does not import report/, llm/ nothing of cliniq/, ...)."""
    code = CodeIndex()

    def unit(m: str) -> str:
        parts = m.split(".")
        return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else m

    graph: dict[str, set[str]] = {}
    for m in modules():
        graph.setdefault(unit(m), set()).update(unit(d) for d in code._module_imports(m) if unit(d) != unit(m))
    cycles = _cycles(graph)
    assert not cycles, cycles


def _stem(code, module, node) -> str | None:
    """The absolute module an ``ImportFrom`` of ``module`` (None: a file outside the package) imports from, when it
    is in the package; None otherwise."""
    if node.level:
        if module is None:
            return None
        base = code._package_of(module).split(".")
        stem = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    return stem if stem == "r2med_eval" or stem.startswith("r2med_eval.") else None


def test_the_package_imports_modules_by_their_real_names():
    """Every ``from <package> import name`` in the package names a module, a subpackage or a name the package's
    ``__init__`` defines; none goes through ``r2med_eval.MOVED`` (the names of version 0.1)."""
    import r2med_eval

    code = CodeIndex()
    known = set(modules())
    bad = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            stem = _stem(code, module, node)
            if stem is None:
                continue
            for alias in node.names:
                if stem == "r2med_eval" and alias.name in r2med_eval.MOVED:
                    bad.append(f"{module}: from {stem} import {alias.name}")
                elif stem not in known and f"{stem}.{alias.name}" not in known:
                    bad.append(f"{module}: from {stem} import {alias.name} (no such module)")
    assert not bad, bad


def _defined(path) -> set[str]:
    """The names a module defines or imports at its top level (its public surface for ``from m import name``)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, ast.Assign):
                    names |= {n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    return names


def test_every_imported_name_exists_where_it_is_imported_from():
    """Imports inside functions run late (a job, a check): every ``from r2med_eval... import name`` anywhere in the
    package, the tests, the benchmarks and the scripts names a module or a name that module defines."""
    mods = modules()
    defined = {m: _defined(p) for m, p in mods.items()}
    files = [*PACKAGE.rglob("*.py"), *(REPO / "tests").rglob("*.py"), *(REPO / "bench").glob("*.py"),
             *(REPO / "scripts").glob("*.py")]
    code = CodeIndex()
    bad = []
    for path in files:
        try:
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            module = ".".join(rel.parts).removesuffix(".__init__")
        except ValueError:
            module = None
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            stem = _stem(code, module, node)
            if stem is None:
                continue
            if stem not in mods:
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}: no module {stem}")
                continue
            for alias in node.names:
                if f"{stem}.{alias.name}" not in mods and alias.name not in defined[stem] and not (
                        stem == "r2med_eval" and alias.name in __import__("r2med_eval").MOVED):
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {stem} has no {alias.name}")
    assert not bad, bad


def test_the_names_of_version_0_1_still_import():
    """``from r2med_eval import significance`` (docs/api.md) and every other flat name of 0.1 give the module it
    moved to."""
    import r2med_eval

    for old, new in r2med_eval.MOVED.items():
        module = getattr(r2med_eval, old)
        assert module is importlib.import_module(f"r2med_eval.{new}"), old
    from r2med_eval import significance

    assert significance.__name__ == "r2med_eval.report.significance" and hasattr(significance, "FIELDS")


def test_every_0_1_name_the_readme_promises_imports():
    """The README's promise (Upgrading): every public name of 0.1's flat modules (tests/data/names_0_1.json, read
    from the 0.1 tree) imports from its flat module, but those docs/development.md lists (the README links the
    list), each in the module it names or gone as it says; ``import r2med_eval.<flat name>`` is the module too."""
    import json
    import re

    import r2med_eval

    text = (REPO / "docs" / "development.md").read_text()
    section = text[text.index("### Names of version 0.1"):]
    section = section[:section.index("\n#", 5)]
    assert "docs/development.md#names-of-version-01" in (REPO / "README.md").read_text()
    moved, removed = {}, set()
    for bullet in re.findall(r"^\* (.*?)(?=^\* |^\n|\Z)", section, re.M | re.S):
        named = {tuple(n.split(".", 1)) for n in re.findall(r"`(\w+\.\w+)`", bullet) if n.split(".")[0] in
                 r2med_eval.MOVED}
        if bullet.startswith("removed:"):
            removed |= named
        else:
            target = re.search(r"now in `([\w.]+)`", bullet).group(1)
            moved.update({n: target for n in named})
    assert moved and removed
    old = json.loads((REPO / "tests" / "data" / "names_0_1.json").read_text())["names"]
    assert set(old) == set(r2med_eval.MOVED)
    for module, names in old.items():
        flat = importlib.import_module(f"r2med_eval.{module}")
        assert flat is getattr(r2med_eval, module)
        for name in names:
            if (module, name) in moved:
                assert not hasattr(flat, name) and hasattr(importlib.import_module(
                    f"r2med_eval.{moved[module, name]}"), name), (module, name)
            elif (module, name) in removed:
                assert not hasattr(flat, name), (module, name)  # the README lists exactly what went
            else:
                assert hasattr(flat, name), f"r2med_eval.{module}.{name} of 0.1 does not import"
    assert set(moved) | removed <= {(m, n) for m, names in old.items() for n in names}


def test_development_docs_draw_the_tree():
    text = (REPO / "docs" / "development.md").read_text()
    tree = text[text.index("```text\nsrc/r2med_eval/"):]
    tree = tree[: tree.index("```", 4)]
    named = set(re.findall(r"^\s+([a-z_]+)/", tree, re.M))
    assert set(subpackages()) <= named, set(subpackages()) - named
    top = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert top <= set(re.findall(r"\b([a-z_]+)\.py\b", tree)), top

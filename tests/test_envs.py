"""The conda environments of `--sdm conda` (envs/*.yaml) hold every third-party package each rule's code
imports (issue 14.10): the rule's stage function and every package module in its code closure
(workflow.code.CodeIndex.closure, whole files), parsed with ast, nothing imported."""
import ast
import re
import sys
from importlib.metadata import packages_distributions

import pytest
import yaml
from conftest import REPO

from r2med_eval.workflow.code import CodeIndex

# Imports a rule's closure holds but its code never reaches, with the reason.
NOT_REACHED = {
    "provenance": ({"torch", "sentence-transformers", "faiss-cpu", "transformers", "mteb", "datasets", "onnxruntime",
                    "openvino"},
                   "provenance uses dense_models.resolve_source only (importlib), not dense_models.load_encoder (whose "
                   "python/mteb adapters import mteb and datasets, and whose backends onnxruntime and openvino); its "
                   "`import torch` for the hardware record is optional (ImportError caught)"),
}
# Import names whose distribution is not installed in the test environment.
DISTRIBUTIONS = {"faiss": "faiss-cpu", "yaml": "pyyaml", "jnius": "pyjnius", "pytrec_eval": "pytrec-eval-terrier"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def rule_envs() -> dict[str, str]:
    """rule -> its conda env file, from rules/*.smk."""
    out = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule )", path.read_text()):
            name = re.match(r"rule (\w+):", block.strip())
            if name:
                env = re.search(r"^\s+conda:\s*\n\s+\"\.\./(envs/[\w.-]+\.yaml)\"", block, flags=re.M)
                assert env, f"rule {name.group(1)} has no conda: env"
                out[name.group(1)] = env.group(1)
    return out


def env_packages(rel: str) -> set[str]:
    spec = yaml.safe_load((REPO / rel).read_text())
    out = set()
    for dep in spec["dependencies"]:
        for item in (dep["pip"] if isinstance(dep, dict) else [dep]):
            out.add(_norm(re.split(r"[=<>!~ \[]", item)[0]))
    return out


def third_party(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("r2med_eval", "__future__")}


def rule_imports(index: CodeIndex, rule: str) -> set[str]:
    module = index.rules()[rule]
    tree = index._tree(module)[1]
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    funcs, files = index.closure(rule)
    names = third_party(ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))],
                                   type_ignores=[]))
    for func in funcs:
        names |= third_party(functions[func.rsplit(".", 1)[1]])
    for rel in files:
        if rel.endswith(".py"):
            names |= third_party(ast.parse((REPO / rel).read_text(encoding="utf-8")))
    names |= third_party(ast.parse((REPO / "src" / "r2med_eval" / "smk.py").read_text()))  # every script's glue
    installed = packages_distributions()
    return {_norm(DISTRIBUTIONS.get(n) or installed.get(n, [n])[0]) for n in names}


ENVS = rule_envs()


def test_every_rule_has_a_stage_and_an_env():
    assert set(ENVS) == set(CodeIndex().rules())


@pytest.mark.parametrize("rule", sorted(ENVS))
def test_env_covers_every_import_of_the_rule(rule):
    index = CodeIndex()
    needed = rule_imports(index, rule) - NOT_REACHED.get(rule, (set(), ""))[0]
    missing = sorted(needed - env_packages(ENVS[rule]))
    assert not missing, f"rule {rule}: {ENVS[rule]} lacks {', '.join(missing)}"


def test_core_env_now_has_scipy_and_matplotlib():
    """The issue's two examples, checked on the parsed imports (not the env alone)."""
    index = CodeIndex()
    assert "scipy" in rule_imports(index, "significance") and "matplotlib" in rule_imports(index, "plot_leaderboard")
    assert {"scipy", "matplotlib"} <= env_packages("envs/core.yaml")


def test_envs_pin_what_the_venv_pins():
    """Every pinned package of an env has the version of requirements.lock (torch: requirements.txt)."""
    pins = {}
    for name in ("requirements.txt", "requirements.lock"):
        for line in (REPO / name).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
            if match:
                pins[_norm(match.group(1))] = match.group(2)
    for path in sorted((REPO / "envs").glob("*.yaml")):
        for dep in yaml.safe_load(path.read_text())["dependencies"]:
            for item in (dep["pip"] if isinstance(dep, dict) else []):
                name, _, version = item.partition("==")
                if _norm(name) in pins:
                    assert pins[_norm(name)] == version.split()[0], (path.name, item)

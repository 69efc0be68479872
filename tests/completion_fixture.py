"""CliniQ's judgment completion on the synthetic CliniQ demo without Snakemake (tests/test_cliniq_completion.py and
bench/cliniq_completion.py): the demo's chunks, queries and judgments prepared by the library, three full-depth
runs written here, the rules' inputs and params from the control layer (``Workflow``), and the stage functions
called with a stand-in for the ``snakemake`` object. The judge is tests/llm_fake_server.py in mode ``judge``, whose
labels follow ``rule_label``: the truth of every chunk is known."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from conftest import REPO
from llm_fake_server import rule_label

from r2med_eval.cliniq import corpus as cc
from r2med_eval.cliniq.metrics import note_of
from r2med_eval.io import read_lines, write_jsonl, write_text
from r2med_eval.scoring import identity
from r2med_eval.scoring import runs as runs_mod
from r2med_eval.stages import score
from r2med_eval.workflow import config, paths
from r2med_eval.workflow.control import Workflow

DEMO = REPO / "data" / "cliniq-demo"
BENCH, TASK = "cliniq-demo", "cliniq"
W = {"benchmark": BENCH, "task": TASK}
SYSTEMS = ("overlap", "oracle", "shuffled")
URL_ENV, KEY_ENV = "R2MED_TEST_JUDGE_URL", "R2MED_TEST_JUDGE_KEY"


def prepare(work: Path, notes: Path = DEMO / "NOTEEVENTS.csv") -> dict:
    """The files the completion rules read, under ``work`` (as the data, chunk and retrieve rules would write them):
    the chunks (owner-only, resources/), chunk ids, queries, query types, judgments and three full-depth runs:
    ``overlap`` (query words in the chunk), ``oracle`` (the fake judge's truth first: it finds the relevant chunks
    CliniQ left unjudged) and ``shuffled`` (pseudo-random). Returns {chunks, queries, qtypes}."""
    work = Path(work)
    corpus = work / paths.fill(paths.CLINIQ_CHUNKS, **W)
    cc.chunk_corpus(notes, DEMO / "test_hadm_ids.txt", corpus, expected=203)
    chunks = {}
    import json

    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            obj = json.loads(line)
            chunks[obj["id"]] = obj["text"]
    data = work / paths.fill(paths.DATA, **W)
    write_text(data / "chunk_ids.txt", "".join(c + "\n" for c in chunks))
    queries, qtypes = cc.read_queries(DEMO)
    rows, _ = cc.read_qrels(DEMO, queries)
    write_jsonl(data / "queries.jsonl", ({"id": q, "text": t} for q, t in queries.items()))
    write_text(data / "query_types.tsv", "".join(f"{q}\t{t}\n" for q, t in qtypes.items()))
    write_text(data / "cliniq_qrels.tsv", "".join(f"{q}\t{c}\t{t}\n" for q, c, t in rows))
    for name in SYSTEMS:
        write_run(work, name, chunks, queries)
    return {"chunks": chunks, "queries": queries, "qtypes": qtypes}


def system_score(name: str, query: str, chunk: str) -> float:
    import hashlib

    words = set(query.lower().split())
    overlap = sum(1 for w in chunk.lower().split() if w in words)
    if name == "overlap":
        return float(overlap)
    if name == "oracle":
        return (rule_label(query, chunk) != "irrelevant") + overlap / 100.0
    return int(hashlib.sha256(f"{name}\0{query}\0{chunk}".encode()).hexdigest()[:8], 16) / 16 ** 8


def write_run(work: Path, name: str, chunks: dict, queries: dict) -> Path:
    path = Path(work) / paths.fill(paths.RUN_BINARY, **W, model=name)  # a CliniQ benchmark's run: binary
    run = {q: {c: system_score(name, text, t) for c, t in chunks.items()} for q, text in queries.items()}
    runs_mod.write_run(run, path, tag=name, identity=identity.make(name, BENCH, TASK, identity.fingerprint(chunks)))
    return path


def workflow(systems=SYSTEMS, judge_settings: dict | None = None, **completion) -> Workflow:
    """The control layer of a configuration with the runs (type: run models), the judge (``judge_settings`` added to
    its generate entry) and the completion block."""
    raw = {"benchmarks": {BENCH: {"layout": "cliniq", "noteevents": str(DEMO / "NOTEEVENTS.csv"),
                                  "expected_chunks": 203, "tasks": {TASK: {"path": str(DEMO)}}}},
           "models": {name: {"type": "run", "path": f"runs/{{benchmark}}/{{task}}/{name}.trec"} for name in systems},
           "llms": {"judge": {"reasoning": "none", "generate": {
               "model": "fake-judge", "base_url_env": URL_ENV, "api_key_env": KEY_ENV, "concurrency": 4,
               "retries": 0, "max_tokens": 256, **(judge_settings or {})}}},
           "cliniq_completion": {"benchmark": BENCH, "llm": "judge", **completion}}
    return Workflow(config.validate(raw))


def outputs(rule: str) -> SimpleNamespace:
    """The outputs of a completion rule, as rules/score.smk declares them."""
    b = {"benchmark": BENCH}

    def f(name, ext):
        return paths.fill(paths.COMPLETION_FILE, **b, name=name, ext=ext)

    out = {
        "cliniq_completion_sample": {"sample": paths.fill(paths.COMPLETION_SAMPLE, **b),
                                     "design": paths.fill(paths.COMPLETION_DESIGN, **b)},
        "cliniq_completion_judge": {"judgments": paths.fill(paths.PRIVATE_JUDGMENTS, **b),
                                    "labels": paths.fill(paths.COMPLETION_LABELS, **b),
                                    "info": paths.fill(paths.COMPLETION_JUDGING, **b)},
        "cliniq_completion_estimate": {"estimates_csv": f("estimates", "csv"), "estimates_md": f("estimates", "md"),
                                       "estimates_tex": f("estimates", "tex"), "per_query": f("per_query", "csv"),
                                       "agreement_csv": f("agreement", "csv"), "agreement_md": f("agreement", "md"),
                                       "agreement_tex": f("agreement", "tex")},
        "cliniq_completion_rescore": {"rescored_csv": f("rescored", "csv"), "rescored_md": f("rescored", "md"),
                                      "rescored_tex": f("rescored", "tex"), "ranking_csv": f("ranking", "csv"),
                                      "ranking_tex": f("ranking", "tex"), "verdict_md": f("verdict", "md"),
                                      "verdict_json": f("verdict", "json")},
    }[rule]
    for path in out.values():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(**out)


def run_stage(w: Workflow, rule: str, config_extra: dict | None = None) -> SimpleNamespace:
    """Call the rule's stage function in the current directory (the work directory) as Snakemake would."""
    wildcards = SimpleNamespace(benchmark=BENCH)
    sm = SimpleNamespace(input=SimpleNamespace(**getattr(w.inputs, rule)(wildcards)), output=outputs(rule),
                         params=SimpleNamespace(spec=w.params.of(rule)(wildcards)), wildcards=wildcards,
                         config={"phi_servers": [], **(config_extra or {})}, log=[])
    getattr(score, rule)(sm)
    return sm


def run_completion(w: Workflow, server_url: str) -> None:
    """sample, judge (against the server at ``server_url``), estimate, rescore."""
    os.environ[URL_ENV], os.environ[KEY_ENV] = server_url, "fake-key"
    for rule in ("cliniq_completion_sample", "cliniq_completion_judge", "cliniq_completion_estimate",
                 "cliniq_completion_rescore"):
        run_stage(w, rule)


def coded_of(work: Path = Path("."), coded_from: str = "codes", unit: str = "patient") -> dict[str, set]:
    """Query -> its coded admissions as the sample stage finds them on the demo: from the demo's code tables
    (``cliniq.codes``) plus the admissions CliniQ's judgments name, or from the judgments alone."""
    from r2med_eval.cliniq import codes
    from r2med_eval.cliniq.completion import coded_admissions, resolve_coded

    queries, qtypes = cc.read_queries(DEMO)
    own, _ = cc.read_qrels(DEMO, queries)
    judged = coded_admissions(own)
    if coded_from == "judgments":
        return judged
    ids = read_lines(Path(work) / paths.fill(paths.CHUNK_IDS, **W))
    found, counts = codes.coded(codes.table_files(DEMO / "NOTEEVENTS.csv"), queries, qtypes, unit,
                                {note_of(c) for c in ids})
    return resolve_coded(judged, found, counts["queries_without_code"], unit)[0]


def truth(prepared: dict, work: Path = Path("."), coded_from: str = "codes") -> dict[str, dict[str, str]]:
    """Query -> chunk -> the fake judge's label of every chunk of the population (the unjudged chunks of uncoded
    admissions) of every completed query, from the design file."""
    from r2med_eval.cliniq.completion import DESIGN_HEADER, read_table
    from r2med_eval.cliniq.files import read_cliniq_qrels

    rows, irrelevant = read_cliniq_qrels(Path(work) / paths.fill(paths.CLINIQ_QRELS, **W))
    coded = coded_of(work, coded_from)
    named: dict[str, set] = {}
    for q, c, _ in rows:
        named.setdefault(q, set()).add(c)
    design = read_table(Path(work) / paths.fill(paths.COMPLETION_DESIGN, benchmark=BENCH), DESIGN_HEADER)
    ids = read_lines(Path(work) / paths.fill(paths.CHUNK_IDS, **W))
    out = {}
    for d in design:
        q = d["query_id"]
        out[q] = {c: rule_label(prepared["queries"][q], prepared["chunks"][c]) for c in ids
                  if note_of(c) not in coded.get(q, set()) and c not in named.get(q, set())}
    return out


def truth_rates(truth: dict, qtypes: dict) -> dict[tuple[str, str, str], float]:
    """(scope, group, measure) -> the true rate, for every estimate the estimate stage writes (estimates.csv and,
    as scope ``query``, per_query.csv)."""
    from r2med_eval.cliniq.completion import MEASURES
    from r2med_eval.cliniq.corpus import MATCH_TYPES

    def rate(queries, measure):
        hits = sum(1 for q in queries for lab in truth[q].values()
                   if (lab in MATCH_TYPES if measure == "relevant" else lab == measure))
        return hits / sum(len(truth[q]) for q in queries)

    groups = {("all", "all"): list(truth)}
    for t in sorted({qtypes[q] for q in truth}):
        groups[("query_type", t)] = [q for q in truth if qtypes[q] == t]
    out = {(scope, name, m): rate(queries, m) for (scope, name), queries in groups.items() for m in MEASURES}
    out.update({("query", q, "relevant"): rate([q], "relevant") for q in truth})
    return out


def read_estimates(work: Path = Path(".")) -> dict[tuple[str, str, str], tuple[float, float, float]]:
    """(scope, group, measure) -> (estimate, 95% low, 95% high) of estimates.csv and per_query.csv."""
    import csv

    base = Path(work) / paths.fill(paths.COMPLETION, benchmark=BENCH)
    out = {}
    with open(base / "estimates.csv", newline="") as handle:
        for r in csv.DictReader(handle):
            out[(r["scope"], r["group"], r["measure"])] = (float(r["rate"]), float(r["rate_low"]),
                                                           float(r["rate_high"]))
    with open(base / "per_query.csv", newline="") as handle:
        for r in csv.DictReader(handle):
            out[("query", r["query_id"], "relevant")] = (float(r["rate"]), float(r["rate_low"]), float(r["rate_high"]))
    return out


def coverage(prepared: dict, server_url: str, seeds, **settings) -> dict:
    """For every estimate: (in how many of the seeded repetitions its 95% interval holds the truth, the sum of its
    estimates, the truth); each repetition draws with another seed and runs sample, judge and estimate in the
    current directory (answers cached across repetitions)."""
    os.environ[URL_ENV], os.environ[KEY_ENV] = server_url, "fake-key"
    out: dict = {}
    rates = None
    for seed in seeds:
        w = workflow(seed=seed, **settings)
        for rule in ("cliniq_completion_sample", "cliniq_completion_judge", "cliniq_completion_estimate"):
            run_stage(w, rule)
        if rates is None:  # the population does not depend on the seed
            rates = truth_rates(truth(prepared), prepared["qtypes"])
        for key, (value, low, high) in read_estimates().items():
            hits, total, _ = out.get(key, (0, 0.0, None))
            out[key] = (hits + int(low - 1e-12 <= rates[key] <= high + 1e-12), total + value, rates[key])
    return out

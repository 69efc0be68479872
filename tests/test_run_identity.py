"""Runs carry what made them (issue 48.1, ``scoring.identity``): every run the pipeline writes records its run name,
benchmark, task and the fingerprint of the corpus it ranks (a binary run in its metadata, a TREC run in a sidecar
with the file's sha256), and every reader checks it. Unit tests of the check, the stages that used to fail with a
withheld KeyError (LameR, the LLM rerankers), the command line given ``--benchmark``; then end to end: each
replaced-file case (another run's file, a run of another corpus, a shuffled id table; TREC and binary) stops the
next ``snakemake all`` with one line naming the file."""
from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import DEMOS_BENCHMARKS, REPO, snakemake, workflow_dir

from r2med_eval import cli
from r2med_eval.errors import InputError
from r2med_eval.scoring import binrun, identity, runs

IDS = ["d1", "d2", "d3", "d4"]
RUN = {"q1": {"d1": 0.9, "d2": 0.5}, "q2": {"d3": 0.7, "d4": 0.1}}


def made(name="a", benchmark="b", task="t", ids=IDS):
    return identity.make(name, benchmark, task, identity.fingerprint(ids))


def test_the_fingerprint_is_of_the_id_set():
    assert identity.fingerprint(IDS) == identity.fingerprint(list(reversed(IDS)))
    assert identity.fingerprint(IDS) != identity.fingerprint(IDS[:3]) and identity.fingerprint(IDS)["documents"] == 4


@pytest.mark.parametrize("suffix", [".trec", ".run.npz"])
def test_a_run_is_checked_against_what_the_reader_expects(tmp_path, suffix):
    path = tmp_path / f"a{suffix}"
    runs.write_run(RUN, path, tag="a", identity=made())
    assert identity.verify(path, made())["run"] == "a"
    for expected, words in ((made("b"), "its run differs"), (made(benchmark="x"), "its benchmark differs"),
                            (made(task="x"), "its task differs"), (made(ids=IDS + ["d5"]), "its corpus, corpus size")):
        with pytest.raises(InputError) as err:
            identity.verify(path, expected)
        message = str(err.value)
        assert message.startswith(f"{path}: the file holds run 'a' of 'b'/'t'") and words in message, message
        assert "\n" not in message and " Fix: " in message


def test_a_trec_run_replaced_or_without_its_sidecar_stops(tmp_path):
    path, other = tmp_path / "a.trec", tmp_path / "b.trec"
    runs.write_run(RUN, path, tag="a", identity=made())
    runs.write_run({"q1": {"d2": 1.0}}, other, tag="b", identity=made("b"))
    shutil.copy(other, path)  # another run's file over this one, its sidecar left
    with pytest.raises(InputError, match="not the one its sidecar a.trec.json describes"):
        identity.verify(path, made())
    identity.sidecar(path).unlink()
    with pytest.raises(InputError, match="has no identity sidecar a.trec.json"):
        identity.verify(path, made())


def test_a_binary_run_without_identity_or_with_another_tag_stops(tmp_path):
    path = tmp_path / "a.run.npz"
    runs.write_run(RUN, path, tag="a")  # as an earlier version wrote it
    with pytest.raises(InputError, match="carries no record of what made it"):
        identity.verify(path, made())
    runs.write_run(RUN, path, tag="z", identity=made())
    with pytest.raises(InputError, match="the run's tag 'z' is not the run its metadata names"):
        identity.verify(path, made())


def test_a_shuffled_id_table_stops_the_reader(tmp_path):
    path = tmp_path / "a.run.npz"
    runs.write_run(RUN, path, tag="a", identity=made())
    _shuffle_ids(path)
    assert identity.verify(path, made())  # the metadata is intact
    with pytest.raises(InputError, match="its id table differs from the one it was written with"):
        runs.read_run(path)


def _shuffle_ids(path: Path) -> None:
    """The binary run's id table reversed, every other member as it was (the documents now point at other ids)."""
    with zipfile.ZipFile(path) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    with np.load(path) as z:
        ids = zlib.decompress(bytes(z["ids"])).decode().split("\n")
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.frombuffer(zlib.compress("\n".join(ids[::-1]).encode()), np.uint8))
    members["ids.npy"] = buffer.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_the_command_line_checks_a_pipeline_run_when_given_the_benchmark(tmp_path, capsys):
    data = tmp_path / "results/data/b/t"
    data.mkdir(parents=True)
    (data / "qrels.tsv").write_text("q1 0 d1 1\nq2 0 d3 1\n")
    identity_file = data / "corpus_ids.json"
    identity_file.write_text(json.dumps(identity.fingerprint(IDS)))
    path = tmp_path / "a.trec"
    runs.write_run(RUN, path, tag="a", identity=made())
    qrels = str(data / "qrels.tsv")
    assert cli.main(["eval", qrels, str(path), "--benchmark", "b", "--task", "t", "-m", "P@1"]) == 0
    for args, words in ((["--benchmark", "x"], "its benchmark differs"), (["--benchmark", "b", "--task", "x"],
                                                                           "its task differs")):
        assert cli.main(["eval", qrels, str(path), "-m", "P@1", *args]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"r2med-eval: {path}: the file holds run 'a'") and words in err and err.count("\n") == 1
    renamed = tmp_path / "b.trec"
    shutil.copy(path, renamed)
    shutil.copy(identity.sidecar(path), identity.sidecar(renamed))
    assert cli.main(["compare", qrels, str(path), str(renamed), "--baseline", "a", "--benchmark", "b"]) == 1
    assert "its run differs" in capsys.readouterr().err
    identity_file.write_text(json.dumps(identity.fingerprint(IDS[:3])))
    assert cli.main(["eval", qrels, str(path), "--benchmark", "b", "-m", "P@1"]) == 1
    assert "its corpus, corpus size differ" in capsys.readouterr().err
    plain = tmp_path / "elsewhere.trec"  # a run made elsewhere carries nothing to check: read as it is
    runs.write_run(RUN, plain, tag="elsewhere")
    assert cli.main(["eval", qrels, str(plain), "--benchmark", "b", "-m", "P@1"]) == 0


def test_lamer_and_the_llm_rerankers_name_a_wrong_first_stage_run(tmp_path, monkeypatch):
    """They failed on such a file with a withheld KeyError; now with one line naming it, before any server."""
    from test_generate import private_sm, settings
    from test_llm_rerank import base_config, stage_sm

    from r2med_eval.stages import data as data_stage
    from r2med_eval.stages import rerank as rerank_stage

    monkeypatch.chdir(tmp_path)
    sm, _ = private_sm(tmp_path, settings())
    runs.write_run({"q1": {"x9": 1.0}}, sm.input.run, tag="bm25", identity=made("bm25", "b", "t", ["x9"]))
    with pytest.raises(InputError, match=r"bm25.trec: the file holds run 'bm25' of 'b'/'t', a corpus of 1 documents"):
        data_stage.generate_private_query_variant(sm)
    sm = stage_sm(tmp_path / "llm", base_config(tmp_path / "llm"), 20)
    os.unlink(identity.sidecar(sm.input.run))
    with pytest.raises(InputError, match="has no identity sidecar bm25.trec.json"):
        rerank_stage.llm_rerank_run(sm)


# ------------------------------------------------------------------ end to end: the next `snakemake all` stops

CONFIG = DEMOS_BENCHMARKS + """models:
  a: {type: run, path: "external/{benchmark}/a.trec"}
  b: {type: run, path: "external/{benchmark}/b.trec"}
fusion:
  rrf-a-b: {method: rrf, runs: [a, b], k: 60}
report:
  baseline: a
"""


def _external_runs(folder: Path) -> dict[str, list[str]]:
    """Runs a and b of both demos, written outside the pipeline (word overlap, and its reverse); the corpus ids."""
    from r2med_eval.benchmarks import datasets
    from r2med_eval.cliniq import corpus as cc

    demo = datasets.load("r2med", REPO / "data" / "demo")
    chunks = folder / "chunks.jsonl"
    cc.chunk_corpus(REPO / "data/cliniq-demo/NOTEEVENTS.csv", REPO / "data/cliniq-demo/test_hadm_ids.txt", chunks,
                    expected=203)
    texts = {json.loads(x)["id"]: json.loads(x)["text"] for x in chunks.read_text().splitlines()}
    queries, _ = cc.read_queries(REPO / "data" / "cliniq-demo")
    tasks = {"demo": ({d: doc["text"] for d, doc in demo.corpus.items()}, demo.queries),
             "cliniq-demo": (texts, queries)}
    ids = {}
    for bench, (docs, qs) in tasks.items():
        words = {d: set(re.findall(r"[a-z]+", t.lower())) for d, t in docs.items()}
        for name, sign in (("a", 1), ("b", -1)):
            run = {q: {d: sign * len(set(re.findall(r"[a-z]+", t.lower())) & w) + 1e-3 * i
                       for i, (d, w) in enumerate(sorted(words.items()))} for q, t in qs.items()}
            out = folder / "external" / bench / f"{name}.trec"
            out.parent.mkdir(parents=True, exist_ok=True)
            runs.write_run(run, out, tag=name)
        ids[bench] = sorted(docs)
    return ids


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    work = workflow_dir(tmp_path_factory.mktemp("identity"), CONFIG)
    ids = _external_runs(work)
    snakemake(work, "--cores", "2", "all")
    return work, ids


def _trec(work, name="a"):
    return work / f"results/runs/demo/demo/{name}.trec"


def _binary(work, name="a"):
    return work / f"results/runs/cliniq-demo/cliniq/{name}.run.npz"


def _another_runs_file(work, ids, target):
    source = target.with_name(target.name.replace("a.", "b.", 1))
    shutil.copy(source, target)


def _another_runs_file_and_sidecar(work, ids, target):
    _another_runs_file(work, ids, target)
    shutil.copy(identity.sidecar(target.with_name("b.trec")), identity.sidecar(target))


def _other_corpus(work, ids, target):
    bench, task = ("demo", "demo") if target.suffix == ".trec" else ("cliniq-demo", "cliniq")
    other = ids[bench][1:]  # the same run name, benchmark and task, over a corpus without its first document
    run = {q: {d: s for d, s in docs.items() if d in other} for q, docs in runs.read_run(target).items()}
    runs.write_run(run, target, tag="a", identity=identity.make("a", bench, task, identity.fingerprint(other)))


def _shuffled(work, ids, target):
    if target.suffix == ".trec":  # the document ids of the lines permuted, the sidecar left
        lines = [x.split() for x in target.read_text().splitlines()]
        docs = [x[2] for x in lines][::-1]
        target.write_text("".join(f"{x[0]} Q0 {d} {x[3]} {x[4]} {x[5]}\n" for x, d in zip(lines, docs)))
    else:
        _shuffle_ids(target)


@pytest.mark.slow
@pytest.mark.parametrize("case, where, words", [
    (_another_runs_file, _trec, "is not the one its sidecar a.trec.json describes"),
    (_another_runs_file_and_sidecar, _trec, "the file holds run 'b' of 'demo'/'demo'"),
    (_other_corpus, _trec, "its corpus, corpus size differ"),
    (_shuffled, _trec, "is not the one its sidecar a.trec.json describes"),
    (_another_runs_file, _binary, "the file holds run 'b' of 'cliniq-demo'/'cliniq'"),
    (_other_corpus, _binary, "its corpus, corpus size differ"),
    (_shuffled, _binary, "its id table differs from the one it was written with"),
])
def test_a_replaced_run_file_stops_the_next_snakemake_all_with_one_line(finished, case, where, words):
    work, ids = finished
    target = where(work)
    saved = {p: p.read_bytes() for p in (target, identity.sidecar(target)) if p.exists()}
    try:
        case(work, ids, target)
        proc = snakemake(work, "--cores", "1", "all", check=False)
        shown = [x for x in proc.stdout.splitlines() if x.startswith("r2med-eval: ")]
        assert proc.returncode != 0 and len(shown) == 1, proc.stdout[-4000:]
        assert shown[0].startswith(f"r2med-eval: {target.relative_to(work)}: ") and words in shown[0], shown[0]
    finally:  # restored: the next case's run scores it again first
        for path, data in saved.items():
            path.write_bytes(data)


@pytest.mark.slow
def test_every_run_file_records_what_made_it(finished):
    work, ids = finished
    snakemake(work, "--cores", "2", "all")  # what the replaced-file cases' failed jobs removed, made again
    for bench, task, suffix in (("demo", "demo", ".trec"), ("cliniq-demo", "cliniq", ".run.npz")):
        for name in ("a", "b", "rrf-a-b"):
            path = work / f"results/runs/{bench}/{task}/{name}{suffix}"
            got = identity.verify(path, identity.make(name, bench, task, identity.fingerprint(ids[bench])))
            assert got["run"] == name
    assert json.loads((work / "results/data/demo/demo/corpus_ids.json").read_text()) == identity.fingerprint(
        ids["demo"])
    assert binrun.read_meta(_binary(work))["identity"]["documents"] == 203

"""Full-depth runs in the binary format (issue 39.2; scoring.binrun, ``<model>.run.npz``).

The same run read from its binary file and from its TREC file gives the same thing to every reader (scoring, the
rerankers' tops, fusion, CliniQ's rankings and pool, the CLI), eval.py's figures included; the file holds about 8
bytes an entry for float32 scores, the same bytes for the same run, and a damaged file stops with one message. The
pipeline writes CliniQ benchmarks' runs so (rules ``*_binary``), and a TREC file of a run's top k on request."""

from __future__ import annotations

import json
import random
import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import fingerprint_file

from r2med_eval.cliniq import metrics as cliniq
from r2med_eval.errors import InputError
from r2med_eval.scoring import binrun, identity, metrics, runfile, runs

CHUNKS = [f"{h}_{i}" for h in (7, 30, 112, 5) for i in range(25)]  # corpus order is not id order


def _run(seed: int, ties: bool = True) -> dict:
    """Every chunk for 12 queries; scores exact in float32 and in 6 decimals (multiples of 1/64), many equal."""
    rng = random.Random(seed)
    grid = 8 if ties else 4096
    return {f"q{i}": {c: rng.randrange(grid) / 64 for c in rng.sample(CHUNKS, len(CHUNKS))} for i in range(12)}


def _qrels(run: dict, seed: int = 0) -> dict:
    rng = random.Random(seed)
    return {q: {c: rng.choice([0, 1, 2]) for c in rng.sample(list(docs), 9)} for q, docs in run.items() if q != "q4"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("binary")
    run = _run(1)
    out = {"run": run, "trec": folder / "r.trec", "bin": folder / "r.run.npz"}
    made = identity.make("m", "cliniq-demo", "cliniq", identity.fingerprint(CHUNKS))
    runs.write_run(run, out["trec"], tag="m", identity=made)
    runs.write_run(run, out["bin"], tag="m", identity=made)
    return {**out, "identity": made}


def test_the_binary_file_holds_the_run_in_trec_eval_order_at_8_bytes_an_entry(files, tmp_path):
    entries = sum(len(d) for d in files["run"].values())
    assert files["bin"].stat().st_size <= 8 * entries + 2000  # int32 index + float32 score; the id table, headers
    assert runs.read_run(files["bin"]) == runs.read_run(files["trec"])  # same documents, scores, order
    again = tmp_path / "again.run.npz"
    runs.write_run({q: dict(reversed(list(d.items()))) for q, d in files["run"].items()}, again, tag="m",
                   identity=files["identity"])
    assert again.read_bytes() == files["bin"].read_bytes()  # the same run, the same bytes
    with np.load(files["bin"], allow_pickle=False) as z:  # a plain NumPy archive for other tools
        assert z["scores"].dtype == np.float32 and z["docs"].dtype == np.int32
        assert json.loads(bytes(z["meta"]))["order"] == "trec_eval"
    b = binrun.read(files["bin"])
    for i in range(len(b.qids)):  # trec_eval's order: score descending, then id descending
        pairs = [(float(s), b.ids[d]) for d, s in zip(b.docs[b.offsets[i]:b.offsets[i + 1]].tolist(),
                                                     b.scores[b.offsets[i]:b.offsets[i + 1]].tolist())]
        assert pairs == sorted(pairs, reverse=True)


def test_scores_are_kept_as_computed(tmp_path):
    """float64 scores that float32 cannot hold are stored as float64 (12 bytes an entry), not rounded."""
    run = {"q": {"a": 0.1, "b": 1 / 3, "c": 2.0 ** -30}}
    runs.write_run(run, tmp_path / "r.run.npz", tag="t")
    assert runs.read_run(tmp_path / "r.run.npz")["q"] == run["q"]
    runs.write_run({"q": {"a": 0.5, "b": 0.25}}, tmp_path / "f.run.npz", tag="t")
    with np.load(tmp_path / "f.run.npz") as z:
        assert z["scores"].dtype == np.float32


def test_every_reader_reads_the_binary_file_as_the_trec_file(files):
    qrels = _qrels(files["run"])
    names = ["nDCG@10", "AP", "RR", "P@5", "Judged@10", "num_ret", "bpref"]
    for options in ({}, {"ignore_identical_ids": True}, {"depth": 7, "level": 2}):
        a = metrics.evaluate(files["trec"], qrels, measures=names, **options)
        b = metrics.evaluate(files["bin"], qrels, measures=names, **options)
        assert a["per_query"] == b["per_query"] and a["metrics"] == b["metrics"]
    assert runs.read_run_tops(files["trec"], 10) == runs.read_run_tops(files["bin"], 10)
    a, b = runs.QueryDocs(files["trec"]), runs.QueryDocs(files["bin"])
    assert sorted(a.qids()) == sorted(b.qids()) and all(a.docs(q) == b.docs(q) for q in a.qids())
    for order in cliniq.TIE_ORDERS:
        x, y = cliniq.read_ranked_run(files["trec"], CHUNKS, order), cliniq.read_ranked_run(files["bin"], CHUNKS, order)
        assert x.qids == y.qids and np.array_equal(x.offsets, y.offsets) and x.vocab == y.vocab
        assert np.array_equal(x.docs, y.docs), order
    judged = {q: set(d) for q, d in qrels.items()}
    orders = {"t": "corpus", "b": "doc_id"}
    assert cliniq.pool_files({"t": files["trec"], "b": files["trec"]}, orders, CHUNKS, judged, 5, list(files["run"])) \
        == cliniq.pool_files({"t": files["bin"], "b": files["bin"]}, orders, CHUNKS, judged, 5, list(files["run"]))


def test_a_ranking_made_elsewhere_keeps_its_order(tmp_path):
    """keep_order (CliniQ's eval.py order of a dense run): equal scores stay in the given order, which the evalpy
    tie order reads back, while trec_eval's scoring ranks them by id descending."""
    run = {"q": {"b_1": 0.5, "a_0": 0.5, "c_2": 0.5, "a_1": 0.25}, "p": {"c_2": 1.0, "b_1": 1.0, "a_0": 0.0}}
    runs.write_run(run, tmp_path / "r.run.npz", tag="t", keep_order=True)
    runs.write_run(run, tmp_path / "r.trec", tag="t", keep_order=True)
    assert runs.read_run(tmp_path / "r.run.npz") == run
    ids = ["a_0", "a_1", "b_1", "c_2"]
    for path in (tmp_path / "r.run.npz", tmp_path / "r.trec"):
        ranked = cliniq.read_ranked_run(path, ids, "evalpy")
        assert [ranked.vocab[i] for i in ranked.ranking("q").tolist()] == ["b_1", "a_0", "c_2", "a_1"]
    qrels = {"q": {"c_2": 1}, "p": {"a_0": 1}}
    assert metrics.evaluate(tmp_path / "r.run.npz", qrels, measures=["RR"])["per_query"]["q"]["RR"] == 1.0
    with pytest.raises(ValueError, match="do not increase"):
        runs.write_run({"q": {"a": 0.1, "b": 0.2}}, tmp_path / "bad.run.npz", tag="t", keep_order=True)


@pytest.mark.parametrize("damage,message", [
    (lambda p: p.write_bytes(p.read_bytes()[:200]), "not a readable r2med-eval binary run"),
    (lambda p: _member(p, "meta", np.frombuffer(b'{"format": "other"}', dtype=np.uint8)), "format"),
    (lambda p: _member(p, "docs", np.full(_len(p), 10_000, dtype=np.int32)), "outside the id table"),
    (lambda p: _member(p, "docs", np.zeros(_len(p), dtype=np.int32)), "twice"),
    (lambda p: _member(p, "scores", np.arange(_len(p), dtype=np.float32)), "increase"),
    (lambda p: _member(p, "scores", np.full(_len(p), np.nan, dtype=np.float32)), "not finite"),
])
def test_a_damaged_binary_file_stops_with_one_message(files, tmp_path, damage, message):
    path = tmp_path / "d.run.npz"
    path.write_bytes(files["bin"].read_bytes())
    damage(path)
    with pytest.raises(InputError, match=message) as err:
        runs.read_run(path)
    assert str(err.value).startswith(str(path)) and "Fix:" in str(err.value)


def _len(path: Path) -> int:
    with np.load(path) as z:
        return len(z["docs"])


def _member(path: Path, name: str, array) -> None:
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    members[name] = array
    with zipfile.ZipFile(path, "w") as archive:
        for key, value in members.items():
            with archive.open(key + ".npy", "w") as handle:
                np.lib.format.write_array(handle, value)


# ---------------------------------------------------------------- the pipeline's stages on binary runs

def _dense_stage(tmp_path, out_name: str, corpus_emb, query_emb, w):
    from r2med_eval.dense import embeddings
    from r2med_eval.stages import retrieve

    emb = tmp_path / "emb"
    if not (emb / "corpus.npy").exists():
        embeddings.write_gathered(CHUNKS, [{"rows": np.arange(len(CHUNKS)), "emb": corpus_emb}], emb / "corpus.npy",
                                  emb / "corpus_ids.txt", "float32", emb / "corpus.json")
        np.save(emb / "queries.npy", query_emb)
        (emb / "queries_ids.txt").write_text("\n".join(f"q{i}" for i in range(len(query_emb))) + "\n")
    wildcards = SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model="minilm")
    sm = SimpleNamespace(input=SimpleNamespace(emb=str(emb / "corpus.npy"), ids=str(emb / "corpus_ids.txt"),
                                               emb_info=str(emb / "corpus.json"), query_emb=str(emb / "queries.npy"),
                                               query_ids=str(emb / "queries_ids.txt"),
                                               fingerprint=fingerprint_file(tmp_path, CHUNKS)),
                         output=SimpleNamespace(run=str(tmp_path / out_name),
                                                info=str(tmp_path / f"{out_name}.search.json")),
                         params=SimpleNamespace(spec=w.params.of("retrieve_dense")(wildcards)), wildcards=wildcards,
                         threads=1)
    retrieve.retrieve_dense(sm)
    return tmp_path / out_name


def test_a_dense_cliniq_run_written_binary_scores_as_its_trec_file(tmp_path):
    """The default dense run on a CliniQ benchmark (eval.py's order), written by the retrieve_dense stage as TREC and
    as binary: the same rankings, and score_cliniq's figures and score_run's are identical."""
    import yaml

    from r2med_eval.stages import score as score_stage
    from r2med_eval.workflow import config
    from r2med_eval.workflow.control import Workflow

    w = Workflow(config.validate(yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())))
    rng = np.random.default_rng(3)
    corpus_emb = np.sign(rng.normal(size=(len(CHUNKS), 8))).astype(np.float32)  # many equal similarities
    query_emb = np.sign(rng.normal(size=(12, 8))).astype(np.float32)
    trec = _dense_stage(tmp_path, "minilm.trec", corpus_emb, query_emb, w)
    binary = _dense_stage(tmp_path, "minilm.run.npz", corpus_emb, query_emb, w)
    x, y = cliniq.read_ranked_run(trec, CHUNKS, "evalpy"), cliniq.read_ranked_run(binary, CHUNKS, "evalpy")
    assert x.qids == y.qids and np.array_equal(x.docs, y.docs)
    rows = [(q, c, rng.choice(["string", "synonym"])) for q in x.qids for c in rng.choice(CHUNKS, 6).tolist()]
    (tmp_path / "qrels.tsv").write_text("".join(f"{q}\t{c}\t{t}\n" for q, c, t in rows))
    (tmp_path / "types.tsv").write_text("".join(f"q{i}\tdrug\n" for i in range(12)))
    (tmp_path / "chunk_ids.txt").write_text("\n".join(CHUNKS) + "\n")
    wildcards = SimpleNamespace(benchmark="cliniq-demo", task="cliniq", model="minilm")
    outs, tables = [], []
    for path in (trec, binary):
        out = tmp_path / f"{path.name}.cliniq.json"
        table = tmp_path / f"{path.name}.by_match_type.tsv"
        score_stage.score_cliniq(SimpleNamespace(
            input=SimpleNamespace(run=str(path), cliniq_qrels=str(tmp_path / "qrels.tsv"),
                                  query_types=str(tmp_path / "types.tsv"), ids=str(tmp_path / "chunk_ids.txt")),
            output=SimpleNamespace(metrics=str(out), per_query=str(table)), wildcards=wildcards,
            params=SimpleNamespace(spec=w.params.of("score_cliniq")(wildcards))))
        outs.append({k: v for k, v in json.loads(out.read_text()).items() if k != "run"})
        tables.append(table.read_bytes())
    assert outs[0] == outs[1] and outs[0]["run_depth"] == len(CHUNKS)
    # the claims' per-query figures: a header and a row per query, the same from either file
    assert tables[0] == tables[1] and tables[0].count(b"\n") == 13
    qrels = {}
    for q, c, _ in rows:
        qrels.setdefault(q, {})[c] = 1
    import pytrec_eval

    got = metrics.evaluate(binary, qrels, measures=["ndcg_cut_10", "recip_rank", "map"])["per_query"]
    want = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank", "map"}).evaluate(
        runs.read_run(binary))  # trec_eval on the binary run's exact float32 scores
    assert {q: pytest.approx(v, abs=1e-12) for q, v in want.items()} == got


def test_export_trec_run_writes_a_binary_runs_top_k(files, tmp_path):
    from r2med_eval.stages import retrieve

    out = tmp_path / "r.top5.trec"
    retrieve.export_trec_run(SimpleNamespace(input=SimpleNamespace(run=str(files["bin"]),
                                                                   fingerprint=fingerprint_file(tmp_path, CHUNKS)),
                                             output=SimpleNamespace(run=str(out)),
                                             wildcards=SimpleNamespace(depth="5", model="m", benchmark="cliniq-demo",
                                                                       task="cliniq")))
    whole = runs.read_run(files["bin"])
    assert runs.read_run(out) == {q: dict(list(docs.items())[:5]) for q, docs in whole.items()}
    lines = out.read_text().splitlines()
    assert len(lines) == 5 * len(whole) and lines[0].split()[3] == "1" and lines[0].endswith(" m")


def test_runfile_reads_binary_by_content_not_name(files, tmp_path):
    odd = tmp_path / "named.trec"
    odd.write_bytes(files["bin"].read_bytes())
    assert runs.read_run(odd) == runs.read_run(files["bin"])
    assert isinstance(runfile.read(odd), runfile.RunTable)


# ---------------------------------------------------------------- bounded reads (issue 48.2)

FORMAT_META = {"format": binrun.FORMAT, "order": "trec_eval", "tag": "t"}


def _npz(path: Path, meta: bytes | None = None, ids: bytes | None = None, members: dict | None = None,
         deflate=()) -> Path:
    """A crafted archive in the binary run's layout: one query, two documents, unless a member is replaced;
    ``deflate``: the members compressed (as numpy.savez_compressed stores them)."""
    import zlib

    arrays = {"meta": np.frombuffer(meta or json.dumps({**FORMAT_META, "qids": ["q1"]}).encode(), np.uint8),
              "ids": np.frombuffer(ids if ids is not None else zlib.compress(b"a\nb"), np.uint8),
              "offsets": np.array([0, 2], np.int64), "docs": np.array([0, 1], np.int32),
              "scores": np.array([1.0, 0.5], np.float32), **(members or {})}
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(name + ".npy")
            info.compress_type = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            with archive.open(info, "w", force_zip64=True) as handle:
                np.lib.format.write_array(handle, array)
    return path


def _zlib_bomb(inflated: int) -> bytes:
    """``inflated`` bytes of id text compressed to about a thousandth, made a block at a time."""
    import zlib

    packer, block = zlib.compressobj(9), b"a\n" * (4 << 20)
    parts = [packer.compress(block) for _ in range(inflated // len(block))]
    return b"".join(parts) + packer.flush()


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """The probe's crafted files: ids that inflate to 256 MB from a quarter of a MB, an offsets member deflated from
    256 MB of zeros, metadata nested 100,000 deep; and a valid run whose queries times ids make a billion cells."""
    import zlib

    folder = tmp_path_factory.mktemp("crafted")
    (folder / "qrels.txt").write_text("q1 0 a 1\n")
    nested = json.dumps({**FORMAT_META, "qids": ["q1"]})[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    qids = [f"q{i}" for i in range(1 << 15)]
    ids = [f"d{i}" for i in range(1 << 15)]
    sparse = {"offsets": np.r_[np.zeros(1 << 15, np.int64), 2], "docs": np.array([0, 1], np.int32)}
    return {"inflating ids": _npz(folder / "inflating.run.npz", ids=_zlib_bomb(256 << 20)),
            "deflated offsets": _npz(folder / "deflated.run.npz", members={"offsets": np.zeros(1 << 25, np.int64)},
                                     deflate=("offsets",)),
            "nested metadata": _npz(folder / "nested.run.npz", meta=nested.encode()),
            "sparse": _npz(folder / "sparse.run.npz", meta=json.dumps({**FORMAT_META, "qids": qids}).encode(),
                           ids=zlib.compress("\n".join(ids).encode()), members=sparse),
            "folder": folder}


def _measured(*args, cwd):
    """``r2med-eval ARGS`` in its own process: (completed process, seconds, its peak resident MB, Linux's VmHWM)."""
    import subprocess
    import sys
    import time

    # the peak of this process's own memory: VmHWM (ru_maxrss keeps the forking parent's peak across exec)
    code = ("import sys\nfrom r2med_eval import cli\ncode = cli.main(sys.argv[1:])\n"
            "hwm = [x.split()[1] for x in open('/proc/self/status') if x.startswith('VmHWM:')]\n"
            "print('maxrss', hwm[0], file=sys.stderr)\nsys.exit(code)")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - start
    lines = proc.stderr.splitlines()
    rss = int(lines.pop().split()[1]) / 1024
    proc.stderr = "\n".join(lines)
    return proc, seconds, rss


@pytest.mark.parametrize("case, words", [
    ("inflating ids", "its id table inflates beyond"),
    ("deflated offsets", "its offsets member is compressed"),
    ("nested metadata", "metadata nested too deeply"),
])
def test_the_probes_crafted_files_each_get_one_line_fast_and_small(crafted, case, words):
    proc, seconds, rss = _measured("eval", "qrels.txt", str(crafted[case]), cwd=crafted["folder"])
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"r2med-eval: {crafted[case]}: "), lines
    assert words in lines[0] and "Fix:" in lines[0] and "Traceback" not in proc.stderr
    assert seconds < 5 and rss < 200, (seconds, rss)


def test_a_valid_run_of_many_queries_and_ids_is_checked_without_a_cell_per_pair(crafted):
    """32,768 queries x 32,768 ids (a billion query-document cells) and two entries: read and scored, the check for a
    document twice made without a flag per cell (a gigabyte before; traced by tracemalloc, which sees numpy's)."""
    import tracemalloc

    proc, seconds, rss = _measured("eval", "qrels.txt", str(crafted["sparse"]), "-m", "num_ret", cwd=crafted["folder"])
    assert proc.returncode == 0 and proc.stdout.strip() == "num_ret\tall\t0", proc.stderr
    assert seconds < 5 and rss < 200, (seconds, rss)
    tracemalloc.start()
    try:
        b = binrun.read(crafted["sparse"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(b.qids) == len(b.ids) == 1 << 15 and len(b) == 2 and peak < 64 << 20, peak


@pytest.mark.parametrize("meta, ids, words", [
    ({"ids_bytes": 10 ** 9}, None, "claims 1,000,000,000 bytes"),
    ({"ids_bytes": 2}, None, "inflates beyond 2 bytes"),
    ({"ids_sha256": "0" * 64}, None, "sha256 does not match"),
    ({"ids_count": 3}, None, "where 3 were expected"),
    ({"identity": {"run": ["x"]}}, None, "'identity' is not of the type"),
    ({"extra": {"a": 1}}, None, "'extra' is not a scalar"),
    ({}, b"a\na", "naming a document twice"),
    ({}, b"not zlib", "not a zlib stream"),
])
def test_declared_sizes_and_tables_are_checked_before_use(tmp_path, meta, ids, words):
    import zlib

    path = _npz(tmp_path / "r.run.npz", meta=json.dumps({**FORMAT_META, "qids": ["q1"], **meta}).encode(),
                ids=zlib.compress(ids) if ids and ids != b"not zlib" else ids)
    with pytest.raises(InputError, match=re.escape(words)):
        binrun.read(path)


def test_the_id_table_is_checked_against_the_corpus_size(tmp_path):
    runs.write_run({"q1": {"a": 1.0, "b": 0.5, "c": 0.1}}, tmp_path / "r.run.npz", tag="t")
    assert binrun.read(tmp_path / "r.run.npz", max_ids=3).ids == ["a", "b", "c"]
    with pytest.raises(InputError, match="holds 3 ids, more than the corpus's 2"):
        binrun.read(tmp_path / "r.run.npz", max_ids=2)

"""User code fails with one message, and note text from user code never leaves resources/ (issue 23, items 2 and 3).

Every exception of a ``type: python`` factory or encoder and every output that is not a finite real 2-D array with
one row per text stops with one ``r2med-eval:`` line naming the model, the factory and the fix. On a MIMIC-derived
benchmark the job's full log (the exception's message and traceback, whatever outside code printed) goes to an
owner-only file under resources/job_logs/; the log under logs/ and the terminal keep the exception's type, the
model, the job and the fix."""
import logging
import os
import stat
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from confidentiality import assert_confined, files_holding
from conftest import REPO

from r2med_eval import smk
from r2med_eval.confidential import ExternalError, mimic_benchmark, private_log
from r2med_eval.dense import encoders
from r2med_eval.errors import InputError
from r2med_eval.stages import index
from r2med_eval.workflow.config import with_defaults

BYO = REPO / "tests" / "byo"
SECRET = "Secretnoteword"
TEXTS = [f"{SECRET} aspirin", "insulin lowers glucose", f"{SECRET} penicillin treats strep"]


def python_spec(kind: str, **extra) -> dict:
    return with_defaults("python", {"type": "python", "factory": "bad_encoder:make", "kwargs": {"kind": kind},
                                    "python_path": str(BYO), "device": "cpu", **extra})


# ---------------------------------------------------------------- outputs that are not embeddings


BAD_OUTPUTS = [
    ("complex", "complex values (shape (3, 8))"),
    ("complex_tensor", "a complex tensor of shape (3, 8)"),
    ("strings", "strings (shape (3,))"),
    ("numeric_strings", "strings (shape (3, 8))"),
    ("ragged", "rows of different lengths (a ragged list)"),
    ("objects", "Python objects"),
    ("rows", "2 rows"),
    ("vector", "an array of shape (8,)"),
    ("cube", "an array of shape (1, 3, 8)"),
    ("no_width", "rows of no dimension"),
    ("nan", "NaN or infinite values"),
    ("inf", "NaN or infinite values"),
    ("overflow", "values beyond float32's range"),
    ("dict", "a dict"),
    ("none", "None"),
]


@pytest.mark.parametrize("kind, what", BAD_OUTPUTS)
def test_an_output_that_is_not_embeddings_stops_with_one_message(kind, what):
    encoder = encoders.load(python_spec(kind), "bad", "doc", "demo")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning (a complex array cast) is no answer
        with pytest.raises(InputError) as err:
            encoder.encode(TEXTS, batch_size=3)
    message = str(err.value)
    assert not isinstance(err.value, ExternalError)
    assert message.startswith(f"model 'bad' (factory bad_encoder:make): encode_corpus() returned {what}"), message
    assert " for 3 texts; it must return a finite real 2-D array with one row per text. Fix: return one embedding " \
           "per text" in message
    assert "\n" not in message and SECRET not in message and len(message) < 600


def test_a_width_that_changes_between_batches_stops():
    encoder = encoders.load(python_spec("width_by_batch"), "bad", "query", "demo")
    assert encoder.encode(TEXTS[:2], batch_size=2).shape == (2, 9)
    with pytest.raises(InputError, match=r"encode_queries\(\) returned rows of 10 dimensions, after 9 in the batches "
                                         "before for 1 texts"):
        encoder.encode(TEXTS[2:], batch_size=1)


@pytest.mark.parametrize("out", [
    np.ones((3, 4), dtype=np.int64), np.ones((3, 4), dtype=bool), np.ones((3, 4), dtype=np.float16),
    np.full((3, 4), 0.5, dtype=np.float64), [[0.5] * 4] * 3, [np.ones(4)] * 3,
])
def test_real_2d_outputs_of_any_numeric_type_are_accepted(out):
    emb = encoders.embeddings(out, 3, "model 'm'")
    assert emb.dtype == np.float32 and emb.shape == (3, 4)


def test_torch_tensors_are_accepted():
    import torch

    for tensor in (torch.ones((3, 4)), torch.ones((3, 4), dtype=torch.bfloat16),
                   torch.ones((3, 4), requires_grad=True)):
        emb = encoders.embeddings(tensor, 3, "model 'm'")
        assert emb.dtype == np.float32 and emb.shape == (3, 4)


# ---------------------------------------------------------------- exceptions of user code


def test_every_exception_of_user_code_is_one_external_error(tmp_path):
    (tmp_path / "raising_module.py").write_text("raise RuntimeError('broken at import')\n")
    (tmp_path / "raising_factory.py").write_text("def make():\n    raise KeyError('no key')\n")
    cases = [
        ({"factory": "raising_module:make", "python_path": str(tmp_path)},
         "model 'bad' (factory raising_module:make): importing raising_module raised RuntimeError: broken at import."),
        ({"factory": "raising_factory:make", "python_path": str(tmp_path), "kwargs": {}},
         "model 'bad' (factory raising_factory:make): raising_factory:make(**kwargs) raised KeyError: 'no key'."),
    ]
    for extra, start in cases:
        with pytest.raises(ExternalError) as err:
            encoders.load(python_spec("good", **extra), "bad", "doc", "demo")
        assert str(err.value).startswith(start), str(err.value)
    with pytest.raises(ExternalError) as err:
        encoders.load(python_spec("runtime"), "bad", "doc", "demo").encode(TEXTS, batch_size=3)
    assert str(err.value) == ("model 'bad' (factory bad_encoder:make): encode_corpus() on 3 texts raised "
                              "RuntimeError: the encoder broke. Fix: fix the encoder (models.bad) so that it encodes "
                              "every text it is given.")
    with pytest.raises(ExternalError) as err:
        encoders.load(python_spec("quote"), "bad", "query", "demo").encode(TEXTS, batch_size=3)
    exc = err.value
    assert SECRET in str(exc) and SECRET in exc.detail and "bad_encoder.py" in exc.traceback
    withheld = exc.withheld("resources/job_logs/x.log")
    assert SECRET not in withheld and withheld.startswith(
        "model 'bad' (factory bad_encoder:make): encode_queries() on 3 texts raised ValueError (its message is "
        "withheld: the job reads MIMIC-derived text; the message and traceback are in resources/job_logs/x.log, "
        "owner-only). Fix: ")


def test_an_mteb_model_fails_with_one_message_too(monkeypatch):
    from test_byo_encoders import need_mteb

    need_mteb()
    import mteb

    spec = {"type": "mteb", "name": "someone/model", "revision": None, "mteb_task": "R2MEDBiologyRetrieval"}

    def unreachable(*args, **kwargs):
        raise OSError("no weights in the cache")

    monkeypatch.setattr(mteb, "get_model", unreachable)
    with pytest.raises(ExternalError, match=r"^model 'm': mteb.get_model\('someone/model', None\) raised OSError: no "
                                            r"weights in the cache\. Fix: check the name and revision"):
        encoders.load(spec, "m", "doc", "demo")

    class Model:
        def __init__(self, out):
            self.out = out

        def encode(self, loader, **kwargs):
            if isinstance(self.out, Exception):
                raise self.out
            return self.out

    origin = "model 'm' (mteb.get_model('someone/model', None)): encode(prompt_type='document')"
    for out, error, start in ((ValueError(f"bad {SECRET}"), ExternalError, f"{origin} on 3 texts raised ValueError"),
                              (np.ones((3, 4), dtype=np.complex64), InputError, f"{origin} returned complex values")):
        monkeypatch.setattr(mteb, "get_model", lambda *args, out=out, **kwargs: Model(out))
        with pytest.raises(error) as err:
            encoders.load(spec, "m", "doc", "demo").encode(TEXTS, batch_size=3)
        assert str(err.value).startswith(start), str(err.value)


def test_a_long_exception_message_is_cut_to_its_first_line():
    exc = ExternalError("model 'm' (factory f:g): encode_corpus() on 1 texts", ValueError("x" * 5000 + "\nsecond line"),
                        fix="fix it.")
    assert len(str(exc)) < 500 and "second line" not in str(exc)


# ---------------------------------------------------------------- where the messages go (smk.run)


def test_which_jobs_read_mimic_derived_text():
    config = {"benchmarks": {"cq": {"layout": "cliniq"}, "r2": {"layout": "r2med"}}}
    assert mimic_benchmark(config, "cq") and not mimic_benchmark(config, "r2")
    assert not mimic_benchmark(config, None) and not mimic_benchmark(config, "absent") and not mimic_benchmark({}, "cq")

    def job(benchmark=None, private=None):
        return SimpleNamespace(config=config,
                               wildcards=SimpleNamespace(**({"benchmark": benchmark} if benchmark else {})),
                               params=SimpleNamespace(**({"spec": {"private": private}}
                                                         if private is not None else {})))

    assert smk.mimic_job(job("cq")) and smk.mimic_job(job(private=True)) and smk.mimic_job(job("cq", private=False))
    assert not smk.mimic_job(job("r2")) and not smk.mimic_job(job()) and not smk.mimic_job(job("r2", private=False))
    assert private_log("logs/encode_corpus/cq/cliniq/m.log") == Path("resources/job_logs/encode_corpus/cq/cliniq/m.log")


def encode_job(root: Path, layout: str, kind: str) -> SimpleNamespace:
    """rule encode_corpus's snakemake object for model ``bad`` on benchmark ``b`` (paths relative to ``root``, the
    working directory)."""
    corpus = Path("data") / "corpus.jsonl"
    (root / corpus).parent.mkdir(parents=True, exist_ok=True)
    (root / corpus).write_text("".join(f'{{"id": "d{i}", "title": "", "text": "{t}"}}\n' for i, t in enumerate(TEXTS)))
    os.chmod(root / corpus, 0o600)  # as CliniQ's chunks are
    os.chmod((root / corpus).parent, 0o700)
    emb = Path("results/embeddings/b/t/bad")
    (root / "logs/encode_corpus/b/t").mkdir(parents=True, exist_ok=True)  # Snakemake makes a log's folder
    spec = {**python_spec(kind), "private": layout == "cliniq", "storage": "float32", "code_sha256": "0" * 64}
    return SimpleNamespace(
        input=SimpleNamespace(corpus=str(corpus)),
        output=SimpleNamespace(emb=str(emb / "corpus.npy"), ids=str(emb / "corpus_ids.txt"),
                               info=str(emb / "corpus.json")),
        params=SimpleNamespace(spec=spec), wildcards=SimpleNamespace(benchmark="b", task="t", model="bad"), threads=1,
        log=["logs/encode_corpus/b/t/bad.log"], rule="encode_corpus", config={"benchmarks": {"b": {"layout": layout}}})


def run_job(job, func, capfd, monkeypatch) -> str:
    """smk.run of ``func`` on ``job``: it must fail; returns what reached the terminal (file descriptors 1 and 2)."""
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # smk.run leaves a job's stderr on its log (the process ends
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # with the job): restored after the test
    with pytest.raises(SystemExit) as exit_:
        smk.run(job, func)
    assert exit_.value.code == 1
    out = capfd.readouterr()
    return out.out + out.err


def test_an_encoder_that_quotes_note_text_on_a_mimic_benchmark(tmp_path, monkeypatch, capfd):
    """The exception's text and traceback go to resources/job_logs/ (0600, folders 0700) only; the log and the
    terminal get one line with the exception's type, the model, the job and the fix; nothing is written."""
    monkeypatch.chdir(tmp_path)
    shown = run_job(encode_job(tmp_path, "cliniq", "quote"), index.encode_corpus, capfd, monkeypatch)
    lines = [line for line in shown.splitlines() if line.strip()]
    full = Path("resources/job_logs/encode_corpus/b/t/bad.log")
    assert lines == [f"r2med-eval: model 'bad' (factory bad_encoder:make): encode_corpus() on 3 texts raised "
                     f"ValueError (its message is withheld: the job reads MIMIC-derived text; the message and "
                     f"traceback are in {full}, owner-only). Fix: fix the encoder (models.bad) so that it encodes "
                     f"every text it is given."]
    public = Path("logs/encode_corpus/b/t/bad.log").read_text()
    assert SECRET not in public and "raised ValueError (its message is withheld" in public and str(full) in public
    text = full.read_text()
    assert f"input rejected: ['{SECRET} penicillin treats strep'" in text and "Traceback" in text
    assert stat.S_IMODE(full.stat().st_mode) == 0o600
    for folder in (full.parent, *[p for p in full.parents if Path("resources/job_logs") in (p, *p.parents)]):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert not [p for p in Path("results").rglob("*") if p.is_file()]  # nothing written, no temporary left
    assert files_holding(tmp_path, SECRET) == [tmp_path / "data" / "corpus.jsonl", tmp_path / full]
    assert_confined(tmp_path, shown, SECRET)


def test_elsewhere_the_log_keeps_the_full_message_and_traceback(tmp_path, monkeypatch, capfd):
    """Not MIMIC-derived: the message helps to debug; the log has it with the encoder's traceback, the terminal
    its first line."""
    monkeypatch.chdir(tmp_path)
    shown = run_job(encode_job(tmp_path, "r2med", "quote"), index.encode_corpus, capfd, monkeypatch)
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        f"r2med-eval: model 'bad' (factory bad_encoder:make): encode_corpus() on 3 texts raised ValueError: input "
        f"rejected: ['{SECRET} penicillin treats strep'")
    public = Path("logs/encode_corpus/b/t/bad.log").read_text()
    assert "Traceback" in public and "bad_encoder.py" in public and SECRET in public
    assert not Path("resources").exists()


def test_any_failure_of_a_mimic_job_stays_in_the_owner_only_log(tmp_path, monkeypatch, capfd):
    """The guard covers the whole job: an unexpected exception quoting text, and whatever outside code prints
    through Python, C (file descriptors 1 and 2) or its own loggers."""
    monkeypatch.chdir(tmp_path)

    def job_body(sm):
        logging.getLogger("r2med_eval.stages").info("read %d documents", 3)
        print(f"debug: {SECRET} on stdout")
        print(f"debug: {SECRET} on stderr", file=sys.stderr)
        os.write(1, f"C-level {SECRET} on fd 1\n".encode())
        os.write(2, f"C-level {SECRET} on fd 2\n".encode())
        logging.getLogger("some_library").warning("library %s", SECRET)
        raise KeyError(f"{SECRET} not found")

    shown = run_job(encode_job(tmp_path, "cliniq", "good"), job_body, capfd, monkeypatch)
    full = Path("resources/job_logs/encode_corpus/b/t/bad.log")
    assert [line for line in shown.splitlines() if line.strip()] == [
        f"r2med-eval: job encode_corpus b/t/bad failed with KeyError (its message and traceback are withheld: the job "
        f"reads MIMIC-derived text; they are in {full}, owner-only). Fix: read that file; to report a bug of "
        "r2med-eval, give the exception's type and the traceback's files and lines, not its message."]
    public = Path("logs/encode_corpus/b/t/bad.log").read_text()
    assert "read 3 documents" in public and "failed with KeyError" in public and "done in" in public
    assert SECRET not in public
    text = full.read_text()
    for piece in ("on stdout", "on stderr", "on fd 1", "on fd 2", f"library {SECRET}",
                  f"KeyError: '{SECRET} not found'", "read 3 documents"):
        assert piece in text, piece
    assert files_holding(tmp_path, SECRET)[-1] == tmp_path / full and stat.S_IMODE(full.stat().st_mode) == 0o600
    # file descriptors and streams are back: the next job's output reaches the terminal
    os.write(2, b"after the job\n")
    assert "after the job" in capfd.readouterr().err


def test_a_bad_output_on_a_mimic_benchmark_is_one_line_too(tmp_path, monkeypatch, capfd):
    """Our own messages name shapes and types, never values: they reach the terminal as they are."""
    monkeypatch.chdir(tmp_path)
    shown = run_job(encode_job(tmp_path, "cliniq", "strings"), index.encode_corpus, capfd, monkeypatch)
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "r2med-eval: model 'bad' (factory bad_encoder:make): encode_corpus() returned strings (shape (3,)) for 3 texts")
    assert SECRET not in shown and SECRET not in Path("logs/encode_corpus/b/t/bad.log").read_text()


# ---------------------------------------------------------------- end to end on the CliniQ demo


# The end-to-end probe with a planted word and this quoting encoder is part of tests/test_confidentiality.py's run.


def test_a_mimic_job_still_shows_its_progress_on_the_terminal(tmp_path, monkeypatch, capfd):
    """Issue 26's progress lines (ids and counts) reach the terminal from a job whose file descriptors 1 and 2 point
    to the owner-only log: the heartbeat writes to a copy of the terminal taken before."""
    import time as _time

    from r2med_eval.progress import Progress

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("R2MED_EVAL_PROGRESS_SECONDS", "0.05")

    def job_body(sm):
        with Progress("encoding", 4, "texts", logging.getLogger("r2med_eval.stages")) as progress:
            for _ in range(4):
                _time.sleep(0.1)
                progress.update()
        print(f"debug: {SECRET}")
        raise KeyError(SECRET)

    shown = run_job(encode_job(tmp_path, "cliniq", "good"), job_body, capfd, monkeypatch)
    beats = [line for line in shown.splitlines() if line.startswith("r2med-eval [encode_corpus b/t/bad] ")]
    assert len(beats) >= 3 and beats[-1].startswith("r2med-eval [encode_corpus b/t/bad] failed after"), shown
    assert any("texts" in line for line in beats), beats
    assert SECRET not in shown
    full = Path("resources/job_logs/encode_corpus/b/t/bad.log").read_text()
    assert "r2med-eval [encode_corpus" not in full and f"debug: {SECRET}" in full

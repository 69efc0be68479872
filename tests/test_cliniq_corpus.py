"""CliniQ corpus rebuilding: cleaning, langchain-equivalent splitting, NOTEEVENTS reading, bad input,
annotations (reading, checks, download)."""
import csv
import functools
import gzip
import http.server
import json
import os
import random
import stat
import threading

import pytest
from conftest import REPO, shared_dataset

from r2med_eval.cliniq import corpus as cc
from r2med_eval.errors import InputError

DEMO = REPO / "data" / "cliniq-demo"


# ---------------------------------------------------------------- cleaning and splitting

def test_clean_text_matches_the_official_rules():
    text = "Admission Date:  [**2101-3-14**]\n\nSex:   M [x] [a\nb] tail  \n"
    # [..] removed within a line only (the regex's '.' does not cross newlines); newlines to spaces;
    # runs of spaces to one; stripped
    assert cc.clean_text(text) == "Admission Date: Sex: M [a b] tail"
    assert cc.clean_text("a\tb \r\n c") == "a\tb \r c"  # tabs and \r stay, as in preprocess.py
    assert cc.clean_text("[**x**][**y**]") == ""


def _reference():
    lts = pytest.importorskip("langchain_text_splitters", reason="langchain-text-splitters (requirements.txt) "
                              "is the reference splitter")
    return lts.CharacterTextSplitter(separator=" ", chunk_size=100, chunk_overlap=10,
                                     length_function=lambda x: len(x.split()))


ADVERSARIAL = [
    "", " ", "   ", "word", "a " * 100, "a " * 101, ("a " * 99) + "b\tc", "\t" * 50,
    " ".join(["x\ty"] * 60),                      # pieces of two words each
    "big" + "\tw" * 150 + " tail",                 # one piece longer than the chunk size
    " ".join(["\t"] * 30 + ["w"] * 120),           # pieces of zero words at the front
    " ".join(["w"] * 95 + ["\u00a0"] * 20 + ["w"] * 30),  # NBSP pieces: zero words
    ("w " * 10 + "\n ") * 30, "a  b   c", " lead and trail ",
    " ".join(f"w{i}" for i in range(1000)),
]


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_splitter_equals_langchain_on_adversarial_texts(text, caplog):
    ref = _reference()
    assert cc.split_text(text) == ref.split_text(text)
    assert cc.split_text(cc.clean_text(text)) == ref.split_text(cc.clean_text(text))


def test_splitter_equals_langchain_on_random_texts():
    ref = _reference()
    rng = random.Random(1234)
    alphabet = ["a", "bb", "ccc", "x\ty", "\t", "\n", " ", "  ", "[**2101-1-1**]", "]", "[", "\r", "\u00a0",
                "z\u2003w", "Pt.", "q6h", "5mg"]
    checked = 0
    for _ in range(1500):
        n = rng.choice([0, 1, 5, 50, 99, 100, 101, 150, 400, 1200])
        p_space = rng.random()
        text = "".join(rng.choice(alphabet) + (" " if rng.random() < p_space else "") for _ in range(n))
        for t in (text, cc.clean_text(text)):
            assert cc.split_text(t) == ref.split_text(t), t[:200]
            checked += 1
    assert checked == 3000


def test_splitter_other_sizes_equal_langchain():
    lts = pytest.importorskip("langchain_text_splitters")
    rng = random.Random(7)
    for size, overlap in ((5, 0), (5, 5), (7, 3), (20, 1)):
        ref = lts.CharacterTextSplitter(separator=" ", chunk_size=size, chunk_overlap=overlap,
                                        length_function=lambda x: len(x.split()))
        for _ in range(200):
            text = " ".join(rng.choice(["a", "b\tc", "\t", "d"]) for _ in range(rng.randint(0, 80)))
            assert cc.split_text(text, size, overlap) == ref.split_text(text)


def test_split_shape_on_plain_words():
    words = [f"w{i}" for i in range(250)]
    chunks = cc.split_text(" ".join(words))
    assert [len(c.split()) for c in chunks] == [100, 100, 70]
    # consecutive chunks overlap by 10 words
    assert chunks[1].split()[:10] == chunks[0].split()[-10:]
    stats = {}
    cc.split_text("x" + "\ty" * 150 + " z", stats=stats)
    assert stats["oversize_chunks"] == 1


# ---------------------------------------------------------------- NOTEEVENTS

HEADER = list(cc.NOTE_HEADER)


def write_notes(path, rows, header=HEADER):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8", newline="") as handle:
        w = csv.writer(handle, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow(r)
    return path


def row(rid, hadm, cat, text):
    return [rid, 1, hadm, "2101-01-01", "", "", cat, "Report", "", "", text]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_first_discharge_summary_per_listed_hadm(tmp_path, suffix):
    notes = write_notes(tmp_path / f"NOTEEVENTS{suffix}", [
        row(1, "100", "Nursing/other", "nursing text"),
        row(2, "100", "Discharge summary", "first\nsummary [**Name**] of 100"),
        row(3, "100", "Discharge summary", "an addendum"),
        row(4, "200", "Discharge summary", ""),
        row(5, "300", "Discharge summary", "not listed"),
        row(6, "", "Discharge summary", "no admission"),
        row(7, "400", "discharge summary", "wrong case is not the category"),
    ])
    got, stats = cc.read_discharge_notes(notes, ["100", "200", "400"])
    assert got == {"100": "first\nsummary [**Name**] of 100", "200": "nan"}
    assert stats["rows"] == 7 and stats["discharge_rows"] == 5
    assert stats["discharge_duplicate_rows_skipped"] == 1 and stats["discharge_rows_not_listed"] == 2
    assert stats["missing_text_as_nan"] == ["200"]


def test_chunk_corpus_writes_owner_only_and_lists_absent_ids(tmp_path, caplog):
    notes = write_notes(tmp_path / "NOTEEVENTS.csv", [row(1, "100", "Discharge summary", "w " * 150)])
    ids = tmp_path / "ids.txt"
    ids.write_text("100\n555\n777\n")
    out = tmp_path / "resources" / "corpus.jsonl"
    with pytest.raises(InputError, match=r"2 of the 3 listed HADM_IDs .*: 555, 777"):
        cc.chunk_corpus(notes, ids, out)
    assert not out.exists()
    stats = cc.chunk_corpus(notes, ids, out, expected=5, allow_missing_notes=True)
    assert stats["hadm_ids_absent"] == 2 and stats["hadm_ids_absent_list"] == ["555", "777"]
    assert stats["chunk_ids"] == ["100_0", "100_1"]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(out.parent).st_mode) == 0o700
    assert "rebuilt 2 chunks where CliniQ has 5 (difference -3)" in caplog.text
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["100_0", "100_1"]


def test_placeholder_noteevents_says_how_to_get_mimic_and_a_missing_file_says_so(tmp_path):
    with pytest.raises(InputError, match=r"placeholder .*physionet.org/content/mimiciii.*noteevents"):
        cc.read_discharge_notes("/path/to/mimic-iii-clinical-database-1.4/NOTEEVENTS.csv.gz", ["1"])
    with pytest.raises(InputError, match=r"NOTEEVENTS.csv.gz' does not exist\. Fix: check the file name") as err:
        cc.read_discharge_notes(tmp_path / "NOTEEVENTS.csv.gz", ["1"])
    assert "physionet" not in str(err.value)


def test_truncated_csv_inside_a_quoted_text_stops(tmp_path):
    path = write_notes(tmp_path / "NOTEEVENTS.csv", [row(1, "100", "Discharge summary", "a\nb")])
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b"b")])  # cut inside the quoted TEXT
    with pytest.raises(InputError, match="truncated"):
        cc.read_discharge_notes(path, ["100"])


def test_truncated_row_stops_with_its_line(tmp_path):
    path = tmp_path / "NOTEEVENTS.csv"
    path.write_text(",".join(HEADER) + "\n1,1,100,2101-01-01,,,Discharge summary,Report,,,\"t\"\n2,1,200,2101")
    with pytest.raises(InputError, match=r"line 3: a row with 4 fields"):
        cc.read_discharge_notes(path, ["100"])


def test_truncated_gzip_stops(tmp_path):
    path = write_notes(tmp_path / "NOTEEVENTS.csv.gz", [row(i, str(i), "Discharge summary", "w " * 3000)
                                                         for i in range(30)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated"):
        cc.read_discharge_notes(path, ["1"])


def test_header_without_needed_columns_stops(tmp_path):
    path = write_notes(tmp_path / "NOTEEVENTS.csv", [], header=["ROW_ID", "HADM_ID", "BODY"])
    with pytest.raises(InputError, match="lacks the column.*CATEGORY, TEXT"):
        cc.read_discharge_notes(path, ["1"])


PLANTED = "Zyxwquartzplanted"  # a word only the notes hold: it must appear in no message or log


def _malformed_notes(tmp_path, kind):
    """NOTEEVENTS files broken in each way a reader can fail, every note holding the planted word."""
    text = f"patient {PLANTED} seen, \"quoted\" {PLANTED}"
    good = row(1, "100", "Discharge summary", text)
    path = tmp_path / ("NOTEEVENTS.csv.gz" if kind == "gzip" else "NOTEEVENTS.csv")
    if kind == "no_header":
        write_notes(path, [row(2, "200", "Discharge summary", text)], header=good)
    elif kind == "no_header_text_first":
        write_notes(path, [], header=[text] + good[1:])
    elif kind == "quoted_cut":
        write_notes(path, [good])
        data = path.read_bytes()
        path.write_bytes(data[: data.rindex(PLANTED.encode())])
    elif kind == "short_row":
        write_notes(path, [good, [3, 1, "300", f"{PLANTED} {PLANTED}"]])
    elif kind == "long_row":
        write_notes(path, [good + [PLANTED]])
    elif kind == "not_utf8":
        write_notes(path, [good])
        path.write_bytes(path.read_bytes().replace(PLANTED.encode(), PLANTED.encode() + b"\xff", 1))
    elif kind == "gzip":
        write_notes(path, [row(i, str(i), "Discharge summary", (text + " ") * 300) for i in range(30)])
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "bad_quote":
        path.write_text(",".join(HEADER) + f'\n1,1,100,d,,,Discharge summary,R,,,"{PLANTED}"x{PLANTED}\n')
    elif kind == "missing_note":
        write_notes(path, [row(1, "999", "Discharge summary", text)])
    return path


@pytest.mark.parametrize("kind", ["no_header", "no_header_text_first", "quoted_cut", "short_row", "long_row",
                                  "not_utf8", "gzip", "bad_quote", "missing_note"])
def test_no_note_text_in_any_message_or_log(tmp_path, caplog, capsys, kind):
    """Issue 14.1: a NOTEEVENTS file without its header line printed its first row (note text)."""
    path = _malformed_notes(tmp_path, kind)
    ids = tmp_path / "ids.txt"
    ids.write_text("100\n")
    caplog.set_level("DEBUG")
    with pytest.raises(InputError) as info:
        cc.chunk_corpus(path, ids, tmp_path / "resources" / "corpus.jsonl", expected=None)
    out = capsys.readouterr()
    for where in (str(info.value), caplog.text, out.out, out.err):
        assert PLANTED not in where, (kind, where)
    assert str(path) in str(info.value)


def test_mimic_header_is_the_real_one():
    """The reader accepts MIMIC-III's own NOTEEVENTS header (shared schema file: header only)."""
    path = shared_dataset("mimic3-demo-noteevents-schema") / "NOTEEVENTS.csv"
    with open(path, encoding="utf-8") as handle:
        assert tuple(next(csv.reader(handle))) == cc.NOTE_HEADER
    notes, stats = cc.read_discharge_notes(path, ["100001"])
    assert notes == {} and stats["rows"] == 0


def test_demo_notes_use_the_mimic_header():
    with open(DEMO / "NOTEEVENTS.csv", encoding="utf-8") as handle:
        assert tuple(next(csv.reader(handle))) == cc.NOTE_HEADER


# ---------------------------------------------------------------- annotations

def annotations(tmp_path, qrels_extra=""):
    folder = tmp_path / "ann"
    folder.mkdir()
    (folder / "test_hadm_ids.txt").write_text("100\n")
    for t in cc.QUERY_TYPES:
        (folder / f"queries_{t}.jsonl").write_text(json.dumps({"_id": "0", "text": f"{t} query"}) + "\n")
        (folder / f"qrels_{t}.tsv").write_text("0\t100_0\tstring\n0\t100_1\tsynonym\n")
    if qrels_extra:
        with open(folder / "qrels_drug.tsv", "a") as handle:
            handle.write(qrels_extra)
    return folder


def test_queries_are_namespaced_by_type_and_qrels_keep_repeats(tmp_path):
    folder = annotations(tmp_path, "0\t100_1\timplication\n")
    queries, types = cc.read_queries(folder)
    assert queries == {"disease-0": "disease query", "procedure-0": "procedure query", "drug-0": "drug query"}
    assert types["procedure-0"] == "procedure"
    rows, stats = cc.read_qrels(folder, queries)
    assert len(rows) == 7 and rows[-1] == ("drug-0", "100_1", "implication")
    assert stats["judgments_repeating_a_chunk"] == 1


def test_unknown_match_type_stops(tmp_path):
    folder = annotations(tmp_path, "0\t100_1\tsynonyms\n")
    queries, _ = cc.read_queries(folder)
    with pytest.raises(InputError, match=r"qrels_drug.tsv, line 3: unknown match type 'syn'\u2026 \(8 characters\)\. "
                       r"Fix: .*did you mean 'synonym'"):
        cc.read_qrels(folder, queries)


def test_judgments_on_absent_chunks_are_counted_then_stop(tmp_path):
    rows = [("q", f"100_{i}", "string") for i in range(999)] + [("q", "999_0", "string")]
    info = cc.check_chunks(rows, {f"100_{i}" for i in range(999)}, 0.001, "qrels")
    assert info == {"judgments_on_absent_chunks": 1, "absent_chunks": ["999_0"]}
    with pytest.raises(InputError, match=r"2 of 1001 judgments .* name 2 chunks .* does not match"):
        cc.check_chunks(rows + [("q", "998_0", "string")], {f"100_{i}" for i in range(999)}, 0.001, "qrels")


def test_new_judgments(tmp_path):
    from r2med_eval.cliniq.label_files import read_new_judgments

    path = tmp_path / "new.tsv"
    path.write_text("query_id\tchunk_id\tlabel\ndisease-0\t100_5\tirrelevant\ndrug-0\t100_6\thyponym\n")
    rows = read_new_judgments(path, {"disease-0": "x", "drug-0": "y"}, {"100_5", "100_6"})
    assert rows == [("disease-0", "100_5", "irrelevant"), ("drug-0", "100_6", "hyponym")]
    path.write_text("disease-0\t100_5\tmaybe\n")
    with pytest.raises(InputError, match=r"new.tsv, line 1: the label 'may'\u2026 \(5 characters\) is not"):
        read_new_judgments(path, {"disease-0": "x"})
    path.write_text("disease-0\t100_7\tstring\n")  # a chunk the corpus does not hold
    with pytest.raises(InputError, match=r"line 1: the chunk id '100_7' is not a chunk of the benchmark's corpus"):
        read_new_judgments(path, {"disease-0": "x"}, {"100_5"})


@pytest.fixture
def http_server(tmp_path):
    root = tmp_path / "www"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/zhao-zy15/CliniQ"
    server.shutdown()


def test_download_from_a_local_server_checks_sums(tmp_path, http_server):
    root, base = http_server
    src = root / "zhao-zy15" / "CliniQ" / cc.PINNED_COMMIT / "benchmark"
    src.mkdir(parents=True)
    for name in cc.ANNOTATION_FILES:
        (src / name).write_bytes((DEMO / name).read_bytes())
    out = tmp_path / "resources" / "ann"
    sums = cc.download_annotations(out, base_url=base)
    assert set(sums) == set(cc.ANNOTATION_FILES)
    assert sums["test_hadm_ids.txt"] == cc.sha256_file(DEMO / "test_hadm_ids.txt")
    assert (out / "SHA256SUMS").read_text().count("\n") == len(cc.ANNOTATION_FILES)
    # a changed upstream file no longer matches the recorded sum
    (src / "qrels_drug.tsv").write_text("0\t1_0\tstring\n")
    with pytest.raises(InputError, match="qrels_drug.tsv has SHA-256"):
        cc.download_annotations(out, base_url=base)
    assert (out / "qrels_drug.tsv").read_bytes() == (DEMO / "qrels_drug.tsv").read_bytes()
    # a pinned checksum in the config is checked too
    with pytest.raises(InputError, match="expected 0000"):
        cc.download_annotations(tmp_path / "other", base_url=base, sha256={"test_hadm_ids.txt": "0" * 64})
    # a missing file stops with the URL
    with pytest.raises(InputError, match="cannot download .*/nope/benchmark/test_hadm_ids.txt"):
        cc.download_annotations(tmp_path / "third", base_url=base, commit="nope")


def test_download_file_url(tmp_path):
    src = tmp_path / "mirror" / "abc" / "benchmark"
    src.mkdir(parents=True)
    for name in cc.ANNOTATION_FILES:
        (src / name).write_bytes((DEMO / name).read_bytes())
    sums = cc.download_annotations(tmp_path / "out", base_url=(tmp_path / "mirror").as_uri(), commit="abc")
    assert sums["qrels_disease.tsv"] == cc.sha256_file(DEMO / "qrels_disease.tsv")

"""Issue 26: the MedQuAD / LiveQA-Med BEIR folder of config/medquad.yaml is built from its public sources at pinned
commits (r2med-eval build-medquad). Offline, on a small synthetic copy of the two repositories' layouts written
here (every text invented for the test), with the expected files spelled out; the real build is pinned by the
SHA-256 sums of ../shared/data's folders."""
import hashlib
import io
import json
import tarfile
import zipfile

import pytest
from conftest import shared_dataset

from r2med_eval.benchmarks import medquad
from r2med_eval.errors import InputError


def xml_document(source, doc_id, focus, pairs):
    body = "".join(f'\t<QAPair pid="{pid}">\n\t\t\t<Question qid="{doc_id}-{pid}" qtype="information">{q}</Question>\n'
                   f'\t\t\t<Answer>{a}</Answer>\n\t</QAPair>\n' for pid, q, a in pairs)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Document id="{doc_id}" source="{source}" '
            f'url="https://example.org/{source}/{doc_id}">\n<Focus>{focus}</Focus>\n<QAPairs>\n{body}</QAPairs>\n'
            '</Document>\n')


JUDGMENTS = ("1 4-Excellent ADAM_0000002_Sec1.txt\n"
             "1 2-Related CancerGov_0000001_1_Sec2.txt\n"
             "1 1-Incorrect GARD_0000004_Sec1.txt\n"
             "2 3-Incomplete ADAM_0000002_Sec1.txt\n"
             "2 2-Related ADAM_0000002_Sec1.txt\n")  # judged twice, kept twice
ANSWERS_CSV = ('AnswerID,Answer\n'
               'ADAM_0000002_Sec1.txt,"Question: What causes a sore knee? \nURL: https://example.org/adam/2\n'
               'Answer: Knees hurt after long walks.\n"\n'
               'CancerGov_0000001_1_Sec2.txt,"Question: How to treat a rash ?\nURL: https://example.org/cg/1\n'
               'Answer: Use a cream, twice a day.  \n"\n'
               'ADAM_0000002_Sec1.txt,"Question: ignored\nURL: x\nAnswer: a repeated row is ignored"\n'
               'GARD_0000004_Sec1.txt,"Question: What is Zed syndrome ?\nURL: https://example.org/gard/4\n'
               'Answer: Zed syndrome is rare."\n')
QUESTIONS = """<?xml version="1.0" encoding="UTF-8"?>
<LiveQA2017-Medical-Test-Set-Full>
\t<NLM-QUESTION qid="TQ1">
\t\t<Original-Question qfile="1.txt">
\t\t\t<SUBJECT>sore knee.</SUBJECT>
\t\t\t<MESSAGE>why does my knee hurt after walking ? thank you .</MESSAGE>
\t\t</Original-Question>
\t\t<NIST-PARAPHRASE>Why does a knee hurt after walking?</NIST-PARAPHRASE>
\t\t<NLM-Summary>What causes knee pain after walking?</NLM-Summary>
\t</NLM-QUESTION>
\t<NLM-QUESTION qid="TQ2">
\t\t<Original-Question qFile="2.txt">
\t\t\t<SUBJECT></SUBJECT>
\t\t\t<MESSAGE>knee pain
\t\t\t\twhen it rains</MESSAGE>
\t\t</Original-Question>
\t\t<NIST-PARAPHRASE></NIST-PARAPHRASE>
\t\t<NLM-Summary>Does rain cause knee pain?</NLM-Summary>
\t</NLM-QUESTION>
</LiveQA2017-Medical-Test-Set-Full>
"""


def make_sources(root):
    """MedQuAD/ and LiveQA_MedicalTask_TREC2017/ as the pinned commits lay them out, in miniature."""
    mq = root / "MedQuAD"
    files = {
        "1_CancerGov_QA/0000001_1.xml": xml_document("CancerGov", "0000001_1", "Rash", [
            (1, "What is (are) a rash ?", "A rash is red skin.\n                \n   It itches."),
            (2, "How to treat a rash ?", "Old text, replaced by the judged answer."),
            (3, "Who gets a rash ?", "   "),  # empty: left out
        ]),
        "1_CancerGov_QA/0000001_2.xml": xml_document("CancerGov", "0000001_1", "Rash again", [
            # same id: first place, last text
            (1, "What is (are) a rash, again ?", "The second text of a repeated id."),
        ]),
        "2_GARD_QA/0000004.xml": xml_document("GARD", "0000004", "Zed syndrome", [
            (1, "What is (are) Zed syndrome ?", "Zed syndrome &amp; its signs."),
        ]),
        "10_MPlus_ADAM_QA/0000002.xml": xml_document("ADAM", "0000002", "Knee", [
            (1, "What causes a sore knee ?", ""),  # answers removed upstream
        ]),
        "9_CDC_QA/0000007.xml": xml_document("CDC", "0000007", "Flu", [(1, "How to prevent Flu ?", "Wash hands. \n")]),
    }
    for rel, text in files.items():
        (mq / rel).parent.mkdir(parents=True, exist_ok=True)
        (mq / rel).write_text(text, encoding="utf-8")
    with zipfile.ZipFile(mq / medquad.JUDGED_ZIP, "w") as archive:
        archive.writestr(medquad.JUDGMENTS, JUDGMENTS)
        archive.writestr(medquad.ANSWERS, ANSWERS_CSV)
        archive.writestr(f"__MACOSX/{medquad.JUDGED_DIR}/._x", b"\0")
    (mq / "readme.txt").write_text("MedQuAD\n")
    lq = root / "LiveQA_MedicalTask_TREC2017" / medquad.QUESTIONS
    lq.parent.mkdir(parents=True)
    lq.write_text(QUESTIONS, encoding="utf-8")
    return root


def doc(key, title, text, **metadata):
    return {"_id": key, "title": title, "text": text, "metadata": metadata}


EXPECTED_CORPUS = [
    doc("CancerGov_0000001_1_Sec1.txt", "What is (are) a rash, again ?", "The second text of a repeated id.",
        source="CancerGov", focus="Rash again", url="https://example.org/CancerGov/0000001_1"),
    doc("CancerGov_0000001_1_Sec2.txt", "How to treat a rash ?", "Use a cream, twice a day.", source="CancerGov",
        url="https://example.org/cg/1", **{"from": "judged-answers-csv"}),
    doc("GARD_0000004_Sec1.txt", "What is Zed syndrome ?", "Zed syndrome is rare.", source="GARD",
        url="https://example.org/gard/4", **{"from": "judged-answers-csv"}),
    doc("CDC_0000007_Sec1.txt", "How to prevent Flu ?", "Wash hands.", source="CDC", focus="Flu",
        url="https://example.org/CDC/0000007"),
    doc("ADAM_0000002_Sec1.txt", "What causes a sore knee?", "Knees hurt after long walks.", source="ADAM",
        url="https://example.org/adam/2", **{"from": "judged-answers-csv"}),
]
EXPECTED_QUERIES = [
    {"_id": "TQ1", "text": "sore knee.. why does my knee hurt after walking ? thank you",
     "metadata": {"subject": "sore knee.", "message": "why does my knee hurt after walking ? thank you .",
                  "nist_paraphrase": "Why does a knee hurt after walking?",
                  "nlm_summary": "What causes knee pain after walking?"}},
    {"_id": "TQ2", "text": "knee pain\n\t\t\t\twhen it rains",
     "metadata": {"subject": "", "message": "knee pain\n\t\t\t\twhen it rains", "nist_paraphrase": "",
                  "nlm_summary": "Does rain cause knee pain?"}},
]
EXPECTED_QRELS = ("query-id\tcorpus-id\tscore\nTQ1\tADAM_0000002_Sec1.txt\t3\nTQ1\tCancerGov_0000001_1_Sec2.txt\t1\n"
                  "TQ1\tGARD_0000004_Sec1.txt\t0\nTQ2\tADAM_0000002_Sec1.txt\t2\nTQ2\tADAM_0000002_Sec1.txt\t1\n")


def jsonl(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def test_build_from_sources_gives_the_beir_folder(tmp_path):
    sources = make_sources(tmp_path / "src")
    info = medquad.build(tmp_path / "out", pool=tmp_path / "pool", sources=sources)
    out = tmp_path / "out"
    assert (out / "corpus.jsonl").read_text(encoding="utf-8") == jsonl(EXPECTED_CORPUS)
    assert (out / "queries.jsonl").read_text(encoding="utf-8") == jsonl(EXPECTED_QUERIES)
    assert (out / "qrels" / "test.tsv").read_text() == EXPECTED_QRELS
    judged = {"CancerGov_0000001_1_Sec2.txt", "GARD_0000004_Sec1.txt", "ADAM_0000002_Sec1.txt"}
    pool = tmp_path / "pool"
    assert (pool / "corpus.jsonl").read_text(encoding="utf-8") == jsonl(d for d in EXPECTED_CORPUS
                                                                          if d["_id"] in judged)
    assert (pool / "queries.jsonl").read_bytes() == (out / "queries.jsonl").read_bytes()
    assert (pool / "qrels" / "test.tsv").read_bytes() == (out / "qrels" / "test.tsv").read_bytes()
    assert (info["documents"], info["queries"], info["judgments"], info["pool_documents"]) == (5, 2, 5, 3)
    assert info["equals_reference"] is False and not any(info["pinned_source_files"].values())
    # the folder loads as the pipeline loads config/medquad.yaml's benchmark (duplicate_qrels: max)
    import r2med_eval

    task = r2med_eval.load_task(out, layout="beir", duplicate_qrels="max")
    assert task.qrels["TQ2"] == {"ADAM_0000002_Sec1.txt": 2} and len(task.corpus) == 5


def test_bad_sources_stop_with_the_file_named(tmp_path):
    sources = make_sources(tmp_path / "src")
    (sources / "LiveQA_MedicalTask_TREC2017" / medquad.QUESTIONS).unlink()
    with pytest.raises(InputError, match=r"TREC-2017-LiveQA-Medical-Test-Questions-w-summaries\.xml: the LiveQA test "
                                         r"questions is missing\. Fix: point --sources at"):
        medquad.build(tmp_path / "out", sources=sources)
    sources = make_sources(tmp_path / "src2")
    with zipfile.ZipFile(sources / "MedQuAD" / medquad.JUDGED_ZIP, "w") as archive:
        archive.writestr(medquad.JUDGMENTS, "1 5-Perfect ADAM_0000002_Sec1.txt\n")
        archive.writestr(medquad.ANSWERS, ANSWERS_CSV)
    with pytest.raises(InputError, match=r"line 1: expected 'question-number grade answer-id'"):
        medquad.build(tmp_path / "out", sources=sources)
    assert not (tmp_path / "out" / "corpus.jsonl").exists()


def github_archive(folder, prefix) -> bytes:
    """A folder as GitHub's tar.gz archive of a commit lays it out (one top folder <repo>-<commit>/)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=prefix)
    return buf.getvalue()


def test_download_unpacks_githubs_archives_of_the_pinned_commits(tmp_path, monkeypatch):
    """The network step, offline: urlopen serves archives of the fixture; the pinned blobs are checked."""
    import urllib.request

    sources = make_sources(tmp_path / "src")
    served = {s.archive_url: github_archive(sources / s.folder, f"{s.folder}-{s.commit}")
              for s in (medquad.MEDQUAD, medquad.LIVEQA)}
    asked = []

    def urlopen(url, timeout=None):
        asked.append(url)
        return io.BytesIO(served[url])

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(InputError, match="not those of the pinned commits"):
        medquad.build(tmp_path / "out", pool=tmp_path / "pool")  # the fixture's files are not the pinned ones
    assert asked == [f"https://codeload.github.com/abachaa/MedQuAD/tar.gz/{medquad.MEDQUAD.commit}",
                     f"https://codeload.github.com/abachaa/LiveQA_MedicalTask_TREC2017/tar.gz/{medquad.LIVEQA.commit}"]
    assert not (tmp_path / "out").exists()
    blobs = {key: medquad.git_blob_id((sources / key[0] / key[1]).read_bytes()) for key in medquad.BLOBS}
    monkeypatch.setattr(medquad, "BLOBS", blobs)
    info = medquad.build(tmp_path / "out", pool=tmp_path / "pool")
    assert info["sources"] == {"abachaa/MedQuAD": medquad.MEDQUAD.commit,
                               "abachaa/LiveQA_MedicalTask_TREC2017": medquad.LIVEQA.commit}
    assert (tmp_path / "out" / "corpus.jsonl").read_text(encoding="utf-8") == jsonl(EXPECTED_CORPUS)


def test_git_blob_id_is_gits():
    assert medquad.git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git hash-object /dev/null


def test_cli_builds_the_folder(tmp_path, capsys):
    from r2med_eval.cli import main

    sources = make_sources(tmp_path / "src")
    assert main(["build-medquad", str(tmp_path / "out"), "--sources", str(sources)]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 5
    assert (tmp_path / "out" / "qrels" / "test.tsv").read_text() == EXPECTED_QRELS


def test_reference_sums_are_those_of_the_shared_folders():
    """The build of the pinned commits is byte for byte ../shared/data's folders (verified when this was
    written, from checkouts of the two commits); the pinned sums are theirs."""
    full, pool = shared_dataset("medquad-liveqa"), shared_dataset("medquad-liveqa-pool")

    def sha(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    assert {rel: sha(full / rel) for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")} == \
        {k: v for k, v in medquad.REFERENCE_SHA256.items() if not k.startswith("pool/")}
    assert sha(pool / "corpus.jsonl") == medquad.REFERENCE_SHA256["pool/corpus.jsonl"]
    assert (pool / "queries.jsonl").read_bytes() == (full / "queries.jsonl").read_bytes()

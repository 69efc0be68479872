"""MedQuAD answers judged for the TREC 2017 LiveQA medical test questions, in BEIR layout, built from the public
sources at pinned commits: the folder ``config/medquad.yaml`` reads (``r2med-eval build-medquad``).

Sources (CC BY 4.0): github.com/abachaa/MedQuAD at ``577bd37b`` (the question-answer pairs, one XML file per
document in numbered folders, and ``QA-TestSet-LiveQA-Med-Qrels-2479-Answers.zip``: the 2,479 judgments of MedQuAD
answers for the LiveQA questions and the text of every judged answer) and
github.com/abachaa/LiveQA_MedicalTask_TREC2017 at ``3f5a42cc`` (``TestDataset/...-Test-Questions-w-summaries.xml``:
the 104 test questions with the NIST paraphrase and the NLM summary).

The folder:

* ``corpus.jsonl`` {_id, title, text, metadata}: every MedQuAD answer that is not empty, id
  ``<source>_<document id>_Sec<pair id>.txt`` (the ids of the judgments), title the question, text the answer
  (both stripped), metadata {source, focus, url}; files in folder order (by their number) and name order, pairs in
  file order, an id seen twice keeping its first place and its last text. Then every judged answer from the
  judgments' CSV ("Question: ...\\nURL: ...\\nAnswer: ..."), metadata {source, url, from: judged-answers-csv}: it
  replaces the XML pair of the same id in place (three subsets had their answers removed upstream for
  copyright reasons; their judged answers exist only there) or is appended in the CSV's order.
* ``queries.jsonl`` {_id, text, metadata}: the test questions in file order, text ``subject. message`` without
  trailing dots or spaces (the message alone without a subject), metadata {subject, message, nist_paraphrase,
  nlm_summary}.
* ``qrels/test.tsv``: header ``query-id corpus-id score``, the judgments in file order, query ``TQ<n>``, grade
  0-3 (1-Incorrect 0, 2-Related 1, 3-Incomplete 2, 4-Excellent 3); 168 pairs are judged twice (the benchmark
  sets ``duplicate_qrels: max``).
* the pool variant (``--pool``): the same queries and judgments, and only the judged documents.

At the pinned commits the build gives 17,908 documents, 104 queries and 2,479 judgments, byte for byte the
files whose SHA-256 sums ``REFERENCE_SHA256`` holds (checked after each build).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import tarfile
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    repo: str
    commit: str

    @property
    def folder(self) -> str:
        return self.repo.split("/")[1]

    @property
    def archive_url(self) -> str:
        return f"https://codeload.github.com/{self.repo}/tar.gz/{self.commit}"


MEDQUAD = Source("abachaa/MedQuAD", "577bd37b96c02d1833b2c9eed2de9f96964e96cb")
LIVEQA = Source("abachaa/LiveQA_MedicalTask_TREC2017", "3f5a42ccbaa0b8ff1c665a6dc23785740ab0f09f")
JUDGED_ZIP = "QA-TestSet-LiveQA-Med-Qrels-2479-Answers.zip"
JUDGED_DIR = "QA-TestSet-LiveQA-Med-Qrels-2479-Answers"
JUDGMENTS = f"{JUDGED_DIR}/All-qrels_LiveQAMed2017-TestQuestions_2479_Judged-Answers.txt"
ANSWERS = f"{JUDGED_DIR}/All-2479-Answers-retrieved-from-MedQuAD.csv"
QUESTIONS = "TestDataset/TREC-2017-LiveQA-Medical-Test-Questions-w-summaries.xml"
GRADES = {"1-Incorrect": 0, "2-Related": 1, "3-Incomplete": 2, "4-Excellent": 3}
# git blob ids (git hash-object) of the two files the build reads besides the XML folders, at the pinned commits
BLOBS = {(MEDQUAD.folder, JUDGED_ZIP): "e747c3c4d1aabcaf36297d9422f9b7e4a167b3fc",
         (LIVEQA.folder, QUESTIONS): "7badb0314a1c4cc10865e3df0c7c8e87c3acf5c7"}
REFERENCE_SHA256 = {
    "corpus.jsonl": "35f99ad3db46990c9ac38ee57cf20497f10ab7fb4d786294072b7a18030f026d",
    "queries.jsonl": "a90a469f9f50827161a9ed832e0348fad95b242fc06d5d1d208e6ad74f028205",
    "qrels/test.tsv": "47e4ccfdbf06d036b82386ba3e6743b5d70353c9e866f024f5cc59b93a00d4ba",
    "pool/corpus.jsonl": "50504925773b5f4d5b8bc94079ea85456f6a11baeaee109cf6e997ed8a3e4b95",
}
_CSV_ANSWER = re.compile(r"Question: (.*?)\nURL: (.*?)\nAnswer: (.*)", re.S)
_NUMBERED = re.compile(r"^(\d+)_")


def git_blob_id(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ------------------------------------------------------------------ reading the sources


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise InputError(f"{what} is missing.", path=path,
                         fix=f"point --sources at a folder holding {MEDQUAD.folder}/ and {LIVEQA.folder}/ as checked "
                             "out (or unpacked from GitHub) at the pinned commits, or leave --sources out to download.")
    return path


def read_xml_answers(medquad: Path) -> dict[str, dict]:
    """The non-empty question-answer pairs of MedQuAD's numbered folders, by answer id, in the order above."""
    folders = sorted((p for p in medquad.iterdir() if p.is_dir() and _NUMBERED.match(p.name)),
                     key=lambda p: (int(_NUMBERED.match(p.name).group(1)), p.name))
    if not folders:
        _need(medquad / "1_CancerGov_QA", "MedQuAD's numbered folders of XML files (1_CancerGov_QA/, ...)")
    docs: dict[str, dict] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.xml")):
            try:
                root = ET.parse(path).getroot()
            except ET.ParseError as exc:
                raise InputError(f"not well-formed XML ({exc}).", path=path,
                                 fix="check out the pinned commit again.") from None
            source, doc_id, url = root.get("source"), root.get("id"), root.get("url")
            focus = root.findtext("Focus")
            for pair in root.iter("QAPair"):
                answer = (pair.findtext("Answer") or "").strip()
                if not answer:
                    continue
                key = f"{source}_{doc_id}_Sec{pair.get('pid')}.txt"
                docs[key] = {"_id": key, "title": (pair.findtext("Question") or "").strip(), "text": answer,
                             "metadata": {"source": source, "focus": focus, "url": url}}
    return docs


def _judged_zip(medquad: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(_need(medquad / JUDGED_ZIP, "MedQuAD's archive of judged answers"))


def read_judged_answers(medquad: Path) -> dict[str, dict]:
    """The judged answers' text (the judgments' CSV), by answer id, in the CSV's order (first row of an id)."""
    with _judged_zip(medquad) as archive, archive.open(ANSWERS) as raw:
        rows = list(csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline="")))
    if not rows or rows[0] != ["AnswerID", "Answer"]:
        raise InputError(f"{ANSWERS} does not start with the header AnswerID,Answer.", path=medquad / JUDGED_ZIP,
                         fix="use the archive of the pinned commit.")
    docs: dict[str, dict] = {}
    for line, (answer_id, body) in enumerate(rows[1:], start=2):
        m = _CSV_ANSWER.match(body)
        if m is None:
            raise InputError(f"{ANSWERS}: the answer of {answer_id!r} is not 'Question: ...', 'URL: ...', "
                             f"'Answer: ...' (row {line}).", path=medquad / JUDGED_ZIP,
                             fix="use the archive of the pinned commit.")
        question, url, answer = m.groups()
        docs.setdefault(answer_id, {"_id": answer_id, "title": question.strip(), "text": answer.strip(),
                                    "metadata": {"source": answer_id.split("_")[0], "url": url,
                                                 "from": "judged-answers-csv"}})
    return docs


def read_judgments(medquad: Path) -> list[tuple[str, str, int]]:
    """(query id, answer id, grade 0-3) in file order."""
    with _judged_zip(medquad) as archive:
        text = archive.read(JUDGMENTS).decode("utf-8")
    out = []
    for line, row in enumerate(text.splitlines(), start=1):
        parts = row.split()
        if not parts:
            continue
        if len(parts) != 3 or parts[1] not in GRADES or not parts[0].isdigit():
            raise InputError(f"{JUDGMENTS}, line {line}: expected 'question-number grade answer-id' with a grade "
                             f"of {', '.join(GRADES)}.", path=medquad / JUDGED_ZIP,
                             fix="use the archive of the pinned commit.")
        out.append((f"TQ{parts[0]}", parts[2], GRADES[parts[1]]))
    return out


def read_questions(liveqa: Path) -> list[dict]:
    path = _need(liveqa / QUESTIONS, "the LiveQA test questions")
    out = []
    for question in ET.parse(path).getroot().iter("NLM-QUESTION"):
        original = question.find("Original-Question")
        subject = ((original.findtext("SUBJECT") if original is not None else "") or "").strip()
        message = ((original.findtext("MESSAGE") if original is not None else "") or "").strip()
        text = ". ".join(part for part in (subject, message) if part).rstrip(" .")
        out.append({"_id": question.get("qid"), "text": text,
                    "metadata": {"subject": subject, "message": message,
                                 "nist_paraphrase": (question.findtext("NIST-PARAPHRASE") or "").strip(),
                                 "nlm_summary": (question.findtext("NLM-Summary") or "").strip()}})
    return out


# ------------------------------------------------------------------ the folder


def _jsonl(rows) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def convert(medquad: Path, liveqa: Path) -> dict[str, str]:
    """The files of the folder (relative path -> text); ``pool/corpus.jsonl`` is the pool variant's corpus."""
    corpus = read_xml_answers(Path(medquad))
    corpus.update(read_judged_answers(Path(medquad)))  # a judged answer keeps the XML pair's place, or is appended
    judgments = read_judgments(Path(medquad))
    questions = read_questions(Path(liveqa))
    known_q = {q["_id"] for q in questions}
    unknown = [(q, d) for q, d, _ in judgments if q not in known_q or d not in corpus]
    if unknown:
        raise InputError(f"{len(unknown)} judgments name questions or answers the sources lack (first: {unknown[0]}).",
                         path=Path(medquad) / JUDGED_ZIP, fix="use the sources of the pinned commits.")
    judged = {d for _, d, _ in judgments}
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in judgments)
    return {"corpus.jsonl": _jsonl(corpus.values()), "queries.jsonl": _jsonl(questions), "qrels/test.tsv": qrels,
            "pool/corpus.jsonl": _jsonl(doc for key, doc in corpus.items() if key in judged)}


def download(dest: Path) -> tuple[Path, Path]:
    """The two repositories at their pinned commits, from GitHub's archives, unpacked into ``dest`` (network)."""
    import shutil
    import urllib.request

    folders = []
    for source in (MEDQUAD, LIVEQA):
        target = Path(dest) / source.folder
        log.info("downloading %s", source.archive_url)
        with urllib.request.urlopen(source.archive_url, timeout=120) as response, \
                tempfile.TemporaryFile() as archive:
            shutil.copyfileobj(response, archive)
            archive.seek(0)
            with tarfile.open(fileobj=archive, mode="r:gz") as tar:
                members = []
                for member in tar.getmembers():
                    parts = member.name.split("/", 1)  # <repo>-<commit>/...: the archive's top folder goes
                    if len(parts) == 2 and parts[1]:
                        member.name = parts[1]
                        members.append(member)
                tar.extractall(target, members=members, filter="data")
        folders.append(target)
    return folders[0], folders[1]


def _write(files: dict[str, str], out: Path, pool: Path | None) -> None:
    from ..io import write_text

    for rel, text in files.items():
        if rel.startswith("pool/"):
            continue
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        write_text(out / rel, text)
    if pool is not None:
        for rel in ("queries.jsonl", "qrels/test.tsv"):
            (pool / rel).parent.mkdir(parents=True, exist_ok=True)
            write_text(pool / rel, files[rel])
        write_text(pool / "corpus.jsonl", files["pool/corpus.jsonl"])


def build(out, pool=None, sources=None) -> dict:
    """Write the BEIR folder ``out`` (and the pool variant ``pool``) from ``sources`` (a folder holding
    ``MedQuAD/`` and ``LiveQA_MedicalTask_TREC2017/``), or from the pinned commits downloaded from GitHub. Returns
    the counts, and whether every file equals the reference build of the pinned commits."""
    import hashlib

    out, pool = Path(out), (Path(pool) if pool else None)
    with tempfile.TemporaryDirectory() as tmp:
        if sources is None:
            medquad, liveqa = download(Path(tmp))
        else:
            medquad, liveqa = _need(Path(sources) / MEDQUAD.folder, "MedQuAD's checkout"), \
                _need(Path(sources) / LIVEQA.folder, "the LiveQA checkout")
        files = convert(medquad, liveqa)
        blobs = {f"{repo}/{rel}": git_blob_id(((medquad if repo == MEDQUAD.folder else liveqa) / rel).read_bytes())
                 == blob for (repo, rel), blob in BLOBS.items()}
    if sources is None and not all(blobs.values()):
        raise InputError(f"the downloaded sources are not those of the pinned commits ({blobs}).",
                         fix="report it: GitHub served other files for the pinned commits.")
    _write(files, out, pool)
    sums = {rel: hashlib.sha256(text.encode("utf-8")).hexdigest() for rel, text in files.items()}
    info = {"out": str(out), "pool": str(pool) if pool else None,
            "sources": {s.repo: s.commit for s in (MEDQUAD, LIVEQA)} if sources is None else str(sources),
            "documents": files["corpus.jsonl"].count("\n"), "queries": files["queries.jsonl"].count("\n"),
            "judgments": files["qrels/test.tsv"].count("\n") - 1,
            "pool_documents": files["pool/corpus.jsonl"].count("\n"), "pinned_source_files": blobs,
            "sha256": sums, "equals_reference": sums == REFERENCE_SHA256}
    if not info["equals_reference"]:
        log.warning("the built files differ from the reference build of the pinned commits: %s", sums)
    return info

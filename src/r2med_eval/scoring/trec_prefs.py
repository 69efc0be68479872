"""trec_eval's preference formats, ``-R prefs`` and ``-R qrels_prefs``, and the scoring of a run with their measures
(``prefs_num_prefs_poss``, ``prefs_num_prefs_ful``, ``prefs_num_prefs_ful_ret``, ``prefs_simp``, ``prefs_pair``,
``prefs_avgjg``, ``prefs_avgjg_Rnonrel`` and their ``_ret`` and ``_imp`` variants: nicknames ``prefs`` and
``all_prefs``), as trec_eval 10.0 computes them (``get_prefs.c``, ``get_qrels_prefs.c``; the counts and measures are
``scoring.prefs_counts``).

``prefs`` lines are ``qid jg jsg docno level``: within a judgment group (jg, one judge's view) each sub-group (jsg)
ranks its documents by level; ``qrels_prefs`` reads TREC qrels (``qid iter docno grade``) so, the iteration field as
the judgment group and one sub-group. Fields are split at white space; a line that starts with ``#`` is a comment,
except right after another comment line, which trec_eval 10.0 reads as a preference (so a comment there is refused
unless it has the fields of one); a comment as the last line is refused (trec_eval 10.0 reads past the file's end
there); so is a level that is not a decimal number (trec_eval reads ``2x`` as 2 and ``x`` as 0).

Only these measures, ``num_q`` and ``runid`` read preferences, and of trec_eval's options only ``-M`` (each query's
first documents in the preference order: score descending, then document id ascending), ``-c`` (a query the run
misses gets trec_eval's stand-in ranking, one document ``ceci_nest_pas_un_docno``) and ``-Z`` change them; ``-J``,
``-l`` and ``-N`` do not, as in trec_eval. The ``all`` line is the mean over the queries (the counts: their sum).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from . import prefs_counts

COUNTS = ("prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret")
FAMILIES = COUNTS + ("prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret",
                     "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp",
                     "prefs_pair_imp", "prefs_avgjg_imp")
WHAT = "preferences"
NAMES = ("prefs_simp, prefs_pair, prefs_avgjg, prefs_avgjg_Rnonrel (each also _ret, _imp), prefs_num_prefs_poss, "
         "prefs_num_prefs_ful(_ret), num_q, runid, or the nicknames prefs and all_prefs")
FORMATS = {"prefs": ("qid", "jg", "jsg", "docno", "level"), "qrels_prefs": ("qid", "jg", "docno", "level")}
STAND_IN = "ceci_nest_pas_un_docno"  # trec_eval.c's document of a query the run misses (-c)
_DECIMAL = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass
class Preferences:
    """A preferences file read: ``queries`` {qid: [(jg, jsg, docno, level), ...]} in query id order, the file's
    ``path`` (for messages) and its ``format`` (``prefs`` or ``qrels_prefs``)."""
    queries: dict
    path: Path | None = None
    format: str = "prefs"


def read(path, rel_format: str = "prefs") -> Preferences:
    """A ``prefs`` or ``qrels_prefs`` file as trec_eval 10.0 reads it (the module's docstring); one ``InputError``
    naming the file and line where trec_eval would stop, crash or guess."""
    from .runfile import regular_file

    names = FORMATS[rel_format]
    fix = f"write one preference per line: `{' '.join(names)}` (trec_eval's {rel_format})."
    path = regular_file(path, "preferences file")
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    queries: dict = {}
    after_comment = False
    for lineno, raw in enumerate(lines, start=1):
        if raw.startswith(b"#") and not after_comment:
            if lineno == len(lines):
                raise InputError("the file ends with a comment line, where trec_eval 10.0 reads past the end of the "
                                 "file.", path=path, line=lineno, fix="remove the comment or move it up.")
            after_comment = True
            continue
        parts = raw.split()
        if len(parts) != len(names) or b"\0" in raw:
            why = " (trec_eval 10.0 reads a comment line right after another as a preference)" \
                if after_comment else ""
            raise InputError(f"expected {len(names)} fields ({' '.join(names)}), found {len(parts)}{why}.", path=path,
                             line=lineno, fix=fix + (" Keep one comment line between preferences." if why else ""))
        after_comment = False
        if not _DECIMAL.fullmatch(parts[-1]):
            raise InputError("the level is not a decimal number.", path=path, line=lineno, fix=fix)
        try:
            fields = [p.decode("utf-8") for p in parts[:-1]]
        except UnicodeDecodeError:
            raise InputError("a field that is not UTF-8.", path=path, line=lineno, fix=fix) from None
        qid, jg, jsg, doc = fields if rel_format == "prefs" else (fields[0], fields[1], "0", fields[2])
        queries.setdefault(qid, []).append((jg, jsg, doc, float(parts[-1])))
    if not queries:
        raise InputError("the file holds no preferences.", path=path, fix=fix)
    return Preferences(dict(sorted(queries.items())), path, rel_format)


def of(preferences) -> Preferences:
    """A :class:`Preferences` as given, or made from {qid: [(jg, jsg, docno, level), ...]}."""
    if isinstance(preferences, Preferences):
        return preferences
    if not isinstance(preferences, dict) or not preferences:
        raise InputError("preferences must be read by scoring.trec_prefs.read, or given as {qid: [(jg, jsg, docno, "
                         "level), ...]}, not empty.", fix="pass trec_prefs.read(path, 'prefs').")
    queries = {str(q): [(str(jg), str(jsg), str(d), float(lv)) for jg, jsg, d, lv in lines]
               for q, lines in preferences.items()}
    return Preferences(dict(sorted(queries.items())))


def score(table, preferences, measures, *, depth: int | None = None, complete: bool | None = None,
          ignore_identical_ids: bool = False, zscores: dict | None = None, queries=None) -> dict:
    """``metrics.score``'s result for the preference measures (with ``num_q`` and ``runid``) of a run held as a
    ``runfile.RunTable``: each query of the preferences in id order; one the run misses scored on the stand-in
    ranking unless ``complete`` is False (then left out)."""
    import numpy as np

    from . import zscores as zs
    from .runs import table_to_dict

    prefs = of(preferences)
    other = [m.name for m in measures if m.family not in FAMILIES + ("num_q", "runid")]
    if other:
        raise InputError(f"{other[0]} does not read preferences (trec_eval cannot compute it with them either).",
                         fix=f"name {NAMES}.")
    table.check_duplicates()
    run = table_to_dict(table)
    qids = list(prefs.queries)
    scored = np.zeros(len(qids), dtype=bool)
    values = {m.name: np.zeros(len(qids)) for m in measures if m.family != "runid"}
    dropped = 0
    for i, qid in enumerate(qids):
        if qid in run:
            docs = [(d, s) for d, s in run[qid].items() if not (ignore_identical_ids and d == qid)]
            dropped += len(run[qid]) - len(docs)
        elif complete is False:
            continue
        else:
            docs = [(STAND_IN, 1.0)]
        scored[i] = True
        try:
            counts = prefs_counts.form(qid, prefs.queries[qid], docs, depth)
            for m in measures:
                if m.family == "num_q":
                    values[m.name][i] = 1.0
                elif m.family != "runid":
                    values[m.name][i] = prefs_counts.value(counts, m.family)
        except InputError as err:  # the preferences are what trec_eval cannot score: name their file
            raise InputError(err.problem, path=prefs.path, fix=err.fix) from None
    if zscores is not None:
        for name, m in ((m.name, m) for m in measures if m.family != "runid"):
            values[name] = zs.convert(values[name], qids, m.trec, zscores, m.family)
    n = int(np.count_nonzero(scored))
    figures = {}
    for m in measures:
        if m.family == "runid":
            figures[m.name] = table.tag or ""
        elif m.family == "num_q":
            figures[m.name] = float(n)
        else:
            total = float(np.cumsum(values[m.name][scored])[-1]) if n else 0.0  # trec_eval adds query by query
            figures[m.name] = total if m.family in COUNTS else total / n if n else float("nan")
    rows = {}
    for i in np.flatnonzero(scored).tolist():
        rows[qids[i]] = {m.name: table.tag or "" if m.family == "runid" else float(values[m.name][i])
                         for m in measures}
    query_ids = list(queries) if queries is not None else sorted(set(table.qids) | set(qids))
    unjudged = [q for q in query_ids if q not in prefs.queries]
    empty = [q for q in qids if q not in run]
    without = sum(1 for lines in prefs.queries.values() if not any(lv > 0.0 for *_, lv in lines))
    counts_ = {"queries": len(query_ids), "judged_queries_scored": n, "unjudged_queries_excluded": len(unjudged),
               "unjudged_query_ids": unjudged, "judged_queries_with_empty_run": len(empty),
               "judged_queries_with_empty_run_ids": empty, "judged_queries_without_relevant": without}
    if ignore_identical_ids:
        counts_["identical_ids_dropped"] = dropped
    return {"metrics": figures, "per_query": rows, "counts": counts_,
            "run_depth": max((len(d) for d in run.values()), default=0)}


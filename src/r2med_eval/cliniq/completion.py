"""CliniQ's judgment completion: how many relevant chunks its multi-patient judgments miss, and whether its
multi-patient results survive once they are found.

CliniQ judges a chunk for a query only when the chunk's patient carries the query's code, so a relevant mention in
any other patient's note counts as not relevant. This module holds the statistics of the test that settles it
(the stages in ``stages/score.py`` and ``stages/report.py`` read and write the files; the judge is
``cliniq_judge``):

**Population.** For a query q, the *coded* admissions are those holding a chunk that CliniQ's own judgment files
judge relevant for q (CliniQ's annotators saw every chunk of such a note, so its other chunks were judged not
relevant). The population U_q is every chunk of every other admission that no judgment row names for q (rows of
``new_judgments`` included): N_q chunks, in corpus order.

**Design** (per query, seeded by (seed, query id), so adding a query or a run leaves the others' draws alone):

* the *pool* P_q: the chunks of U_q in the top ``pool_depth`` of any selected run, judged all (a certainty
  stratum, inclusion probability 1);
* the *uniform sample*: the first n_q = min(``sample_per_query``, N_q) chunks of a random permutation of U_q, a
  simple random sample without replacement that does not depend on the runs (adding a run adds pool chunks
  only). Its chunks that fall outside the pool, m_q of them, are the sample of the *rest* R_q = U_q \\ P_q.
  Because the permutation restricted to R_q is a random permutation of R_q whatever the positions of the pool
  chunks, those m_q chunks are, given m_q, a simple random sample of R_q: each has inclusion probability
  m_q / |R_q|. A sampled chunk that is also a pool chunk is a certainty unit (counted once, in the pool). When the
  first n_q chunks all fall in the pool and R_q is not empty, the draw goes on to the first chunk of R_q in the
  permutation, so that m_q >= 1 (the argument above still holds).

**Estimator** (stratified, Horvitz-Thompson with those inclusion probabilities; strata = query x {pool, rest}):
the number of relevant chunks in U_q is T_q = Y(P_q) + |R_q| y_q / m_q (y_q: relevant among the m_q), unbiased
given m_q and so unbiased; the false-negative rate of a group of queries is sum T_q / sum N_q (per match type the
same with "relevant with that match type"). Malformed answers (after the re-asks) are non-response: each stratum
is estimated from its usable answers (the weighting-class adjustment, unbiased when an answer's malformation does
not depend on its label within the stratum); a stratum without any usable answer is left out and the population
an estimate covers is reported beside it.

**Intervals** (95%): the queries are fixed, the only randomness is the draw, so the intervals are design-based:
Korn and Graubard's Clopper-Pearson interval of the rest strata's weighted rate p on the design's effective sample
size n_eff = p(1-p) / V(p) (V: the stratified variance with the finite-population correction; capped at the Kish
effective size n_kish / (1 - f), i.e. a design effect of at least 1; that value also when p is 0 or 1 or V is 0),
i.e. the exact binomial interval of p n_eff successes in n_eff trials, mapped through the exact pool part. For one
query this is the exact interval of the rest's sample proportion on (m - 1) / (1 - f) trials. Chosen by the
coverage it reaches at CliniQ's scale for rare events (``bench/completion_coverage.py``: every query at least 0.96
exactly, where the Wilson interval on the same n_eff falls to 0.84 at a rate of 0.001). Kendall's tau, where
queries are the unit, gets a bootstrap over queries (``ranking``).

**Re-scoring.** Every multi-patient figure of every selected run is computed twice by ``cliniq.evaluate_ranked``,
with CliniQ's judgments and with the completed ones (the judge's labels of every judged chunk added as new
judgments, malformed ones left unjudged), overall, per query type and over the completed queries.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict

from ..errors import InputError, as_id
from .corpus import IRRELEVANT, MATCH_TYPES, QUERY_ID, QUERY_TYPES

SAMPLE_HEADER = ("query_id", "query_type", "chunk_id", "stratum", "drawn", "draw_order", "pi", "best_rank",
                 "n_systems")
DESIGN_HEADER = ("query_id", "query_type", "coded_from", "coded_unit", "mapped_through", "coded_admissions",
                 "codes_only", "judgments_only", "unit_differs", "population", "pool", "rest", "drawn",
                 "drawn_in_pool", "rest_sampled", "extended")
CODED_FROM = ("codes", "judgments")
NO_CODE = "judgments:no_code"  # coded_from of a query no code of the tables maps to (it falls back to judgments)
MEASURES = ("relevant",) + MATCH_TYPES
RESCORED_METRICS = ("mrr", "ndcg_at_10", "ndcg_at_10_cliniq", "recall_at_100", "judged_at_10")
EFFECTIVENESS = RESCORED_METRICS[:4]  # judged@10 rises by construction: flagged, but no conclusion rests on it
COMPLETED_GROUP = "completed"  # the group of the completed queries (beside all and the query types)
CONFIDENCE = 0.95


# ------------------------------------------------------------------ the design

def coded_admissions(rows) -> dict[str, set[str]]:
    """Query -> the admissions (HADM_IDs) holding a chunk CliniQ judges relevant for it."""
    from .metrics import note_of

    out: dict[str, set[str]] = defaultdict(set)
    for q, c, _ in rows:
        out[q].add(note_of(c))
    return dict(out)


def resolve_coded(judged: dict[str, set[str]], from_codes: dict[str, set[str]] | None, without_code=(),
                  unit: str = "admission", mapping: dict | None = None) -> tuple[dict[str, set[str]], dict[str, tuple]]:
    """The coded admissions of every query and how they were found: (query -> admissions, query -> (coded_from,
    coded_unit, mapped_through, codes_only, judgments_only, unit_differs)). ``judged``: CliniQ's own judgments
    (``coded_admissions``); ``from_codes``: the code tables' (``cliniq.codes.coded``), None for ``coded_from:
    judgments``; ``mapping``: ``codes.coded``'s counts (``mapped_through``: the codes and the kind of title a query
    mapped through; ``unit_differs``: the admissions the two units classify differently). With codes, a query's coded
    admissions are those the tables give plus those CliniQ's annotators judged (whose chunks are all judged);
    codes_only and judgments_only count the admissions only one of the two definitions calls coded. A query no code
    maps to (``without_code``) falls back to its judgments (``NO_CODE``)."""
    if from_codes is None:
        return dict(judged), {q: ("judgments", "admission", "", "", "", "") for q in judged}
    missing = set(without_code)
    through = (mapping or {}).get("mapped_through", {})
    differs = (mapping or {}).get("unit_differs", {})
    out, info = {}, {}
    for q in set(judged) | set(from_codes) | missing:
        j = judged.get(q, set())
        if q in missing:
            out[q], info[q] = set(j), (NO_CODE, "admission", "", "", "", "")
            continue
        c = from_codes.get(q, set())
        codes, sources = through.get(q, ((), ()))
        how = ";".join(sources) + (":" + ";".join(codes) if codes else "")
        out[q], info[q] = c | j, ("codes", unit, how, len(c - j), len(j - c), differs.get(q, 0))
    return out, info


def select_queries(setting, coded: dict[str, set[str]], qtypes: dict[str, str],
                   judged: dict[str, set[str]] | None = None) -> list[str]:
    """The completed queries: an integer N selects the N disease and procedure queries with the most coded
    admissions (ties by id), ``all`` every query CliniQ judges, a list those ids (each must be judged). ``judged``:
    the admissions CliniQ's own judgments hold (a query without any has no multi-patient figure to complete);
    default ``coded``."""
    judged = coded if judged is None else judged
    if setting == "all":
        return sorted(q for q in qtypes if judged.get(q))
    if isinstance(setting, list):
        unknown = [q for q in setting if q not in qtypes]
        if unknown:
            raise InputError(f"cliniq_completion.queries names unknown queries: "
                             f"{', '.join(as_id(q, shape=QUERY_ID) for q in unknown[:20])}.",
                             fix="use the benchmark's query ids ({type}-{_id}, e.g. disease-12).")
        unjudged = [q for q in setting if not judged.get(q)]
        if unjudged:
            raise InputError(f"cliniq_completion.queries names queries CliniQ judges for no patient: "
                             f"{', '.join(unjudged)} (no coded admission, so no multi-patient figure to complete).",
                             fix="leave them out.")
        return list(dict.fromkeys(setting))
    eligible = [q for q in qtypes if qtypes[q] in ("disease", "procedure") and judged.get(q)]
    return sorted(eligible, key=lambda q: (-len(coded.get(q, ())), q))[:int(setting)]


def query_rng(seed: int, query: str):
    """The random generator of one query's draw: from (seed, sha256 of the query id)."""
    import numpy as np

    return np.random.default_rng([int(seed), int.from_bytes(hashlib.sha256(query.encode()).digest()[:8], "big")])


def draw(population: list[str], pool: set[str], n: int, rng) -> tuple[list[str], int, bool]:
    """The uniform sample of one query: ``draw_in_order`` over a random permutation of ``population``."""
    return draw_in_order(population, pool, n, rng.permutation(len(population)).tolist())


def draw_in_order(population: list[str], pool: set[str], n: int, order) -> tuple[list[str], int, bool]:
    """The first ``n`` chunks of ``population`` in ``order`` (a permutation of its positions), extended to the first
    chunk outside ``pool`` when all of them lie in it. Returns (the sample in that order, how many lie outside the
    pool, whether it was extended)."""
    n = min(n, len(population))
    drawn = [population[i] for i in order[:n]]
    rest = sum(1 for c in drawn if c not in pool)
    if rest == 0:
        for i in order[n:]:
            drawn.append(population[i])
            if population[i] not in pool:
                return drawn, 1, True
    return drawn, rest, False


def top_chunks(ranked, queries, depth: int) -> dict[str, list[str]]:
    """Query -> the ids of its top ``depth`` chunks in a ``cliniq.RankedRun``."""
    return {q: [ranked.vocab[i] for i in ranked.ranking(q)[:depth].tolist()] for q in queries}


def design(queries: list[str], qtypes: dict[str, str], coded: dict[str, set[str]], chunk_ids: list[str],
           judged: dict[str, set[str]], tops: dict[str, dict[str, list[str]]], n: int, seed: int,
           coded_info: dict[str, tuple] | None = None):
    """The sample rows (``SAMPLE_HEADER``) and the design rows (``DESIGN_HEADER``) of every query. ``judged``:
    query -> chunks any judgment row names; ``tops``: run -> query -> its top chunks (the pool's runs; empty: the
    sample-only design); ``coded_info``: how each query's coded admissions were found (``resolve_coded``; default:
    from CliniQ's judgments)."""
    from .metrics import note_of

    notes = [note_of(c) for c in chunk_ids]
    sample, rows = [], []
    for q in queries:
        cod, named = coded.get(q, set()), judged.get(q, set())
        population = [c for c, note in zip(chunk_ids, notes) if note not in cod and c not in named]
        members = set(population)
        best: dict[str, list] = {}
        for run in sorted(tops):
            for rank, c in enumerate(tops[run].get(q, []), start=1):
                if c in members:
                    entry = best.setdefault(c, [rank, 0])
                    entry[0], entry[1] = min(entry[0], rank), entry[1] + 1
        drawn, m, extended = draw(population, set(best), n, query_rng(seed, q))
        position = {c: i for i, c in enumerate(drawn)}
        rest = len(population) - len(best)
        pi_rest = m / rest if rest else 0.0
        for c in population:
            if c in best:
                sample.append((q, qtypes[q], c, "pool", int(c in position), position.get(c, ""), 1.0, best[c][0],
                               best[c][1]))
            elif c in position:
                sample.append((q, qtypes[q], c, "rest", 1, position[c], pi_rest, "", 0))
        how = (coded_info or {}).get(q, ("judgments", "admission", "", "", "", ""))
        rows.append((q, qtypes[q], *how[:3], len(cod), *how[3:], len(population), len(best), rest, len(drawn),
                     sum(1 for c in drawn if c in best), m, int(extended)))
    return sample, rows


def table_text(header, rows) -> str:
    def cell(v):
        return f"{v:.10g}" if isinstance(v, float) else str(v)

    return "\n".join(["\t".join(header)] + ["\t".join(cell(v) for v in r) for r in rows]) + "\n"


def read_table(path, header) -> list[dict]:
    from ..io import read_lines

    lines = read_lines(path)
    if not lines or tuple(lines[0].split("\t")) != tuple(header):
        raise InputError(f"header is not {' '.join(header)}.", path=path, line=1,
                         fix="the file is written by the cliniq_completion rules; run them again.")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


# ------------------------------------------------------------------ the estimator

class Stratum:
    """One stratum of one query: ``kind`` pool or rest, its ``size``, and the labels of its sampled chunks."""

    def __init__(self, query: str, query_type: str, kind: str, size: int, labels: list[str]):
        self.query, self.query_type, self.kind, self.size, self.labels = query, query_type, kind, size, labels


def strata(design_rows: list[dict], sample_rows: list[dict], labels: dict[tuple[str, str], str]) -> list[Stratum]:
    """The pool and rest strata of every query, each with the judge's labels of its sampled chunks."""
    got: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in sample_rows:
        got[(r["query_id"], r["stratum"])].append(labels.get((r["query_id"], r["chunk_id"]), "malformed"))
    out = []
    for d in design_rows:
        q, t = d["query_id"], d["query_type"]
        out.append(Stratum(q, t, "pool", int(d["pool"]), got.get((q, "pool"), [])))
        out.append(Stratum(q, t, "rest", int(d["rest"]), got.get((q, "rest"), [])))
    return out


def indicator(measure: str):
    if measure == "relevant":
        return lambda label: label in MATCH_TYPES
    return lambda label: label == measure


INTERVALS = ("clopper-pearson", "wilson")  # the first is the one the tables use (docs/cliniq.md, bench/)


def rest_interval(size, used, hits, confidence: float = CONFIDENCE, method: str = INTERVALS[0]):
    """The design-based estimate of the sampled strata (vectorised): ``size`` N_h, ``used`` n_h (usable answers
    among the sampled chunks, 0 < n_h < N_h), ``hits`` y_h, arrays of shape (..., H) over the strata (a stratum with
    n_h = 0 is left out: pass size 0). Returns arrays over the leading axes: the weighted rate p = sum N_h y_h / n_h /
    sum N_h, its 95% interval and the effective sample size n_eff = p(1-p) / V (V the stratified variance with the
    finite-population correction), capped at the Kish effective size n_kish / (1 - f), a design effect of at least
    1, and that value also when p is 0 or 1 or V is 0. ``method``: ``clopper-pearson`` (Korn and Graubard: the exact
    binomial interval of p n_eff successes in n_eff trials) or ``wilson`` (the Wilson score interval on n_eff)."""
    import numpy as np

    from ..scoring.stats import clopper_pearson_interval, wilson_interval

    size, used, hits = (np.asarray(a, dtype=float) for a in (size, used, hits))
    live = (used > 0) & (size > 0)
    n = np.where(live, used, 1.0)
    w = np.where(live, size, 0.0)
    total = w.sum(axis=-1)
    safe_total = np.where(total > 0, total, 1.0)
    ph = np.where(live, hits / n, 0.0)
    p = (w * ph).sum(axis=-1) / safe_total
    s2 = np.where(n > 1, ph * (1.0 - ph) * n / np.maximum(n - 1.0, 1.0), 0.25)
    var = ((w / safe_total[..., None]) ** 2 * (1.0 - n / np.where(live, size, 1.0)) * s2 / n).sum(axis=-1)
    sampled = np.where(live, used, 0.0).sum(axis=-1)
    kish = total ** 2 / np.where(total > 0, (w ** 2 / n).sum(axis=-1), 1.0)
    cap = kish / np.maximum(1.0 - sampled / safe_total, 1e-300)
    inner = (p > 0) & (p < 1) & (var > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = np.where(inner, np.minimum(p * (1.0 - p) / np.where(var > 0, var, 1.0), cap), cap)
    n_eff = np.where(total > 0, n_eff, 1.0)
    if method == "clopper-pearson":
        low, high = clopper_pearson_interval(np.clip(p * n_eff, 0.0, n_eff), n_eff, confidence)
    elif method == "wilson":
        pairs = [wilson_interval(float(a), float(b), confidence) for a, b in zip(p.ravel(), n_eff.ravel())]
        low = np.array([a for a, _ in pairs]).reshape(p.shape)
        high = np.array([b for _, b in pairs]).reshape(p.shape)
    else:
        raise ValueError(f"unknown interval method {method!r} (one of {', '.join(INTERVALS)})")
    nan = np.full(p.shape, np.nan)
    empty = total <= 0
    return (np.where(empty, nan, p), np.where(empty, nan, low), np.where(empty, nan, high),
            np.where(empty, nan, n_eff), total)


def estimate(group: list[Stratum], measure: str = "relevant", confidence: float = CONFIDENCE,
             method: str = INTERVALS[0]) -> dict:
    """The stratified estimate over a group of strata: the rate of relevant chunks (``measure``: any relevant, or
    one match type) in the population they cover, the number of relevant chunks there, their 95% intervals, and
    the counts behind them (module docstring; the sampled strata through ``rest_interval``)."""
    from .judge import MALFORMED

    f = indicator(measure)
    population = sum(s.size for s in group)
    judged = sum(len(s.labels) for s in group)
    malformed = sum(1 for s in group for lab in s.labels if lab == MALFORMED)
    found = cert_total = cert_size = 0
    rand = []  # (N_h, n_h, y_h) of the strata estimated from a sample
    for s in group:
        usable = [lab for lab in s.labels if lab != MALFORMED]
        hits = sum(1 for lab in usable if f(lab))
        found += hits
        if s.size == 0 or not usable:
            continue
        if len(usable) >= s.size:
            cert_total += hits
            cert_size += s.size
        else:
            rand.append((s.size, len(usable), hits))
    rest_size = sum(size for size, _, _ in rand)
    covered = cert_size + rest_size
    out = {"population": population, "covered": covered, "judged": judged, "malformed": malformed, "found": found,
           "rate": math.nan, "rate_low": math.nan, "rate_high": math.nan, "missing": math.nan,
           "missing_low": math.nan, "missing_high": math.nan, "n_eff": math.nan}
    if not covered:
        return out
    low = high = p = 0.0
    if rand:
        p, low, high, n_eff, _ = (float(v) for v in rest_interval([r[0] for r in rand], [r[1] for r in rand],
                                                                  [r[2] for r in rand], confidence, method))
        out["n_eff"] = n_eff
    total = cert_total + rest_size * p
    out.update(rate=total / covered, rate_low=(cert_total + rest_size * low) / covered,
               rate_high=(cert_total + rest_size * high) / covered, missing=total,
               missing_low=cert_total + rest_size * low, missing_high=cert_total + rest_size * high)
    return out


def estimates(all_strata: list[Stratum]) -> tuple[list[dict], list[dict]]:
    """(the rows of every group: all queries, each query type, per measure; the rows of each query, measure
    relevant)."""
    rows = []
    groups = [("all", "all", all_strata)]
    groups += [("query_type", t, [s for s in all_strata if s.query_type == t]) for t in QUERY_TYPES]
    for scope, name, members in groups:
        queries = len({s.query for s in members})
        if not queries:
            continue
        for measure in MEASURES:
            rows.append({"scope": scope, "group": name, "measure": measure, "queries": queries,
                         **estimate(members, measure)})
    per_query = []
    for q in dict.fromkeys(s.query for s in all_strata):
        members = [s for s in all_strata if s.query == q]
        per_query.append({"query_id": q, "query_type": members[0].query_type, **estimate(members, "relevant")})
    return rows, per_query


# ------------------------------------------------------------------ re-scoring

def completed_judgments(rows, irrelevant: set, labels: dict[tuple[str, str], str]):
    """CliniQ's judgments with the judge's labels added as new judgments (a match type: relevant; ``irrelevant``:
    judged not relevant; malformed: left unjudged), and how many of each were added."""
    new_rows = [(q, c, lab) for (q, c), lab in sorted(labels.items()) if lab in MATCH_TYPES]
    new_irrelevant = {k for k, lab in labels.items() if lab == IRRELEVANT}
    return list(rows) + new_rows, set(irrelevant) | new_irrelevant, {"relevant": len(new_rows),
                                                                     "irrelevant": len(new_irrelevant)}


def per_query_values(result: dict) -> dict[str, dict[str, float]]:
    """Query -> its multi-patient figures (``RESCORED_METRICS``) from a ``cliniq.evaluate`` result."""
    return {r["query"]: {m: r[m] for m in RESCORED_METRICS} for r in result["per_query"]}


def groups_of(qtypes: dict[str, str], scored, completed: list[str]) -> dict[str, list[str]]:
    """Group -> its scored queries: all, each query type with a scored query, the completed queries."""
    scored = sorted(scored)
    out = {"all": scored}
    for t in QUERY_TYPES:
        members = [q for q in scored if qtypes[q] == t]
        if members:
            out[t] = members
    chosen = set(completed)
    out[COMPLETED_GROUP] = [q for q in scored if q in chosen]
    return out


def _mean(values) -> float:
    values = list(values)
    return math.fsum(values) / len(values) if values else math.nan


def relative_change(original: float, completed: float) -> float:
    """(completed - original) / original in percent; 0 when both are 0, +-inf when only the original is 0."""
    if original == 0:
        return 0.0 if completed == 0 else math.copysign(math.inf, completed)
    return (completed - original) / original * 100.0


def compare(original: dict, completed: dict, groups: dict[str, list[str]], threshold: float) -> list[dict]:
    """Rows model, group, metric, queries, original, completed, change, relative change (%) and whether it moves
    by more than ``threshold`` relative points. ``original``/``completed``: model -> query -> figures."""
    rows = []
    for model in original:
        for group, queries in groups.items():
            for metric in RESCORED_METRICS:
                o = _mean(original[model][q][metric] for q in queries)
                c = _mean(completed[model][q][metric] for q in queries)
                rel = relative_change(o, c) if queries else math.nan
                rows.append({"model": model, "group": group, "metric": metric, "queries": len(queries),
                             "original": o, "completed": c, "change": c - o, "relative_change": rel,
                             "moved": bool(queries) and abs(rel) > threshold})
    return rows


def flipped_pairs(original: dict[str, float], completed: dict[str, float]) -> list[tuple[str, str]]:
    """(a, b) with a above b originally and below b once completed (ties are not flips), a before b by name."""
    names = sorted(original)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            do, dc = original[a] - original[b], completed[a] - completed[b]
            if do * dc < 0:
                out.append((a, b) if do > 0 else (b, a))
    return out


def bootstrap_tau(orig, comp, resamples: int, seed: int, chunk: int = 500) -> tuple[float, float, int]:
    """95% percentile interval of Kendall's tau-b between the systems' mean figures, original against completed,
    over ``resamples`` resamples of the queries (``orig``, ``comp``: systems x queries arrays); and how many
    resamples left tau undefined (a constant ordering)."""
    import numpy as np

    orig, comp = np.asarray(orig, dtype=float), np.asarray(comp, dtype=float)
    s, nq = orig.shape
    if s < 2 or nq == 0:
        return math.nan, math.nan, resamples
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(s, k=1)
    taus = []
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        idx = rng.integers(0, nq, (size, nq))
        mo = orig[:, idx].mean(axis=-1).T  # size x systems
        mc = comp[:, idx].mean(axis=-1).T
        so, sc = np.sign(mo[:, i] - mo[:, j]), np.sign(mc[:, i] - mc[:, j])
        pairs = len(i)
        denom = np.sqrt((pairs - (so == 0).sum(axis=1)).astype(float) * (pairs - (sc == 0).sum(axis=1)))
        with np.errstate(invalid="ignore", divide="ignore"):
            taus.append(np.where(denom > 0, (so * sc).sum(axis=1) / denom, np.nan))
        done += size
    taus = np.concatenate(taus)
    finite = taus[np.isfinite(taus)]
    undefined = int(len(taus) - len(finite))
    if not len(finite):
        return math.nan, math.nan, undefined
    low, high = np.quantile(finite, [(1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2])
    return float(low), float(high), undefined


def ranking(original: dict, completed: dict, groups: dict[str, list[str]], resamples: int, seed: int) -> list[dict]:
    """Per metric and group: Kendall's tau-b between the system orderings (original, completed) with its bootstrap
    interval over the group's queries, and the flipped pairs."""
    from ..scoring.stats import kendall_tau_b

    models = list(original)
    rows = []
    for group, queries in groups.items():
        for metric in RESCORED_METRICS:
            o = {m: _mean(original[m][q][metric] for q in queries) for m in models}
            c = {m: _mean(completed[m][q][metric] for q in queries) for m in models}
            tau = kendall_tau_b([o[m] for m in models], [c[m] for m in models]) if len(models) > 1 and queries \
                else math.nan
            low, high, undefined = bootstrap_tau([[original[m][q][metric] for q in queries] for m in models],
                                                 [[completed[m][q][metric] for q in queries] for m in models],
                                                 resamples, seed)
            strict = sum(1 for i, a in enumerate(models) for b in models[i + 1:] if o[a] != o[b])
            rows.append({"group": group, "metric": metric, "systems": len(models), "queries": len(queries),
                         "strict_pairs": strict, "kendall_tau": tau, "ci_low": low, "ci_high": high,
                         "undefined_resamples": undefined, "flipped_pairs": flipped_pairs(o, c) if queries else []})
    return rows

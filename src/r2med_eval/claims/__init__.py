"""The papers' conclusions tested on the user's runs (issue 38): for every benchmark a claim is about, a verdict
(holds, does_not_hold, inconclusive, not_testable) with its evidence. ``catalogue`` (the ten claims, their statements
and decision rules), ``roles`` (which runs each claim compares, from the registry's tags), ``evidence`` (the paired
tests and intervals over queries, from ``scoring.stats``), ``r2med_claims`` and ``cliniq_claims`` (the decisions),
``verdicts`` (Holm over a benchmark's tests, the verdicts and their reasons), ``overlap`` (per-query lexical overlap
from the analysed tokens, and its TSV), ``assess`` (a benchmark's claims), ``render`` (Markdown, LaTeX and the index
page's section). CliniQ's per-query figures by match type are ``score_cliniq``'s (``cliniq.per_query``)."""

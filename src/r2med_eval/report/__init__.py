"""The report: leaderboards (``leaderboard``), the significance table of every run against the baseline
(``significance``, tests from ``scoring.stats``), tables a researcher can paste (``tables``: LaTeX, Markdown), the
figures (``figure``: the common toolkit; ``plots``: the leaderboard's figures; CliniQ's are in ``cliniq.plots``),
one style per run (``palette``), the HTML pages (``html``), provenance (``provenance``), R2MED's published
numbers beside ours (``r2med_paper``) and MTEB's results layout (``mteb_results``).
"""

"""Runs and their scores: TREC run files (``runs``), trec_eval's measures under R2MED's names (``metrics``),
a benchmark's metric files in one table (``metric_table``), rank fusion (``fusion``) and significance tests over
queries (``stats``, ``significance``).
"""

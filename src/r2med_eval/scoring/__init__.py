"""Runs and their scores: run files read and written (``runfile``: the one reader, TREC text as trec_eval reads
it and the binary format of ``binrun``; ``runs``: runs in memory, trec_eval's tie order, writers; ``identity``:
what made a run, recorded by the writers and checked by every reader of the pipeline), trec_eval's
measures over all queries at once (``trec``) under R2MED's and ir_measures' names (``metrics``), a benchmark's
metric files in one table (``metric_table``), rank fusion (``fusion``) and the paired tests over queries
(``stats``). The significance table built from them is ``report.significance``.
"""

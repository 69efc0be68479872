"""The benchmarks' data as the pipeline reads it: the on-disk layouts normalised into one (``datasets``: R2MED's
native layout, BEIR, CliniQ's files), what is specific to R2MED (``r2med``: its tasks and the paper's dataset
statistics; ``protocols``: how R2MED's and ReasonEmbed's code searched and scored) and the MedQuAD / LiveQA-Med
collection built from its public sources (``medquad``).
"""

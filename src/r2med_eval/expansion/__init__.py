"""Generation-augmented retrieval: R2MED's query variants from LLM-written documents (``gar``: HyDE,
query2doc, LameR and how each retriever combines them with the query) and the expansion files written with an
LLM (``generate``).
"""

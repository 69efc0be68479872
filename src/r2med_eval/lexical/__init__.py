"""Lexical retrieval: BM25 through Anserini (``lucene``, with its Java set up by the pipeline in ``java``) and
R2MED's own BM25 code reproduced bit for bit (``bm25_paper``).
"""

"""Dense retrieval: how a model entry loads (``models``), the adapters of ``type: python`` and ``mteb`` models
(``encoders``, ``factories``), the batch plan and the encoding of corpus, queries and query variants
(``encode``), the stored vectors (``embeddings``) and exact or FAISS search (``search``).
"""

"""Second-stage reranking: scorers run in the job (``scorers``: cross-encoders, RankLLaMA, a bi-encoder), LLM
rerankers behind a server (``listwise``: RankGPT; ``pointwise``: yes/no; ``llm_rerank`` runs an entry of either),
and the reranked run built from the first stage (``merge``).
"""

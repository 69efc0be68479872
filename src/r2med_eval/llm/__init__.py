"""The one LLM client, split along its seams: what is asked and answered (``requests``), the answers' cache
(``cache``), which servers may receive MIMIC-derived text (``policy``), one exchange with a server
(``transport``), the client itself (``client``), a vLLM server started inside a job (``server``) and a reasoning
LLM's output cut to its answer (``reasoning``). Query expansion, the LLM rerankers and the CliniQ judge all ask
through it.
"""

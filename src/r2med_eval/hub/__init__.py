"""Downloads from the Hugging Face Hub at pinned revisions, checksummed and atomic: R2MED's dataset repos
(``datasets``) and model weights fetched ahead of the jobs that load them (``models``, rule ``prefetch_model``).
"""

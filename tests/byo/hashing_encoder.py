"""A small encoder outside the package, for the ``type: python`` tests: hashed bag of words (numpy only).

``make(dim=...)`` returns an object with ``encode_queries`` / ``encode_corpus``, the interface a user's own
retriever (an API embedding, a ColBERT pooled vector, ...) implements."""
import re
import zlib

import numpy as np


class HashingEncoder:
    def __init__(self, dim: int = 256, device: str = "cpu"):
        self.dim = dim
        self.device = device
        self.calls = []

    def _encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out

    def encode_queries(self, texts, **kwargs):
        return self._encode(texts)

    def encode_corpus(self, texts, **kwargs):
        return self._encode(texts)


def make(dim: int = 256, device: str = "cpu"):
    return HashingEncoder(dim=dim, device=device)

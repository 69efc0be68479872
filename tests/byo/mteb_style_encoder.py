"""A small encoder with MTEB's classic interface, ``encode(sentences, task_name=..., prompt_type=...)``: hashed
character trigrams; queries and documents get different weights so that the prompt type matters."""
import zlib

import numpy as np


class TrigramEncoder:
    def __init__(self, dim: int = 512):
        self.dim = dim

    def encode(self, sentences, *, task_name=None, prompt_type=None, **kwargs):
        assert task_name and prompt_type in ("query", "document"), (task_name, prompt_type)
        weight = 2.0 if prompt_type == "query" else 1.0
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        for i, text in enumerate(sentences):
            text = f"  {text.lower()} "
            for j in range(len(text) - 2):
                out[i, zlib.crc32(text[j:j + 3].encode()) % self.dim] += weight
        return out

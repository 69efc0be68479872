"""An encoder outside the package that fails in the ways a user's encoder can, for the tests of ``type: python``.

``make(kind=...)`` returns an object whose ``encode_queries`` / ``encode_corpus`` return (or raise) what ``kind``
names; ``kind: quote`` raises as API clients do, quoting its input."""
import numpy as np

DIM = 8


class BadEncoder:
    def __init__(self, kind: str = "good"):
        self.kind = kind
        self.calls = 0

    def _encode(self, texts):
        self.calls += 1
        n, kind = len(texts), self.kind
        good = np.ones((n, DIM), dtype=np.float32)
        if kind == "good":
            return good
        if kind == "quote":
            raise ValueError(f"input rejected: {texts!r}")
        if kind == "runtime":
            raise RuntimeError("the encoder broke")
        if kind == "complex":
            return good.astype(np.complex64) + 1j
        if kind == "complex_tensor":
            import torch

            return torch.ones((n, DIM), dtype=torch.complex64)
        if kind == "strings":
            return list(texts)
        if kind == "numeric_strings":
            return [["0.5"] * DIM for _ in texts]
        if kind == "ragged":
            return [[1.0] * (DIM + i) for i in range(n)]
        if kind == "objects":
            out = np.empty((n, DIM), dtype=object)
            out[:] = 1.0
            return out
        if kind == "rows":
            return good[:-1]
        if kind == "vector":
            return good[0]
        if kind == "cube":
            return good[None]
        if kind == "no_width":
            return np.zeros((n, 0), dtype=np.float32)
        if kind == "width_by_batch":
            return np.ones((n, DIM + self.calls), dtype=np.float32)
        if kind == "nan":
            good[0, 0] = np.nan
            return good
        if kind == "inf":
            good[-1, -1] = np.inf
            return good
        if kind == "overflow":
            return np.full((n, DIM), 1e300)
        if kind == "dict":
            return {"dense_vecs": good}
        if kind == "none":
            return None
        raise AssertionError(kind)

    def encode_queries(self, texts, **kwargs):
        return self._encode(texts)

    def encode_corpus(self, texts, **kwargs):
        return self._encode(texts)


def make(kind: str = "good"):
    return BadEncoder(kind)

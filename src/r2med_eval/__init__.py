"""r2med-eval: reproducible evaluation of retrieval models on reasoning-driven medical retrieval."""

__version__ = "0.1.0"

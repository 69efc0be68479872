"""The claims' per-query TSV file (rule ``claims_overlap``): a header and one row per query, a float with 6
decimals, an undefined value (None) as an empty cell."""

from __future__ import annotations


def tsv(header, rows: list[dict]) -> str:
    def cell(v):
        return "" if v is None else (f"{v:.6f}" if isinstance(v, float) else str(v))

    return "\n".join(["\t".join(header)] + ["\t".join(cell(r[h]) for h in header) for r in rows]) + "\n"

"""CliniQ's tables in the CliniQ paper's wide shape (Markdown and LaTeX) from the long rows of
``cliniq.table_rows``: models as rows, single- and multi-patient side by side. Kept apart from
``cliniq_files`` (which the corpus and scoring stages use) so that an edit of the report's table code reruns
the report only."""

from __future__ import annotations

from ..report.tables import best_per_column, latex_table, md_escape, metric_label, tex_label

# One wide table per metric: single- and multi-patient side by side (single first), a column per group.
WIDE_METRICS = (("MRR", {"single": "mrr", "multi": "mrr"}),
                ("nDCG", {"single": "ndcg", "multi": "ndcg_at_10_cliniq"}),
                ("MAP and Recall@100", {"single": "map", "multi": "recall_at_100"}),
                ("nDCG@10, standard", {"multi": "ndcg_at_10"}))
SETTING_NAMES = {"single": "Single-patient", "multi": "Multi-patient"}


def wide_tables(rows) -> list[dict]:
    """The long rows of ``cliniq.table_rows`` as the CliniQ paper's tables: models as rows; per setting
    (single, then multi) a column per group (``all`` first). A group nothing was scored on (no query of
    that type) is left out and named in ``dropped``. Each table: {title, columns [(setting header, group)],
    rows [model, value...], counts {column: n}, dropped}."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    index = {(r["model"], r["setting"], r["group"], r["metric"]): r for r in rows}
    out = []
    for title, per_setting in WIDE_METRICS:
        columns, keys, counts, dropped = [], [], {}, []
        for setting in ("single", "multi"):
            metric = per_setting.get(setting)
            groups = list(dict.fromkeys(r["group"] for r in rows if r["setting"] == setting and r["metric"] == metric))
            head = f"{SETTING_NAMES[setting]} ({metric_label(metric)})" if metric else ""
            for group in groups:
                cells = [index.get((m, setting, group, metric)) for m in models]
                if all(c is None or c["value"] is None for c in cells):
                    dropped.append(f"{SETTING_NAMES[setting].lower()} {group}")
                    continue
                columns.append((head, group))
                keys.append((setting, group, metric))
                counts[(head, group)] = max(c["n_queries"] for c in cells if c is not None)
        if not columns:
            continue
        table = [[m] + [(index.get((m, s, g, me)) or {}).get("value") for s, g, me in keys] for m in models]
        out.append({"title": title, "columns": columns, "keys": keys, "rows": table, "counts": counts,
                    "dropped": dropped})
    return out


def wide_markdown(tables, title: str) -> str:
    """The wide tables in Markdown (x 100, best per column in bold); the setting in each column name."""
    out = [f"# {md_escape(title)}", "", "Models as rows; single- and multi-patient side by side; x 100; best per "
           "column in bold; the number of scored queries (single-patient: query-note pairs) under each column.", ""]
    for t in tables:
        best = best_per_column(t["rows"]) if len(t["rows"]) > 1 else {}
        names = [f"{k[0]}: {g} (n={t['counts'][(h, g)]})" for (h, g), k in zip(t["columns"], t["keys"])]
        out += [f"## {md_escape(t['title'])}", "", "; ".join(md_escape(h) for h in dict.fromkeys(
            h for h, _ in t["columns"])) + ".", "",
            "| model | " + " | ".join(md_escape(n) for n in names) + " |", "|---|" + "---:|" * len(names)]
        for r in t["rows"]:
            cells = ["" if v is None else (f"**{v * 100:.2f}**" if best.get(j) == v else f"{v * 100:.2f}")
                     for j, v in enumerate(r[1:], start=1)]
            out.append(f"| {md_escape(r[0])} | " + " | ".join(cells) + " |")
        if t["dropped"]:
            out += ["", "Not shown (nothing scored): " + md_escape(", ".join(t["dropped"])) + "."]
        out.append("")
    return "\n".join(out)


def wide_latex(tables, title: str, label: str) -> str:
    """The wide tables as booktabs tables (one float each), single- and multi-patient under spanning headers."""
    parts = []
    for t in tables:
        counts = "; ".join(f"{k[0]} {g}: {t['counts'][(h, g)]}" for (h, g), k in zip(t["columns"], t["keys"]))
        dropped = [f"Not shown (nothing scored): {', '.join(t['dropped'])}."] if t["dropped"] else []
        parts.append(latex_table(t["columns"], t["rows"], caption=f"{title}: {t['title']} \u00d7 100.",
                                 label=tex_label(label, t["title"]), notes=[f"Queries per column: {counts}.",
                                                                             *dropped]))
    return "\n".join(parts)

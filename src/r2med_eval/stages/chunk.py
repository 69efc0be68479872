"""Stage chunk (rules/chunk.smk): CliniQ's corpus rebuilt from the user's MIMIC-III NOTEEVENTS (credentialed
text, written owner-only under resources/), and CliniQ's annotations fetched at a pinned commit."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("r2med_eval")


def download_cliniq_annotations(sm) -> None:
    from ..cliniq import corpus as cc

    spec = sm.params.spec
    sums = cc.download_annotations(Path(sm.output[0]).parent, commit=spec["commit"], base_url=spec["base_url"],
                                   sha256=spec["sha256"])
    log.info("CliniQ annotations at commit %s: %d files checked", spec["commit"], len(sums))


def chunk_cliniq(sm) -> None:
    from ..cliniq import corpus as cc
    from ..io import write_json, write_text

    spec = sm.params.spec
    stats = cc.chunk_corpus(sm.input.notes, sm.input.hadm_ids, sm.output.corpus, expected=spec["expected_chunks"],
                            allow_missing_notes=spec["allow_missing_notes"])
    ids = stats.pop("chunk_ids")
    write_text(sm.output.ids, "".join(i + "\n" for i in ids))
    stats.update({"benchmark": sm.wildcards.benchmark, "task": sm.wildcards.task,
                  "noteevents": str(sm.input.notes), "hadm_ids_sha256": cc.sha256_file(sm.input.hadm_ids)})
    write_json(sm.output.stats, stats)
    log.info("NOTEEVENTS rows %d; 'Discharge summary' rows %d (repeats of a HADM_ID skipped %d, not listed %d); "
             "listed HADM_IDs %d, found %d, absent %d%s", stats["rows"], stats["discharge_rows"],
             stats["discharge_duplicate_rows_skipped"], stats["discharge_rows_not_listed"], stats["listed_hadm_ids"],
             stats["notes_found"], stats["hadm_ids_absent"],
             (": " + ", ".join(stats["hadm_ids_absent_list"])) if stats["hadm_ids_absent_list"] else "")
    log.info("chunks %d (expected %s, difference %s); oversize chunks %d; notes without chunks %d; missing texts "
             "read as 'nan' %d", stats["chunks"], spec["expected_chunks"],
             "-" if spec["expected_chunks"] is None else f"{stats['chunks'] - spec['expected_chunks']:+d}",
             stats["oversize_chunks"], len(stats["notes_without_chunks"]), len(stats["missing_text_as_nan"]))

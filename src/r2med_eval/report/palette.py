"""One style per run across every plot of a benchmark: a colour (colour-blind safe) and, beyond the first nine
runs, a marker and a hatch that tell runs of the same colour apart; 90 distinct styles in all.

The assignment is recorded in ``results/plots/{benchmark}/palette.tsv`` (rule ``plot_palette``) and kept when the
run list changes: a run already in the file keeps its style (also one edited by hand), a new run takes its place
among all benchmarks' runs (configuration order) when that style is free, else the first free one, and a run no
longer configured frees its style. From scratch the runs take the styles of their places, so the same
configuration gives the same file, and a run shared by benchmarks the same style in each. No hashing: two runs
of a benchmark never share a style while fewer than 90 are configured.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io import write_text

log = logging.getLogger(__name__)

# Paul Tol's "muted" qualitative scheme (https://personal.sron.nl/~pault/, colour-blind safe), ordered so that
# neighbours differ in lightness as well as hue.
COLOURS = ("#332288", "#DDCC77", "#44AA99", "#CC6677", "#88CCEE", "#117733", "#882255", "#999933", "#AA4499")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p")
HATCHES = ("none", "///", "...", "xxx", "\\\\\\", "+++", "ooo", "---", "|||", "**")
STYLES = len(COLOURS) * len(MARKERS)
FIELDS = ["run", "colour", "marker", "hatch"]
_HEX = re.compile(r"^#[0-9A-Fa-f]{6}$")


@dataclass(frozen=True)
class Style:
    colour: str
    marker: str
    hatch: str  # "none" or a matplotlib hatch pattern

    @property
    def bar_hatch(self) -> str | None:
        return None if self.hatch == "none" else self.hatch


def style(slot: int) -> Style:
    """The style of a slot: colours first (slots 0-8 solid with circles), then the next marker and hatch."""
    variant = (slot // len(COLOURS)) % len(MARKERS)
    return Style(COLOURS[slot % len(COLOURS)], MARKERS[variant], HATCHES[variant])


def assign(runs, previous: dict | None = None, preferred: dict | None = None) -> dict[str, Style]:
    """{run: style} for ``runs`` (in their order): the styles of ``previous`` kept for the runs still there; a new
    run on its ``preferred`` slot (its place among every benchmark's runs, so that a run shared by benchmarks
    gets the same style in each) when no run holds that style, else on the first free slot. Beyond 90 runs
    styles repeat (logged)."""
    previous = previous or {}
    preferred = preferred or {}
    out = {r: previous[r] for r in runs if r in previous}
    taken = {(s.colour.upper(), s.marker) for s in out.values()}

    def free(slot: int) -> bool:
        return (style(slot).colour, style(slot).marker) not in taken

    for run in runs:
        if run in out:
            continue
        slot = preferred.get(run)
        if slot is None or slot >= STYLES or not free(slot):
            slot = next((k for k in range(STYLES) if free(k)), None)
        if slot is None:
            log.warning("%d runs: more than the %d distinct styles, %s shares one", len(runs), STYLES, run)
            slot = len(out)
        out[run] = style(slot)
        taken.add((out[run].colour, out[run].marker))
    kept = sum(1 for r in runs if r in previous)
    log.info("palette: %d runs, %d kept from the previous file, %d new, %d dropped", len(runs), kept,
             len(runs) - kept, sum(1 for r in previous if r not in set(runs)))
    return {r: out[r] for r in runs}


def to_tsv(palette: dict[str, Style]) -> str:
    lines = ["\t".join(FIELDS)] + [f"{r}\t{s.colour}\t{s.marker}\t{s.hatch}" for r, s in palette.items()]
    return "\n".join(lines) + "\n"


def write(path, palette: dict[str, Style]) -> None:
    write_text(Path(path), to_tsv(palette))


def read(path) -> dict[str, Style]:
    """A palette file (header run, colour, marker, hatch; colour as #RRGGBB), validated."""
    path = Path(path)
    fix = "edit the file as run<TAB>#RRGGBB<TAB>marker<TAB>hatch, or delete it to assign the styles afresh."
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t") != FIELDS:
        raise InputError(f"header is not {' '.join(FIELDS)} (tab-separated).", path=path, line=1, fix=fix)
    out = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != len(FIELDS):
            raise InputError(f"expected {len(FIELDS)} tab-separated fields, found {len(parts)}.", path=path,
                             line=lineno, fix=fix)
        run, colour, marker, hatch = parts
        if not _HEX.match(colour):
            raise InputError(f"colour {colour!r} of {run} is not #RRGGBB.", path=path, line=lineno, fix=fix)
        if marker not in MARKERS or (hatch != "none" and set(hatch) - set("/\\|-+xoO.*")):
            raise InputError(f"marker {marker!r} or hatch {hatch!r} of {run} is not one of {' '.join(MARKERS)} / "
                             "none or a matplotlib hatch.", path=path, line=lineno, fix=fix)
        if run in out:
            raise InputError(f"run {run} is listed twice.", path=path, line=lineno, fix=fix)
        out[run] = Style(colour.upper(), marker, hatch)
    return out


def styles_of(palette: dict[str, Style], runs, path=None) -> dict[str, Style]:
    """The styles of ``runs``; a run the palette lacks stops with the fix."""
    missing = [r for r in runs if r not in palette]
    if missing:
        raise InputError(f"no style for {', '.join(missing)} in the palette.", path=path,
                         fix="rerun rule plot_palette (delete the palette file to rebuild it).")
    return {r: palette[r] for r in runs}

"""The report as a reader opens it: ``results/index.html`` in Debian's headless Chromium, its weight, its load
time, and screenshots of the whole page in tiles.

    python bench/report_pages.py --results /work/scratch/r2med-full/run/results --out /work/scratch/r2med-full/shots

Weight: the page itself and every file it shows inline (``<img>``), in bytes, and the number of table rows and
images. Load time: the wall time of ``chromium --headless --screenshot`` of the page (which waits for the load
event) minus that of a blank page, median of ``--repeats``. Screenshots: the whole page, ``--width`` pixels wide
(one screenshot ``--max-height`` tall, since headless Chromium cannot scroll to an anchor before its screenshot), cut
into tiles of ``--height`` pixels, ``<out>/index-01.png``, ...; the page's height is where the last non-white row
lies. With ``--latex``, every table of ``results/tables/*.tex`` is also compiled in one article on US letter with
1-inch margins, as the tests compile them (``tests/conftest.py::compile_tex``: no overfull box, no float too large),
and the pages are counted. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    raise SystemExit("Debian's chromium is needed (apt-get install -y chromium)")


def shoot(url: str, png: Path, width: int, height: int, profile: Path) -> float:
    """Screenshot ``url`` into ``png``; the wall time of the browser process."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}",
           f"--window-size={width},{height}", f"--screenshot={png}", url]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not png.is_file():
        raise SystemExit(f"chromium failed on {url}: {proc.stderr[-2000:]}")
    return wall


def tiles(tall: Path, out: Path, height: int) -> list:
    """The screenshot cut into tiles of ``height`` rows down to its last non-white row; [tile paths..., height]."""
    import numpy as np
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None
    image = Image.open(tall).convert("RGB")
    rows = np.flatnonzero(np.asarray(image.convert("L")).min(axis=1) < 250)
    bottom = int(rows.max()) + 1 if len(rows) else 0
    paths = []
    for k, top in enumerate(range(0, bottom, height), start=1):
        path = out / f"index-{k:02d}.png"
        image.crop((0, top, image.width, min(bottom, top + height))).save(path)
        paths.append(str(path))
    return paths + [bottom]


def weight(page: Path) -> dict:
    html = page.read_text(encoding="utf-8")
    images = re.findall(r'<img src="([^"]+)"', html)
    sizes = {src: (page.parent / src).stat().st_size for src in images if (page.parent / src).is_file()}
    return {"page_bytes": len(html.encode()), "images": len(images), "image_bytes": sum(sizes.values()),
            "total_bytes": len(html.encode()) + sum(sizes.values()), "table_rows": html.count("<tr"),
            "largest_images": sorted(sizes.items(), key=lambda kv: -kv[1])[:5]}


def latex(tables: list, workdir: Path) -> dict:
    """The tables compiled by the tests' harness (one definition of "fits the page"); its failure names the boxes."""
    if not tables:
        raise SystemExit("no results/tables/*.tex to compile")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import compile_tex

    log = compile_tex(tables, workdir)
    pages = re.search(r"Output written on doc\.pdf \((\d+) pages?", log.replace("\n", ""))
    return {"tables": [p.name for p in tables], "pages": int(pages.group(1)) if pages else None,
            "pdf": str(workdir / "doc.pdf")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="the run's results/ folder (holds index.html)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the screenshots")
    parser.add_argument("--width", type=int, default=1400, help="window width in pixels (default 1400)")
    parser.add_argument("--height", type=int, default=2400, help="tile height in pixels (default 2400)")
    parser.add_argument("--max-height", type=int, default=150000,
                        help="height of the whole-page screenshot (default 150000; a page that reaches it is cut "
                             "there, and the output says so)")
    parser.add_argument("--repeats", type=int, default=3, help="load-time repeats (default 3)")
    parser.add_argument("--latex", action="store_true",
                        help="also compile results/tables/*.tex on a page with 1-inch margins (pdflatex)")
    args = parser.parse_args(argv)
    page = (args.results / "index.html").resolve()
    if not page.is_file():
        raise SystemExit(f"no index.html in {args.results}")
    args.out.mkdir(parents=True, exist_ok=True)
    out = {"page": str(page), **weight(page)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        blank = tmp / "blank.html"
        blank.write_text("<!doctype html><title>blank</title>")
        shoot(blank.as_uri(), tmp / "warm.png", args.width, args.height, tmp / "profile")  # warm the disk cache
        loads, blanks = [], []
        for _ in range(args.repeats):
            blanks.append(shoot(blank.as_uri(), tmp / "blank.png", args.width, args.height, tmp / "profile"))
            loads.append(shoot(page.as_uri(), tmp / "index.png", args.width, args.height, tmp / "profile"))
        out["load_seconds"] = round(statistics.median(loads) - statistics.median(blanks), 2)
        out["browser_seconds_blank"] = round(statistics.median(blanks), 2)
        tall = tmp / "tall.png"
        shoot(page.as_uri(), tall, args.width, args.max_height, tmp / "profile")
        out["screenshots"] = tiles(tall, args.out, args.height)
        out["page_height_px"] = out["screenshots"].pop()
        out["cut_at_max_height"] = out["page_height_px"] >= args.max_height
        if out["cut_at_max_height"]:
            print(f"the page reaches --max-height {args.max_height} px: the screenshots stop there; give a larger one",
                  file=sys.stderr)
    if args.latex:
        out["latex"] = latex(sorted((args.results / "tables").glob("*.tex")), args.out / "latex")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""A burst of image decodes in a real main window: how soon the page in view shows, how many cores
the decodes take, and how long the GUI thread goes without a turn meanwhile.

What a live run does during indexing: the corpus preview asks for the thumbnails of the pages just
indexed while the evidence view is told to show a new page. Here a thumbnail strip (the product's
``ThumbnailStrip``) is given ``--thumbs`` fresh A4 page renders (1654×2339 JPEGs, the size the
indexer writes at 200 dpi) and, right after, the window's evidence view is sent the run's next page
(an ``ImageShown`` and a ``Crop`` on it, as a VRAG step sends them). Measured per burst, with fresh
files each time (nothing cached by the app):

- **page shown**: ms until the evidence view has that page's pixels (``pageLoaded``);
- **all thumbnails**: ms until the strip has every thumbnail (``itemsLoaded``);
- **decode cores**: the CPU time of the app's decoding threads (``vrag-io*`` / ``vrag-img*``) over
  the burst's length, and the most they took in any 20 ms (their ``schedstat``, read every 5 ms;
  Linux);
- **longest GUI gap**: the longest time between two turns of the GUI thread's loop (it sleeps
  2 ms a turn), i.e. how long the window could not repaint.

``--tree`` measures another source tree (a baseline checkout), so before and after run one after
the other on one machine:

    git worktree add /tmp/work/baseline 6411cb1
    .venv/bin/python bench/decode_burst.py --tree /tmp/work/baseline
    .venv/bin/python bench/decode_burst.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from _modes import ROOT, use_tree
from _report import row, save_json  # bench/ is the script's folder, first on sys.path
from _window import open_window

A4 = (1654, 2339)
DECODERS = ("vrag-io", "vrag-img")


def draw_page(path: Path, seed: int) -> None:
    """A text-like page: dark strokes on white in lines, a table, a figure (JPEG, quality 90)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", A4, "white")
    d = ImageDraw.Draw(img)
    for y in range(160, 1500, 38):  # lines of "words"
        x = 140
        while x < A4[0] - 200:
            w = 30 + (x * 7 + y * 3 + seed) % 90
            d.rectangle([x, y, x + w, y + 18], fill=(30, 30, 30))
            x += w + 16
    for i in range(6):  # a table
        d.line([(140, 1560 + 60 * i), (A4[0] - 140, 1560 + 60 * i)], fill=(0, 0, 0), width=2)
    d.ellipse([300 + seed % 200, 1950, 700 + seed % 200, 2250], fill=(40, 120, 200))
    img.save(path, quality=90)


def decoder_ns() -> dict[int, int]:
    """CPU time (ns, the scheduler's own count) used so far by each decoding thread, by thread id."""
    out: dict[int, int] = {}
    for t in threading.enumerate():  # Python's names (the kernel's are all "python" before 3.14)
        if not t.name.startswith(DECODERS) or t.native_id is None:
            continue
        try:
            with open(f"/proc/self/task/{t.native_id}/schedstat") as f:
                out[t.native_id] = int(f.read().split()[0])
        except OSError:
            continue
    return out


class CoreSampler:
    """Samples the decoding threads' CPU every 5 ms; ``peak(window)`` is the most cores they took in
    any ``window`` seconds."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def __enter__(self) -> CoreSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), sum(decoder_ns().values())))
            time.sleep(0.005)

    def peak(self, window: float = 0.02) -> float:
        best = 0.0
        for i, (t0, c0) in enumerate(self.samples):
            for t1, c1 in self.samples[i + 1 :]:
                if t1 - t0 >= window:
                    best = max(best, (c1 - c0) / 1e9 / (t1 - t0))
                    break
        return best


def burst(app: Any, window: Any, strip: Any, folder: Path, k: int, n_thumbs: int) -> dict[str, float]:
    from vrag_desktop.core.agents.events import Crop, ImageShown
    from vrag_desktop.core.corpus.status import PreviewItem

    paths = [folder / f"b{k}_p{i}.jpg" for i in range(n_thumbs + 1)]
    for i, p in enumerate(paths):
        draw_page(p, seed=97 * k + i)
    items = [
        PreviewItem(i, 1, p.stem, "page", i, str(p), "ok", None, "", None, None)
        for i, p in enumerate(paths[:-1])
    ]
    page = str(paths[-1])
    doc = str(folder / f"doc{k}.pdf")
    step = 2 * k + 1
    marks: dict[str, float] = {}
    view = window.evidence
    strip.itemsLoaded.connect(lambda: marks.setdefault("thumbs", time.perf_counter()))
    ns0 = sum(decoder_ns().values())
    with CoreSampler() as sampler:
        t0 = time.perf_counter()
        strip.show_items(items)
        window._route_event(
            ImageShown(step=step, image=page, raw=page, width=1140, height=1612, source=doc, page=1)
        )
        window._route_event(
            Crop(
                step=step + 1,
                region=(200, 300, 900, 800),
                raw=page,
                image=page,
                width=700,
                height=500,
                source=doc,
                page=1,
            )
        )
        gap, last = 0.0, time.perf_counter()
        while "thumbs" not in marks or "page" not in marks:
            app.processEvents()
            now = time.perf_counter()
            gap, last = max(gap, now - last), now
            if "page" not in marks and view.loaded == page:
                marks["page"] = now
            if now - t0 > 60:
                raise SystemExit("the burst did not finish in 60 s")
            time.sleep(0.002)
        t_end = time.perf_counter()
    strip.itemsLoaded.disconnect()
    cores = (sum(decoder_ns().values()) - ns0) / 1e9 / (t_end - t0)
    return {
        "page_ms": (marks["page"] - t0) * 1000,
        "thumbs_ms": (marks["thumbs"] - t0) * 1000,
        "cores_mean": cores,
        "cores_peak_20ms": sampler.peak(),
        "gui_gap_ms": gap * 1000,
    }


def measure(bursts: int, n_thumbs: int) -> dict[str, Any]:
    from vrag_desktop.qt.infra.thumbnails import ThumbnailStrip

    app, _ctx, window, tmp = open_window()
    for _ in range(20):
        app.processEvents()
    window.ask.begin("What does the table on page 1 say?")
    strip = ThumbnailStrip()
    strip.resize(1200, 200)
    strip.show()
    runs = [burst(app, window, strip, tmp, k, n_thumbs) for k in range(bursts)]
    keys = runs[0].keys()
    return {
        "bursts": runs,
        "median": {key: round(statistics.median(r[key] for r in runs), 2) for key in keys},
        "max": {key: round(max(r[key] for r in runs), 2) for key in keys},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to measure (default: this one)")
    ap.add_argument("--bursts", type=int, default=7)
    ap.add_argument("--thumbs", type=int, default=16, help="thumbnails asked for in each burst")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    tree = use_tree(args)
    out = measure(args.bursts, args.thumbs)
    med, top = out["median"], out["max"]
    print(f"tree {tree}: {args.bursts} bursts of {args.thumbs} thumbnails + 1 page, {os.cpu_count()} cores")
    print(
        "| page shown ms | all thumbnails ms | decode cores (mean) | decode cores (peak 20 ms) | longest GUI gap ms |"
    )
    print("|---|---|---|---|---|")
    print(
        row(
            *(
                f"{med[k]} (max {top[k]})"
                for k in ("page_ms", "thumbs_ms", "cores_mean", "cores_peak_20ms", "gui_gap_ms")
            )
        )
    )
    save_json(args.json, {"tree": str(tree), **out})


if __name__ == "__main__":
    main()

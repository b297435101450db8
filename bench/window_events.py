#!/usr/bin/env python
"""GUI-thread time per live-run event in a real main window, with the GIL free and with it contended.

A run's events reach the window as queued calls on the GUI thread: the handler runs (``route``),
then Qt lays out and paints what it changed (``Qt work``, the event loop after it). Each time Qt calls
back into Python (a ``paint``, a ``heightForWidth``, a ``boundingRect``) or a handler makes a call
that releases the GIL, the GUI thread must win the GIL back; while another thread runs Python (a
streaming run's loop, an indexing worker) each such return can wait up to the interpreter's switch
interval (5 ms). So the same event costs far more under load, in proportion to those crossings.

A :class:`MainWindow` (offscreen, 1600×1000) is fed the events of a 10-step VRAG-shaped run (30
thinking pieces, a search with five hits, the page shown, a region and its crop, the step's timing;
pages alternate between three documents and their images) once with no other thread running, then once in a fresh
process while a pure-Python thread spins. ``--tree`` measures another source tree (a baseline
checkout), so before and after run on one machine in one go:

    git worktree add /tmp/work/baseline 68efbc8
    .venv/bin/python bench/window_events.py --tree /tmp/work/baseline
    .venv/bin/python bench/window_events.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from _modes import add_mode_args, run_modes, spin, use_tree
from _report import row, save_json  # bench/ is the script's folder, first on sys.path
from _window import open_window

KINDS = ("ThinkDelta", "SearchStarted", "SearchResults", "ImageShown", "BBox", "Crop", "Timing")


def step_events(step: int, pages: list[Path]) -> list[Any]:
    """The events of one step of the VRAG-shaped run: thinking, a search, the page, a region, its
    crop, the step's timing. Pages alternate between three documents and their images."""
    from vrag_desktop.core.agents.events import (
        BBox,
        Crop,
        ImageShown,
        SearchResults,
        SearchStarted,
        ThinkDelta,
        Timing,
    )
    from vrag_desktop.core.search.hit import Hit

    doc, img = f"/x/doc{step % 3}.pdf", pages[step % 3]
    hits = tuple(
        Hit(0.5 + k / 100, f"doc{k}_{step}", f"/x/doc{k}.pdf", "page", page=k + 1, image=str(img))
        for k in range(5)
    )
    region = (10 + 20 * step, 20, 300, 400 + 30 * step)
    pic = str(img)
    return [
        *(ThinkDelta(step=step, content="word " * 20) for _ in range(30)),
        SearchStarted(step=step, content="payload weight"),
        SearchResults(step=step, content="payload weight", hits=hits, shown=(0,)),
        ImageShown(step=step, image=pic, raw=pic, width=1140, height=1612, source=doc, page=1),
        BBox(step=step, content="[1, 2, 300, 400]", box=(1, 2, 300, 400)),
        Crop(step=step, region=region, raw=pic, image=pic, width=290, height=380, source=doc, page=1),
        Timing(step=step, model_seconds=1.0, tool_seconds=0.2),
    ]


def open_run_window() -> tuple[Any, Any, list[Path]]:
    """(QApplication, a shown MainWindow with a run begun, the three page images)."""
    from PIL import Image

    app, _ctx, window, tmp = open_window()
    for _ in range(20):
        app.processEvents()
    pages = [tmp / f"page{i}.jpg" for i in range(3)]  # the evidence view keys pages by image path
    for page in pages:
        Image.new("RGB", (1140, 1612), "white").save(page)
    window.ask.begin("How heavy is the payload?")
    return app, window, pages


def feed_run(contended: bool, steps: int) -> dict[str, Any]:
    app, window, pages = open_run_window()
    stop = threading.Event()
    if contended:
        spin(stop)
    cost: dict[str, list[tuple[float, float]]] = {}

    def feed(ev: Any) -> None:
        t = time.perf_counter()
        window._route_event(ev)
        t1 = time.perf_counter()
        app.processEvents()
        t2 = time.perf_counter()
        cost.setdefault(type(ev).__name__, []).append(((t1 - t) * 1000, (t2 - t1) * 1000))

    for step in range(1, steps + 1):
        for ev in step_events(step, pages):
            feed(ev)
        time.sleep(0.11)  # the transcript's 100 ms timer
        app.processEvents()
    stop.set()
    return {
        kind: {
            "n": len(xs),
            "route_ms_p50": round(statistics.median(a for a, _ in xs), 2),
            "qt_ms_p50": round(statistics.median(b for _, b in xs), 2),
            "total_ms_max": round(max(a + b for a, b in xs), 2),
        }
        for kind, xs in cost.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    add_mode_args(ap)
    args = ap.parse_args()
    tree = use_tree(args)
    if args.one:
        print(json.dumps(feed_run(args.one == "contended", args.steps)))
        return
    out = run_modes(__file__, tree, ["--steps", str(args.steps)])
    print(f"tree {tree}: {args.steps} steps")
    print("| event | quiet: handler p50 ms | quiet: Qt work p50 ms | contended: handler p50 ms | "
          "contended: Qt work p50 ms | contended: max ms |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for kind in (k for k in KINDS if k in out["quiet"] and k in out["contended"]):
        q, c = out["quiet"][kind], out["contended"][kind]
        print(
            row(kind, q["route_ms_p50"], q["qt_ms_p50"], c["route_ms_p50"], c["qt_ms_p50"], c["total_ms_max"])
        )
    save_json(args.json, out)


if __name__ == "__main__":
    main()

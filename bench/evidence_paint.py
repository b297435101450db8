#!/usr/bin/env python
"""What one repaint of the evidence page costs the GUI thread, with a run's regions on it.

In a live run every new region or badge repaints the page view's whole viewport (its update mode),
so this cost is paid at each crop event, and again while a worker thread holds the GIL: each Python
``paint`` of an item must win the GIL back. A real :class:`PageView` (offscreen, 700×900) shows a
1140×1612 page with ``--regions`` crop regions and their badges; the viewport is repainted 60 times
on a quiet process, then 60 times while a pure-Python thread spins (the GIL contended). ``--tree``
measures another source tree (a baseline checkout), so before and after run on one machine in one go:

    git worktree add /tmp/work/baseline 68efbc8
    .venv/bin/python bench/evidence_paint.py --tree /tmp/work/baseline
    .venv/bin/python bench/evidence_paint.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _report import row, save_json  # bench/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def run(regions: int, repaints: int) -> dict[str, Any]:
    from PySide6.QtGui import QColor, QImage
    from PySide6.QtWidgets import QApplication

    from vrag_desktop.core.run.evidence import Region
    from vrag_desktop.qt.evidence.page_view import PageView

    app = QApplication.instance() or QApplication([])
    view = PageView()
    view.resize(700, 900)
    view.show()
    page = QImage(1140, 1612, QImage.Format.Format_RGB32)
    page.fill(QColor("white"))
    view.set_page((1140, 1612), page)
    view.set_regions(
        [
            Region(i + 1, 1 + i // 2, (20 + 37 * i, 30 + 61 * i, 420 + 23 * i, 330 + 59 * i), "")
            for i in range(regions)
        ]
    )
    view.select(regions)  # the latest region selected, as a live run leaves it
    for _ in range(5):
        app.processEvents()

    def repaint_ms() -> list[float]:
        out = []
        for _ in range(repaints):
            t = time.perf_counter()
            view.viewport().repaint()
            out.append((time.perf_counter() - t) * 1000)
        return out

    quiet = repaint_ms()
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        contended = repaint_ms()
    finally:
        stop.set()
        spinner.join()
    return {
        "regions": regions,
        "repaints": repaints,
        **{
            f"{label}_ms_{stat}": round(fn(xs), 2)
            for label, xs in (("quiet", quiet), ("contended", contended))
            for stat, fn in (("p50", statistics.median), ("max", max))
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--regions", type=int, default=10)
    ap.add_argument("--repaints", type=int, default=60)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to measure (default: this one)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    r = run(args.regions, args.repaints)
    print(f"tree {args.tree}: {r['regions']} regions, {r['repaints']} repaints each")
    print("| GIL | repaint p50 ms | repaint max ms |")
    print("|---|---|---|")
    for label in ("quiet", "contended"):
        print(row(label, r[f"{label}_ms_p50"], r[f"{label}_ms_max"]))
    save_json(args.json, r)


if __name__ == "__main__":
    main()

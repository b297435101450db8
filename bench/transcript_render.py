#!/usr/bin/env python
"""What the ask panel's transcript costs the GUI thread per redraw, as a run grows.

A VRAG-shaped run is fed to a real ask panel (offscreen; its transcript view since the view appends
streamed text): per step ~2,400 characters of thinking streamed in pieces, each raw piece followed
by the thinking inside it as the VRAG agent streams them, drawn every 50 pieces (the panel draws at
most every 100 ms), then a search with five hits, a region, a crop and the step's
timing. Each draw is timed in two parts: ``draw`` (building the HTML and handing it to Qt) and
``events`` (the layout and painting Qt then does in the event loop). Draws that only appended the
streamed text are reported apart from whole-document draws. ``--tree`` measures another source tree
(a baseline checkout), so before and after run on the same machine in one go:

    git worktree add /tmp/work/baseline 644651f
    .venv/bin/python bench/transcript_render.py --tree /tmp/work/baseline
    .venv/bin/python bench/transcript_render.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import row, save_json  # bench/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
SENTENCE = "the robot carries payloads across the warehouse floor and the table lists its battery life"


def run(steps: int, data: Path) -> dict[str, Any]:
    from PySide6.QtWidgets import QApplication

    from vrag_desktop.core.agents.events import (
        BBox,
        ContentDelta,
        Crop,
        SearchResults,
        SearchStarted,
        ThinkDelta,
        Timing,
    )
    from vrag_desktop.core.search.hit import Hit
    from vrag_desktop.qt.ask.ask_panel import AskPanel
    from vrag_desktop.qt.context import AppContext

    app = QApplication.instance() or QApplication([sys.argv[0]])
    panel = AskPanel(AppContext.for_dirs(data_dir=data / "data", config_dir=data / "cfg"))
    panel.resize(700, 900)
    panel.show()
    panel.begin("How heavy a load can the Atlas robot carry, and what is its battery life?")
    view = panel.view
    words = SENTENCE.split()
    draws: list[tuple[float, float, bool]] = []

    def draw() -> None:
        appended = getattr(view, "appends", 0)  # trees before the appending view: every draw is whole
        t0 = time.perf_counter()
        panel.render_transcript()
        t1 = time.perf_counter()
        app.processEvents()
        t2 = time.perf_counter()
        draws.append(((t1 - t0) * 1000, (t2 - t1) * 1000, getattr(view, "appends", 0) > appended))

    for step in range(1, steps + 1):
        for i in range(400):
            piece = words[i % len(words)] + ("\n" if i % 60 == 59 else " ")
            if i == 0:
                panel.transcript.apply(ContentDelta(step=step, content="<think>"))
            panel.transcript.apply(ContentDelta(step=step, content=piece))  # as the agent streams:
            panel.transcript.apply(ThinkDelta(step=step, content=piece))  # raw text, then the thinking
            if i % 50 == 0:
                draw()
        panel.transcript.apply(SearchStarted(step=step, content="atlas payload"))
        hits = tuple(
            Hit(0.5 + k / 100, f"doc{k}_{step}", f"/x/doc{k}.pdf", "page", page=k + 1) for k in range(5)
        )
        panel.transcript.apply(SearchResults(step=step, content="atlas payload", hits=hits, shown=(0,)))
        panel.transcript.apply(BBox(step=step, content="[1, 2, 3, 4]", box=(1.0, 2.0, 3.0, 4.0)))
        panel.transcript.apply(Crop(step=step, region=(10, 20, 300, 400), source="/x/doc1.pdf", page=2))
        panel.transcript.apply(Timing(step=step, model_seconds=1.0, tool_seconds=0.2))
        draw()
    out: dict[str, Any] = {"steps": steps, "blocks": len(panel.transcript.blocks)}
    for label, appended in (("append", True), ("whole", False)):
        xs = [d for d in draws if d[2] == appended]
        if xs:
            total = [a + b for a, b, _ in xs]
            out[label] = {
                "draws": len(xs),
                "draw_ms_p50": round(statistics.median(a for a, _, _ in xs), 2),
                "events_ms_p50": round(statistics.median(b for _, b, _ in xs), 2),
                "total_ms_p50": round(statistics.median(total), 2),
                "total_ms_max": round(max(total), 2),
            }
    panel.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to measure (default: this one)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        r = run(args.steps, Path(tmp))
    print(f"tree {args.tree}: {r['steps']} steps, {r['blocks']} blocks")
    print("| draws | n | draw p50 ms | Qt layout + paint p50 ms | total p50 ms | total max ms |")
    print("|---|---|---|---|---|---|")
    for label in (k for k in ("whole", "append") if k in r):
        x = r[label]
        print(
            row(label, x["draws"], x["draw_ms_p50"], x["events_ms_p50"], x["total_ms_p50"], x["total_ms_max"])
        )
    save_json(args.json, r)


if __name__ == "__main__":
    main()

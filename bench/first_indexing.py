#!/usr/bin/env python
"""GUI-thread gaps in the first second of the first indexing after start: embedder loaded or not.

Why: after the warm-up's imports, the first indexing still loaded the embedder on its worker, right
as the window showed the indexing banner and laid out the corpora panel. The load holds the GIL in
single C calls of ~20 ms (parses of the tokenizer's JSON) between long stretches of Python, so the
window's heartbeat missed beats. The app now loads the small default embedder in the warm-up thread
(``AppContext.start_warmup``); this measures what that buys, in one run.

Each trial is a fresh process: a real :class:`MainWindow` (offscreen, 1600×1000), the warm-up's
imports done, then, in the ``loaded`` mode only, ``ctx.embedder()``; the window idles 2 s, a 5 ms
precise ``QTimer`` heartbeat starts and ``corpora.add_and_index`` indexes generated PDFs (the stall
bench's, 10 PDFs × 10 pages). The longest gap between beats in the first 1.3 s is the longest freeze.
Modes alternate (not loaded, loaded, …) so the machine's other load falls on both alike.

    .venv/bin/python bench/first_indexing.py [--trials 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import row, save_json  # bench/ is the script's folder, first on sys.path
from _window import open_window

ROOT = Path(__file__).resolve().parents[1]
WINDOW_S = 1.3


def one_trial(docs: Path, loaded: bool) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from PySide6.QtCore import Qt, QTimer

    from vrag_desktop.core import warmup

    app, ctx, window, _tmp = open_window()
    warmup.warm()
    if loaded:
        ctx.embedder()
    end = time.perf_counter() + 2
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.005)
    beats: list[float] = []
    heartbeat = QTimer()
    heartbeat.setTimerType(Qt.TimerType.PreciseTimer)
    heartbeat.setInterval(5)
    heartbeat.timeout.connect(lambda: beats.append(time.perf_counter()))
    t0 = time.perf_counter()
    beats.append(t0)
    heartbeat.start()
    window.corpora.add_and_index("first", [docs])
    QTimer.singleShot(int(WINDOW_S * 1000), app.quit)
    app.exec()
    heartbeat.stop()
    window.corpora.cancel_indexing()
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(beats) if b - t0 <= WINDOW_S]
    return {"max_gap_ms": round(max(gaps), 1), "over_25ms": sum(g > 25 for g in gaps), "beats": len(gaps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4, help="trials per mode")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--one", choices=("cold", "loaded"), help=argparse.SUPPRESS)  # a child's mode
    ap.add_argument("--docs", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_trial(args.docs, args.one == "loaded")))
        os._exit(0)  # the cancelled job's thread is left behind: nothing to wait for
    import gui_stall

    work = Path(tempfile.mkdtemp())
    gui_stall.prepare(work, 10, 100, 0, 1)
    out: dict[str, list[dict[str, Any]]] = {"cold": [], "loaded": []}
    for _ in range(args.trials):
        for mode in ("cold", "loaded"):
            cmd = [sys.executable, __file__, "--one", mode, "--docs", str(work / "docs")]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            out[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"longest GUI-thread gap in the first {WINDOW_S} s of the first indexing, {args.trials} trials each"
    )
    print("| embedder at the first indexing | longest gap per trial (ms) | median | gaps > 25 ms per trial |")
    print("|---|---|---|---|")
    for mode, label in (("cold", "loaded by the job (before)"), ("loaded", "already loaded (warm-up)")):
        runs = out[mode]
        maxes = [r["max_gap_ms"] for r in runs]
        print(row(label, " / ".join(f"{m:.1f}" for m in maxes), f"{statistics.median(maxes):.1f}",
                  " / ".join(str(r["over_25ms"]) for r in runs)))  # fmt: skip
    save_json(args.json, out)


if __name__ == "__main__":
    main()

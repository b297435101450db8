#!/usr/bin/env python
"""GUI-thread time to show one more saved run in History, with N runs listed already.

After every run the main window reads the run list again and hands it to the History table. When
the table was a Python model behind a sorting proxy, every cell Qt read (to sort, filter, paint) was
a call into Python, and while another thread runs Python each such call can wait for the GIL.

This feeds a real :class:`MainWindow`'s History panel N runs (timed too: the first listing, as at
the app's start), then N+1 (the new run). It times the hand-over (``set``: the model's update, the
proxy's sort) and the event loop after it (``Qt``: layout and paint of the shown table), quietly and
then in a fresh process with a pure-Python thread spinning beside it (the worst case of GIL
contention). ``--tree`` measures another source tree, so before and after run on one machine in one
go:

    git worktree add /tmp/work/baseline 964e913
    .venv/bin/python bench/history_update.py --tree /tmp/work/baseline
    .venv/bin/python bench/history_update.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from _modes import add_mode_args, run_modes, spin, use_tree
from _report import row, save_json  # bench/ is the script's folder, first on sys.path
from _window import open_window


def one(contended: bool, sizes: list[int], repeat: int) -> dict[str, Any]:
    from vrag_desktop.core.run.store import RunSummary

    app, _ctx, window, _tmp = open_window()
    panel = window.history
    window.history_dock.raise_()  # shown, as at the app's start
    for _ in range(20):
        app.processEvents()

    def summary(i: int) -> RunSummary:
        return RunSummary(
            id=f"run-{i:05d}",
            agent="vrag",
            question=f"What is the payload of robot {i}?",
            status="answered",
            started_at=1.7e9 + i * 60,
            answer=f"{i} kg",
            model="Qwen/Qwen2.5-VL-7B-Instruct",
            steps=5,
        )

    if contended:
        spin()
    out: dict[str, Any] = {}
    for n in sizes:
        runs = [summary(i) for i in range(n)]
        t0 = time.perf_counter()
        panel._listed((runs, 0))  # a new list (a reset): what the app does once at start
        app.processEvents()
        first = (time.perf_counter() - t0) * 1000
        sets, qts = [], []
        for _ in range(repeat):
            runs = [*runs, summary(len(runs))]
            t0 = time.perf_counter()
            panel._listed((runs, 0))
            t1 = time.perf_counter()
            app.processEvents()
            t2 = time.perf_counter()
            sets.append((t1 - t0) * 1000)
            qts.append((t2 - t1) * 1000)
        out[str(n)] = {
            "first_listing_ms": round(first, 2),
            "set_ms_median": round(statistics.median(sets), 2),
            "qt_ms_median": round(statistics.median(qts), 2),
            "total_ms_max": round(max(a + b for a, b in zip(sets, qts, strict=True)), 2),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50,200,1000", help="runs already listed, comma-separated")
    ap.add_argument("--repeat", type=int, default=5)
    add_mode_args(ap)
    args = ap.parse_args()
    tree = use_tree(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.one:
        print(json.dumps(one(args.one == "contended", sizes, args.repeat)))
        return
    res = run_modes(__file__, tree, ["--sizes", args.sizes, "--repeat", str(args.repeat)])
    print(f"tree {tree}: one run more, {args.repeat} times")
    print(
        "| runs listed | quiet: first listing ms | quiet: set ms | quiet: Qt ms | contended: set ms "
        "| contended: Qt ms | contended: max ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        q, c = res["quiet"][str(n)], res["contended"][str(n)]
        print(
            row(
                n,
                q["first_listing_ms"],
                q["set_ms_median"],
                q["qt_ms_median"],
                c["set_ms_median"],
                c["qt_ms_median"],
                c["total_ms_max"],
            )
        )
    save_json(args.json, res)


if __name__ == "__main__":
    main()

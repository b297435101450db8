#!/usr/bin/env python
"""GUI-thread CPU of the Training dock's plots taking new steps (issue 31, item 3).

A real ``MetricPlots`` (offscreen, 560×800, in a tab widget beside a Log tab, as in the run view) is
fed rows of the metrics a GRPO run writes. Timed, with the GUI thread's own CPU (``time.thread_time``,
which a loaded machine inflates less than wall time), until the events that follow are processed
(the redraw and its paint):

- **redraw**: a new step while the Plots tab is shown (what the 250 ms redraw timer does);
- **switch**: the Plots tab shown again after a step came while the Log tab was shown (the tab
  switch, its first paint, and the redraw of the new step, however they are split into turns).

Every 3rd or so step the x axis grows (×1.5), which re-lays out every plot's step axis: the max
column. ``--tree DIR`` measures another source tree too (e.g. the commit before a change, from
``git worktree add``), alternating with this one, each in its own process.

    .venv/bin/python bench/plot_redraw.py [--steps 40] [--rounds 2] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(steps: int) -> dict[str, list[float]]:
    """One process's figures (the tree is whatever ``vrag_desktop`` imports from)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import random

    from PySide6.QtWidgets import QApplication, QLabel, QTabWidget

    app = QApplication.instance() or QApplication([sys.argv[0]])
    from vrag_desktop.qt.training.plots import MetricPlots

    rng = random.Random(1)

    def row(step: int) -> dict[str, float]:
        keys = ("reward", "reward/format", "accuracy", "kl", "entropy", "loss")
        return {"step": step, **{k: rng.random() for k in keys}, "response_length": 100 * rng.random()}

    def settle(turns: int) -> None:
        for _ in range(turns):
            app.processEvents()
            time.sleep(0.002)

    tabs = QTabWidget()
    plots = MetricPlots()
    tabs.addTab(plots, "Plots")
    tabs.addTab(QLabel("log"), "Log")
    tabs.resize(560, 800)
    tabs.show()
    plots.add_rows([row(s) for s in range(1, 5)])
    plots.redraw()
    end = time.monotonic() + 60
    while not plots.built and time.monotonic() < end:
        settle(1)
    settle(50)
    step, redraw, switch = 5, [], []
    for _ in range(steps // 2):
        plots.add_rows([row(step)])
        step += 1
        t = time.thread_time()
        plots.redraw()
        for _ in range(3):
            app.processEvents()
        redraw.append((time.thread_time() - t) * 1000)
        settle(5)
        tabs.setCurrentIndex(1)
        settle(5)
        plots.add_rows([row(step)])
        step += 1
        t = time.thread_time()
        tabs.setCurrentIndex(0)
        for _ in range(3):
            app.processEvents()
        plots._timer.stop()  # the redraw a timer would make later, made now: both counted
        plots.redraw()
        for _ in range(3):
            app.processEvents()
        switch.append((time.thread_time() - t) * 1000)
        settle(5)
    return {"redraw_ms": redraw, "switch_ms": switch}


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {max(values):.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tree", type=Path, help="a baseline source tree, measured alternately")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "plot_redraw.json")
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(measure(args.steps)), flush=True)
        return
    trees = [("this tree", ROOT)] + ([("baseline tree", args.tree.resolve())] if args.tree else [])
    got: dict[str, dict[str, list[float]]] = {name: {"redraw_ms": [], "switch_ms": []} for name, _ in trees}
    load = [os.getloadavg()]
    for r in range(args.rounds):
        for name, tree in trees if r % 2 == 0 else trees[::-1]:
            env = {**os.environ, "PYTHONPATH": str(tree), "QT_QPA_PLATFORM": "offscreen"}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--steps", str(args.steps)]
            out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=600)
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                raise SystemExit(f"{name}: no result\n{out.stderr[-2000:]}")
            for k, v in json.loads(line[len("RESULT ") :]).items():
                got[name][k] += v
    load.append(os.getloadavg())
    print(f"load average at start {load[0]}, at end {load[1]}\n")
    print(
        "| tree | a new step while shown, ms CPU median/max | Plots shown again after a step, ms CPU median/max |"
    )
    print("|---|---|---|")
    for name, _ in trees:
        print(f"| {name} | {summary(got[name]['redraw_ms'])} | {summary(got[name]['switch_ms'])} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"load": load, "trees": {n: str(t) for n, t in trees}, "results": got}, indent=1)
    )


if __name__ == "__main__":
    main()

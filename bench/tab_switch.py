#!/usr/bin/env python
"""GUI-thread CPU of one dock tab switch, the app otherwise idle (issue 31, item 10).

A real ``MainWindow`` (offscreen, 1280×800, a fresh data directory) with the side docks (History,
Datasets, Evaluations, Training, Runtime) as one group of tabs; each is raised in turn and the events
that follow are processed (layout, first show, paint). What is timed is the GUI thread's own CPU
(``time.thread_time``), which a loaded machine does not inflate the way it inflates wall time; the
first round is each panel's first show. ``bench/gui_stall.py`` times the same switches while the
app indexes, streams and trains.

A second figure counts the GUI thread's CPU in the 0.5 s after each raise too (a panel reads what it
shows off the GUI thread when raised, and lists it when the reading comes back); ``--training-runs N``
gives the Training dock N finished runs to list (a fresh data directory has none).

    .venv/bin/python bench/tab_switch.py [--rounds 3] [--training-runs 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--training-runs", type=int, default=0, help="finished training runs to list")
    args = ap.parse_args()
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0]])
    from vrag_desktop.core.settings import AppSettings, save_settings
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.main_window import MainWindow

    tmp = Path(tempfile.mkdtemp(prefix="vrag-tabs-"))
    save_settings(AppSettings(first_run_done=True), tmp / "cfg")
    ctx = AppContext.for_dirs(data_dir=tmp / "data", config_dir=tmp / "cfg")
    if args.training_runs:
        from vrag_desktop.core.training.config import TrainConfig
        from vrag_desktop.core.training.rundir import TrainRun

        config = TrainConfig.from_mapping({"model": "m", "dataset": "d.json"})
        for i in range(args.training_runs):
            run = TrainRun.create(ctx.layout.training / f"run{i:04d}", config)
            run.write_state(status="stopped", step=3)
            for step in range(1, 4):
                run.append_metrics({"step": step, "reward": step / 10})
    w = MainWindow(ctx, first_run=False)
    w.resize(1280, 800)
    w.show()
    for _ in range(20):  # the window settles (its start-up look-ups end)
        app.processEvents()
        time.sleep(0.05)
    docks = [w.history_dock, w.datasets_dock, w.evaluations_dock, w.training_dock, w.runtime_dock]
    for d in docks:
        d.show()
    for d in docks[1:]:
        w.tabifyDockWidget(docks[0], d)
    app.processEvents()
    rows: dict[str, list[float]] = {d.windowTitle(): [] for d in docks}
    after: dict[str, list[float]] = {d.windowTitle(): [] for d in docks}
    for _ in range(args.rounds):
        for d in docks:
            c0 = time.thread_time()
            d.raise_()
            app.processEvents()
            app.processEvents()
            rows[d.windowTitle()].append((time.thread_time() - c0) * 1000)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                app.processEvents()
                time.sleep(0.002)
            after[d.windowTitle()].append((time.thread_time() - c0) * 1000)
    w.close()
    print(
        f"load average {tuple(round(x, 2) for x in os.getloadavg())}; training runs listed: {args.training_runs}\n"
    )
    print(
        "| tab | first show, ms CPU | later, median ms CPU | in the 0.5 s after, median ms CPU |\n|---|---|---|---|"
    )
    for name, ms in rows.items():
        later = statistics.median(ms[1:]) if len(ms) > 1 else float("nan")
        rest = statistics.median(after[name][1:]) if len(ms) > 1 else float("nan")
        print(f"| {name} | {ms[0]:.1f} | {later:.1f} | {rest:.1f} |")


if __name__ == "__main__":
    main()

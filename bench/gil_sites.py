#!/usr/bin/env python
"""Where the GUI thread takes the GIL back while a live run's events are drawn, by call site.

While another thread runs Python, each time the GUI thread needs the GIL back it can wait up to the
interpreter's switch interval (5 ms): when Qt calls a Python override (a ``paintEvent``, a
``resizeEvent``, an event filter, a timer's slot) and when a Python call into Qt that released the
GIL returns. A profiler cannot see these waits (no Python runs during them). ``bench/gil_shim.c``,
built here and loaded with ``LD_PRELOAD``, counts them: each site is the first frame outside the
Python bindings, the two named Qt frames above it and, for a return, the Python line.

A real :class:`MainWindow` (offscreen) is fed :mod:`window_events`'s 10-step run; recording is on
while the chosen events are handled and drawn (steps 3 on, the window warmed up). ``--contended``
adds a spinning Python thread, so the waits are real ones; without it the counts are exact and the
waits tiny. Linux with gcc; the shim only ever runs in this bench's own process:

    .venv/bin/python bench/gil_sites.py --events BBox,Crop,Timing [--contended] [--tree DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHIM = HERE / "out" / "gil_shim.so"


def build() -> Path:
    """Compile the shim against this interpreter's headers (once per change of the source)."""
    source = HERE / "gil_shim.c"
    if SHIM.exists() and SHIM.stat().st_mtime >= source.stat().st_mtime:
        return SHIM
    SHIM.parent.mkdir(parents=True, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    cmd = ["gcc", "-O1", "-shared", "-fPIC", "-Wall", f"-I{include}", "-o", str(SHIM), str(source), "-ldl"]
    subprocess.run(cmd, check=True)
    return SHIM


def record(kinds: set[str], steps: int, contended: bool, out: Path) -> int:
    """Feed the run in this process (the shim preloaded); returns how many events were recorded."""
    from _modes import spin
    from window_events import open_run_window, step_events

    shim = ctypes.CDLL(str(SHIM))
    app, window, pages = open_run_window()
    stop = threading.Event()
    if contended:
        spin(stop)
    shim.gil_shim_reset()
    recorded = 0
    for step in range(1, steps + 1):
        for ev in step_events(step, pages):
            on = type(ev).__name__ in kinds and step > 2
            shim.gil_shim_record(int(on))
            window._route_event(ev)
            app.processEvents()
            shim.gil_shim_record(0)
            recorded += on
        time.sleep(0.11)  # the transcript's 100 ms timer
        app.processEvents()
    stop.set()
    if shim.gil_shim_dump(str(out).encode()) != 0:
        raise OSError(f"cannot write {out}")
    return recorded


def report(path: Path, events: int, top: int) -> None:
    """The sites, most waited first, per recorded event."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        kind, n, wait, python, lib, frame, above1, above2 = line.split("\t")
        rows.append((float(wait), int(n), kind, python, Path(lib).name, frame, above1, above2))
    names = [r[5] for r in rows] + [r[6] for r in rows] + [r[7] for r in rows]
    plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    demangled = dict(zip(names, plain.stdout.splitlines(), strict=False)) if plain.returncode == 0 else {}
    for kind in ("entry", "return"):  # C++ calling Python; a Python call into Qt returning
        n = sum(r[1] for r in rows if r[2] == kind)
        wait = sum(r[0] for r in rows if r[2] == kind)
        print(
            f"{kind:6s}: {n / events:5.1f} GIL takes, {wait / events:6.2f} ms waited, per event ({events} events)"
        )
    print("| per event | waited ms | kind | Python line | where (library, then Qt frames) |")
    print("|---|---|---|---|---|")
    for wait, n, kind, python, lib, frame, above1, above2 in sorted(rows, reverse=True)[:top]:
        python = python.replace(str(ROOT) + "/", "")
        qt = " ← ".join(demangled.get(f, f)[:60] for f in (frame, above1, above2) if f != "?")
        print(f"| {n / events:.1f} | {wait / events:.2f} | {kind} | {python} | {lib}: {qt} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", default="BBox,Crop,Timing", help="event kinds to record, comma-separated")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--contended", action="store_true", help="a Python thread spins meanwhile")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to measure (default: this one)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "gil_sites.tsv")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    kinds = set(args.events.split(","))
    if args.child:
        sys.path.insert(0, str(args.tree.resolve()))
        print(record(kinds, args.steps, args.contended, args.out))
        return
    env = {
        **os.environ,
        "LD_PRELOAD": str(build()),
        "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
    }
    done = subprocess.run(
        [sys.executable, __file__, *sys.argv[1:], "--child"], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(done.stderr[-2000:])
    report(args.out, int(done.stdout.strip().splitlines()[-1]), args.top)


if __name__ == "__main__":
    main()

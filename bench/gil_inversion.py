#!/usr/bin/env python
"""How long a thread at normal priority waits for the GIL when its holder runs at lower priority.

Why: the app runs its indexing worker (and the start-up warm-up) at nice 10 so that the GUI thread
wins the cores. But a Python thread at nice 10 also *holds the GIL* between its native calls, and a
thread waiting for the GIL waits until the holder gets a core again to let go. When processes at
normal priority keep both cores busy (a vLLM server streaming, the scripted server of
``gui_stall.py``), the low-priority holder is slow to get one: a priority inversion. This measures
it without the app: the main thread wakes every 5 ms (needing the GIL, as the GUI thread does for
each Python slot) while a worker thread runs Python at nice 0 or nice 10, next to CPU-bound
processes at nice 0 or nice 10. A process of its own (no GIL shared) waking every 2 ms is the
machine's floor.

    .venv/bin/python bench/gil_inversion.py [--seconds 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WAKER = r"""
import os, sys, threading, time
nice, seconds, period = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
spin = sys.argv[4] == "1"
def worker():
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    x = 0
    while True:
        for i in range(1000):
            x += i
if spin:
    threading.Thread(target=worker, daemon=True).start()
    time.sleep(0.5)
late = []
expected = time.perf_counter() + period
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    time.sleep(max(0.0, expected - time.perf_counter()))
    now = time.perf_counter()
    late.append((now - expected) * 1000)
    expected = now + period
late.sort()
n = len(late)
print(f"{late[n // 2]:.1f} {late[int(n * 0.99)]:.1f} {late[-1]:.1f} {sum(v > 20 for v in late)} {n}")
"""


def measure(nice: int | None, seconds: float) -> list[str]:
    """p50, p99, max ms late and wake-ups > 20 ms late; ``nice`` None: no worker (a process alone)."""
    spin = nice is not None
    period = "0.005" if spin else "0.002"
    args = [sys.executable, "-c", WAKER, str(nice or 0), str(seconds), period, "1" if spin else "0"]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()


def hogs(count: int, nice: int) -> list[subprocess.Popen[bytes]]:
    code = f"import os; os.nice({nice}); exec('while True: pass')"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0)
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores, {args.seconds:.0f} s per line\n")
    print("| CPU-bound processes | Python worker thread | p50 ms late | p99 | max | wake-ups > 20 ms late |")
    print("|---|---|---|---|---|---|")
    for count, hog_nice in ((0, 0), (2, 10), (2, 0)):
        procs = hogs(count, hog_nice)
        time.sleep(0.5)
        try:
            for nice in (None, 0, 10):
                p50, p99, top, over, n = measure(nice, args.seconds)
                who = "none (a process alone, 2 ms)" if nice is None else f"nice {nice}"
                load = f"{count} at nice {hog_nice}" if count else "none"
                print(f"| {load} | {who} | {p50} | {p99} | {top} | {over} of {n} |", flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()

"""How long another thread is paused while torch & co. are imported: plain imports vs ``core/warmup``.

A thread that wakes every 2 ms records the gaps between its wake-ups (a gap = the GIL held
elsewhere, or no CPU) while a second thread imports torch, transformers, onnxruntime and cv2 —
``plain``: as the indexing worker used to (collector paused, as ``long_lived`` does), ``warm``:
``warmup.preload_native()`` (GIL-free ``dlopen``) first. Missing packages are skipped.

    .venv/bin/python bench/warmup_gil.py plain
    .venv/bin/python bench/warmup_gil.py warm
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vrag_desktop.core import warmup
from vrag_desktop.core.long_lived import long_lived


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "warm"
    stage = ["-"]

    def work() -> None:
        if mode == "warm":
            stage[0] = "native"
            warmup.preload_native()
        with long_lived():
            for name in warmup.MODULES:
                if importlib.util.find_spec(name):
                    stage[0] = name
                    importlib.import_module(name)

    thread = threading.Thread(target=work)
    gaps: list[tuple[float, str]] = []
    last = t0 = time.perf_counter()
    thread.start()
    while thread.is_alive():
        time.sleep(0.002)
        now = time.perf_counter()
        gaps.append(((now - last) * 1000, stage[0]))
        last = now
    gaps.sort()
    print(
        f"{mode}: {last - t0:.1f} s; longest pauses {[(round(g), s) for g, s in gaps[-4:]]}; "
        f"pauses > 50 ms: {sum(g > 50 for g, _ in gaps)}"
    )


if __name__ == "__main__":
    main()

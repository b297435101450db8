"""Screenshots of the Training dock over real training runs (docs/screenshots/training*.png).

Copies finished runs (by default the ones ``bench/trainer_learning.py`` writes under
``bench/out/trainer_learning/``) into a throw-away data directory, opens the main window and
grabs the Training dock: the plots of a GRPO run, and the samples of a GGPO run with their masked
segments. Run under a display: ``xvfb-run -a .venv/bin/python scripts/screenshot_training.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def settle(app: object, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default=str(ROOT / "bench" / "out" / "trainer_learning"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = ap.parse_args()
    runs = Path(args.runs)
    work = Path(tempfile.mkdtemp(prefix="vrag-train-shots-"))
    os.environ["VRAG_DESKTOP_DATA_DIR"] = str(work / "data")
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = str(work / "config")
    for name in ("vrag_grpo", "vimrag_ggpo"):
        if not (runs / name / "metrics.jsonl").is_file():
            raise SystemExit(f"no run {runs / name}: run bench/trainer_learning.py first")
        shutil.copytree(
            runs / name, work / "data" / "training" / name, ignore=shutil.ignore_patterns("checkpoints")
        )

    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.main_window import MainWindow

    ctx = AppContext.load()
    window = MainWindow(ctx, first_run=False)
    window.resize(1600, 1000)
    window.show()
    dock = window.training_dock
    dock.setFloating(True)
    dock.resize(1400, 900)
    dock.show()
    dock.raise_()
    panel = window.training
    panel.refresh()
    settle(app, 2.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    panel.select(ctx.layout.training / "vrag_grpo")
    settle(app, 4.0)
    dock.grab().save(str(out / "training.png"))
    print("wrote", out / "training.png")
    panel.select(ctx.layout.training / "vimrag_ggpo")
    settle(app, 2.0)
    view = panel.findChild(object, "trainingSamples")
    tabs = view.parent().parent() if view is not None else None
    if tabs is not None and hasattr(tabs, "setCurrentWidget"):
        tabs.setCurrentWidget(view)
    settle(app, 3.0)
    dock.grab().save(str(out / "training-samples.png"))
    print("wrote", out / "training-samples.png")
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

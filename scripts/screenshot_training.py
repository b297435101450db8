"""Screenshots of the Training dock over real training runs (docs/screenshots/training*.png).

Copies finished runs (by default the ones ``bench/trainer_learning.py`` writes under
``bench/out/trainer_learning/``) into a throw-away data directory, opens the main window and
grabs the Training dock: the plots of a GRPO run, and the samples of a GGPO run with their masked
segments; then opens a GGPO sample in the reasoning graph (masked nodes and the legend). Run under a
display: ``xvfb-run -a .venv/bin/python scripts/screenshot_training.py``.

``--validated RUN`` also grabs training-validation.png: a run that validates (its validation curve
beside the training reward, the best step marked, *Export best*), e.g. the GRPO run that
``trainer/tests/test_learning_rise.py`` leaves under ``--basetemp``: copied whole, checkpoints too,
so its best checkpoint can be exported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
    ap.add_argument("--validated", default=None, help="a run folder that validates (training-validation.png)")
    args = ap.parse_args()
    runs = Path(args.runs)
    work = Path(tempfile.mkdtemp(prefix="vrag-train-shots-"))
    os.environ["VRAG_DESKTOP_DATA_DIR"] = str(work / "data")
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = str(work / "config")
    validated = Path(args.validated) if args.validated else None
    have = all((runs / name / "metrics.jsonl").is_file() for name in ("vrag_grpo", "vimrag_ggpo"))
    if not have and validated is None:
        raise SystemExit(f"no runs in {runs}: run bench/trainer_learning.py first")
    for name in ("vrag_grpo", "vimrag_ggpo") if have else ():
        shutil.copytree(
            runs / name, work / "data" / "training" / name, ignore=shutil.ignore_patterns("checkpoints")
        )
    if validated is not None:
        if not (validated / "val_metrics.jsonl").is_file():
            raise SystemExit(f"{validated} has no val_metrics.jsonl: not a run that validates")
        shutil.copytree(validated, work / "data" / "training" / "grpo_validated")

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
    if validated is not None:
        panel.select(ctx.layout.training / "grpo_validated")
        settle(app, 4.0)
        dock.grab().save(str(out / "training-validation.png"))
        print("wrote", out / "training-validation.png")
    if not have:
        print(f"no runs in {runs} (bench/trainer_learning.py): training.png and the GGPO shots skipped")
        window.close()
        return 0
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
    ggpo_sample(app, window, ctx.layout.training / "vimrag_ggpo" / "samples", out)
    window.close()
    return 0


def ggpo_sample(app: object, window: object, samples: Path, out: Path) -> None:
    """A positive GGPO rollout with a node masked off the answer path, opened in the graph dock."""
    chosen = None
    for run in sorted(samples.iterdir()):
        meta = run / "run.json"
        if not meta.is_file():
            continue
        segments = json.loads(meta.read_text()).get("settings", {}).get("training", {}).get("segments", [])
        masked = [
            s["node_id"] for s in segments if s.get("reason", "").startswith("off") and s.get("node_id")
        ]
        if masked:  # a positive rollout: a trained search beside one masked off the answer path
            chosen = (run.name, masked[0])
            break
    if chosen is None:
        print("no GGPO sample with a masked node: skipped training-ggpo-graph.png")
        return
    w: Any = window
    w.training_dock.hide()
    w.open_sample(samples, chosen[0])
    dock = w.graph_dock
    dock.setFloating(True)
    dock.resize(1150, 560)
    settle(app, 3.0)
    w.graph_view.fit()
    w.graph_scene.select_node(chosen[1])
    settle(app, 1.0)
    dock.grab().save(str(out / "training-ggpo-graph.png"))
    print("wrote", out / "training-ggpo-graph.png")


if __name__ == "__main__":
    raise SystemExit(main())

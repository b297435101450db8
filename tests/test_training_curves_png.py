"""scripts/training_curves.py: the pictures of docs/trainer.md's training curves are drawn by the
Training panel's own plots, offscreen, from a run's files; a run without metrics is named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "training_curves.py"


def _run(folder: Path, train: list[float], val: dict[int, float]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": i + 1, "reward": r, "reward/format": r}) + "\n" for i, r in enumerate(train)
        )
    )
    best = max(val, key=lambda s: (val[s], -s))
    (folder / "val_metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "val/reward": v, "best": s == best and s > 0}) + "\n"
            for s, v in val.items()
        )
    )
    return folder


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_two_runs_are_drawn_one_row_each_with_their_curves(tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    a = _run(tmp_path / "a", [0.0, 0.1, 0.2, 0.3], {0: 0.0, 2: 0.1, 4: 0.3})
    b = _run(tmp_path / "b", [0.2, 0.1, 0.1, 0.0], {0: 0.2, 4: 0.1})
    out = tmp_path / "curves.png"
    done = _script(str(a), str(b), "--label", "GRPO", "--label", "GGPO", "--out", str(out))
    assert done.returncode == 0, done.stderr
    image = QImage(str(out))
    assert not image.isNull() and image.width() >= 800
    one = _script(str(a), "--out", str(tmp_path / "one.png"))
    assert one.returncode == 0, one.stderr
    single = QImage(str(tmp_path / "one.png"))
    assert image.height() > 1.8 * single.height()  # a row per run
    # the plots are drawn, not blank: many colours (curves, points, text), not a page of one
    colours = {image.pixel(x, y) for x in range(0, image.width(), 3) for y in range(0, image.height(), 3)}
    assert len(colours) > 20


def test_a_folder_without_metrics_and_an_unknown_plot_are_named(tmp_path: Path) -> None:
    done = _script(str(tmp_path / "nothing"), "--out", str(tmp_path / "x.png"))
    assert done.returncode != 0 and "is no run folder (no metrics.jsonl)" in done.stderr
    run = _run(tmp_path / "a", [0.1], {0: 0.0})
    done = _script(str(run), "--plots", "Rewards", "--out", str(tmp_path / "x.png"))
    assert done.returncode != 0 and "no plot ['Rewards']" in done.stderr
    assert not (tmp_path / "x.png").exists()

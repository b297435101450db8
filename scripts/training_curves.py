"""Draw training runs' curves to a PNG with the Training panel's own plot widget, offscreen.

Why this way: the pictures in docs/trainer.md show what a person sees in the Training panel (the
training reward with its parts, the validation reward beside it, the Validation plot with the best
step), drawn by the same code (``qt/training/plots.py``), so no plotting library of its own is
needed. Each run is a row of the panel's plots named by ``--plots`` (default: Reward and
Validation), under the run's label; several runs are stacked, one row each.

    .venv/bin/python scripts/training_curves.py RUN [RUN ...] --out docs/img/NAME.png
        [--label TEXT ...] [--plots Reward,Validation] [--dark]

``RUN`` is a run folder (``metrics.jsonl``, ``val_metrics.jsonl``) or a run's name under the data
folder's ``training/``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def run_folder(name: str) -> Path:
    """A run's folder: the path itself, or a run of that name under the data folder."""
    path = Path(name).expanduser()
    if (path / "metrics.jsonl").is_file():
        return path
    from vrag_desktop.core.paths import DataLayout

    under = DataLayout.resolve(None).training / name
    if (under / "metrics.jsonl").is_file():
        return under
    raise SystemExit(
        f"training_curves: {name} is no run folder (no metrics.jsonl) and no run under {under.parent}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run folders or run names")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    p.add_argument("--label", action="append", default=[], help="a title per run (default: its name)")
    p.add_argument("--plots", default="Reward,Validation", help="the panel's plots to show, by title")
    p.add_argument("--dark", action="store_true", help="the dark theme")
    args = p.parse_args(argv)
    folders = [run_folder(r) for r in args.runs]
    labels = args.label + [f.name for f in folders[len(args.label) :]]

    from PySide6.QtCore import QCoreApplication, QElapsedTimer, QPoint, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtWidgets import QApplication

    from vrag_desktop.core.training.rundir import TrainRun
    from vrag_desktop.qt.infra.theme import apply_theme, color
    from vrag_desktop.qt.training.plots import PLOTS, MetricPlots

    titles = [t.strip() for t in args.plots.split(",") if t.strip()]
    unknown = sorted(set(titles) - {t for t, _c in PLOTS})
    if unknown:
        raise SystemExit(f"training_curves: no plot {unknown}; the panel's are {[t for t, _c in PLOTS]}")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    apply_theme(app, "dark" if args.dark else "light")
    grids: list[MetricPlots] = []
    for folder in folders:
        run = TrainRun(folder)
        grid = MetricPlots()
        grid.set_live(False)  # an ended run: its steps end to end
        grid.add_rows(run.metrics())
        grid.add_rows(run.val_metrics() if run.val_metrics_path.exists() else [])
        grid.resize(900, 1100)  # the panel's two columns of plots, each ~450 px wide
        grid.show()
        grid.redraw()  # starts the lazy build
        grids.append(grid)
    clock = QElapsedTimer()
    clock.start()
    while not all(g.built for g in grids) and clock.elapsed() < 20_000:
        QCoreApplication.processEvents()
    if not all(g.built for g in grids):
        raise SystemExit("training_curves: the plots were not built within 20 s")
    for grid in grids:
        grid.redraw()
    QCoreApplication.processEvents()
    rows = []  # per run: (label, the pictures of its plots)
    for grid, label in zip(grids, labels, strict=True):
        shot = grid.view.grab()
        pics = []
        for title in titles:
            rect = grid.view.mapFromScene(grid.plots[title].sceneBoundingRect()).boundingRect()
            pics.append(shot.copy(rect).toImage())
        rows.append((label, pics))
    label_h = 26
    width = max(sum(p.width() for p in pics) for _l, pics in rows)
    height = sum(label_h + max(p.height() for p in pics) for _l, pics in rows)
    out = QImage(width, height, QImage.Format.Format_RGB32)
    out.fill(color("surface"))
    painter = QPainter(out)
    painter.setPen(color("text"))
    font = painter.font()
    font.setBold(True)
    painter.setFont(font)
    y = 0
    for label, pics in rows:
        painter.drawText(8, y, width - 16, label_h, Qt.AlignmentFlag.AlignVCenter, label)
        y += label_h
        x = 0
        for pic in pics:
            painter.drawImage(QPoint(x, y), pic)
            x += pic.width()
        y += max(p.height() for p in pics)
    painter.end()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not out.save(str(args.out)):
        raise SystemExit(f"training_curves: could not write {args.out}")
    print(f"wrote {args.out} ({', '.join(str(f) for f in folders)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

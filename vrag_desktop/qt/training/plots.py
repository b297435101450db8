"""Live plots of a training run's metrics against step, with pyqtgraph.

Why this shape: a run writes one row per step and may reach 10,000 steps; the panel polls once a
second. Values are appended to growing numpy arrays (capacity doubling, no per-point items) and
curves are redrawn by a timer at most 4 times a second, with ``clipToView`` and peak downsampling
so only what is visible, at screen resolution, is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QVBoxLayout, QWidget

REDRAW_MS = 250  # at most 4 redraws a second
X_START = 10  # steps the x axis shows at first; it grows by half again when a run passes its end

#: Plot title -> (metric key, legend name, colour); GPU memory shows only once a row has it.
PLOTS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "Reward",
        (
            ("reward", "reward", "#2563eb"),
            ("reward/format", "format", "#16a34a"),
            ("reward/judge", "judge", "#d97706"),
            ("reward/ndcg", "NDCG", "#9333ea"),
        ),
    ),
    ("Accuracy", (("accuracy", "accuracy", "#16a34a"),)),
    ("KL", (("kl", "KL", "#dc2626"),)),
    ("Entropy", (("entropy", "entropy", "#0891b2"),)),
    ("Loss", (("loss", "loss", "#4b5563"),)),
    ("Response length", (("response_length", "tokens", "#7c3aed"),)),
    ("Tokens/s", (("tokens_per_second", "tokens/s", "#ea580c"),)),
    ("GPU memory (GB)", (("gpu_memory_gb", "GB", "#be123c"),)),
)
KEYS = tuple(key for _title, curves in PLOTS for key, _n, _c in curves)


class Series:
    """A growing (step, value) array pair; amortised O(1) appends."""

    def __init__(self) -> None:
        self.x = np.empty(256, dtype=np.float64)
        self.y = np.empty(256, dtype=np.float64)
        self.n = 0

    def append(self, x: float, y: float) -> None:
        if self.n == len(self.x):
            self.x = np.resize(self.x, 2 * self.n)
            self.y = np.resize(self.y, 2 * self.n)
        self.x[self.n], self.y[self.n] = x, y
        self.n += 1

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x[: self.n], self.y[: self.n]


class MetricPlots(QWidget):
    """A grid of plots sharing the step axis; feed it rows with :meth:`add_rows`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.series: dict[str, Series] = {k: Series() for k in KEYS}
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.plots: dict[str, pg.PlotItem] = {}
        self._dirty: set[str] = set()
        pg.setConfigOptions(antialias=False)
        self.view = pg.GraphicsLayoutWidget(self)
        pal = self.palette()
        self.view.setBackground(pal.color(QPalette.ColorRole.Base))
        fg = pal.color(QPalette.ColorRole.Text)
        first: pg.PlotItem | None = None
        for i, (title, curves) in enumerate(PLOTS):
            plot = self.view.addPlot(row=i // 2, col=i % 2, title=title)
            # no grid: AxisItem paints grid lines across the whole view, the costliest part of a
            # repaint (docs/benchmarks.md §5.7)
            plot.setClipToView(True)
            plot.setDownsampling(auto=True, mode="peak")
            plot.getAxis("bottom").setTextPen(fg)
            plot.getAxis("left").setTextPen(fg)
            plot.setMenuEnabled(False)
            if len(curves) > 1:
                plot.addLegend(offset=(-4, 4), labelTextColor=fg)
            if first is None:
                first = plot
                plot.enableAutoRange(x=False)  # grows in steps (see redraw): axes repaint less often
                plot.setXRange(0, X_START, padding=0)
            else:
                plot.setXLink(first)
            for key, name, colour in curves:
                self.curves[key] = plot.plot(name=name, pen=pg.mkPen(colour, width=1.5))
            self.plots[title] = plot
        self.plots["GPU memory (GB)"].setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self._timer = QTimer(self, interval=REDRAW_MS)
        self._timer.timeout.connect(self.redraw)
        self._timer.start()

    def clear(self) -> None:
        self.series = {k: Series() for k in KEYS}
        for curve in self.curves.values():
            curve.setData([], [])
        self._dirty.clear()
        self.plots["GPU memory (GB)"].setVisible(False)

    def add_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append each row's known metrics at its step; returns how many rows had a step."""
        n = 0
        for row in rows:
            step = row.get("step")
            if not isinstance(step, (int, float)):
                continue
            n += 1
            for key in KEYS:
                value = row.get(key)
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self.series[key].append(float(step), float(value))
                    self._dirty.add(key)
        return n

    def redraw(self) -> None:
        """Push changed series to their curves (called by the timer; tests call it directly).
        While hidden (another tab shown) nothing is pushed; the series keep growing."""
        if not self._dirty or self.isHidden():  # hidden: another tab of the run view is shown
            return
        last = 0.0
        for key in self._dirty:
            x, y = self.series[key].view()
            self.curves[key].setData(x, y)
            if len(x):
                last = max(last, float(x[-1]))
        first = next(iter(self.plots.values()))
        end = first.viewRange()[0][1]
        if last > end:  # the x axis grows in steps, not with every row: fewer axis repaints
            first.setXRange(0, max(last * 1.5, X_START), padding=0)
        if "gpu_memory_gb" in self._dirty:
            self.plots["GPU memory (GB)"].setVisible(True)
        self._dirty.clear()

    def point_count(self, key: str = "reward") -> int:
        """Points the curve of ``key`` holds (before downsampling to the screen's resolution)."""
        x = self.curves[key].xData
        return 0 if x is None else len(x)

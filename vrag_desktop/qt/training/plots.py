"""Live plots of a training run's metrics against step, with pyqtgraph.

Why this shape: a run writes one row per step and may reach 10,000 steps; the panel polls once a
second. Values are appended to growing numpy arrays (capacity doubling, no per-point items) and
curves are redrawn at most 4 times a second, with ``clipToView`` and peak downsampling so only what
is visible, at screen resolution, is drawn. The redraw timer is single-shot, armed by rows arriving
(or by the tab being shown with rows not drawn yet): a plot with nothing new wakes nobody (each
wake-up is a GIL round-trip that a training or indexing thread can delay).

Built lazily, in small steps: making a pyqtgraph plot takes 10-60 ms on the GUI thread and the first
paint of the whole grid took 160-330 ms (docs/benchmarks.md §5.7), so nothing is made until the
Plots tab is shown with rows to plot; then one plot is made per event-loop turn (hidden, so the
grid's geometry settles without painting), and they are revealed one per turn, each with its data,
so no turn paints more than one new plot. A plot is a title, a ViewBox and two axes, without menus (see
:meth:`MetricPlots._make_plot`); a plot of several curves has a one-line legend between its title
and its view, never over the points. Whole-step ticks, the value range and the single-point marker:
:mod:`.plot_axes`.

The validation curve (``val/...`` rows of ``val_metrics.jsonl``, a point every ``eval_steps``) is
drawn beside what it validates: the validation reward on the Reward plot and the validation accuracy
on the Accuracy plot, as dashed lines through points (few points, each a measurement), and the
reward's parts and the retrieval recall on a Validation plot of their own, whose title names the
best step; a dotted line marks the best step on both.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from vrag_desktop.core.training.validation import best_floor
from vrag_desktop.qt.infra.theme import color, theme_notifier
from vrag_desktop.qt.training.plot_axes import StepAxis, ValueAxis, cached, legend_html, value_range

REDRAW_MS = 250  # at most 4 redraws a second
MIN_ROW_HEIGHT = 150  # px a row of plots keeps (title, legend, view, step axis); the grid scrolls below
X_START = 10  # steps the x axis shows at first; it grows by half again when a run passes its end
VAL_COLOUR = "plot_red"  # the validation curve beside a training one (a theme colour name)

#: Plot title -> (metric key, legend name, the theme's colour name); the :data:`OPTIONAL` ones show once a row has it.
PLOTS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "Reward",
        (
            ("reward", "reward", "plot_blue"),
            ("reward/format", "format", "plot_green"),
            ("reward/judge", "judge", "plot_orange"),
            ("reward/ndcg", "NDCG", "plot_purple"),
            ("val/reward", "validation", VAL_COLOUR),
        ),
    ),
    ("Accuracy", (("accuracy", "accuracy", "plot_green"), ("val/accuracy", "validation", VAL_COLOUR))),
    ("KL", (("kl", "KL", "plot_red"),)),
    ("Entropy", (("entropy", "entropy", "plot_cyan"),)),
    ("Loss", (("loss", "loss", "plot_grey"),)),
    ("Response length", (("response_length", "tokens", "plot_violet"),)),
    ("Tokens/s", (("tokens_per_second", "tokens/s", "plot_amber"),)),
    (
        "Validation",
        (
            ("val/reward", "reward", "plot_blue"),
            ("val/accuracy", "accuracy", "plot_green"),
            ("val/format", "format", "plot_cyan"),
            ("val/ndcg", "NDCG", "plot_purple"),
            ("val/recall", "recall", "plot_orange"),
        ),
    ),
    ("GPU memory (GB)", (("gpu_memory_gb", "GB", "plot_rose"),)),
    (
        "Dynamic sampling",
        (
            ("groups_filtered", "groups filtered", "plot_orange"),
            ("resample_rounds", "resample rounds", "plot_blue"),
            ("skipped_steps", "skipped", "plot_red"),
        ),
    ),
)
#: Plots shown only once a row has their key: GPU memory (a GPU run), dynamic sampling (when on),
#: validation (a run with ``validation.eval_steps``).
OPTIONAL = {
    "GPU memory (GB)": "gpu_memory_gb",
    "Dynamic sampling": "groups_filtered",
    "Validation": "val/reward",
}
KEYS = tuple(dict.fromkeys(key for _title, curves in PLOTS for key, _n, _c in curves))
#: The last plot (index) each key is drawn on.
LAST_PLOT_OF = {key: i for i, (_t, curves) in enumerate(PLOTS) for key, _n, _c in curves}
#: Drawn as points on a dashed line: a validation is a measurement every few steps, not a trace.
POINTS = frozenset(k for k in KEYS if k.startswith("val/"))
#: The plots whose best validation step is marked with a dotted vertical line.
BEST_MARKED = ("Reward", "Validation")
#: What an empty plot says once the run has rows (TRL logs KL only when β > 0).
NOT_LOGGED = {"KL": "KL — not logged (β = 0: no reference model)"}


class Series:
    """A growing (step, value) array pair with its value range; amortised O(1) appends."""

    def __init__(self) -> None:
        self.x = np.empty(256, dtype=np.float64)
        self.y = np.empty(256, dtype=np.float64)
        self.n = 0
        self.lo, self.hi = math.inf, -math.inf

    def append(self, x: float, y: float) -> None:
        if self.n == len(self.x):
            self.x = np.resize(self.x, 2 * self.n)
            self.y = np.resize(self.y, 2 * self.n)
        self.x[self.n], self.y[self.n] = x, y
        self.n += 1
        self.lo, self.hi = min(self.lo, y), max(self.hi, y)

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x[: self.n], self.y[: self.n]


class MetricPlots(QWidget):
    """A grid of plots sharing the step axis; feed it rows with :meth:`add_rows`. The plots are made
    the first time rows are there to plot while this tab is shown (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.series: dict[str, Series] = {k: Series() for k in KEYS}
        self.curves: dict[str, list[pg.PlotDataItem]] = {}  # a key's curve in each plot it is on
        self.best: tuple[float, float] | None = None  # (step, validation reward) of the best so far
        self._start: float | None = None  # the warm start's validation reward (step 0)
        self.best_lines: list[pg.InfiniteLine] = []
        self.plots: dict[str, pg.GraphicsLayout] = {}  # title -> its cell (title, axes, view)
        self.boxes: dict[str, pg.ViewBox] = {}
        self.titles: dict[str, pg.LabelItem] = {}
        self.legends: dict[str, pg.LabelItem] = {}  # plots of several curves: which colour is which
        self._marked: set[str] = set()  # keys drawn with a marker (a single point)
        self.axes: dict[str, tuple[ValueAxis, StepAxis]] = {}  # title -> (left, bottom)
        self._dirty: set[str] = set()
        self._steps: list[Callable[[], None]] | None = None  # the build's steps left (None: not started)
        self._built = False
        self.live = True  # a run still writing rows: its x axis grows in steps
        self._styled: list[tuple[pg.PlotDataItem, str, str]] = []  # (curve, key, colour name)
        pg.setConfigOptions(antialias=False)
        self.view = pg.GraphicsLayoutWidget(self)
        self._fg = color("text")
        self.view.setBackground(color("surface"))
        theme_notifier().changed.connect(self._on_theme)
        # a short dock scrolls the grid rather than squash each plot below readable (labels overlapped)
        self.view.setMinimumHeight(MIN_ROW_HEIGHT * math.ceil(len(PLOTS) / 2))
        self.scroller = QScrollArea(self)
        self.scroller.setWidgetResizable(True)
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroller.setWidget(self.view)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.scroller)
        self._timer = QTimer(self, singleShot=True, interval=REDRAW_MS)
        self._timer.timeout.connect(self.redraw)

    def _schedule(self) -> None:
        """One redraw ``REDRAW_MS`` from now when there is something to draw (and none is due)."""
        if self._dirty and not self._timer.isActive():
            self._timer.start()

    def showEvent(self, e: QShowEvent) -> None:
        # shown again (this tab, or the window): draw what came while hidden (an ``event`` override
        # would run Python at every event of the plots, their repaints included). Made already: the
        # new rows go in now, before the first paint, so the switch paints the grid once with them
        # (a redraw a timer later repainted every changed plot again: two draws in the switch's wake)
        super().showEvent(e)
        if self._built and self._dirty:
            self._timer.stop()
            self.redraw()
        else:
            self._schedule()

    # ---- the lazy build ---------------------------------------------------------------------------
    @property
    def built(self) -> bool:
        """True once every plot is made and shown (before: :meth:`point_count` is 0)."""
        return self._built

    def _has_points(self) -> bool:
        return any(s.n for s in self.series.values())

    def _start_build(self) -> None:
        steps: list[Callable[[], None]] = [self._make_cells]
        for i in range(len(PLOTS)):  # a plot's frame, then its curves: no turn makes more than one
            steps += [functools.partial(self._make_plot, i), functools.partial(self._make_curves, i)]
        self._steps = [*steps, *(functools.partial(self._reveal, i) for i in range(len(PLOTS)))]
        QTimer.singleShot(0, self, self._next_step)  # with self: none once it is deleted

    def _next_step(self) -> None:
        if not self._steps:
            return
        self._steps.pop(0)()
        if self._steps:
            QTimer.singleShot(0, self, self._next_step)  # one step per event-loop turn
        else:
            self._built = True
            self._schedule()  # rows that came during the build, into plots already revealed

    def _make_cells(self) -> None:
        """The grid's cells first, empty and hidden: the grid's geometry is final from here, so filling
        a cell does not lay out (and resize) the ones filled before."""
        for i in range(len(PLOTS)):
            cell = self.view.addLayout(row=i // 2, col=i % 2)
            # the same preferred size whatever it holds, and its room kept while hidden: the grid
            # shares the view the same way before, during and after the build
            cell.setPreferredSize(200, 150)
            cell.layout.setContentsMargins(1, 1, 1, 1)  # as a PlotItem's
            cell.layout.setSpacing(0)
            policy = cell.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            cell.setSizePolicy(policy)
            cell.setVisible(False)  # revealed later, with its data
            self.plots[PLOTS[i][0]] = cell

    def _make_plot(self, i: int) -> None:
        """One plot, hidden: a title, a ViewBox and two axes in a small layout. Not a pyqtgraph
        ``PlotItem``: that also makes ~20 hidden option widgets (its menu), each styled by the app's
        style sheet, which made a plot 2-3x costlier. No grid either: AxisItem paints grid lines
        across the whole view, the costliest part of a repaint."""
        title, curves = PLOTS[i]
        fg = self._fg
        cell = self.plots[title]
        self.titles[title] = cached(pg.LabelItem(title, color=fg, size="10pt"))
        cell.addItem(self.titles[title], row=0, col=1)
        row = 1
        if len(curves) > 1:  # its own row: a legend inside the view covered the first points
            self.legends[title] = cached(pg.LabelItem("", color=fg, size="8pt"))
            cell.addItem(self.legends[title], row=1, col=1)
            row = 2
        box = pg.ViewBox(enableMenu=False)
        box.enableAutoRange(y=False)  # set from the values (see _fit_y): never a millionth's span
        self.axes[title] = (ValueAxis("left"), StepAxis("bottom"))
        for axis, r, col in ((self.axes[title][0], row, 0), (self.axes[title][1], row + 1, 1)):
            axis.linkToView(box)
            axis.setTextPen(fg)
            cell.addItem(axis, row=r, col=col)
        cell.addItem(box, row=row, col=1)
        if i == 0:
            box.enableAutoRange(x=False)  # grows in steps (see redraw): axes repaint less often
            box.setXRange(0, X_START, padding=0)
        else:
            box.setXLink(self.boxes[PLOTS[0][0]])
        self.boxes[title] = box

    def _make_curves(self, i: int) -> None:
        """The plot's curves (its legend names those with points: :meth:`_title`)."""
        title, curves = PLOTS[i]
        box = self.boxes[title]
        for key, _name, colour in curves:
            curve = pg.PlotDataItem(clipToView=True, autoDownsample=True, downsampleMethod="peak")
            self._style_curve(curve, key, colour)
            self._styled.append((curve, key, colour))
            box.addItem(curve)
            self.curves.setdefault(key, []).append(curve)
        if title in BEST_MARKED:
            line = pg.InfiniteLine(angle=90, movable=False, pen=self._best_pen())
            line.setVisible(False)
            box.addItem(line, ignoreBounds=True)
            self.best_lines.append(line)

    def _reveal(self, i: int) -> None:
        title, curves = PLOTS[i]
        plot = self.plots[title]
        last = 0.0
        for key, _name, _colour in curves:
            x, _y = self._push(key)
            if LAST_PLOT_OF[key] == i:  # its last plot: every curve of it holds its series now
                self._dirty.discard(key)
            if len(x):
                last = max(last, float(x[-1]))
        if i == 0:
            self.boxes[title].setXRange(0, self._x_end(last), padding=0)
        self._fit_y(title)
        plot.setVisible(title not in OPTIONAL or bool(self.series[OPTIONAL[title]].n))
        self._show_best()
        self._title(title)

    def _title(self, title: str) -> None:
        """The plot's title, or why it is empty while the run has rows."""
        empty = self.series["reward"].n and not any(self.series[k].n for k, _n, _c in dict(PLOTS)[title])
        text = NOT_LOGGED.get(title, f"{title} — not logged") if empty else title
        if title == "Dynamic sampling" and not empty:
            text = f"{title} — {self.sampling_totals()}"
        if title == "Validation" and self.best is not None:
            text = f"{title} — best: step {self.best[0]:g} (reward {self.best[1]:.3f})"
        if self.titles[title].text != text:
            self.titles[title].setText(text)
        legend = self.legends.get(title)
        if legend is not None:
            shown = [(n, color(c).name(), k in POINTS) for k, n, c in dict(PLOTS)[title] if self.series[k].n]
            html = legend_html(shown)
            if legend.text != html:
                legend.setText(html)

    def _push(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """Give the key's curves its series; a lone point gets a marker (a line through it draws nothing)."""
        x, y = self.series[key].view()
        single = len(x) == 1 and key not in POINTS  # validation points always have markers
        for curve in self.curves[key]:
            curve.setData(x, y)
        if single != (key in self._marked):
            (self._marked.add if single else self._marked.discard)(key)
            for curve, k, colour in self._styled:
                if k == key:
                    self._style_curve(curve, key, colour)
        return x, y

    # ---- the theme's colours ----------------------------------------------------------------------
    def _style_curve(self, curve: pg.PlotDataItem, key: str, name: str) -> None:
        """Pen and marker of a curve in the theme's colour ``name``: validation points are dashed
        lines through markers; a curve with a single point shows it as a marker."""
        c = color(name)
        if key in POINTS:
            curve.setPen(pg.mkPen(c, width=1.2, style=Qt.PenStyle.DashLine))
            self._marker(curve, c, 6)
            return
        curve.setPen(pg.mkPen(c, width=1.5))
        if key in self._marked:
            self._marker(curve, c, 7)
        else:
            curve.setSymbol(None)

    @staticmethod
    def _marker(curve: pg.PlotDataItem, c: QColor, size: int) -> None:
        curve.setSymbol("o")
        curve.setSymbolSize(size)
        curve.setSymbolBrush(c)
        curve.setSymbolPen(None)

    @staticmethod
    def _best_pen() -> Any:
        return pg.mkPen(color(VAL_COLOUR), width=1, style=Qt.PenStyle.DotLine)

    def _on_theme(self, _theme: str) -> None:
        """Everything drawn in the new theme's colours (pyqtgraph paints with its own pens)."""
        self._fg = color("text")
        self.view.setBackground(color("surface"))
        for title, label in self.titles.items():
            label.setAttr("color", self._fg)
            label.setText(label.text)
            if (legend := self.legends.get(title)) is not None:
                legend.setAttr("color", self._fg)
                legend.setText("")  # redrawn by _title, in the new colours
            for axis in self.axes.get(title, ()):
                axis.setTextPen(self._fg)
            self._title(title)
        for curve, key, colour in self._styled:
            self._style_curve(curve, key, colour)
        for line in self.best_lines:
            line.setPen(self._best_pen())

    def _fit_y(self, title: str) -> None:
        """The plot's value range from its series' extremes (see :func:`.plot_axes.value_range`)."""
        series = [self.series[k] for k, _n, _c in dict(PLOTS)[title] if self.series[k].n]
        if not series:
            return
        lo, hi = value_range(min(s.lo for s in series), max(s.hi for s in series))
        box = self.boxes[title]
        if box.viewRange()[1] != [lo, hi]:
            box.setYRange(lo, hi, padding=0)

    # ---- data -------------------------------------------------------------------------------------
    def clear(self) -> None:
        self.series = {k: Series() for k in KEYS}
        for curves in self.curves.values():
            for curve in curves:
                curve.setData([], [])
        self._dirty.clear()
        self._marked.clear()
        for curve, key, colour in self._styled:
            self._style_curve(curve, key, colour)
        self.best, self._start = None, None
        self._show_best()
        if self.boxes:  # another run: its steps from the start, not the last run's range
            self.boxes[PLOTS[0][0]].setXRange(0, self._x_end(0.0), padding=0)
        for title in OPTIONAL:
            if (plot := self.plots.get(title)) is not None:
                plot.setVisible(False)

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
            reward = row.get("val/reward")
            if step == 0 and isinstance(reward, (int, float)):
                self._start = float(reward)
            # the trainer's verdict, held to core's floor: an older run marked a best at 0 or below
            # its warm start, which is no best (export --best writes the warm start's weights)
            if (
                row.get("best") is True
                and isinstance(reward, (int, float))
                and reward > best_floor(self._start)
            ):
                self.best = (float(step), float(reward))
        self._schedule()
        return n

    def _show_best(self) -> None:
        """The dotted line at the best validation step (hidden while there is none)."""
        for line in self.best_lines:
            if self.best is not None:
                line.setValue(self.best[0])
            line.setVisible(self.best is not None)

    def redraw(self) -> None:
        """Push changed series to their curves (called by the timer new rows arm; tests call it
        directly). While hidden (another tab shown) nothing is pushed; the series keep growing and are
        drawn once shown. The first time there is something to plot while shown, the plots are made
        (in steps; see the module)."""
        if self.isHidden():  # another tab of the run view is shown
            return
        if not self._built:
            if self._steps is None and self._has_points():
                self._start_build()
            return
        if not self._dirty:
            return
        last = 0.0
        for key in self._dirty:
            x, _y = self._push(key)
            if len(x):
                last = max(last, float(x[-1]))
        for title, curves in PLOTS:
            if any(k in self._dirty for k, _n, _c in curves):
                self._fit_y(title)
        self._show_best()
        first = self.boxes[PLOTS[0][0]]
        end = first.viewRange()[0][1]
        if last > end:  # the x axis grows in steps, not with every row: fewer axis repaints
            first.setXRange(0, self._x_end(last), padding=0)
        for title, key in OPTIONAL.items():
            if key in self._dirty:
                self.plots[title].setVisible(True)
        for title, _curves in PLOTS:  # a text compare each; set only when it changes
            self._title(title)
        self._dirty.clear()

    def sampling_totals(self) -> str:
        """The run's dynamic-sampling counts so far, summed over its steps (the plot's title)."""
        filtered, rounds, skipped = (
            int(self.series[k].view()[1].sum())
            for k in ("groups_filtered", "resample_rounds", "skipped_steps")
        )
        return f"{filtered} groups filtered, {rounds} resample rounds, {skipped} step(s) skipped"

    def _x_end(self, last: float) -> float:
        # ended: its steps end to end, with room for the last point's marker and its tick's label
        return max(last * 1.5, X_START) if self.live else max(last * 1.03 + 0.5, 1.5)

    def set_live(self, live: bool) -> None:
        """A run that has ended shows its steps end to end; a live one keeps room to grow."""
        if live == self.live:
            return
        self.live = live
        if self._built:
            last = max((float(s.view()[0][-1]) for s in self.series.values() if s.n), default=0.0)
            self.boxes[PLOTS[0][0]].setXRange(0, self._x_end(last), padding=0)

    def point_count(self, key: str = "reward") -> int:
        """Points the curve of ``key`` holds (before downsampling to the screen's resolution); 0 until
        the plots are made."""
        curves = self.curves.get(key)
        x = curves[0].xData if curves else None
        return 0 if x is None else len(x)

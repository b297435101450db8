"""The training plots' axes, value ranges and legends, chosen for people reading a run.

Why not pyqtgraph's defaults: steps are whole numbers, yet a short run got ticks at 0.5 and 2.5;
a flat curve (entropy that barely moves) was auto-ranged to a millionth, so its axis read
``10.373412 10.373414``; a legend inside the view covered the first steps' points; and a
single point, drawn as a line, drew nothing. Here the step axis only ticks whole steps, a value
axis shows at most four decimals, the value range is at least a few percent of the values' size
(:func:`value_range`), and the legend is a line of text above the plot (:func:`legend_html`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsItem

#: The smallest value range shown, as a fraction of the largest magnitude plotted: below it a
#: curve's wobble is float noise, not a trend worth an axis of six decimals.
MIN_SPAN = 0.05
PAD = 0.08  # room above and below the values, as a fraction of the range
MAX_PLACES = 4


def cached(label: pg.LabelItem) -> pg.LabelItem:
    """``label`` drawn once into a pixmap and blitted at each repaint until its text changes: laying
    out rich text at every paint of the grid (a tab shown, a curve updated beside it) was most of a
    repaint's cost."""
    label.item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    return label


class QuietAxis(pg.AxisItem):
    """An axis without a label, so without pyqtgraph's SI prefix: by default every range change (the
    step axes of all plots when the x range grows, a value axis at most redraws) re-set the hidden
    label's HTML and re-measured it, ~0.4 ms an axis on the GUI thread for nothing shown."""

    def __init__(self, orientation: str) -> None:
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)
        # drawn into a pixmap, blitted until its range or size changes (its ``update()`` then): a
        # repaint beside it (a curve's new point, the tab shown) no longer replays its tick texts
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


class StepAxis(QuietAxis):
    """A step axis: ticks at whole steps only, labelled without decimals."""

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, float]]:
        levels = [(s, o) for s, o in super().tickSpacing(minVal, maxVal, size) if s >= 1]
        return levels or [(1.0, 0.0)]

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, list[float]]]:
        out = []
        for spacing, values in super().tickValues(minVal, maxVal, size):
            whole = [v for v in values if abs(v - round(v)) < 1e-9]
            out.append((spacing, whole))
        return out

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [str(round(v * scale)) for v in values]


class ValueAxis(QuietAxis):
    """A value axis whose labels never run to more than :data:`MAX_PLACES` decimals."""

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return tick_texts([v * scale for v in values], spacing * scale)


def tick_texts(values: list[float], spacing: float) -> list[str]:
    """Tick labels ``spacing`` apart: as many decimals as the spacing needs, up to four; beyond, or for
    huge values, one power of ten for all (``1.5e-4``), so an axis never mixes notations."""
    if not values:
        return []
    step = math.floor(math.log10(spacing)) if spacing > 0 else 0
    big = max(abs(v) for v in values)
    if -step <= MAX_PLACES and big < 1e5:
        places = max(0, -step)
        return [f"{0.0 if abs(v) < spacing / 1e6 else v:.{places}f}" for v in values]
    power = math.floor(math.log10(big)) if big > 0 else step
    digits = max(0, power - step)
    return [f"{v / 10**power:.{digits}f}e{power}" for v in values]


def value_range(lo: float, hi: float) -> tuple[float, float]:
    """The y range showing values from ``lo`` to ``hi``: at least :data:`MIN_SPAN` of their
    magnitude (1 when all are 0) around their middle, padded by :data:`PAD` on both sides."""
    size = max(abs(lo), abs(hi))
    floor = MIN_SPAN * size if size > 0 else 1.0
    if hi - lo < floor:
        mid = (lo + hi) / 2
        lo, hi = mid - floor / 2, mid + floor / 2
    pad = (hi - lo) * PAD
    return lo - pad, hi + pad


def legend_html(entries: Iterable[tuple[str, str, bool]]) -> str:
    """One line naming each curve in its colour: ``(name, colour, dashed points)`` each."""
    parts = []
    for name, colour, points in entries:
        mark = "╌●╌" if points else "━━"
        parts.append(f'<span style="color:{colour}">{mark}</span>&nbsp;{name}')
    return "&nbsp;&nbsp; ".join(parts)

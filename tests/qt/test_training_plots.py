"""The training plots as a person reads them: whole-step ticks, values with a few decimals even
when a curve is flat, a legend that never covers the points, and a run's first point visible."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtGui import QColor, QImage

from vrag_desktop.qt.infra.theme import color
from vrag_desktop.qt.training.plots import PLOTS, MetricPlots


def _plots(qtbot: Any, rows: list[dict[str, Any]]) -> MetricPlots:
    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.resize(900, 700)
    plots.show()
    plots.add_rows(rows)
    plots.redraw()
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    plots.redraw()
    return plots


def test_step_ticks_are_whole_steps(qtbot: Any) -> None:
    plots = _plots(qtbot, [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.3}])
    plots.set_live(False)  # an ended run: its steps end to end, 0 to 2
    box = plots.boxes["Reward"]
    lo, hi = box.viewRange()[0]
    assert lo == 0 and 2 < hi < 3  # room for the last point's marker and label
    bottom = plots.axes["Reward"][1]
    values = [v for _s, vs in bottom.tickValues(lo, hi, bottom.width()) for v in vs]
    assert values and all(v == round(v) for v in values), values
    labels = bottom.tickStrings(values, 1.0, 1.0)
    assert labels and all("." not in s for s in labels), labels


def test_a_flat_curve_has_a_readable_value_axis(qtbot: Any) -> None:
    rows = [{"step": i, "reward": 0.5, "entropy": 10.373412 + i * 1e-7} for i in range(1, 6)]
    plots = _plots(qtbot, rows)
    lo, hi = plots.boxes["Entropy"].viewRange()[1]
    assert hi - lo >= 0.05 * 10.37 and lo < 10.373412 < hi
    left = plots.axes["Entropy"][0]
    labels = [s for sp, vs in left.tickValues(lo, hi, left.height()) for s in left.tickStrings(vs, 1.0, sp)]
    assert labels and all(len(s.split(".")[1]) <= 2 for s in labels if "." in s), labels
    # all zero (a loss of 0): a range around it, not a millionth's
    zero = _plots(qtbot, [{"step": i, "loss": 0.0} for i in range(1, 4)])
    lo, hi = zero.boxes["Loss"].viewRange()[1]
    assert lo < 0 < hi and hi - lo >= 1


def _has_colour(image: QImage, colour: str, tolerance: int = 40) -> int:
    """Pixels of ``image`` close to ``colour``."""
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    arr = np.frombuffer(image.constBits(), np.uint8, count=h * stride).reshape(h, stride)[:, : w * 3]
    rgb = arr.reshape(h, w, 3).astype(int)
    c = QColor(colour)
    d = np.abs(rgb - np.array([c.red(), c.green(), c.blue()])).sum(axis=2)
    return int((d < tolerance).sum())


def test_a_single_point_is_drawn_and_the_legend_is_off_the_points(qtbot: Any) -> None:
    plots = _plots(qtbot, [{"step": 1, "reward": 0.4, "reward/format": 0.9}])
    reward = color(dict((k, c) for _t, cs in PLOTS for k, _n, c in cs)["reward"]).name()
    qtbot.wait(50)
    view_rect = plots.boxes["Reward"].sceneBoundingRect()  # the view alone: the legend has the colour too
    image = plots.view.grab(plots.view.mapFromScene(view_rect).boundingRect()).toImage()
    assert _has_colour(image, reward) >= 12, "the run's first point is not drawn"
    assert plots.curves["reward"][0].opts["symbol"] == "o"
    # the legend names the curves that have points, above the view, not over it
    legend = plots.legends["Reward"]
    assert "reward" in legend.text and "format" in legend.text and "judge" not in legend.text
    box = plots.boxes["Reward"]
    assert not legend.sceneBoundingRect().intersects(box.sceneBoundingRect())
    assert legend.sceneBoundingRect().bottom() <= box.sceneBoundingRect().top()
    # a second point: a line joins them, no markers any more
    plots.add_rows([{"step": 2, "reward": 0.5}])
    plots.redraw()
    assert plots.curves["reward"][0].opts["symbol"] is None
    assert "Loss" not in plots.legends  # one curve: its title names it


def test_small_values_share_one_notation(qtbot: Any) -> None:
    """A KL of 1e-4 is labelled 0.98e-4 … 1.02e-4, not 9.8e-05 beside 0.000102."""
    plots = _plots(qtbot, [{"step": 1, "reward": 0.1, "kl": 1e-4}])
    lo, hi = plots.boxes["KL"].viewRange()[1]
    left = plots.axes["KL"][0]
    labels = [s for sp, vs in left.tickValues(lo, hi, left.height()) for s in left.tickStrings(vs, 1.0, sp)]
    assert len(labels) >= 2 and all(s.endswith("e-4") for s in labels), labels


def test_another_run_starts_from_its_own_steps_and_scrolls_when_short(qtbot: Any) -> None:
    """Showing a 1-step run after a 30-step one: its axis is its own, not 0-30 with one point at
    the left edge; in a short dock the plots keep a readable height and scroll."""
    plots = _plots(qtbot, [{"step": i, "reward": i / 30} for i in range(1, 31)])
    plots.set_live(False)
    assert plots.boxes["Reward"].viewRange()[0][1] > 30
    plots.clear()
    plots.add_rows([{"step": 1, "reward": 0.5}])
    plots.redraw()
    assert plots.boxes["Reward"].viewRange()[0][1] < 3
    assert plots.curves["reward"][0].opts["symbol"] == "o"
    plots.resize(900, 300)
    qtbot.wait(50)
    assert plots.view.height() >= 5 * 140 and plots.scroller.verticalScrollBar().maximum() > 0


def test_cached_axes_and_titles_are_redrawn_in_a_new_theme(qtbot: Any) -> None:
    """The axes and titles are drawn from pixmaps kept between repaints: a theme switch still shows
    their text in the new theme's colour, not the old theme's pixels."""
    from PySide6.QtWidgets import QApplication

    from vrag_desktop.qt.infra.theme import apply_theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, "light")
    try:
        plots = _plots(qtbot, [{"step": i, "reward": i / 10} for i in range(1, 6)])
        qtbot.wait(50)

        def pixels(colour: str) -> tuple[int, int]:
            """Pixels of the Reward plot's value axis and title near ``colour``, and all of them."""
            left = plots.axes["Reward"][0]
            title = plots.titles["Reward"]
            rect = left.sceneBoundingRect().united(title.sceneBoundingRect())
            image = plots.view.grab(plots.view.mapFromScene(rect).boundingRect()).toImage()
            return _has_colour(image, colour, tolerance=60), image.width() * image.height()

        text, area = pixels(color("text").name())
        assert 20 < text < area // 4  # the text, on a light background
        apply_theme(app, "dark")
        qtbot.wait(50)
        assert pixels(color("surface").name())[0] > area // 2  # the background is the dark one
        text, area = pixels(color("text").name())
        assert 20 < text < area // 4, "the axis and title kept the light theme's drawing"
    finally:
        apply_theme(app, "system")

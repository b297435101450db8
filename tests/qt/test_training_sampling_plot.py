"""The run view's plots show DAPO's dynamic-sampling counts (issue 30, item 2) once a run logs them:
groups filtered, resample rounds and skipped steps per step, and their totals in the plot's title;
a run without dynamic sampling does not show the plot at all."""

from __future__ import annotations

from typing import Any


def _shown(qtbot: Any, rows: list[dict[str, Any]]) -> Any:
    from vrag_desktop.qt.training.plots import MetricPlots

    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.resize(900, 900)
    plots.show()
    plots.add_rows(rows)
    plots.redraw()
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    plots.redraw()
    return plots


def test_dynamic_sampling_counts_are_plotted_with_their_totals(qtbot: Any) -> None:
    rows = [
        {"step": 1, "reward": 0.5, "groups_filtered": 1.0, "resample_rounds": 1.0, "skipped_steps": 0.0},
        {"step": 2, "reward": 1.0, "groups_filtered": 4.0, "resample_rounds": 2.0, "skipped_steps": 1.0},
    ]
    plots = _shown(qtbot, rows)
    assert plots.plots["Dynamic sampling"].isVisible()
    for key in ("groups_filtered", "resample_rounds", "skipped_steps"):
        assert plots.point_count(key) == 2
    title = "Dynamic sampling — 5 groups filtered, 3 resample rounds, 1 step(s) skipped"
    assert plots.titles["Dynamic sampling"].text == title
    plots.clear()
    assert not plots.plots["Dynamic sampling"].isVisible()


def test_a_run_without_dynamic_sampling_hides_the_plot(qtbot: Any) -> None:
    plots = _shown(qtbot, [{"step": i, "reward": i / 10} for i in range(1, 4)])
    assert not plots.plots["Dynamic sampling"].isVisible()
    assert plots.plots["Reward"].isVisible()

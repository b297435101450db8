"""The docks hidden until used (Runtime, Datasets, Evaluations, Training) get their panels after the
window's first paint, or at once when something needs one first (issue 31: cold start ≤ 1.0 s); so
does the Evidence view when its dock starts as a tab behind the graph.

What must not change for the person: every panel is there once the window has painted (their start-up
look-ups run at start), a dock shown from the View menu or by a saved layout holds its real panel, and
the status bar names the current model before the Runtime panel exists.
"""

from __future__ import annotations

from typing import Any

from vrag_desktop.core.endpoints.profiles import EndpointProfile
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow


def _window(qtbot: Any, ctx: AppContext) -> MainWindow:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    return w


def test_hidden_docks_get_their_panels_after_the_first_paint(qtbot: Any, ctx: AppContext) -> None:
    w = _window(qtbot, ctx)
    parts = w.panels.all()
    assert not any(p.built for p in parts)  # nothing the first frame does not show
    assert w.runtime_label.text() == "Model: none chosen"  # said before the Runtime panel exists
    w.show()
    qtbot.waitUntil(lambda: all(p.built for p in parts), timeout=10_000)
    docks = {
        w.runtime_dock: w.runtime,
        w.datasets_dock: w.datasets,
        w.evaluations_dock: w.evaluations,
        w.training_dock: w.training,
    }
    assert all(dock.widget() is panel for dock, panel in docks.items())
    assert all(dock.isHidden() for dock in docks)  # made, still hidden until used
    assert w.evidence_dock.widget() is w.evidence


def test_a_dock_shown_before_its_panel_is_made_makes_it(qtbot: Any, ctx: AppContext) -> None:
    w = _window(qtbot, ctx)
    w.show()
    assert not w.panels.training.built
    w.training_dock.toggleViewAction().trigger()  # View → Training, before the first paint
    assert w.panels.training.built and w.training_dock.widget() is w.training
    assert not w.panels.evaluations.built


def test_a_saved_layout_showing_a_tool_dock_makes_its_panel_before_the_window_shows(
    qtbot: Any, ctx: AppContext
) -> None:
    w = _window(qtbot, ctx)
    w.show()
    w.open_runtime()
    w.close()  # saves the layout with the Runtime dock shown
    again = _window(qtbot, ctx)
    assert again.panels.runtime.built and not again.runtime_dock.isHidden()
    assert again.runtime_dock.widget() is again.runtime


def test_the_status_bar_follows_the_current_model_before_and_after_the_runtime_panel(
    qtbot: Any, ctx: AppContext
) -> None:
    ctx.profiles.save(EndpointProfile(name="Lab", kind="custom", base_url="http://127.0.0.1:9", model="m"))
    w = _window(qtbot, ctx)
    ctx.current_model.choose("Lab")
    assert not w.panels.runtime.built and w.runtime_label.text() == "Model: Lab"
    w.runtime  # noqa: B018 - made on reading
    assert w.runtime_label.text() == "Model: Lab"
    ctx.current_model.choose(None)
    assert w.runtime_label.text() == "Model: none chosen"


def _first_paint_sees(w: MainWindow) -> list[bool]:
    """Whether the Evidence view was made when ``w`` handled its first paint request."""
    from PySide6.QtCore import QEvent, QObject

    seen: list[bool] = []

    class FirstPaint(QObject):
        def eventFilter(self, obj: Any, event: Any) -> bool:
            if event.type() == QEvent.Type.UpdateRequest and not seen:
                seen.append(w.panels.evidence.built)
            return False

    spy = FirstPaint(w)
    w.installEventFilter(spy)
    w.__dict__["_spy"] = spy
    return seen


def test_the_evidence_view_behind_the_graph_is_made_after_the_first_paint(
    qtbot: Any, ctx: AppContext
) -> None:
    """A screen too small to split the graph and the evidence (here 1280×800) tabs them, the graph
    on top: the Evidence view is made after the first frame, and a run's events find it made."""
    from PySide6.QtCore import QRect

    w = _window(qtbot, ctx)
    w.window_layout.apply_default(QRect(0, 0, 1280, 800))
    seen = _first_paint_sees(w)
    w.show()
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen == [False]
    qtbot.waitUntil(lambda: w.panels.evidence.built, timeout=5000)
    assert w.evidence_dock.widget() is w.evidence
    w.evidence_dock.raise_()  # the person opens the tab: the view, not a placeholder
    qtbot.waitUntil(lambda: w.evidence.isVisible(), timeout=2000)


def test_an_evidence_view_on_screen_is_in_the_first_paint(qtbot: Any, ctx: AppContext) -> None:
    """A wide screen shows the evidence under the graph: it is made as the window shows, before its
    first paint (never an empty placeholder on screen)."""
    from PySide6.QtCore import QRect

    w = _window(qtbot, ctx)
    w.window_layout.apply_default(QRect(0, 0, 1920, 1080))
    seen = _first_paint_sees(w)
    w.show()
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen == [True]
    assert w.evidence_dock.widget() is w.evidence


def test_a_run_before_the_evidence_view_is_made_makes_it_and_shows_its_pages(
    qtbot: Any, ctx: AppContext
) -> None:
    """Events routed to the evidence view before it was made (a run opened at once) are not lost."""
    from vrag_desktop.core.agents.events import ImageShown

    w = _window(qtbot, ctx)
    assert not w.panels.evidence.built
    w._route_event(ImageShown(step=1, source="a.pdf", page=2, image=str(ctx.data_dir / "p2.png")))
    assert w.panels.evidence.built and w.evidence_dock.widget() is w.evidence
    assert [p.page for p in w.evidence.board.pages.values()] == [2]


def test_the_window_says_when_its_deferred_panels_are_made(qtbot: Any, ctx: AppContext) -> None:
    """``ctx.window_settled`` (what the warm-up waits for) is set once every panel made after the
    first paint is made, not before."""
    w = _window(qtbot, ctx)
    assert not ctx.window_settled.is_set()
    w.show()
    qtbot.waitUntil(ctx.window_settled.is_set, timeout=10_000)
    assert all(p.built for p in w.panels.all())

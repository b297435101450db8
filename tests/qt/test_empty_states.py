"""Every empty state a person meets on a fresh start, at the default window size and a small one:
nothing cut off, clipped or oddly sized (the evidence title, the ask panel's controls, the welcome
dialog), and the window never wider than the size it was given."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtWidgets import QComboBox, QStyle, QTextBrowser

from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.evidence.evidence_view import EMPTY_MESSAGE
from vrag_desktop.qt.main_window import MainWindow

SIZES = [(1600, 1000), (1280, 800)]


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def window(request: pytest.FixtureRequest, qtbot: Any, ctx: AppContext) -> MainWindow:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.resize(*request.param)
    w.show()
    qtbot.waitExposed(w)
    qtbot.waitUntil(lambda: w.corpora.stack.currentWidget() is w.corpora.empty, timeout=5000)
    return w


def test_the_window_keeps_the_size_it_was_given(window: MainWindow) -> None:
    """The docks' and the ask panel's minimum widths add up to no more than a 1280 px screen."""
    assert window.minimumSizeHint().width() <= 1280
    assert window.width() in (1280, 1600)


def test_evidence_empty_state_is_not_cut_off(window: MainWindow) -> None:
    title = window.evidence.title
    assert title.fontMetrics().horizontalAdvance(title.text()) <= title.width(), title.text()
    # the explanation is where the page will be, wrapped to the page view's width
    assert window.evidence.page_view.message == EMPTY_MESSAGE


def test_the_agent_choice_shows_its_whole_name(window: MainWindow) -> None:
    ask = window.ask
    texts = [ask.agent_combo.itemText(i) for i in range(ask.agent_combo.count())]
    ref = QComboBox()
    ref.addItems(texts)
    ref.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    assert ask.agent_combo.width() >= ref.sizeHint().width(), (ask.agent_combo.width(), texts)


def test_the_corpora_choice_leaves_room_for_its_arrow(window: MainWindow) -> None:
    button = window.ask.corpora_button  # its text and, beside it, the menu arrow
    arrow = button.style().pixelMetric(QStyle.PixelMetric.PM_MenuButtonIndicator, None, button)
    assert button.width() >= button.fontMetrics().horizontalAdvance(button.text()) + arrow + 8


def test_a_help_dialog_is_as_tall_as_its_text(qtbot: Any, ctx: AppContext) -> None:
    from vrag_desktop.qt.help_dialogs import CONNECT_HELP

    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    dlg = w.show_help(CONNECT_HELP, "Connect a model")  # Help → Connect a model…
    qtbot.waitExposed(dlg)
    view = dlg.findChild(QTextBrowser)
    text_height = view.document().size().height()
    assert view.verticalScrollBar().maximum() == 0  # all of it shows without scrolling
    assert view.viewport().height() - text_height < 40  # and no empty half below it
    assert abs(dlg.height() - dlg.sizeHint().height()) <= 8


def test_the_graph_says_what_will_appear_until_a_run_draws_nodes(window: MainWindow) -> None:
    from PySide6.QtWidgets import QGraphicsView, QLabel

    from vrag_desktop.core.agents.events import GraphChanged, GraphNode
    from vrag_desktop.qt.graph.graph_view import PLACEHOLDER

    view = window.graph_view
    note = next(w for w in view.viewport().findChildren(QLabel) if w.text() == PLACEHOLDER)
    assert type(view).drawForeground is QGraphicsView.drawForeground  # a label, not Python painting
    assert view.showing_placeholder() and note.isVisible()  # not a bare dotted grid
    window.graph_scene.apply(GraphChanged(nodes=(GraphNode(id="root", kind="root", label="q"),)))
    assert not view.showing_placeholder() and not note.isVisible()
    window.graph_scene.clear_graph()
    assert view.showing_placeholder() and note.isVisible()


def test_the_page_is_the_evidence_views_widest_column(window: MainWindow) -> None:
    strip, page, crops = window.evidence.splitter.sizes()
    assert page > strip and page > crops, (strip, page, crops)


def test_a_dragged_evidence_split_is_kept_on_resize(window: MainWindow, qtbot: Any) -> None:
    ev = window.evidence
    ev.splitter.setSizes([300, 200, 200])
    ev.splitter.splitterMoved.emit(300, 1)  # as a drag of the first handle reports it
    kept = ev.splitter.sizes()
    window.resize(window.width() + 40, window.height())
    qtbot.wait(50)
    assert ev.splitter.sizes()[0] == kept[0]

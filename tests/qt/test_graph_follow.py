"""The reasoning graph follows the run (issue 31, item 3): during a live run and a replay in the
main window the graph view holds the newest node after each event, at a zoom where its card is read
in full, until the person zooms or drags away, and then *Follow run* brings it back; a fitted
graph's cards say what each step was about, not only its kind; the details pane's tables show
every row with the scores in view, however narrow the pane.

The live run is real: the VRAG agent searches an indexed corpus and a scripted OpenAI-compatible
server plays the model (as in ``test_main_window.py``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRect
from PySide6.QtGui import QColor, QImage, QPalette
from scripted_openai import ScriptedOpenAI
from test_reasoning_graph import vrag_run

from qt.test_ask_panel import use_scripted
from qt.test_graph_scene import wheel
from vrag_desktop.core.agents.events import AgentEvent
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.graph.graph_items import LOD_FULL
from vrag_desktop.qt.graph.graph_view import GraphView
from vrag_desktop.qt.graph.node_details import NodeDetails
from vrag_desktop.qt.main_window import MainWindow

SCRIPT = [
    {"content": "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>", "chunk": 4},
    {"content": "<think>Zoom into the table.</think>\n<bbox>[20, 30, 300, 200]</bbox>"},
    {"content": "<think>Closer.</think>\n<bbox>[10, 10, 120, 90]</bbox>"},
    {"content": "<think>Closer still.</think>\n<bbox>[5, 5, 60, 40]</bbox>"},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
]


def newest_in_view(view: GraphView) -> bool:
    scene = view.graph_scene()
    newest = scene.graph.newest()
    item = scene.node_item(newest) if newest else None
    if item is None:
        return True
    card = item.mapToScene(item.card()).boundingRect()
    return view.viewport().rect().contains(view.mapFromScene(card).boundingRect())


def _window(qtbot: Any, ctx: AppContext) -> MainWindow:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    return w


def test_the_graph_follows_a_live_run_and_its_replay(qtbot: Any, indexed: AppContext) -> None:
    w = _window(qtbot, indexed)
    view = w.graph_view
    w.evidence_dock.raise_()  # the person was looking elsewhere: a run brings the graph to the front
    seen: list[tuple[str, bool, float]] = []

    def check(ev: AgentEvent) -> None:  # connected after the window's own handler: the view has moved
        if w.graph_scene.node_items():
            seen.append((ev.event, newest_in_view(view), view.zoom()))

    w.controller.agentEvent.connect(check)
    ends: list[tuple[str, str]] = []
    w.controller.finished.connect(lambda s, r: ends.append((s, r)))
    with ScriptedOpenAI(SCRIPT, api_key="k-1") as srv:
        use_scripted(w.ask, indexed, srv.base_url, "k-1")
        w.ask.question_edit.setPlainText("How heavy a load can the Atlas robot carry?")
        w.ask.send()
        qtbot.waitUntil(lambda: bool(ends), timeout=30_000)
    status, run_id = ends[0]
    assert status == "answered"
    nodes = len(w.graph_scene.node_items())
    assert nodes >= 10 and not w.graph_dock.visibleRegion().isEmpty()
    pitch = w.graph_scene.layout.layer_pitch * view.zoom()
    assert nodes * pitch > view.viewport().height()  # the run outgrew the view: following was needed
    assert seen and all(ok for _, ok, _ in seen), [e for e, ok, _ in seen if not ok]
    assert min(z for _, _, z in seen) >= LOD_FULL  # cards read in full while following
    assert not view.is_live() and view.follow_button.isHidden()

    # Replay: the same, step by step
    view.set_zoom(0.3)
    w.replay_run(run_id)
    qtbot.waitUntil(lambda: w.replay_bar.isVisible() and w.replay.total > 0, timeout=5000)
    assert view.is_live() and view.follow_button.isVisible() and view.follow_button.isChecked()
    steps = 0
    while w.graph_scene.graph.ids() != set() and len(w.graph_scene.node_items()) < nodes // 2:
        w.replay.step()
        steps += 1
        assert newest_in_view(view) and view.zoom() >= LOD_FULL, steps
    # the person zooms out over the graph: the view stays theirs, the button says so
    wheel(view, QPointF(view.viewport().rect().center()), -3)
    assert view.following() is None and view.follow_button.isVisible() and not view.follow_button.isChecked()
    where = view.mapToScene(view.viewport().rect().center())
    w.replay.step()
    w.replay.step()
    assert view.mapToScene(view.viewport().rect().center()) == where
    view.follow_button.click()  # follow again
    assert view.following() == "newest" and newest_in_view(view)
    while not w.replay.at_end():
        w.replay.step()
        assert newest_in_view(view)
    qtbot.waitUntil(lambda: not view.is_live(), timeout=5000)  # the replay finished
    assert view.follow_button.isHidden()


def _text_pixels(img: QImage, rect: QRect, base: QColor) -> int:
    """Pixels in ``rect`` clearly unlike the background (text)."""
    n = 0
    for y in range(rect.top(), rect.bottom(), 2):
        for x in range(rect.left(), rect.right(), 2):
            c = img.pixelColor(x, y)
            if abs(c.lightness() - base.lightness()) > 60:
                n += 1
    return n


def test_a_fitted_graph_says_what_each_step_was_about(graph_view: GraphView, qtbot: Any) -> None:
    view = graph_view
    view.resize(460, 380)
    scene = view.graph_scene()
    scene.load(vrag_run())
    view.fit()
    assert view.zoom() < LOD_FULL  # zoomed out: the full cards do not fit
    items = scene.node_items()
    assert items and all(item.beside > 0 for item in items)  # a chain: each card is last in its row
    base = view.palette().color(QPalette.ColorRole.Base)
    vp = view.viewport().rect()

    def words_beside() -> list[int]:
        qtbot.wait(20)
        img = view.viewport().grab().toImage()
        counts = []
        for item in items:
            card = view.mapFromScene(item.mapToScene(item.card()).boundingRect()).boundingRect()
            strip = QRect(card.right() + 6, card.top(), 90, card.height()).intersected(vp)
            assert strip.width() >= 80  # the fit left room for them inside the view
            counts.append(_text_pixels(img, strip, base))
        return counts

    counts = words_beside()
    assert all(n > 3 for n in counts) and sum(counts) > 150, counts
    scene.show_beside(False)  # as before: the words squeezed into the card, nothing beside it
    assert all(n == 0 for n in words_beside())


def test_the_details_tables_show_every_row_and_the_scores(qtbot: Any, graph_view: GraphView) -> None:
    scene = graph_view.graph_scene()
    scene.load(vrag_run())
    details = NodeDetails()
    qtbot.addWidget(details)
    details.resize(330, 700)
    details.show()
    details.show_node(scene.details("s1-search"))
    for width in (330, 700):
        details.resize(width, 700)
        qtbot.wait(30)
        t = details.tables["hits"]
        assert t.rowCount() == 3
        rows = sum(t.rowHeight(r) for r in range(t.rowCount()))
        bar = t.horizontalScrollBar()
        covered = bar.height() if bar.isVisible() else 0
        assert t.viewport().height() - covered >= rows, (width, t.viewport().height(), rows)
        head = t.horizontalHeader()
        for column in (2, 3):  # score and shown: whole and in view
            right = head.sectionViewportPosition(column) + head.sectionSize(column)
            assert head.sectionViewportPosition(column) >= 0 and right <= t.viewport().width(), (
                width,
                column,
            )
            text = t.item(0, column).text()
            assert head.sectionSize(column) >= t.fontMetrics().horizontalAdvance(text)

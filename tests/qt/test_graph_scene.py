"""The reasoning graph on screen: items follow the events, clicks reach the details panel, the view
zooms under the mouse, fits, follows a live run, and hundreds of nodes render.

Real widgets on the offscreen platform; event sequences from ``tests/test_reasoning_graph.py``
(built in the order the agents emit them); thumbnails are real image files.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QImage, QPalette, QWheelEvent
from PySide6.QtWidgets import QApplication
from test_reasoning_graph import hits_for, vimrag_run, vrag_run

from vrag_desktop.core.agents.events import (
    AgentEvent,
    GraphChanged,
    GraphNode,
    Memorize,
    MemoryItem,
    SearchResults,
)
from vrag_desktop.core.run.store import RunStore
from vrag_desktop.qt.graph.graph_items import KIND_COLORS, EdgeItem, NodeItem
from vrag_desktop.qt.graph.graph_scene import GraphScene
from vrag_desktop.qt.graph.graph_view import GraphView
from vrag_desktop.qt.graph.node_details import MISSING, UNREADABLE, NodeDetails, link_details


@pytest.fixture
def view(graph_view: GraphView) -> GraphView:
    return graph_view


def visible(view: GraphView, node_id: str) -> bool:
    item = view.graph_scene().node_item(node_id)
    assert item is not None
    return view.viewport().rect().contains(view.mapFromScene(item.sceneBoundingRect()).boundingRect())


def wheel(view: GraphView, pos: QPointF, notches: float) -> None:
    ev = QWheelEvent(
        pos,
        QPointF(view.viewport().mapToGlobal(pos.toPoint())),
        QPoint(),
        QPoint(0, round(120 * notches)),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(view.viewport(), ev)


def big_graph(n: int, seed: int = 1) -> list[AgentEvent]:
    """``n`` nodes, one snapshot per node, two thirds of them searches with results."""
    rng = random.Random(seed)
    nodes = [GraphNode(id="root", kind="root", label="q", query="What is in these reports?")]
    events: list[AgentEvent] = [GraphChanged(nodes=tuple(nodes))]
    kinds = ["search", "search", "think", "crop"]
    for i in range(1, n):
        parents = tuple({nodes[rng.randrange(max(0, i - 12), i)].id for _ in range(rng.choice([1, 1, 2]))})
        kind = kinds[i % 4]
        nodes.append(GraphNode(id=f"n{i}", kind=kind, parents=parents, label=f"node {i}", query=f"query {i}"))
        events.append(GraphChanged(step=i, nodes=tuple(nodes)))
        if kind == "search":
            events.append(SearchResults(step=i, content=f"query {i}", hits=hits_for(str(i)), node_id=f"n{i}"))
    return events


def pixel(img: QImage, view: GraphView, scene_pt: QPointF) -> QColor:
    p = view.viewport().mapTo(view, view.mapFromScene(scene_pt))
    dpr = img.devicePixelRatio()
    return img.pixelColor(round(p.x() * dpr), round(p.y() * dpr))


def close(a: QColor, b: QColor, tol: int = 24) -> bool:
    return max(abs(a.red() - b.red()), abs(a.green() - b.green()), abs(a.blue() - b.blue())) <= tol


# ====================================================================== items follow events


def test_nodes_and_edges_appear_as_events_arrive(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    added: list[list[str]] = []
    scene.nodesAdded.connect(added.append)
    events = vrag_run()
    for ev in events:
        scene.apply(ev)
        items = scene.node_items()
        assert sorted(i.node_id for i in items) == sorted(scene.graph.ids())
        assert len(scene.edge_items()) == len(scene.graph.edges())
        for item in items:  # each item sits where the model placed it
            assert (item.pos().x(), item.pos().y()) == (item.info.x, item.info.y)
    assert added == [
        ["root"],
        ["s1-think", "s1-search"],
        ["s2-think", "s2-crop"],
        ["s3-think", "s3-crop"],
        ["s4-think", "answer"],
    ]
    assert len(scene.node_items()) == 9 and len(scene.edge_items()) == 8
    assert sum(isinstance(i, EdgeItem) for i in scene.items()) == 8
    assert sum(isinstance(i, NodeItem) for i in scene.items()) == 9
    search = scene.node_item("s1-search")
    assert search is not None and "3 hits" in search.toolTip()


def test_changed_and_removed_nodes_update_their_items(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    events = vimrag_run(n_search=4, seed=1, failed=(2,))
    selected: list[str] = []
    scene.nodeSelected.connect(selected.append)
    gone = None
    for ev in events:
        before = set(scene.graph.ids())
        d = scene.apply(ev)
        if isinstance(ev, SearchResults) and ev.node_id and not ev.hits:
            gone = ev.node_id
            scene.select_node(gone)  # the person is looking at it when it goes away
            assert selected[-1] == gone
        if d.removed:
            assert set(d.removed) == {gone} and before - set(scene.graph.ids()) == {gone}
            assert scene.node_item(gone) is None and selected[-1] == ""
            assert all(gone not in (e.parent_id, e.child_id) for e in scene.edge_items())
        if isinstance(ev, Memorize):
            item = scene.node_item(str(ev.node_id))
            assert item is not None and "2/3 useful" in item.toolTip()
    assert gone is not None and scene.details(gone).removed
    assert len(scene.node_items()) == 5 and scene.selected_node() is None


def test_load_a_saved_run_and_clear(view: GraphView, tmp_path: Path, qtbot: Any) -> None:
    events = vimrag_run(n_search=12, failed=(4,))
    store = RunStore(tmp_path / "runs")
    with store.recorder("vimrag", "Who keeps the lighthouse?") as rec:
        for ev in events:
            rec.record(ev)
    scene = view.graph_scene()
    with qtbot.waitSignal(scene.nodesAdded) as got:
        scene.load(store.events(rec.id))
    live = GraphScene()
    for ev in events:
        live.apply(ev)
    assert sorted(got.args[0]) == sorted(live.graph.ids())
    assert {i.node_id: i.pos() for i in scene.node_items()} == {i.node_id: i.pos() for i in live.node_items()}
    assert len(scene.edge_items()) == len(live.edge_items()) == len(live.graph.edges())
    scene.select_node("answer")
    with qtbot.waitSignal(scene.nodeSelected) as sel:
        scene.clear_graph()
    assert sel.args == [""] and scene.items() == [] and len(scene.graph) == 0
    scene.load(vrag_run())  # another run in the same scene
    assert len(scene.node_items()) == 9


def test_edges_pass_between_nodes(view: GraphView, qtbot: Any) -> None:
    """Each edge touches its two nodes and no other: long edges run down free channels."""
    scene = view.graph_scene()
    for ev in vimrag_run(n_search=40, seed=11):
        scene.apply(ev)
    long = 0
    for edge in scene.edge_items():
        touched = {i.node_id for i in edge.collidingItems() if isinstance(i, NodeItem)}
        assert touched == {edge.parent_id, edge.child_id}, (edge.parent_id, edge.child_id, touched)
        long += bool(scene.graph.route((edge.parent_id, edge.child_id)))
    assert long >= 5


def test_edges_are_drawn_by_qt_restyled_on_selection_and_palette_and_lose_arrows_zoomed_out(
    view: GraphView, qtbot: Any
) -> None:
    """No Python paint or boundingRect for an edge (each was a GIL round-trip per edge at every
    repaint of a live run's graph): the scene colours edges when the selection or the palette
    changes, and the view hides their arrows below LOD_ARROW."""
    from PySide6.QtWidgets import QGraphicsPathItem

    from vrag_desktop.qt.graph.graph_items import LOD_ARROW

    assert EdgeItem.paint is QGraphicsPathItem.paint
    assert EdgeItem.boundingRect is QGraphicsPathItem.boundingRect
    scene = view.graph_scene()
    for ev in vrag_run():
        scene.apply(ev)
    edges = scene.edge_items()
    pal = scene.palette()
    text = QColor(pal.color(QPalette.ColorRole.Text))
    assert all(e.pen().color().rgb() == text.rgb() and e.pen().color().alpha() == 125 for e in edges)
    assert all(e.arrow_item.brush().color() == e.pen().color() for e in edges)
    scene.select_node("s1-search")
    lit = [e for e in edges if "s1-search" in (e.parent_id, e.child_id)]
    assert lit and all(e.pen().color() == pal.color(QPalette.ColorRole.Highlight) for e in lit)
    assert all(e.pen().color().alpha() == 125 for e in edges if e not in lit)
    dark = QPalette(pal)
    dark.setColor(QPalette.ColorRole.Text, QColor("#e6e8eb"))
    scene.set_palette(dark)
    assert all(e.pen().color().rgb() == QColor("#e6e8eb").rgb() for e in edges if e not in lit)
    view.set_zoom(LOD_ARROW / 2)
    assert not any(e.arrow_item.isVisible() for e in edges)
    view.set_zoom(1.0)
    assert all(e.arrow_item.isVisible() for e in edges)


# ====================================================================== clicking and details


def memory_run(tmp_path: Path) -> tuple[list[AgentEvent], Path, Path]:
    """A VimRAG run whose memory images are real files: one good, one missing, one unreadable."""
    good, bad = tmp_path / "good.png", tmp_path / "bad.jpg"
    img = QImage(900, 1200, QImage.Format.Format_RGB32)
    img.fill(QColor("#3a7"))
    assert img.save(str(good))
    bad.write_bytes(b"not a jpeg at all")
    out: list[AgentEvent] = []
    for ev in vimrag_run(n_search=5, seed=4):
        if isinstance(ev, Memorize):
            paths = [str(good), str(tmp_path / "gone.jpg"), str(bad)]
            ev = Memorize(
                step=ev.step,
                time=ev.time,
                content=ev.content,
                node_id=ev.node_id,
                items=tuple(
                    MemoryItem(**{**m.__dict__, "image": p}) for m, p in zip(ev.items, paths, strict=True)
                ),
            )
        out.append(ev)
    return out, good, bad


def test_click_a_node_shows_its_details(view: GraphView, qtbot: Any, tmp_path: Path) -> None:
    events, _good, _ = memory_run(tmp_path)
    scene = view.graph_scene()
    details = NodeDetails()
    details.resize(460, 700)
    qtbot.addWidget(details)
    link_details(scene, details)
    scene.load(events)
    view.set_zoom(1.0)
    memo = [e for e in events if isinstance(e, Memorize)][2]
    nid = str(memo.node_id)
    item = scene.node_item(nid)
    assert item is not None
    view.centerOn(item)
    clicks: list[str] = []
    view.nodeClicked.connect(clicks.append)
    with qtbot.waitSignal(scene.nodeClicked) as clicked:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(item.scenePos()))
    assert clicked.args == [nid] and clicks == [nid]
    assert view.selected_node() == nid and item.isSelected()

    info = scene.details(nid)
    assert details.node() is info
    assert details.fields["query"].text() == info.query
    assert details.fields["summary"].text() == memo.content
    results = next(e for e in events if isinstance(e, SearchResults) and e.node_id == nid)
    hits = details.tables["hits"]
    assert hits.rowCount() == len(results.hits)
    assert [hits.item(r, 2).text() for r in range(hits.rowCount())] == [
        f"{h.score:.3f}" for h in results.hits
    ]
    assert hits.item(0, 1).text() == "report-0.pdf · p.2"
    mem = details.tables["memory"]
    assert [[mem.item(r, c).text() for c in (1, 2, 3, 4, 5)] for r in range(mem.rowCount())] == [
        [
            m.information_id,
            "yes" if m.useful else "no",
            str(m.priority),
            f"{m.energy:.3f}",
            f"{m.pixel_budget:,} px" if m.pixel_budget else "—",
        ]
        for m in memo.items
    ]
    assert mem.item(1, 0).text() == MISSING  # known at once
    qtbot.waitUntil(lambda: mem.item(0, 0).data(Qt.ItemDataRole.DecorationRole) is not None, timeout=3000)
    thumb = mem.item(0, 0).data(Qt.ItemDataRole.DecorationRole)
    assert max(thumb.width(), thumb.height()) <= 88 and thumb.height() == 88  # decoded at thumbnail size
    qtbot.waitUntil(lambda: mem.item(2, 0).text() == UNREADABLE, timeout=3000)

    # clicking the background clears the selection and the panel
    with qtbot.waitSignal(scene.nodeSelected) as sel:
        qtbot.mouseClick(
            view.viewport(),
            Qt.MouseButton.LeftButton,
            pos=view.mapFromScene(item.scenePos()) + QPoint(0, round(item.h)),
        )
    assert sel.args == [""] and details.node() is None and not details.tables


def test_details_of_crop_answer_and_live_refresh(view: GraphView, qtbot: Any, tmp_path: Path) -> None:
    scene = view.graph_scene()
    details = NodeDetails()
    qtbot.addWidget(details)
    link_details(scene, details)
    events = vrag_run()
    crop_at = next(i for i, e in enumerate(events) if e.event == "crop_image")
    for ev in events:
        scene.apply(ev)
    scene.select_node("s2-crop")
    crops = details.tables["crops"]
    x1, y1, x2, y2 = scene.details("s2-crop").crops[0].region
    assert crops.item(0, 1).text().startswith(f"[{x1}, {y1}, {x2}, {y2}]")
    assert crops.item(0, 0).text() == MISSING and details.fields["box"].text() == "[20, 30, 400, 160]"
    scene.select_node("answer")
    assert details.fields["answer"].text() == "cold, wind and UV light"
    assert "region [" in details.fields["evidence"].text()
    assert crop_at > 0

    # a live node gains its memory while it is shown: the panel follows
    scene.clear_graph()
    run = vimrag_run(n_search=1)
    memo = next(i for i, e in enumerate(run) if isinstance(e, Memorize))
    for ev in run[:memo]:
        scene.apply(ev)
    nid = str(run[memo].node_id)  # type: ignore[attr-defined]
    scene.select_node(nid)
    assert "memory" not in details.tables and "hits" in details.tables
    scene.apply(run[memo])
    qtbot.waitUntil(lambda: "memory" in details.tables, timeout=2000)
    assert details.tables["memory"].rowCount() == 3


# ====================================================================== zoom, pan, fit, follow


def test_wheel_zoom_keeps_the_point_under_the_mouse(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    scene.load(vimrag_run(n_search=20))
    view.fit()
    for pos, notches in [
        (QPointF(200, 150), 1),
        (QPointF(610, 420), 2),
        (QPointF(100, 500), -1),
        (QPointF(400, 300), -3),
        (QPointF(700, 80), 0.5),
    ]:
        before_zoom = view.zoom()
        scene_pt = view.mapToScene(pos.toPoint())
        wheel(view, pos, notches)
        assert view.zoom() == pytest.approx(
            min(view.MAX_ZOOM, max(view.MIN_ZOOM, before_zoom * 1.2**notches))
        )
        after = view.mapFromScene(scene_pt)
        assert abs(after.x() - pos.x()) <= 2 and abs(after.y() - pos.y()) <= 2, (pos, after)
    for _ in range(40):
        wheel(view, QPointF(300, 300), 1)
    assert view.zoom() == view.MAX_ZOOM
    for _ in range(80):
        wheel(view, QPointF(300, 300), -1)
    assert view.zoom() == view.MIN_ZOOM


def test_zoom_buttons_change_the_transform_around_the_centre(view: GraphView, qtbot: Any) -> None:
    view.graph_scene().load(vrag_run())
    view.set_zoom(1.0)
    centre = view.viewport().rect().center()
    scene_pt = view.mapToScene(centre)
    zooms: list[float] = []
    view.zoomChanged.connect(zooms.append)
    view.zoom_in()
    assert view.transform().m11() == pytest.approx(1.2) and view.transform().m22() == pytest.approx(1.2)
    view.zoom_out()
    view.zoom_out()
    assert view.zoom() == pytest.approx(1 / 1.2)
    assert zooms == pytest.approx([1.2, 1.0, 1 / 1.2])
    after = view.mapFromScene(scene_pt)
    assert abs(after.x() - centre.x()) <= 2 and abs(after.y() - centre.y()) <= 2


def test_fit_shows_every_node(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    scene.load(big_graph(120))
    view.set_zoom(2.0)
    assert not all(visible(view, n) for n in scene.graph.ids())
    view.fit()
    assert all(visible(view, n) for n in scene.graph.ids())
    r = view.mapFromScene(scene.graph_rect()).boundingRect()
    vp = view.viewport().rect()  # fitted: the graph fills the view along one axis (less the margin)
    assert r.width() >= vp.width() - 60 or r.height() >= vp.height() - 60
    # a small graph is not blown up past natural size
    scene.load(vrag_run(actions=[("x", "answer:y")]))
    view.fit()
    assert view.zoom() == 1.0 and all(visible(view, n) for n in scene.graph.ids())


def test_live_view_follows_the_newest_node_until_the_person_moves(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    view.set_zoom(1.0)
    view.set_live(True)
    actions = [
        (f"thought {i}", f"search:query {i}" if i % 2 else f"bbox:[1, 2, {30 + i}, 40]") for i in range(14)
    ]
    events = vrag_run(actions=[*actions, ("done", "answer:42")])
    for ev in events:
        scene.apply(ev)
        newest = scene.graph.newest()
        if newest:
            assert visible(view, newest), newest
    assert view.following() == "newest"

    # the person zooms: the view stays where they put it
    scene.clear_graph()
    view.set_live(True)
    for ev in events[:10]:
        scene.apply(ev)
    wheel(view, QPointF(400, 300), 1)
    assert view.following() is None
    where = view.mapToScene(view.viewport().rect().center())
    for ev in events[10:]:
        scene.apply(ev)
    assert view.mapToScene(view.viewport().rect().center()) == where
    assert not visible(view, "answer")

    # fit while live keeps the whole graph in view as it grows
    scene.clear_graph()
    view.set_live(True)
    scene.apply(events[0])
    view.fit()
    assert view.following() == "fit"
    for ev in events[1:]:
        scene.apply(ev)
    assert all(visible(view, n) for n in scene.graph.ids())
    view.set_live(False)
    assert view.following() is None and not view.is_live()


def test_dragging_pans_and_stops_following(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    scene.load(big_graph(60))
    view.set_zoom(1.0)
    view.set_live(True)
    view.centerOn(scene.node_item("n30"))  # room to pan every way
    empty = next(
        p
        for p in (QPoint(x, y) for y in range(200, 400, 7) for x in range(300, 500, 7))
        if view.itemAt(p) is None
    )
    before = view.mapToScene(view.viewport().rect().center())
    qtbot.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=empty)
    for k in range(1, 6):
        qtbot.mouseMove(view.viewport(), empty + QPoint(-30 * k, 20 * k))
    qtbot.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=empty + QPoint(-150, 100))
    after = view.mapToScene(view.viewport().rect().center())
    assert view.following() is None
    assert after.x() == pytest.approx(before.x() + 150, abs=2) and after.y() == pytest.approx(
        before.y() - 100, abs=2
    )
    assert view.selected_node() is None  # a drag on the background selects nothing


# ====================================================================== drawing


def test_level_of_detail_and_palettes(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    scene.load(vrag_run())
    item = scene.node_item("s1-search")
    assert item is not None
    probe = item.scenePos() + QPointF(0, item.h * 0.3)  # inside the body, below the text lines
    search = QColor(KIND_COLORS["search"])

    view.set_zoom(1.0)
    view.centerOn(item)
    img = view.grab().toImage()
    body = pixel(img, view, probe)
    assert not close(body, search) and body.lightness() > 200  # full card: light body on a light base

    view.set_zoom(0.1)  # far out: a plain box in the kind colour
    view.centerOn(item)
    img = view.grab().toImage()
    assert close(pixel(img, view, item.scenePos()), search)

    dark = QPalette(view.palette())
    dark.setColor(QPalette.ColorRole.Base, QColor("#1e1f22"))
    dark.setColor(QPalette.ColorRole.Text, QColor("#dfe1e5"))
    view.setPalette(dark)
    assert scene.palette().color(QPalette.ColorRole.Base) == QColor("#1e1f22")
    view.set_zoom(1.0)
    view.centerOn(item)
    img = view.grab().toImage()
    body = pixel(img, view, probe)
    assert body.lightness() < 90 and not close(body, search)  # a dark card body, still tinted
    assert close(pixel(img, view, item.scenePos() - QPointF(item.w / 2 - 4, item.h / 2 - 8)), search, 40)


def test_three_hundred_nodes_render(view: GraphView, qtbot: Any) -> None:
    scene = view.graph_scene()
    t = time.perf_counter()
    for ev in big_graph(300):
        scene.apply(ev)
    build = time.perf_counter() - t
    assert len(scene.node_items()) == 300 and len(scene.edge_items()) == len(scene.graph.edges())
    view.fit()
    t = time.perf_counter()
    img = view.grab().toImage()
    first = time.perf_counter() - t
    assert not img.isNull()
    kinds = {QColor(c).rgb() for c in KIND_COLORS.values()}
    seen = {img.pixelColor(x, y).rgb() for x in range(0, img.width(), 3) for y in range(0, img.height(), 3)}
    assert len(kinds & seen) >= 3  # boxes of several kinds were drawn
    view.set_zoom(1.0)
    view.centerOn(scene.node_item("n150"))
    assert not view.grab().toImage().isNull()
    assert build < 10 and first < 10, (build, first)  # generous: typically well under a second


def test_a_malformed_graph_from_the_model_still_draws(view: GraphView, qtbot: Any) -> None:
    """Unknown parents, a cycle, a self-loop, a duplicate id, an unknown kind: drawn, never a crash."""
    nodes = (
        GraphNode("root", "root", label="q"),
        GraphNode("a", "search", parents=("root", "b"), query="first"),
        GraphNode("b", "search", parents=("a",), query="second"),
        GraphNode("c", "search", parents=("nope",), query="orphan"),
        GraphNode("a", "search", parents=("root",), query="duplicate id"),
        GraphNode("d", "weird", parents=("d",), label="self-loop"),
    )
    scene = view.graph_scene()
    scene.apply(GraphChanged(step=1, nodes=nodes))
    assert sorted(n.node_id for n in scene.node_items()) == ["a", "b", "c", "d", "root"]
    rects = [n.sceneBoundingRect() for n in scene.node_items()]
    assert not any(r.intersects(o) for i, r in enumerate(rects) for o in rects[i + 1 :])
    view.fit()
    assert not view.grab().isNull()
    scene.apply(GraphChanged(step=2, nodes=nodes[:2]))  # and a later snapshot that drops most of it
    assert sorted(n.node_id for n in scene.node_items() if not n.info.removed) == ["a", "root"]

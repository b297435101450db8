"""The reasoning graph drawn live: a scene that mirrors :class:`ReasoningGraph` item by item, and a view
to read it with (zoom under the mouse, pan, fit, follow the newest node while a run is live).

The model places nodes and never moves them, so the scene only ever adds, repaints or removes
items — no relayout pass, no jumping. Hundreds of nodes stay smooth: nodes paint into a device
cache, edges use cosmetic pens, and when zoomed out nodes draw as plain coloured boxes.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPalette,
    QPen,
    QPolygonF,
    QResizeEvent,
    QTransform,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QAbstractSlider,
    QApplication,
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsSceneMouseEvent,
    QGraphicsView,
    QStyleOptionGraphicsItem,
    QWidget,
)

from vrag_desktop.core.agents.events import AgentEvent
from vrag_desktop.core.run.reasoning_graph import GraphDelta, Layout, NodeInfo, ReasoningGraph

Z_EDGE, Z_EDGE_EMPHASIS, Z_NODE = -2.0, -1.0, 1.0
# Levels of detail by zoom: the full card; a box with one large name; below LOD_BOX a plain coloured box.
LOD_FULL = 0.6
LOD_BOX = 0.25
LOD_ARROW = 0.2

# Mid-saturation kind colours: white text on them is readable, and they stand out on light and dark bases.
KIND_COLORS = {
    "root": "#4f5d95",
    "think": "#8657c4",
    "search": "#2474c6",
    "crop": "#b8650f",
    "answer": "#24894a",
}
OTHER_COLOR = "#6b7280"


def kind_color(kind: str) -> QColor:
    return QColor(KIND_COLORS.get(kind, OTHER_COLOR))


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved a fraction ``t`` towards ``b``."""
    return QColor.fromRgbF(
        a.redF() + (b.redF() - a.redF()) * t,
        a.greenF() + (b.greenF() - a.greenF()) * t,
        a.blueF() + (b.blueF() - a.blueF()) * t,
    )


def wrap_lines(text: str, fm: QFontMetricsF, width: float, max_lines: int) -> list[str]:
    """Greedy word wrap into at most ``max_lines``; the last line is elided when text is left over."""
    words = text.split()
    lines: list[str] = []
    cur = ""
    i = 0
    while i < len(words) and len(lines) < max_lines:
        trial = f"{cur} {words[i]}" if cur else words[i]
        if fm.horizontalAdvance(trial) <= width:
            cur, i = trial, i + 1
        elif cur:
            lines.append(cur)
            cur = ""
        else:  # one word wider than the line
            lines.append(fm.elidedText(words[i], Qt.TextElideMode.ElideRight, width))
            i += 1
    if cur and len(lines) < max_lines:
        lines.append(cur)
        cur = ""
    if (i < len(words) or cur) and lines:
        rest = " ".join([lines[-1], cur, *words[i:]]).replace("  ", " ")
        lines[-1] = fm.elidedText(rest, Qt.TextElideMode.ElideRight, width)
    return lines


class NodeItem(QGraphicsItem):
    """One node: a rounded card with a kind-coloured header (caption, step or name), up to two lines
    of text and a status badge; only the coloured box when zoomed out."""

    RADIUS = 7.0
    HEADER = 22.0
    PAD = 8.0

    def __init__(self, info: NodeInfo, layout: Layout) -> None:
        super().__init__()
        self.info = info
        self.w, self.h = layout.node_width, layout.node_height
        self.setPos(info.x, info.y)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, True)
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setZValue(Z_NODE)
        self.setAcceptHoverEvents(True)
        self._hover = False
        self._lines: tuple[str, float, list[str]] | None = None  # text, width -> wrapped lines
        self.refresh()

    @property
    def node_id(self) -> str:
        return self.info.id

    def refresh(self) -> None:
        """Repaint after the node's text, badge or details changed."""
        i = self.info
        tip = [f"<b>{i.caption}</b> {_html(i.tag)}"]
        if i.text:
            tip.append(_html(i.text[:400]))
        if i.badge:
            tip.append(f"<i>{_html(i.badge)}</i>")
        self.setToolTip("<br>".join(tip))
        self._lines = None
        self.update()

    def card(self) -> QRectF:
        return QRectF(-self.w / 2, -self.h / 2, self.w, self.h)

    def boundingRect(self) -> QRectF:
        return self.card().adjusted(-4, -4, 4, 4)  # room for the selection ring

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(self.card(), self.RADIUS, self.RADIUS)
        return path

    def hoverEnterEvent(self, event: Any) -> None:
        self._hover = True
        self.update()
        super().hoverEnterEvent(event)

    def hoverLeaveEvent(self, event: Any) -> None:
        self._hover = False
        self.update()
        super().hoverLeaveEvent(event)

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.GraphicsItemChange.ItemSelectedHasChanged:
            self.update()
        return super().itemChange(change, value)

    def _palette(self) -> QPalette:
        s = self.scene()
        return s.palette() if s is not None else QApplication.palette()

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        pal = self._palette()
        dark = is_dark(pal)
        color = kind_color(self.info.kind)
        rect = self.card()
        lod = option.levelOfDetailFromTransform(painter.worldTransform())  # type: ignore[attr-defined]
        selected = self.isSelected()
        highlight = pal.color(QPalette.ColorRole.Highlight)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)

        if selected:  # a soft ring outside the card
            ring = QColor(highlight)
            ring.setAlpha(110)
            painter.setPen(QPen(ring, 6.0))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), self.RADIUS + 1, self.RADIUS + 1)

        dashed = self.info.synthetic or self.info.forced
        border = QPen(
            highlight if selected else color.darker(125 if not dark else 90), 2.2 if selected else 1.3
        )
        border.setCosmetic(True)
        if dashed:
            border.setStyle(Qt.PenStyle.DashLine)

        if lod < LOD_FULL:
            painter.setPen(border)
            painter.setBrush(color)
            painter.drawRoundedRect(rect, self.RADIUS, self.RADIUS)
            if lod >= LOD_BOX:  # one name, large enough to read at this zoom
                big = QFont(widget.font() if widget is not None else painter.font())
                big.setBold(True)
                big.setPixelSize(max(1, round(self.h * 0.3)))
                painter.setFont(big)
                painter.setPen(QColor("#ffffff"))
                tag = self.info.tag
                name = (
                    tag
                    if self.info.kind == "search" and tag and not tag.startswith("step ")
                    else self.info.caption
                )
                inner = rect.adjusted(self.PAD, 0, -self.PAD, 0)
                painter.drawText(
                    inner,
                    Qt.AlignmentFlag.AlignCenter,
                    QFontMetricsF(big).elidedText(name, Qt.TextElideMode.ElideRight, inner.width()),
                )
            return

        base = pal.color(QPalette.ColorRole.Base)
        body = mix(base, color, 0.22 if dark else 0.09)
        if self._hover and not selected:
            body = mix(body, color, 0.12)
        path = self.shape()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(body)
        painter.drawPath(path)
        painter.save()
        painter.setClipPath(path)
        painter.fillRect(QRectF(rect.left(), rect.top(), rect.width(), self.HEADER), color)
        painter.restore()
        painter.setPen(border)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(path)

        font = QFont(painter.font() if widget is None else widget.font())
        base_pt = font.pointSizeF() if font.pointSizeF() > 0 else 9.0
        pad = self.PAD
        inner = rect.width() - 2 * pad

        # header: caption left, tag right (white on the kind colour)
        cap_font = QFont(font)
        cap_font.setBold(True)
        cap_font.setPointSizeF(base_pt * 0.95)
        painter.setFont(cap_font)
        fm = QFontMetricsF(cap_font)
        head = QRectF(rect.left() + pad, rect.top(), inner, self.HEADER)
        caption = self.info.caption.upper() if lod < 0.8 else self.info.caption
        painter.setPen(QColor("#ffffff"))
        painter.drawText(head, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, caption)
        tag = self.info.tag
        if tag:
            tag_font = QFont(font)
            tag_font.setPointSizeF(base_pt * 0.85)
            tfm = QFontMetricsF(tag_font)
            room = inner - fm.horizontalAdvance(caption) - 12
            if room > 20:
                painter.setFont(tag_font)
                painter.setPen(QColor(255, 255, 255, 215))
                painter.drawText(
                    head,
                    Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                    tfm.elidedText(tag, Qt.TextElideMode.ElideRight, room),
                )

        # body: up to two lines of text, then the badge
        text_font = QFont(font)
        text_font.setPointSizeF(base_pt)
        tfm = QFontMetricsF(text_font)
        badge = self.info.badge
        line_h = tfm.lineSpacing()
        body_top = rect.top() + self.HEADER + pad * 0.6
        room_h = rect.bottom() - body_top - pad * 0.5 - (line_h if badge else 0)
        max_lines = max(1, int(room_h // line_h))
        text = self.info.text or "…"
        if self._lines is None or self._lines[0] != text or self._lines[1] != inner:
            self._lines = (text, inner, wrap_lines(text, tfm, inner, max_lines))
        painter.setFont(text_font)
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        y = body_top
        for line in self._lines[2][:max_lines]:
            painter.drawText(
                QRectF(rect.left() + pad, y, inner, line_h),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                line,
            )
            y += line_h
        if badge:
            badge_font = QFont(font)
            badge_font.setPointSizeF(base_pt * 0.8)
            painter.setFont(badge_font)
            muted = mix(pal.color(QPalette.ColorRole.Text), body, 0.4)
            if self.info.errors:
                muted = QColor("#e0605a" if dark else "#b3261e")
            painter.setPen(muted)
            painter.drawText(
                QRectF(rect.left() + pad, rect.bottom() - line_h - pad * 0.35, inner, line_h),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                badge,
            )


class EdgeItem(QGraphicsItem):
    """Parent → child: a curve leaving the parent's far side and arriving at the child with an arrow."""

    ARROW_LEN = 9.0
    ARROW_HALF = 4.5

    def __init__(
        self,
        parent: NodeInfo,
        child: NodeInfo,
        layout: Layout,
        route: list[tuple[float, float]] | None = None,
    ) -> None:
        super().__init__()
        self.parent_id, self.child_id = parent.id, child.id
        self.setZValue(Z_EDGE)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.emphasis = False
        self.path, self.arrow = self._geometry(parent, child, layout, route or [])
        self._bounds = self.path.boundingRect().united(self.arrow.boundingRect()).adjusted(-3, -3, 3, 3)
        self._shape: QPainterPath | None = None

    def _geometry(
        self, p: NodeInfo, c: NodeInfo, lay: Layout, route: list[tuple[float, float]]
    ) -> tuple[QPainterPath, QPolygonF]:
        """S-curves across the gaps between layers; a long edge runs straight down its channel
        (the route's two waypoints) between them."""
        tb = lay.direction == "TB"
        hw, hh = lay.node_width / 2, lay.node_height / 2
        if tb:
            start, tip = QPointF(p.x, p.y + hh), QPointF(c.x, c.y - hh)
            unit = QPointF(0, 1 if tip.y() >= start.y() else -1)
        else:
            start, tip = QPointF(p.x + hw, p.y), QPointF(c.x - hw, c.y)
            unit = QPointF(1 if tip.x() >= start.x() else -1, 0)
        end = tip - unit * self.ARROW_LEN
        points = [start, *(QPointF(x, y) for x, y in route), end]
        path = QPainterPath(start)
        for i, (a, b) in enumerate(itertools.pairwise(points)):
            if route and i == 1:  # down the channel
                path.lineTo(b)
                continue
            span = abs((b.y() - a.y()) if tb else (b.x() - a.x()))
            bend = max(span * 0.5, 6.0)
            path.cubicTo(a + unit * bend, b - unit * bend, b)
        normal = QPointF(-unit.y(), unit.x()) * self.ARROW_HALF
        arrow = QPolygonF([tip, end + normal, end - normal])
        return path, arrow

    def set_emphasis(self, on: bool) -> None:
        if on != self.emphasis:
            self.emphasis = on
            self.setZValue(Z_EDGE_EMPHASIS if on else Z_EDGE)
            self.update()

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        """The line itself (not its bounding box), so the empty space around a curve stays empty."""
        if self._shape is None:
            stroker = QPainterPathStroker()
            stroker.setWidth(6.0)
            self._shape = stroker.createStroke(self.path)
            self._shape.addPolygon(self.arrow)
        return self._shape

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        s = self.scene()
        pal = s.palette() if s is not None else QApplication.palette()
        if self.emphasis:
            color = pal.color(QPalette.ColorRole.Highlight)
        else:
            color = QColor(pal.color(QPalette.ColorRole.Text))
            color.setAlpha(125)
        pen = QPen(color, 2.2 if self.emphasis else 1.3)
        pen.setCosmetic(True)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.path)
        if option.levelOfDetailFromTransform(painter.worldTransform()) >= LOD_ARROW:  # type: ignore[attr-defined]
            painter.setBrush(color)
            painter.drawPolygon(self.arrow)


class GraphScene(QGraphicsScene):
    """Items for a :class:`ReasoningGraph`, updated from its deltas.

    Signals: ``nodeClicked(id)`` on a click on a node; ``nodeSelected(id)`` when the selection
    changes ("" for none); ``nodesAdded(list)`` after new nodes are drawn; ``detailsChanged(id)``
    when what a details panel shows for a node changed (results, memory, thinking…).
    """

    nodeClicked = Signal(str)
    nodeSelected = Signal(str)
    nodesAdded = Signal(list)
    detailsChanged = Signal(str)

    def __init__(self, parent: Any = None, layout: Layout | None = None) -> None:
        super().__init__(parent)
        self.graph = ReasoningGraph(layout)
        self._nodes: dict[str, NodeItem] = {}
        self._edges: dict[tuple[str, str], EdgeItem] = {}
        self._selected: str | None = None
        self.selectionChanged.connect(self._on_selection)

    @property
    def layout(self) -> Layout:
        return self.graph.layout

    # ------------------------------------------------------------------ feeding
    def apply(self, event: AgentEvent | Mapping[str, Any]) -> GraphDelta:
        """Take one event of a live run; redraw only what it changed."""
        delta = self.graph.apply(event)
        if delta:
            self._sync(delta)
        return delta

    def load(self, events: Iterable[AgentEvent | Mapping[str, Any]]) -> None:
        """Show a saved run (replaces what is drawn)."""
        self.clear_graph()
        self.graph = ReasoningGraph.from_events(events, self.graph.layout)
        added = self.graph.ids()
        for info in self.graph.nodes():
            self._add_node(info)
        for e in self.graph.edges():
            self._add_edge(e)
        self._fit_rect()
        if added:
            self.nodesAdded.emit(added)

    def clear_graph(self) -> None:
        """Remove every item and forget the run."""
        self.blockSignals(True)
        try:
            self.clearSelection()
            self.clear()
        finally:
            self.blockSignals(False)
        self._nodes.clear()
        self._edges.clear()
        self.graph.reset()
        if self._selected is not None:
            self._selected = None
            self.nodeSelected.emit("")
        self.setSceneRect(QRectF())

    def _sync(self, d: GraphDelta) -> None:
        for e in d.removed_edges:
            item = self._edges.pop(e, None)
            if item is not None:
                self.removeItem(item)
        for nid in d.removed:
            item = self._nodes.pop(nid, None)
            if item is not None:
                self.removeItem(item)  # a selected node going away clears the selection
        for nid in d.added:
            self._add_node(self.graph.node(nid))
        for nid in d.changed:
            item = self._nodes.get(nid)
            if item is not None:
                item.refresh()
        for e in d.added_edges:
            self._add_edge(e)
        if d.added or d.removed:
            self._fit_rect()
        if d.added:
            self.nodesAdded.emit(list(d.added))
        for nid in d.details:
            self.detailsChanged.emit(nid)

    def _add_node(self, info: NodeInfo) -> None:
        old = self._nodes.pop(info.id, None)
        if old is not None:
            self.removeItem(old)
        item = NodeItem(info, self.graph.layout)
        self._nodes[info.id] = item
        self.addItem(item)

    def _add_edge(self, e: tuple[str, str]) -> None:
        if e in self._edges:
            return
        item = EdgeItem(self.graph.node(e[0]), self.graph.node(e[1]), self.graph.layout, self.graph.route(e))
        item.set_emphasis(self._selected in e)
        self._edges[e] = item
        self.addItem(item)

    def _fit_rect(self) -> None:
        """Scene rect = the graph with a margin (views widen it as needed for zoom and pan)."""
        x0, y0, x1, y1 = self.graph.bounds()
        m = max(self.graph.layout.node_width, self.graph.layout.node_height)
        self.setSceneRect(QRectF(x0 - m, y0 - m, x1 - x0 + 2 * m, y1 - y0 + 2 * m))

    # ------------------------------------------------------------------ queries
    def node_item(self, node_id: str) -> NodeItem | None:
        return self._nodes.get(node_id)

    def node_items(self) -> list[NodeItem]:
        return list(self._nodes.values())

    def edge_items(self) -> list[EdgeItem]:
        return list(self._edges.values())

    def details(self, node_id: str) -> NodeInfo:
        """What the details panel shows for a node (live or removed)."""
        return self.graph.node(node_id)

    def graph_rect(self) -> QRectF:
        """The drawn nodes' bounds in scene units (empty when there are none)."""
        if not self._nodes:
            return QRectF()
        x0, y0, x1, y1 = self.graph.bounds()
        return QRectF(x0, y0, x1 - x0, y1 - y0)

    # ------------------------------------------------------------------ selection
    def selected_node(self) -> str | None:
        return self._selected

    def select_node(self, node_id: str | None) -> None:
        """Select one node (None: none), as a click would, without emitting ``nodeClicked``."""
        self.clearSelection()
        item = self._nodes.get(node_id) if node_id else None
        if item is not None:
            item.setSelected(True)

    def _on_selection(self) -> None:
        try:
            chosen = [i for i in self.selectedItems() if isinstance(i, NodeItem)]
        except RuntimeError:  # the scene is being destroyed
            return
        nid = chosen[0].node_id if chosen else None
        if nid == self._selected:
            return
        for e, item in self._edges.items():
            item.set_emphasis(nid is not None and nid in e)
        self._selected = nid
        self.nodeSelected.emit(nid or "")

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        super().mousePressEvent(event)
        if event.button() != Qt.MouseButton.LeftButton:
            return
        views = self.views()
        transform = views[0].transform() if views else QTransform()
        for item in self.items(
            event.scenePos(),
            Qt.ItemSelectionMode.IntersectsItemShape,
            Qt.SortOrder.DescendingOrder,
            transform,
        ):
            if isinstance(item, NodeItem):
                self.nodeClicked.emit(item.node_id)
                break

    # ------------------------------------------------------------------ palette
    def event(self, ev: QEvent) -> bool:
        if ev.type() == QEvent.Type.PaletteChange:
            for item in self.items():
                item.update()
        return super().event(ev)


class GraphView(QGraphicsView):
    """Reads a :class:`GraphScene`: the wheel zooms under the mouse (clamped), drag pans, ``fit``
    shows everything. While a run is live (``set_live(True)``) the view follows the newest node —
    or keeps everything in view after ``fit()`` — until the person zooms or pans."""

    zoomChanged = Signal(float)
    nodeClicked = Signal(str)

    MIN_ZOOM = 0.05
    MAX_ZOOM = 3.0
    FIT_MAX_ZOOM = 1.0  # a small graph is fitted at natural size, not blown up
    STEP = 1.2  # per wheel notch or zoom_in()

    def __init__(self, scene: GraphScene | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRenderHints(
            QPainter.RenderHint.Antialiasing
            | QPainter.RenderHint.TextAntialiasing
            | QPainter.RenderHint.SmoothPixmapTransform
        )
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)  # anchoring is done by hand
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.BoundingRectViewportUpdate)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # pan by dragging
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMinimumSize(QSize(120, 90))
        self._live = False
        self._follow: str | None = None  # "newest" | "fit" | None
        self._press: QPointF | None = None
        self._programmatic = 0
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.actionTriggered.connect(self._user_scrolled)
        self.setScene(scene if scene is not None else GraphScene(self))

    # ------------------------------------------------------------------ scene
    def setScene(self, scene: QGraphicsScene | None) -> None:
        old = self.scene()
        if isinstance(old, GraphScene):
            for sig, slot in (
                (old.nodesAdded, self._on_nodes_added),
                (old.nodeClicked, self.nodeClicked.emit),
            ):
                with contextlib.suppress(RuntimeError, TypeError):
                    sig.disconnect(slot)
        super().setScene(scene)
        if isinstance(scene, GraphScene):
            scene.setPalette(self.palette())
            scene.nodesAdded.connect(self._on_nodes_added)
            scene.nodeClicked.connect(self.nodeClicked.emit)

    def graph_scene(self) -> GraphScene:
        s = self.scene()
        assert isinstance(s, GraphScene)
        return s

    def selected_node(self) -> str | None:
        return self.graph_scene().selected_node()

    # ------------------------------------------------------------------ zoom
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, zoom: float, anchor: QPointF | None = None) -> None:
        """Zoom to ``zoom`` (clamped) keeping the scene point under viewport position ``anchor``
        (default: the viewport centre) where it is."""
        old = self.zoom()
        new = min(self.MAX_ZOOM, max(self.MIN_ZOOM, zoom))
        if abs(new - old) < 1e-9:
            return
        vp = self.viewport().rect()
        pos = QPointF(anchor) if anchor is not None else QPointF(vp.width() / 2, vp.height() / 2)
        scene_pt = self._to_scene(pos)
        self._programmatic += 1
        try:
            self.setTransform(QTransform.fromScale(new, new))
            self._widen_rect(scene_pt, pos)
            self._put(scene_pt, pos)
        finally:
            self._programmatic -= 1
        self.zoomChanged.emit(new)

    def zoom_in(self) -> None:
        self._user_moved()
        self.set_zoom(self.zoom() * self.STEP)

    def zoom_out(self) -> None:
        self._user_moved()
        self.set_zoom(self.zoom() / self.STEP)

    def reset_zoom(self) -> None:
        self._user_moved()
        self.set_zoom(1.0)

    def fit(self) -> None:
        """Show every node with a margin (never above natural size); while live, keep doing so."""
        if self._live:
            self._follow = "fit"
        self._fit()

    def _fit(self) -> None:
        rect = self.graph_scene().graph_rect()
        if rect.isEmpty():
            return
        margin = 24.0
        vp = self.viewport().rect()
        w, h = max(1.0, vp.width() - 2 * margin), max(1.0, vp.height() - 2 * margin)
        zoom = min(w / rect.width(), h / rect.height(), self.FIT_MAX_ZOOM)
        zoom = max(zoom, 0.005)  # fitting may go below MIN_ZOOM: a huge graph must still fit
        self._programmatic += 1
        try:
            self.setTransform(QTransform.fromScale(zoom, zoom))
            centre = rect.center()
            pos = QPointF(vp.width() / 2, vp.height() / 2)
            self._widen_rect(centre, pos, reset=True)
            self._put(centre, pos)
        finally:
            self._programmatic -= 1
        self.zoomChanged.emit(zoom)

    def _to_scene(self, pos: QPointF) -> QPointF:
        inv, ok = self.viewportTransform().inverted()
        return inv.map(pos) if ok else QPointF()

    def _widen_rect(self, scene_pt: QPointF, pos: QPointF, reset: bool = False) -> None:
        """Make the scrollable area big enough that ``scene_pt`` can sit at viewport ``pos`` (and that
        any node can be brought to the middle)."""
        z = self.zoom()
        vp = self.viewport().rect()
        vw, vh = vp.width() / z, vp.height() / z
        want = QRectF(scene_pt.x() - pos.x() / z, scene_pt.y() - pos.y() / z, vw, vh)
        graph = self.graph_scene().graph_rect()
        if graph.isEmpty():
            graph = QRectF(-1, -1, 2, 2)
        rect = graph.adjusted(-vw / 2, -vh / 2, vw / 2, vh / 2).united(want)
        if not reset:
            rect = rect.united(self.sceneRect())
        self.setSceneRect(rect)

    def _put(self, scene_pt: QPointF, pos: QPointF) -> None:
        """Scroll so that ``scene_pt`` appears at viewport position ``pos``."""
        at = self.viewportTransform().map(scene_pt)
        dx, dy = at.x() - pos.x(), at.y() - pos.y()
        h, v = self.horizontalScrollBar(), self.verticalScrollBar()
        h.setValue(h.value() + round(dx))
        v.setValue(v.value() + round(dy))

    # ------------------------------------------------------------------ following a live run
    def set_live(self, live: bool) -> None:
        """A run is streaming into the scene: follow its newest node until the person moves."""
        self._live = live
        self._follow = "newest" if live else None

    def is_live(self) -> bool:
        return self._live

    def following(self) -> str | None:
        """ "newest", "fit" or None (the person took over)."""
        return self._follow

    def follow_newest(self) -> None:
        self._follow = "newest"
        self._on_nodes_added([])

    def _user_moved(self) -> None:
        if self._follow is not None:
            self._follow = None

    def _user_scrolled(self, action: int) -> None:
        if not self._programmatic and action != QAbstractSlider.SliderAction.SliderNoAction.value:
            self._user_moved()

    def _on_nodes_added(self, ids: list[str]) -> None:
        s = self.graph_scene()
        if self._follow == "fit":
            self._fit()
            return
        self._widen_rect(
            self._to_scene(QPointF(self.viewport().rect().center())), QPointF(self.viewport().rect().center())
        )
        if self._follow != "newest":
            return
        newest = s.graph.newest()
        item = s.node_item(newest) if newest else None
        if item is None:
            return
        self._programmatic += 1
        try:
            self.ensureVisible(item.sceneBoundingRect(), 40, 40)
        finally:
            self._programmatic -= 1

    # ------------------------------------------------------------------ input
    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta().y() or event.angleDelta().x()
        if not delta:
            event.ignore()
            return
        self._user_moved()
        self.set_zoom(self.zoom() * self.STEP ** (delta / 120.0), event.position())
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            moved = event.position() - self._press
            if abs(moved.x()) + abs(moved.y()) > QApplication.startDragDistance():
                self._user_moved()
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._press = None
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        if self.itemAt(event.position().toPoint()) is None:
            self.fit()
            return
        super().mouseDoubleClickEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_in()
        elif key == Qt.Key.Key_Minus:
            self.zoom_out()
        elif key == Qt.Key.Key_0:
            self.reset_zoom()
        elif key == Qt.Key.Key_F:
            self.fit()
        else:
            super().keyPressEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._follow == "fit":
            self._fit()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange and isinstance(self.scene(), GraphScene):
            self.graph_scene().setPalette(self.palette())
            self.resetCachedContent()
        super().changeEvent(event)

    def drawBackground(self, painter: QPainter, rect: QRectF) -> None:
        pal = self.palette()
        base = pal.color(QPalette.ColorRole.Base)
        painter.fillRect(rect, base)
        z = self.zoom()
        step = 40.0
        if z * step < 14:  # dots closer than that are noise
            return
        dot = mix(base, pal.color(QPalette.ColorRole.Text), 0.16 if is_dark(pal) else 0.13)
        pen = QPen(dot, 1.6)
        pen.setCosmetic(True)
        painter.setPen(pen)
        x0 = int(rect.left() // step) * step
        y0 = int(rect.top() // step) * step
        points = []
        y = y0
        while y <= rect.bottom():
            x = x0
            while x <= rect.right():
                points.append(QPointF(x, y))
                x += step
            y += step
        if len(points) < 20000:
            painter.drawPoints(points)

    def sizeHint(self) -> QSize:
        return QSize(520, 480)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["KIND_COLORS", "EdgeItem", "GraphScene", "GraphView", "NodeItem", "kind_color"]

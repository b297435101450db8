"""An edge of the reasoning graph: a curve from parent to child with its arrow, drawn by Qt alone
(no Python ``paint``), restyled only when the palette or the selection changes."""

from __future__ import annotations

import itertools

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QPainterPath, QPainterPathStroker, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QApplication, QGraphicsPathItem, QGraphicsPolygonItem

from vrag_desktop.core.run.reasoning_graph import Layout, NodeInfo

Z_EDGE, Z_EDGE_EMPHASIS = -2.0, -1.0


class EdgeItem(QGraphicsPathItem):
    """Parent → child: a curve leaving the parent's far side and arriving at the child with an arrow.

    Qt draws it alone: a path item, its arrow a polygon item (a child). A Python ``paint`` and
    ``boundingRect`` had to win the GIL back for every edge at each repaint of a live run's graph, up
    to 5 ms each while the run's thread ran Python. So the scene restyles an edge when the palette
    or the selection changes (:meth:`restyle`), and the view hides the arrows when zoomed out
    (:meth:`show_arrow`)."""

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
        self.setBrush(Qt.BrushStyle.NoBrush)
        self.emphasis = False
        curve, self.arrow = self._geometry(parent, child, layout, route or [])
        self.setPath(curve)
        self.arrow_item = QGraphicsPolygonItem(self.arrow, self)
        self._shape: QPainterPath | None = None  # styled once in a scene (its palette): restyle

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
            self.restyle()

    def restyle(self, palette: QPalette | None = None) -> None:
        """Colour the line and its arrow from ``palette`` (default: the scene's): the highlight when
        emphasised (its node is selected), else the text colour, half transparent."""
        if palette is None:
            s = self.scene()
            palette = s.palette() if s is not None else QApplication.palette()
        if self.emphasis:
            color = palette.color(QPalette.ColorRole.Highlight)
        else:
            color = QColor(palette.color(QPalette.ColorRole.Text))
            color.setAlpha(125)
        pen = QPen(color, 2.2 if self.emphasis else 1.3)
        pen.setCosmetic(True)
        self.setPen(pen)
        self.arrow_item.setPen(pen)
        self.arrow_item.setBrush(color)

    def show_arrow(self, on: bool) -> None:
        """The arrow is drawn from zoom LOD_ARROW up (below, a speck)."""
        if self.arrow_item.isVisible() != on:
            self.arrow_item.setVisible(on)

    def shape(self) -> QPainterPath:
        """The line itself (not its bounding box), so the empty space around a curve stays empty.
        Asked for hit tests (clicks, collisions) and, once per path, by Qt's ``boundingRect``."""
        if self._shape is None:  # the line and its arrow, 6 px wide: Qt's boundingRect is this too
            outline = QPainterPath(self.path())
            outline.addPolygon(self.arrow)
            stroker = QPainterPathStroker()
            stroker.setWidth(6.0)
            self._shape = stroker.createStroke(outline)
            self._shape.setFillRule(Qt.FillRule.WindingFill)
            self._shape.addPolygon(self.arrow)
        return self._shape


__all__ = ["EdgeItem"]

"""The graph's items: a node card (kind-coloured header, text, badge; a plain box when zoomed out)
and an edge curve with its arrow, drawn from what :class:`ReasoningGraph` placed."""

from __future__ import annotations

import itertools
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPalette,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import (
    QApplication,
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsPolygonItem,
    QStyleOptionGraphicsItem,
    QWidget,
)

from vrag_desktop.core.run.reasoning_graph import Layout, NodeInfo
from vrag_desktop.qt.infra.theme import color as theme_color
from vrag_desktop.qt.infra.theme import is_dark

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


# A training sample's masked nodes: the theme colour of each mask reason (core.run.training_roles.role_kind).
ROLE_COLORS = {"off_path": "warn", "valuable": "ok", "masked": "muted"}
MASKED_OPACITY = 0.6


def role_color(role: str) -> QColor | None:
    """The theme colour a masked node of ``role`` is drawn with; None for trained or no role."""
    name = ROLE_COLORS.get(role)
    return theme_color(name) if name else None


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
        self.training_role = ""  # a training sample's: "" | "trained" | "off_path" | "valuable" | "masked"
        self.training_note = ""
        self.refresh()

    def set_training_role(self, role: str, note: str = "") -> None:
        """Draw the node as trained or masked (dimmed, hatched, bordered in the reason's colour)."""
        self.training_role, self.training_note = role, note
        self.setOpacity(MASKED_OPACITY if self.masked() else 1.0)
        self.refresh()

    def masked(self) -> bool:
        return self.training_role not in ("", "trained")

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
        if self.training_note:
            tip.append(f"<i>{_html(self.training_note)}</i>")
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
        mask = role_color(self.training_role)
        if mask is not None:  # the reason colour, even when selected (the ring shows that)
            border = QPen(mask, 3.0)
            border.setCosmetic(True)
            border.setStyle(Qt.PenStyle.DashLine)

        if lod < LOD_FULL:
            painter.setPen(border)
            painter.setBrush(color)
            painter.drawRoundedRect(rect, self.RADIUS, self.RADIUS)
            if mask is not None:
                self._hatch(painter, mask)
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
                name_rect = rect.adjusted(self.PAD, 0, -self.PAD, 0)
                painter.drawText(
                    name_rect,
                    Qt.AlignmentFlag.AlignCenter,
                    QFontMetricsF(big).elidedText(name, Qt.TextElideMode.ElideRight, name_rect.width()),
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
        if mask is not None:
            self._hatch(painter, mask)
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

    def _hatch(self, painter: QPainter, mask: QColor) -> None:
        """Diagonal hatching in the mask colour over the card."""
        hatch = QColor(mask)
        hatch.setAlpha(210)
        brush = QBrush(hatch, Qt.BrushStyle.BDiagPattern)
        brush.setTransform(painter.worldTransform().inverted()[0])  # the same stripe spacing at any zoom
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(brush)
        painter.drawPath(self.shape())


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


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

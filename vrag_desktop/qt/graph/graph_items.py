"""The graph's items: a node card (kind-coloured header, text, badge; zoomed out, a coloured box
with its words sized for the screen) and, from :mod:`graph_edges`, an edge curve with its arrow,
drawn from what :class:`ReasoningGraph` placed."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import (
    QApplication,
    QGraphicsItem,
    QStyleOptionGraphicsItem,
    QWidget,
)

from vrag_desktop.core.run.reasoning_graph import Layout, NodeInfo
from vrag_desktop.qt.graph.graph_edges import EdgeItem
from vrag_desktop.qt.infra.theme import KINDS, is_dark
from vrag_desktop.qt.infra.theme import color as theme_color

Z_NODE = 1.0
# Levels of detail by zoom: the full card; a coloured box with its words sized for the screen; below
# LOD_LABEL (a card under ~13 px tall, no line fits) a plain coloured box.
LOD_FULL = 0.6
LOD_LABEL = 0.15
LOD_ARROW = 0.2

# The theme's kind colours (the same in both themes): white text on them is readable.
KIND_COLORS = {k: KINDS[k] for k in ("root", "think", "search", "crop", "answer")}
OTHER_COLOR = KINDS["other"]


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
        self.gap = layout.layer_gap
        self.beside = 0.0  # room (scene units) right of the card for its words when zoomed out
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
        if self.beside:  # the words beside the card may spill into half the gaps above and below
            spill = self.gap * 0.45
            return self.card().adjusted(-4, -4 - spill, 4 + self.beside, 4 + spill)
        return self.card().adjusted(-4, -4, 4, 4)  # room for the selection ring

    def set_beside(self, room: float) -> None:
        """Let a zoomed-out card write its words in ``room`` scene units to its right (0: inside the
        card). The scene gives room to the last card of a layer, which has nothing to its right."""
        if room != self.beside:
            self.prepareGeometryChange()
            self.beside = room
            self.update()

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
            if lod >= LOD_LABEL:
                font = QFont(widget.font() if widget is not None else painter.font())
                if self.beside:
                    self._paint_beside(painter, rect, lod, font, pal)
                else:
                    self._paint_label(painter, rect, lod, font)
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
        painter.setPen(QColor(KINDS["on_kind"]))
        painter.drawText(head, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, caption)
        tag = self.info.tag
        if tag:
            tag_font = QFont(font)
            tag_font.setPointSizeF(base_pt * 0.85)
            tfm = QFontMetricsF(tag_font)
            room = inner - fm.horizontalAdvance(caption) - 12
            if room > 20:
                painter.setFont(tag_font)
                quiet = QColor(KINDS["on_kind"])
                quiet.setAlpha(215)
                painter.setPen(quiet)
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
                muted = theme_color("error")
            painter.setPen(muted)
            painter.drawText(
                QRectF(rect.left() + pad, rect.bottom() - line_h - pad * 0.35, inner, line_h),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                badge,
            )

    def _paint_beside(self, painter: QPainter, rect: QRectF, lod: float, font: QFont, pal: QPalette) -> None:
        """A zoomed-out card with room to its right: its kind in the box, its words beside it in
        the text colour, on the lines that fit between it and its neighbours above and below."""
        text_px = min(13.0, max(9.0, self.h * lod * 0.36))
        font.setPixelSize(max(1, round(text_px / lod)))
        pad = 3.0 / lod
        bold = QFont(font)
        bold.setBold(True)
        bold.setPixelSize(max(1, round(text_px * 0.9 / lod)))
        painter.setFont(bold)
        painter.setPen(QColor(KINDS["on_kind"]))
        inner = rect.adjusted(pad, 0, -pad, 0)
        caption = QFontMetricsF(bold).elidedText(
            self.info.caption.upper(), Qt.TextElideMode.ElideRight, inner.width()
        )
        painter.drawText(inner, Qt.AlignmentFlag.AlignCenter, caption)
        words = self.info.text
        if not words:
            return
        fm = QFontMetricsF(font)
        room = QRectF(rect.right() + 2 * pad, 0, self.beside - 2 * pad, 0)
        tall = self.h + self.gap * 0.9
        lines = wrap_lines(words, fm, room.width(), max(1, min(3, int(tall // fm.lineSpacing()))))
        y = rect.center().y() - fm.lineSpacing() * len(lines) / 2
        painter.setFont(font)
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        for line in lines:
            painter.drawText(
                QRectF(room.left(), y, room.width(), fm.lineSpacing()),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                line,
            )
            y += fm.lineSpacing()

    def _paint_label(self, painter: QPainter, rect: QRectF, lod: float, font: QFont) -> None:
        """A zoomed-out card's words, sized for the screen rather than the scene: what the node is
        about (the query, the region, the thought, the answer) on as many lines as fit, under its
        kind when there is room for both. Why: a fitted graph of a long run showed boxes that said
        only "Think" or "Crop"; the colour already says the kind."""
        card_px = self.h * lod  # the card's height on screen
        text_px = min(13.0, max(9.0, card_px * 0.36))
        pad = 4.0 / lod
        inner = rect.adjusted(pad, pad * 0.5, -pad, -pad * 0.5)
        font.setPixelSize(max(1, round(text_px / lod)))
        fm = QFontMetricsF(font)
        lines = max(1, int(inner.height() // fm.lineSpacing()))
        words = self.info.text or self.info.tag or self.info.caption
        head = self.info.caption if lines >= 2 and words != self.info.caption else ""
        body = wrap_lines(words, fm, inner.width(), lines - (1 if head else 0))
        painter.setPen(QColor(KINDS["on_kind"]))
        y = inner.top() + (inner.height() - fm.lineSpacing() * (len(body) + (1 if head else 0))) / 2
        if head:
            bold = QFont(font)
            bold.setBold(True)
            painter.setFont(bold)
            painter.drawText(
                QRectF(inner.left(), y, inner.width(), fm.lineSpacing()),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                QFontMetricsF(bold).elidedText(head.upper(), Qt.TextElideMode.ElideRight, inner.width()),
            )
            y += fm.lineSpacing()
        painter.setFont(font)
        for line in body:
            painter.drawText(
                QRectF(inner.left(), y, inner.width(), fm.lineSpacing()),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                line,
            )
            y += fm.lineSpacing()

    def _hatch(self, painter: QPainter, mask: QColor) -> None:
        """Diagonal hatching in the mask colour over the card."""
        hatch = QColor(mask)
        hatch.setAlpha(210)
        brush = QBrush(hatch, Qt.BrushStyle.BDiagPattern)
        brush.setTransform(painter.worldTransform().inverted()[0])  # the same stripe spacing at any zoom
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(brush)
        painter.drawPath(self.shape())


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["KIND_COLORS", "EdgeItem", "NodeItem", "kind_color", "mix", "role_color", "wrap_lines"]

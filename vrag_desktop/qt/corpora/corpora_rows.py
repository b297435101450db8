"""How the corpora tree draws: two-line rows with a state chip, and small line icons.

Kept apart from the panel's logic; colours come from :func:`vrag_desktop.qt.infra.theme.color`, so rows
and icons follow the light/dark theme.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QIcon, QPainter, QPainterPath, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from vrag_desktop.qt.infra.theme import color

KIND_ROLE = Qt.ItemDataRole.UserRole  # "corpus" | "root" | "file"
NAME_ROLE = Qt.ItemDataRole.UserRole + 1  # corpus name
KEY_ROLE = Qt.ItemDataRole.UserRole + 2  # root path or source id
SUB_ROLE = Qt.ItemDataRole.UserRole + 3  # second line
STATE_ROLE = Qt.ItemDataRole.UserRole + 4  # chip text
TONE_ROLE = Qt.ItemDataRole.UserRole + 5  # chip colour name
SUB_TONE_ROLE = Qt.ItemDataRole.UserRole + 6  # second line colour name ("" = muted)

TONES = {
    "indexed": "ok",
    "pending": "warn",
    "failed": "error",
    "missing": "warn",
    "duplicate": "muted",
    "unsupported": "muted",
    "empty": "muted",
    "queued": "info",
    "indexing": "accent",
    "damaged": "error",
    "unreadable": "error",
}


# ---------------------------------------------------------------- drawing
def line_icon(shape: str, ink: QColor, size: int = 32) -> QIcon:
    """Small line icons in the theme's ink (the platform icon themes are absent offscreen), with a
    faded variant for disabled buttons."""
    icon = QIcon(_line_pixmap(shape, ink, size))
    icon.addPixmap(_line_pixmap(shape, _tint(ink, 0.32), size), QIcon.Mode.Disabled)
    return icon


Point = tuple[float, float]

#: Line shapes on a 16×16 grid: each an open polyline, or closed (True) back to its first point.
POLYLINES: dict[str, list[tuple[bool, list[Point]]]] = {
    "plus": [(False, [(8, 3), (8, 13)]), (False, [(3, 8), (13, 8)])],
    "refresh": [(False, [(10.6, 1.8), (10.6, 4.6), (13.4, 4.6)])],  # the arrow head; the arc is drawn
    "pencil": [
        (True, [(3, 13), (3.6, 10.2), (10.8, 3), (13, 5.2), (5.8, 12.4)]),
        (False, [(9.4, 4.4), (11.6, 6.6)]),
    ],
    "trash": [
        (False, [(2.8, 4.5), (13.2, 4.5)]),
        (False, [(6.2, 4.5), (6.6, 2.6), (9.4, 2.6), (9.8, 4.5)]),
        (False, [(4.2, 4.5), (5, 13.4), (11, 13.4), (11.8, 4.5)]),
        (False, [(6.8, 7), (7, 11)]),
        (False, [(9.2, 7), (9, 11)]),
    ],
    "folder": [(True, [(1.8, 4), (6, 4), (7.4, 5.4), (14.2, 5.4), (14.2, 12.8), (1.8, 12.8)])],
    "file": [
        (True, [(4, 1.8), (9.6, 1.8), (12.4, 4.6), (12.4, 14.2), (4, 14.2)]),
        (False, [(9.6, 1.8), (9.6, 4.6), (12.4, 4.6)]),
    ],
    # a shield with a tick: Check…
    "check": [
        (True, [(8, 1.8), (13, 3.6), (13, 7.6), (12, 10.6), (8, 14.2), (4, 10.6), (3, 7.6), (3, 3.6)]),
        (False, [(5.6, 8), (7.4, 9.8), (10.6, 6.2)]),
    ],
}


def _line_path(shape: str) -> QPainterPath:
    path = QPainterPath()
    if shape == "refresh":
        path.arcMoveTo(QRectF(3, 3, 10, 10), 60)
        path.arcTo(QRectF(3, 3, 10, 10), 60, 290)
    elif shape == "stop":
        path.addRoundedRect(QRectF(4, 4, 8, 8), 1.5, 1.5)
    elif shape == "corpus":  # a stack: one card on top of two layers
        path.addRoundedRect(QRectF(2.5, 2.2, 11, 4.4), 1.4, 1.4)
        for y in (8.4, 11.6):
            path.moveTo(2.5, y)
            path.quadTo(2.5, y + 1.6, 4.1, y + 1.6)
            path.lineTo(11.9, y + 1.6)
            path.quadTo(13.5, y + 1.6, 13.5, y)
    for closed, points in POLYLINES.get(shape, []):
        path.moveTo(*points[0])
        for x, y in points[1:]:
            path.lineTo(x, y)
        if closed:
            path.closeSubpath()
    return path


def _line_pixmap(shape: str, ink: QColor, size: int) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = size / 16.0
    p.scale(s, s)
    pen = QPen(ink, 1.3, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap, Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    p.drawPath(_line_path(shape))
    p.end()
    return pm


def _tint(c: QColor, alpha: float) -> QColor:
    out = QColor(c)
    out.setAlphaF(alpha)
    return out


class RowDelegate(QStyledItemDelegate):
    """Two-line rows: icon, title, a muted second line, and a state chip on the right."""

    PAD = 6

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        return QSize(200, fm.height() * 2 + 2 * self.PAD + 2)

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        widget = opt.widget
        style = widget.style() if widget is not None else None
        icon = QIcon(opt.icon)  # a copy: PySide hands out opt's own, which the next line empties
        opt.text = ""
        opt.icon = QIcon()
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        pal = opt.palette
        ink = pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        r = opt.rect.adjusted(self.PAD, self.PAD - 1, -self.PAD - 2, -self.PAD + 1)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        x = r.left()
        if not icon.isNull():
            icon.paint(painter, QRect(x, r.top() + 2, 18, 18))
            x += 24
        # the chip, right-aligned on the first line
        chip = str(index.data(STATE_ROLE) or "")
        small = QFont(opt.font)
        small.setPointSizeF(max(7.0, opt.font.pointSizeF() - 1.2))
        fm_small = QFontMetrics(small)
        chip_w = 0
        line_h = QFontMetrics(opt.font).height()
        if chip:
            tone = color(str(index.data(TONE_ROLE) or "muted"))
            chip_w = fm_small.horizontalAdvance(chip) + 14
            cr = QRectF(
                r.right() - chip_w,
                r.top() + (line_h - fm_small.height() - 2) / 2,
                chip_w,
                fm_small.height() + 2,
            )
            painter.setPen(QPen(_tint(tone, 0.55 if not selected else 0.9), 1))
            painter.setBrush(_tint(tone, 0.14) if not selected else _tint(QColor("white"), 0.85))
            painter.drawRoundedRect(cr, cr.height() / 2, cr.height() / 2)
            painter.setFont(small)
            painter.setPen(tone.darker(115) if selected else tone)
            painter.drawText(cr, Qt.AlignmentFlag.AlignCenter, chip)
        title_font = QFont(opt.font)
        if index.data(KIND_ROLE) == "corpus":
            title_font.setWeight(QFont.Weight.DemiBold)
        painter.setFont(title_font)
        painter.setPen(ink)
        title_w = r.right() - x - (chip_w + 8 if chip else 0)
        title = QFontMetrics(title_font).elidedText(
            str(index.data(Qt.ItemDataRole.DisplayRole) or ""), Qt.TextElideMode.ElideMiddle, title_w
        )
        painter.drawText(QRect(x, r.top(), title_w, line_h), Qt.AlignmentFlag.AlignVCenter, title)
        sub = str(index.data(SUB_ROLE) or "")
        if sub:
            tone_name = str(index.data(SUB_TONE_ROLE) or "")
            painter.setFont(small)
            painter.setPen(ink if selected else color(tone_name or "muted"))
            sub_w = r.right() - x
            text = fm_small.elidedText(sub, Qt.TextElideMode.ElideRight, sub_w)
            painter.drawText(
                QRect(x, r.top() + line_h + 1, sub_w, line_h), Qt.AlignmentFlag.AlignVCenter, text
            )
        painter.restore()

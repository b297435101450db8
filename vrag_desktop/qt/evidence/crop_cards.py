"""The crops column: one card per region of the page, its full-resolution pixels drawn to the column's
width (small crops upscaled at most 2×), its number, box and whether the answer cites it."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRect, QRectF, Qt, Signal
from PySide6.QtGui import QImage, QMouseEvent, QPainter, QPalette, QPen, QPixmap, QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from vrag_desktop.core.run.evidence import Region
from vrag_desktop.qt.evidence.page_view import CITED_COLOUR, region_colour
from vrag_desktop.qt.infra.theme import color as theme_colour


# ---------------------------------------------------------------------- the crops
class CropImage(QWidget):
    """A crop's full-resolution pixmap, drawn to the panel's width (up to 2× for tiny crops).

    Its height follows its width, set when either changes, rather than answered to the layout's
    ``heightForWidth`` questions: a layout pass asked each card about a hundred times per new crop,
    each a Python call that had to win the GIL back while a run or an indexing job held it."""

    MAX_UPSCALE = 2.0
    EMPTY_HEIGHT = 48

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pixmap: QPixmap | None = None
        self.text = "loading…"
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(64)
        self._fit_height()

    def set_pixmap(self, pixmap: QPixmap | None, text: str = "") -> None:
        self.pixmap = pixmap
        self.text = text
        self._fit_height()
        self.update()

    def _scale(self, width: int) -> float:
        if self.pixmap is None or self.pixmap.isNull():
            return 0.0
        return min(width / self.pixmap.width(), self.MAX_UPSCALE)

    def height_for(self, width: int) -> int:
        if self.pixmap is None or self.pixmap.isNull():
            return self.EMPTY_HEIGHT
        return max(1, round(self.pixmap.height() * self._scale(width)))

    def _fit_height(self) -> None:
        height = self.height_for(self.width())
        if self.maximumHeight() != height:  # fixed heights only come from here
            self.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:
        if event.size().width() != event.oldSize().width():
            self._fit_height()
        super().resizeEvent(event)

    def paintEvent(self, event: Any) -> None:
        with QPainter(self) as painter:  # ended on every path, whatever holds this frame
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
        if self.pixmap is None or self.pixmap.isNull():
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.text)
            return
        k = self._scale(self.width())
        w, h = round(self.pixmap.width() * k), round(self.pixmap.height() * k)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, k < 1.0)
        painter.drawPixmap(QRect(0, 0, w, h), self.pixmap)


class CropCard(QFrame):
    """One crop: its number and where it was cut, then the pixels. Clicking it shows it on the page.

    The evidence view keeps the cards of a page it leaves and gives them the next page's regions
    (:meth:`reset`): each widget made from Python answers Qt's first call of each of its virtual
    methods only after winning the GIL back, about thirty round-trips for a new card, each up to
    5 ms while a run or an indexing job runs Python."""

    clicked = Signal(int)

    def __init__(self, region: Region, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 8)
        lay.setSpacing(4)
        head = QHBoxLayout()
        head.setSpacing(6)
        self.badge = QToolButton(self)
        self.badge.setToolTip("Show this region on the page")
        self.badge.setAutoRaise(True)
        self.badge.clicked.connect(lambda: self.clicked.emit(self.number))
        self.title = QLabel(self)
        self.title.setWordWrap(True)
        head.addWidget(self.badge)
        head.addWidget(self.title, 1)
        lay.addLayout(head)
        self.where = QLabel(self)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.where.setWordWrap(True)
        small = self.where.font()
        small.setPointSizeF(small.pointSizeF() * 0.9)
        self.where.setFont(small)
        self.where.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        lay.addWidget(self.where)
        self.image = CropImage(self)
        lay.addWidget(self.image)
        self.reset(region)

    def reset(self, region: Region) -> None:
        """Show ``region``: its number and box, no pixels yet, not selected (a new card, or one the
        evidence view reuses)."""
        self.number = region.number
        self.selected = False
        self.colour = region_colour(region)
        self.badge.setText(str(region.number))
        self.where.setText(region.text)
        self.image.set_pixmap(None, "loading…")
        self.image.setToolTip("")
        self.update_region(region, False)

    def update_region(self, region: Region, selected: bool) -> None:
        """Show ``region`` (selected or not). Called for every card at each event of a live run, so
        only what changed is set: a style sheet or a wrapped label's text costs a relayout."""
        colour = region_colour(region)
        sheet = (
            f"QToolButton {{ background: {colour.name()}; color: white; font-weight: bold;"
            f" border-radius: 11px; min-width: 22px; min-height: 22px; padding: 0 4px; }}"
        )
        if self.badge.styleSheet() != sheet:
            self.badge.setStyleSheet(sheet)
        nested = f" · inside {region.parent}" if region.parent else ""
        cited = f"  <b style='color:{CITED_COLOUR.name()}'>cited in the answer</b>" if region.cited else ""
        title = f"Region {region.number} · step {region.step}{nested}{cited}"
        if self.title.text() != title:
            self.title.setText(title)
        if (selected, colour) != (self.selected, self.colour):
            self.selected = selected
            self.colour = colour
            self.update()

    def paintEvent(self, event: Any) -> None:
        # drawn here rather than by a stylesheet so the border follows palette (theme) changes
        with QPainter(self) as painter:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            width = 2.0 if self.selected else 1.0
            colour = self.colour if self.selected else theme_colour("border")
            painter.setPen(QPen(colour, width))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            r = QRectF(self.rect()).adjusted(width / 2, width / 2, -width / 2, -width / 2)
            painter.drawRoundedRect(r, 6, 6)

    def set_crop(self, image: QImage | None, stand_in: bool = False, missing: str = "") -> None:
        if image is None or image.isNull():
            self.image.set_pixmap(None, missing or "crop unavailable")
            return
        pm = QPixmap.fromImage(image)
        self.image.set_pixmap(pm)
        if stand_in:
            self.where.setText(self.where.text() + " · page image gone: showing the model's resized copy")
        self.image.setToolTip(
            f"{pm.width()}×{pm.height()} px" + (" (model's copy)" if stand_in else " (full resolution)")
        )

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit(self.number)
        super().mousePressEvent(event)

"""The crops column: one card per region of the page, its full-resolution pixels drawn to the column's
width (small crops upscaled at most 2×), its number, box and whether the answer cites it."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt, Signal
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
    each a Python call that had to win the GIL back while a run or an indexing job held it. For the
    same reason a label paints it, scaled once per width: a Python ``paintEvent`` was such a call at
    every repaint of the column."""

    MAX_UPSCALE = 2.0
    EMPTY_HEIGHT = 48

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pixmap: QPixmap | None = None
        self.text = "loading…"
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(64)
        self._label = QLabel(self)
        self._label.setWordWrap(True)
        self._label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._label)
        self._drawn: tuple[QPixmap | None, str, int] | None = None  # what the label shows, at which width
        self._fit_height()
        self._show()

    def set_pixmap(self, pixmap: QPixmap | None, text: str = "") -> None:
        self.pixmap = pixmap
        self.text = text
        self._fit_height()
        self._show()

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

    def _show(self) -> None:
        """The pixmap scaled to the width (smoothly when shrunk, square pixels when enlarged, at the
        screen's density), else the text."""
        state = (self.pixmap, self.text, self.width())
        if state == self._drawn:
            return
        self._drawn = state
        if self.pixmap is None or self.pixmap.isNull():
            self._label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            self._label.setText(self.text)
            return
        k = self._scale(self.width())
        dpr = self.devicePixelRatioF()
        w, h = max(1, round(self.pixmap.width() * k * dpr)), max(1, round(self.pixmap.height() * k * dpr))
        mode = (
            Qt.TransformationMode.SmoothTransformation
            if k < 1.0
            else Qt.TransformationMode.FastTransformation
        )
        shown = self.pixmap.scaled(w, h, Qt.AspectRatioMode.IgnoreAspectRatio, mode)
        shown.setDevicePixelRatio(dpr)
        self._label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self._label.setPixmap(shown)

    def resizeEvent(self, event: QResizeEvent) -> None:
        if event.size().width() != event.oldSize().width():
            self._fit_height()
            self._show()
        super().resizeEvent(event)


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

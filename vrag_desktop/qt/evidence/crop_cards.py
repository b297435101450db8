"""The crops column: one card per region of the page, its full-resolution pixels drawn to the column's
width (small crops upscaled at most 2×), its number, box and whether the answer cites it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QImage, QMouseEvent, QPalette, QPixmap, QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from vrag_desktop.core.run.evidence import Region
from vrag_desktop.qt.evidence.page_view import CITED_COLOUR, region_colour
from vrag_desktop.qt.infra.theme import MARKS, set_role


# ---------------------------------------------------------------------- the crops
# Nothing here is Python that Qt calls while it lays out or paints a live run's column: each such
# call (a paintEvent, a resizeEvent, a heightForWidth) had to win the GIL back, up to 5 ms a time
# while a run or an indexing job ran Python, and a new crop brought dozens. The column alone
# follows its width (:class:`CropColumn`, one call per resize of the column) and tells the cards;
# a label paints each crop, scaled once per width; the app stylesheet draws the cards' borders.
class CropImage(QWidget):
    """A crop's full-resolution pixmap at the width it is given (:meth:`fit`), up to 2× for tiny
    crops; its height follows from that width."""

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
        self._width = 0  # until fitted: a pixmap is drawn at its own size
        self._drawn: tuple[QPixmap | None, str, int] | None = None  # what the label shows, at which width
        self._fit_height()
        self._show()

    def set_pixmap(self, pixmap: QPixmap | None, text: str = "") -> None:
        self.pixmap = pixmap
        self.text = text
        self._fit_height()
        self._show()

    def fit(self, width: int) -> None:
        """Draw to ``width`` pixels (the column's, less the card's margins)."""
        if width != self._width:
            self._width = width
            self._fit_height()
            self._show()

    def _scale(self) -> float:
        if self.pixmap is None or self.pixmap.isNull():
            return 0.0
        if self._width <= 0:
            return 1.0
        return min(self._width / self.pixmap.width(), self.MAX_UPSCALE)

    def _fit_height(self) -> None:
        if self.pixmap is None or self.pixmap.isNull():
            height = self.EMPTY_HEIGHT
        else:
            height = max(1, round(self.pixmap.height() * self._scale()))
        if self.maximumHeight() != height:  # fixed heights only come from here
            self.setFixedHeight(height)

    def _show(self) -> None:
        """The pixmap scaled to the width (smoothly when shrunk, square pixels when enlarged, at the
        screen's density), else the text."""
        state = (self.pixmap, self.text, self._width)
        if state == self._drawn:
            return
        self._drawn = state
        if self.pixmap is None or self.pixmap.isNull():
            self._label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            self._label.setText(self.text)
            return
        k = self._scale()
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


class CropColumn(QWidget):
    """The column the cards stand in, top to bottom. When its width changes it refits every card's
    picture: one Python call per resize of the column (the layout has placed the cards by then)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cards_layout = QVBoxLayout(self)
        self.cards_layout.setContentsMargins(6, 6, 6, 6)
        self.cards_layout.setSpacing(8)

    def card_width(self) -> int:
        m = self.cards_layout.contentsMargins()
        return self.width() - m.left() - m.right()

    def resizeEvent(self, event: QResizeEvent) -> None:
        if event.size().width() != event.oldSize().width():
            width = self.card_width()
            for card in self.findChildren(CropCard):
                card.fit(width)


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
        self.setProperty("card", "crop")  # its border: the app stylesheet's QFrame[card="crop"]
        self.mark: str | None = None  # the stylesheet's mark: None, "region" or "cited" (selected)
        self.box = lay = QVBoxLayout(self)
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
        self.badge.setText(str(region.number))
        self.badge.setAccessibleName(f"Show region {region.number} on the page")
        self.where.setText(region.text)
        self.image.set_pixmap(None, "loading…")
        self.image.setToolTip("")
        self.update_region(region, False)

    def fit(self, width: int) -> None:
        """Fit the card's picture to a card ``width`` pixels wide."""
        self.ensurePolished()  # the stylesheet's border counts in frameWidth once polished
        m = self.box.contentsMargins()
        self.image.fit(width - m.left() - m.right() - 2 * self.frameWidth())

    def update_region(self, region: Region, selected: bool) -> None:
        """Show ``region`` (selected or not). Called for every card at each event of a live run, so
        only what changed is set: a style sheet or a wrapped label's text costs a relayout."""
        colour = region_colour(region)
        sheet = (
            f"QToolButton {{ background: {colour.name()}; color: {MARKS['on_mark']}; font-weight: bold;"
            f" border-radius: 11px; min-width: 22px; min-height: 22px; padding: 0 4px; }}"
        )
        if self.badge.styleSheet() != sheet:
            self.badge.setStyleSheet(sheet)
        nested = f" · inside {region.parent}" if region.parent else ""
        cited = f"  <b style='color:{CITED_COLOUR.name()}'>cited in the answer</b>" if region.cited else ""
        title = f"Region {region.number} · step {region.step}{nested}{cited}"
        if self.title.text() != title:
            self.title.setText(title)
        self.selected = selected
        mark = ("cited" if region.cited else "region") if selected else None
        if mark != self.mark:
            self.mark = mark
            set_role(self, "mark", mark)

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

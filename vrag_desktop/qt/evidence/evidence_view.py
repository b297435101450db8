"""Evidence view: the pages a run looked at, every crop drawn where it was cut, each crop at full resolution.

Left, the run's pages; centre, a :class:`PageView` whose scene coordinates *are* the raw image's pixels,
so each region from :mod:`vrag_desktop.core.run.evidence` is drawn at its numbers with no mapping; right,
the crops of that page cut from the raw image (the pixels on disk, not the small copy the model saw).
Images are decoded off the GUI thread; ``pageLoaded(key)`` says when a page is on screen.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, QSize, Qt, QUrl, QVariantAnimation, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QDesktopServices,
    QFont,
    QFontMetrics,
    QIcon,
    QImage,
    QImageReader,
    QMouseEvent,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsItem,
    QGraphicsPixmapItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QStyle,
    QStyleOptionGraphicsItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.events import AgentEvent, Crop, Evidence, ImageShown
from vrag_desktop.core.run.evidence import EvidenceBoard, EvidencePage, Region, viewer_command
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.theme import color as theme_colour
from vrag_desktop.qt.infra.thumbnails import load_thumbnail
from vrag_desktop.qt.infra.workers import run_in_thread

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

#: Pages above this many pixels are shown downscaled (the scene stays in raw pixels; crops stay full).
MAX_VIEW_PIXELS = 40_000_000
REGION_COLOUR = QColor("#1971c2")
CITED_COLOUR = QColor("#e8590c")
THUMB = QSize(60, 80)


def region_colour(region: Region) -> QColor:
    return QColor(CITED_COLOUR if region.cited else REGION_COLOUR)


def _rect(region: Region) -> QRectF:
    x1, y1, x2, y2 = region.region
    return QRectF(x1, y1, x2 - x1, y2 - y1)


# ---------------------------------------------------------------------- decoding (worker threads)
@dataclass
class _PageRead:
    key: str
    seq: int
    image: QImage | None = None
    size: tuple[int, int] | None = None  # raw pixels
    crops: dict[int, QImage] = field(default_factory=dict)
    stand_in: set[int] = field(default_factory=set)  # crops shown from the model's copy (raw gone)
    error: str | None = None


def _read_page(key: str, seq: int, regions: list[tuple[int, tuple[int, int, int, int], str]]) -> _PageRead:
    """(Worker thread.) Decode the raw page (downscaled only past MAX_VIEW_PIXELS) and cut its crops."""
    out = _PageRead(key, seq)
    if not os.path.isfile(key):
        out.error = f"image no longer on disk: {key}"
        for number, _box, seen in regions:  # the small copies the model saw may still be with the run
            img = QImage(seen) if seen and os.path.isfile(seen) else QImage()
            if not img.isNull():
                out.crops[number] = img
                out.stand_in.add(number)
        return out
    reader = QImageReader(key)
    reader.setAutoTransform(False)  # regions are in the file's stored pixel grid, as PIL reads it
    size = reader.size()
    if not size.isValid():
        out.error = f"cannot read image {key}: {reader.errorString()}"
        return out
    w, h = size.width(), size.height()
    out.size = (w, h)
    full = w * h <= MAX_VIEW_PIXELS
    if not full:
        k = math.sqrt(MAX_VIEW_PIXELS / (w * h))
        reader.setScaledSize(QSize(max(1, int(w * k)), max(1, int(h * k))))
    image = reader.read()
    if image.isNull():
        out.error = f"cannot decode image {key}: {reader.errorString()}"
        return out
    out.image = image
    out.crops = _cut(key, image if full else None, [(n, b) for n, b, _ in regions])
    return out


def _cut(
    key: str, page: QImage | None, boxes: Iterable[tuple[int, tuple[int, int, int, int]]]
) -> dict[int, QImage]:
    """Crops at full resolution: copied from the decoded page, or read by clip rect when it was scaled."""
    out: dict[int, QImage] = {}
    for number, (x1, y1, x2, y2) in boxes:
        rect = QRect(x1, y1, max(1, x2 - x1), max(1, y2 - y1))
        if page is not None:
            out[number] = page.copy(rect)
        else:
            reader = QImageReader(key)
            reader.setAutoTransform(False)
            reader.setClipRect(rect)
            img = reader.read()
            if not img.isNull():
                out[number] = img
    return out


def _read_thumb(key: str) -> QImage:
    """(Worker thread.) A strip thumbnail in the page's stored pixel grid; a null image if unreadable."""
    try:
        return load_thumbnail(key, THUMB, auto_transform=False)
    except OSError:
        return QImage()


# ---------------------------------------------------------------------- graphics items
class RegionItem(QGraphicsRectItem):
    """A crop region at its exact raw-pixel rect; cosmetic pens keep it a crisp line at any zoom."""

    def __init__(self, region: Region) -> None:
        super().__init__(_rect(region))
        self.number = region.number
        self.cited = region.cited
        self.setZValue(1)
        self.set_style(region.cited, False)

    def set_style(self, cited: bool, selected: bool) -> None:
        self.cited = cited
        colour = QColor(CITED_COLOUR if cited else REGION_COLOUR)
        pen = QPen(colour, 3.0 if selected else 2.0)
        pen.setCosmetic(True)
        pen.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
        self.setPen(pen)
        fill = QColor(colour)
        fill.setAlpha(46 if selected else 18 if cited else 0)
        self.setBrush(QBrush(fill) if fill.alpha() else Qt.BrushStyle.NoBrush)

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        # a light halo under the coloured line: visible on dark photos and white pages alike
        halo = QPen(QColor(255, 255, 255, 190), self.pen().widthF() + 2.0)
        halo.setCosmetic(True)
        halo.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
        painter.setPen(halo)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(self.rect())
        painter.setPen(self.pen())
        painter.setBrush(self.brush())
        painter.drawRect(self.rect())


class BadgeItem(QGraphicsItem):
    """The region's number, centred on its top-left corner at a constant on-screen size (half outside
    the box, so it hides little of what was cropped)."""

    def __init__(self, region: Region) -> None:
        super().__init__()
        self.number = region.number
        self.colour = region_colour(region)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, True)
        self.setZValue(3)
        self.setPos(region.region[0], region.region[1])
        self.font = QFont()
        self.font.setBold(True)
        self.font.setPointSizeF(max(9.0, self.font.pointSizeF()))
        fm = QFontMetrics(self.font)
        self._h = float(fm.height() + 4)
        self._w = float(max(self._h, fm.horizontalAdvance(str(self.number)) + 10))

    def set_colour(self, colour: QColor) -> None:
        self.colour = QColor(colour)
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(-self._w / 2 - 1, -self._h / 2 - 1, self._w + 2, self._h + 2)

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = QRectF(-self._w / 2, -self._h / 2, self._w, self._h)
        painter.setPen(QPen(QColor(255, 255, 255), 1.5))
        painter.setBrush(self.colour)
        painter.drawRoundedRect(r, r.height() / 2, r.height() / 2)
        painter.setPen(QColor(255, 255, 255))
        painter.setFont(self.font)
        painter.drawText(r, Qt.AlignmentFlag.AlignCenter, str(self.number))


# ---------------------------------------------------------------------- the page
class PageView(QGraphicsView):
    """A page image in raw-pixel scene coordinates with its regions; wheel zooms under the mouse,
    dragging pans. A message (loading, missing file) replaces the page when there is none."""

    regionClicked = Signal(int)
    zoomChanged = Signal(float)

    ZOOM_STEP = 1.25
    MAX_SCALE = 16.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.SmoothPixmapTransform)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setBackgroundBrush(self.palette().color(QPalette.ColorRole.Mid))
        self.message = ""
        self.pixmap_item: QGraphicsPixmapItem | None = None
        self.region_items: dict[int, RegionItem] = {}
        self.badges: dict[int, BadgeItem] = {}
        self.selected: int | None = None
        self._fit_mode = True
        self._press: QPointF | None = None
        self._flash: QVariantAnimation | None = None

    # ---- content
    def clear_page(self, message: str = "") -> None:
        self._stop_flash()
        self.scene().clear()
        self.pixmap_item = None
        self.region_items.clear()
        self.badges.clear()
        self.selected = None
        self.message = message
        self.scene().setSceneRect(QRectF())
        self.viewport().update()

    def set_page(self, size: tuple[int, int], image: QImage) -> None:
        """Show ``image`` as a page of ``size`` raw pixels (a downscaled image is scaled back up)."""
        self.clear_page()
        w, h = size
        self.scene().setSceneRect(QRectF(0, 0, w, h))
        item = QGraphicsPixmapItem(QPixmap.fromImage(image))
        item.setTransformationMode(Qt.TransformationMode.SmoothTransformation)
        if image.width() != w:
            item.setScale(w / image.width())
        item.setZValue(0)
        self.scene().addItem(item)
        self.pixmap_item = item
        self._fit_mode = True
        self.fit()

    def set_regions(self, regions: Iterable[Region]) -> None:
        """Add the regions not drawn yet; restyle the rest (cited marks arrive with the answer)."""
        for r in regions:
            item = self.region_items.get(r.number)
            if item is None:
                item = self.region_items[r.number] = RegionItem(r)
                self.scene().addItem(item)
                badge = self.badges[r.number] = BadgeItem(r)
                self.scene().addItem(badge)
            item.set_style(r.cited, r.number == self.selected)
            self.badges[r.number].set_colour(region_colour(r))

    def select(self, number: int | None) -> None:
        self.selected = number
        for n, item in self.region_items.items():
            item.set_style(item.cited, n == number)

    # ---- zoom and pan
    def scale_factor(self) -> float:
        return float(self.transform().m11())

    def fit(self) -> None:
        rect = self.sceneRect()
        if rect.isEmpty():
            return
        self._fit_mode = True
        self.fitInView(rect.adjusted(-8, -8, 8, 8), Qt.AspectRatioMode.KeepAspectRatio)
        self.zoomChanged.emit(self.scale_factor())

    def _fit_scale(self) -> float:
        rect = self.sceneRect()
        vp = self.viewport().rect()
        if rect.isEmpty() or vp.isEmpty():
            return 1.0
        return min(vp.width() / rect.width(), vp.height() / rect.height())

    def zoom_at(self, factor: float, view_pos: QPointF) -> None:
        """Scale by ``factor`` keeping the scene point under ``view_pos`` (viewport coords) in place."""
        if self.sceneRect().isEmpty():
            return
        current = self.scale_factor()
        target = min(max(current * factor, self._fit_scale() * 0.5), self.MAX_SCALE)
        if abs(target - current) < 1e-9:
            return
        anchor = self.mapToScene(view_pos.toPoint())
        self.scale(target / current, target / current)
        moved = self.mapFromScene(anchor)
        delta = moved - view_pos.toPoint()
        self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() + delta.x())
        self.verticalScrollBar().setValue(self.verticalScrollBar().value() + delta.y())
        self._fit_mode = False
        self.zoomChanged.emit(self.scale_factor())

    def zoom_in(self) -> None:
        self.zoom_at(self.ZOOM_STEP, QPointF(self.viewport().rect().center()))

    def zoom_out(self) -> None:
        self.zoom_at(1 / self.ZOOM_STEP, QPointF(self.viewport().rect().center()))

    def actual_size(self) -> None:
        """One image pixel per screen pixel, around the view's centre."""
        current = self.scale_factor()
        if current > 0:
            self.zoom_at(1.0 / current, QPointF(self.viewport().rect().center()))

    def centre_on(self, number: int, flash: bool = True) -> None:
        """Bring region ``number`` to the middle at a size where it reads well (about 60 % of the view,
        never smaller than the whole page fitted, never past 4×)."""
        item = self.region_items.get(number)
        if item is None:
            return
        rect = item.rect()
        vp = self.viewport().rect()
        if rect.width() > 0 and rect.height() > 0 and not vp.isEmpty():
            want = 0.6 * min(vp.width() / rect.width(), vp.height() / rect.height())
            target = max(min(want, 4.0), self._fit_scale())
            self.scale(target / self.scale_factor(), target / self.scale_factor())
            self._fit_mode = False
            self.zoomChanged.emit(self.scale_factor())
        self.centerOn(rect.center())
        self.select(number)
        if flash:
            self._flash_rect(rect)

    def _flash_rect(self, rect: QRectF) -> None:
        self._stop_flash()
        mark = QGraphicsRectItem(rect)
        pen = QPen(QColor("#fab005"), 6.0)
        pen.setCosmetic(True)
        mark.setPen(pen)
        mark.setZValue(2)
        self.scene().addItem(mark)
        anim = QVariantAnimation(self)
        anim.setStartValue(1.0)
        anim.setEndValue(0.0)
        anim.setDuration(900)
        anim.valueChanged.connect(lambda v: mark.setOpacity(float(v)))
        anim.finished.connect(self._stop_flash)
        self._flash = anim
        self._flash_item = mark
        anim.start()

    def _stop_flash(self) -> None:
        anim, self._flash = self._flash, None
        if anim is not None:
            anim.stop()
            item = getattr(self, "_flash_item", None)
            if item is not None and item.scene() is self.scene():
                self.scene().removeItem(item)
            self._flash_item = None

    # ---- events
    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.setBackgroundBrush(self.palette().color(QPalette.ColorRole.Mid))
        super().changeEvent(event)

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_at(self.ZOOM_STEP**steps, event.position())
        event.accept()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._fit_mode:
            self.fit()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        press, self._press = self._press, None
        if press is None or (event.position() - press).manhattanLength() > 4:
            return  # a drag (pan), not a click
        number = self.region_at(event.position())
        if number is not None:
            self.select(number)
            self.regionClicked.emit(number)

    def region_at(self, view_pos: QPointF) -> int | None:
        """The smallest region under a viewport point (nested zooms: the innermost)."""
        p = self.mapToScene(view_pos.toPoint())
        hits = [
            (i.rect().width() * i.rect().height(), n)
            for n, i in self.region_items.items()
            if i.rect().contains(p)
        ]
        return min(hits)[1] if hits else None

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        if not self.message:
            return
        painter.save()
        painter.resetTransform()
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        area = self.viewport().rect().adjusted(24, 24, -24, -24)
        painter.drawText(area, Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.message)
        painter.restore()


# ---------------------------------------------------------------------- the crops
class CropImage(QWidget):
    """A crop's full-resolution pixmap, drawn to the panel's width (up to 2× for tiny crops)."""

    MAX_UPSCALE = 2.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pixmap: QPixmap | None = None
        self.text = "loading…"
        sp = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        sp.setHeightForWidth(True)
        self.setSizePolicy(sp)

    def set_pixmap(self, pixmap: QPixmap | None, text: str = "") -> None:
        self.pixmap = pixmap
        self.text = text
        self.updateGeometry()
        self.update()

    def _scale(self, width: int) -> float:
        if self.pixmap is None or self.pixmap.isNull():
            return 0.0
        return min(width / self.pixmap.width(), self.MAX_UPSCALE)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        if self.pixmap is None or self.pixmap.isNull():
            return 48
        return max(1, round(self.pixmap.height() * self._scale(width)))

    def sizeHint(self) -> QSize:
        if self.pixmap is None or self.pixmap.isNull():
            return QSize(200, 48)
        return QSize(min(self.pixmap.width(), 480), self.heightForWidth(min(self.pixmap.width(), 480)))

    def minimumSizeHint(self) -> QSize:
        return QSize(64, 32)

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
    """One crop: its number and where it was cut, then the pixels. Clicking it shows it on the page."""

    clicked = Signal(int)

    def __init__(self, region: Region, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.number = region.number
        self.selected = False
        self.colour = region_colour(region)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 8)
        lay.setSpacing(4)
        head = QHBoxLayout()
        head.setSpacing(6)
        self.badge = QToolButton(self)
        self.badge.setText(str(region.number))
        self.badge.setToolTip("Show this region on the page")
        self.badge.setAutoRaise(True)
        self.badge.clicked.connect(lambda: self.clicked.emit(self.number))
        self.title = QLabel(self)
        self.title.setWordWrap(True)
        head.addWidget(self.badge)
        head.addWidget(self.title, 1)
        lay.addLayout(head)
        self.where = QLabel(region.text, self)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.where.setWordWrap(True)
        small = self.where.font()
        small.setPointSizeF(small.pointSizeF() * 0.9)
        self.where.setFont(small)
        self.where.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        lay.addWidget(self.where)
        self.image = CropImage(self)
        lay.addWidget(self.image)
        self.update_region(region, False)

    def update_region(self, region: Region, selected: bool) -> None:
        colour = region_colour(region)
        self.badge.setStyleSheet(
            f"QToolButton {{ background: {colour.name()}; color: white; font-weight: bold;"
            f" border-radius: 11px; min-width: 22px; min-height: 22px; padding: 0 4px; }}"
        )
        nested = f" · inside {region.parent}" if region.parent else ""
        cited = f"  <b style='color:{CITED_COLOUR.name()}'>cited in the answer</b>" if region.cited else ""
        self.title.setText(f"Region {region.number} · step {region.step}{nested}{cited}")
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


# ---------------------------------------------------------------------- the view
class EvidenceView(QWidget):
    """Pages of a run (left), the current page with its regions (centre), its crops (right)."""

    pageChanged = Signal(str)  # key (raw image path) of the page now shown
    pageLoaded = Signal(str)  # that page's pixels (or its placeholder) are on screen

    def __init__(self, ctx: AppContext | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.board = EvidenceBoard()
        self.current: str | None = None
        self.loaded: str | None = None  # key whose pixels are in the page view
        self._page_image: QImage | None = None
        self._size: tuple[int, int] | None = None  # raw pixel size of the loaded page
        self._full_res = False
        self._seq = 0
        self._pending: int | None = None  # region to centre on once the page is loaded
        self._follow = True  # live: show each new page/crop until the person picks a page
        self.cards: dict[int, CropCard] = {}
        self._build()

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(4)
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 6, 8, 0)
        self.title = QLabel("No evidence yet: pages and crops appear here as the agent looks at them.", self)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        # A long title must not set the dock's minimum width: it is elided by the layout instead.
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar.addWidget(self.title, 1)
        self.fit_button = self._button(bar, "Fit", "Fit the whole page in view", lambda: self.page_view.fit())
        self._button(bar, "−", "Zoom out", lambda: self.page_view.zoom_out())
        self._button(bar, "+", "Zoom in", lambda: self.page_view.zoom_in())
        self._button(bar, "1:1", "One image pixel per screen pixel", lambda: self.page_view.actual_size())
        self.open_button = self._button(
            bar, "Open source", "Open the source document at this page", self.open_source
        )
        root.addLayout(bar)

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.strip = QListWidget(self.splitter)
        self.strip.setIconSize(THUMB)
        self.strip.setSpacing(2)
        self.strip.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.strip.setMinimumWidth(110)
        self.strip.currentItemChanged.connect(self._strip_changed)
        self.page_view = PageView(self.splitter)
        self.page_view.setMinimumWidth(200)
        self.page_view.regionClicked.connect(self._region_clicked)
        self.crop_scroll = QScrollArea(self.splitter)
        self.crop_scroll.setWidgetResizable(True)
        self.crop_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.crop_scroll.setMinimumWidth(160)
        self.crop_panel = QWidget()
        self.crop_layout = QVBoxLayout(self.crop_panel)
        self.crop_layout.setContentsMargins(6, 6, 6, 6)
        self.crop_layout.setSpacing(8)
        self.crop_note = QLabel("", self.crop_panel)
        self.crop_note.setWordWrap(True)
        self.crop_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.crop_note.hide()
        self.crop_layout.addWidget(self.crop_note)
        self.crop_layout.addStretch(1)
        self.crop_scroll.setWidget(self.crop_panel)
        self.splitter.addWidget(self.strip)
        self.splitter.addWidget(self.page_view)
        self.splitter.addWidget(self.crop_scroll)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([210, 640, 350])
        self.splitter.setChildrenCollapsible(False)
        root.addWidget(self.splitter, 1)
        self._update_buttons()

    def _update_note(self) -> None:
        """The line above the crops: why there are none, or why they are not the page's pixels."""
        page = self.current_page()
        text = ""
        if page is not None and self.loaded == self.current:
            if not page.regions:
                text = "No crops on this page: the agent looked at it whole."
            elif self._page_image is None:
                text = "The page image is gone, so its crops cannot be cut from it."
        self.crop_note.setText(text)
        self.crop_note.setVisible(bool(text))

    def _button(self, bar: QHBoxLayout, text: str, tip: str, slot: Any) -> QPushButton:
        b = QPushButton(text, self)
        b.setToolTip(tip)
        b.clicked.connect(slot)
        if len(text) <= 3:
            b.setFixedWidth(max(36, b.fontMetrics().horizontalAdvance(text) + 20))
        bar.addWidget(b)
        return b

    # ------------------------------------------------------------------ feeding
    def apply(self, event: AgentEvent) -> None:
        """One live event: update the strip; follow new pages and crops unless a page was picked."""
        key = self.board.apply(event)
        if key is None:
            return
        self._sync_strip()
        if self.current is None or (
            self._follow and isinstance(event, ImageShown | Crop) and key != self.current
        ):
            self.show_page(key, _user=False)
        elif key == self.current:
            self._refresh_current()
        if isinstance(event, Crop) and key == self.current and self._follow:
            number = self.board.pages[key].regions[-1].number
            if self.loaded == key:
                self.page_view.select(number)
                self._highlight_card(number)

    def load(self, events: Iterable[AgentEvent]) -> None:
        """A whole (saved) run: show its first cited page, else its first page."""
        self.clear()
        self.board = EvidenceBoard.from_events(events)
        self._follow = False
        self._sync_strip()
        cited = self.board.answer_evidence()
        first = cited[0][0] if cited else next(iter(self.board.pages), None)
        if first is not None:
            self.show_page(first, _user=False)

    def load_run(self, run_id: str) -> None:
        """A saved run by id, read off the GUI thread (needs a context)."""
        if self.ctx is None:
            raise RuntimeError("EvidenceView.load_run needs an AppContext")
        runs = self.ctx.runs

        def loaded(events: list[AgentEvent]) -> None:
            if _alive(self):  # the view may have closed while the run was read
                self.load(events)

        run_in_thread(lambda: list(runs.events(run_id)), on_done=loaded, error_title="Cannot open the run")

    def clear(self) -> None:
        self.board = EvidenceBoard()
        self.current = self.loaded = None
        self._page_image = None
        self._pending = None
        self._follow = True
        self._seq += 1
        self.strip.blockSignals(True)
        self.strip.clear()
        self.strip.blockSignals(False)
        self.page_view.clear_page()
        self._set_cards([])
        self._update_note()
        self.title.setText("No evidence yet: pages and crops appear here as the agent looks at them.")
        self._update_buttons()

    # ------------------------------------------------------------------ navigation
    def current_page(self) -> EvidencePage | None:
        return self.board.pages.get(self.current) if self.current else None

    def show_page(self, key: str, *, _user: bool = True) -> bool:
        """Show page ``key`` (decoded off the GUI thread; ``pageLoaded`` follows)."""
        page = self.board.pages.get(key)
        if page is None:
            return False
        if _user:
            self._follow = False
        if key == self.current:
            if self.loaded == key:
                self._apply_pending()
            return True
        self.current = key
        self.loaded = None
        self._page_image = None
        self._select_strip(key)
        self.page_view.clear_page(f"Loading {page.label}…")
        self._set_cards(page.regions)
        self._update_title()
        self._update_buttons()
        self._seq += 1
        boxes = [(r.number, r.region, r.crop_image) for r in page.regions]
        run_in_thread(
            _read_page, key, self._seq, boxes, on_done=self._page_read, error_title="Cannot show the page"
        )
        self.pageChanged.emit(key)
        return True

    def focus(
        self, source: str, page: int | None, region: Iterable[int] | None = None, image: str | None = None
    ) -> bool:
        """Show the evidence an answer names: its page, centred on (and flashing) its region."""
        key = image if image and image in self.board.pages else self.board.find(source, page)
        if key is None and source in self.board.pages:
            key = source
        if key is None:
            where = Path(source).name + (f" p. {page}" if page is not None else "")
            error_sink().report(
                "Evidence not in this run", f"{where} is not among the pages of this run", "warning"
            )
            return False
        self.show_region(key, self.board.region_number(key, region))
        return True

    def focus_evidence(self, evidence: Evidence) -> bool:
        """:meth:`focus` on one of an answer's :class:`Evidence` (what its links carry)."""
        return self.focus(evidence.source, evidence.page, evidence.region, image=evidence.image)

    def show_region(self, key: str, number: int | None) -> bool:
        """Show page ``key``; centre on region ``number`` (None: the whole page)."""
        self._pending = number if number is not None else -1
        if not self.show_page(key):
            self._pending = None
            return False
        return True

    def _apply_pending(self) -> None:
        number, self._pending = self._pending, None
        if number is None:
            return
        if number < 0:
            self.page_view.select(None)
            self.page_view.fit()
            self._highlight_card(None)
        else:
            self._show_number(number)

    def _show_number(self, number: int) -> None:
        self.page_view.centre_on(number)
        self._highlight_card(number)
        card = self.cards.get(number)
        if card is not None:
            self.crop_scroll.ensureWidgetVisible(card, 0, 8)

    def _region_clicked(self, number: int) -> None:
        self._highlight_card(number)
        card = self.cards.get(number)
        if card is not None:
            self.crop_scroll.ensureWidgetVisible(card, 0, 8)

    # ------------------------------------------------------------------ loading
    def _page_read(self, result: _PageRead) -> None:
        if not _alive(self) or result.seq != self._seq or result.key != self.current:
            return  # the person moved on
        page = self.board.pages.get(result.key)
        if page is None:
            return
        if result.error or result.image is None or result.size is None:
            self.page_view.clear_page(result.error or f"cannot show {result.key}")
            self._page_image = None
            for r in page.regions:
                card = self.cards.get(r.number)
                if card is not None:
                    card.set_crop(
                        result.crops.get(r.number), r.number in result.stand_in, "crop image gone too"
                    )
        else:
            self.page_view.set_page(result.size, result.image)
            self.page_view.set_regions(page.regions)
            self._page_image = result.image
            self._full_res = result.image.width() == result.size[0]
            self._crops_read(result.key, result.crops)
            # crops that arrived while the page was loading
            self._fill_crops([r for r in page.regions if r.number not in result.crops])
            if self._follow and page.regions and self._pending is None:
                self.page_view.select(page.regions[-1].number)
                self._highlight_card(page.regions[-1].number)
        self.loaded = result.key
        self._size = result.size
        self._update_note()
        self._update_title(result.size)
        self._apply_pending()
        self.pageLoaded.emit(result.key)

    def _refresh_current(self) -> None:
        """The current page changed (a new crop, cited marks): add what is new, restyle the rest."""
        page = self.current_page()
        if page is None:
            return
        new = [r for r in page.regions if r.number not in self.cards]
        self._set_cards(page.regions)
        self._update_title()
        if self.loaded != self.current:
            return  # the pending load draws everything
        self.page_view.set_regions(page.regions)
        self._update_note()
        self._fill_crops(new)

    def _fill_crops(self, regions: list[Region]) -> None:
        """Cut crops for ``regions`` of the loaded page: a memory copy when it is decoded at full size."""
        if not regions or self.current is None:
            return
        if self._page_image is None:
            for r in regions:
                if r.number in self.cards:
                    self.cards[r.number].set_crop(None, missing="page image gone")
            return
        key = self.current
        boxes = [(r.number, r.region) for r in regions]
        if self._full_res:  # part of the decoded page: cheap enough for the GUI thread
            self._crops_read(key, _cut(key, self._page_image, boxes))
        else:
            run_in_thread(_cut, key, None, boxes, on_done=lambda crops: self._crops_read(key, crops))

    def _crops_read(self, key: str | None, crops: dict[int, QImage]) -> None:
        if not _alive(self) or key != self.current:
            return
        for number, img in crops.items():
            card = self.cards.get(number)
            if card is not None:
                card.set_crop(img)

    # ------------------------------------------------------------------ strip, cards, title
    def _sync_strip(self) -> None:
        keys = list(self.board.pages)
        self.strip.blockSignals(True)
        for row in reversed(range(self.strip.count())):
            if self.strip.item(row).data(Qt.ItemDataRole.UserRole) not in self.board.pages:
                self.strip.takeItem(row)
        present = {
            self.strip.item(i).data(Qt.ItemDataRole.UserRole): self.strip.item(i)
            for i in range(self.strip.count())
        }
        for key in keys:
            item = present.get(key)
            if item is None:
                item = QListWidgetItem(self.strip)
                item.setData(Qt.ItemDataRole.UserRole, key)
                item.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon))
                run_in_thread(
                    _read_thumb,
                    key,
                    on_done=lambda img, k=key: self._thumb_read(k, img),
                    on_error=lambda _exc: None,
                )
            self._describe_item(item, self.board.pages[key])
        self.strip.blockSignals(False)

    def _describe_item(self, item: QListWidgetItem, page: EvidencePage) -> None:
        n = len(page.regions)
        where = f"p. {page.page}" if page.page is not None else "image"
        steps = f"step {', '.join(map(str, page.steps))}" if page.steps else "named by the answer"
        meta = [f"{n} crop{'s' if n != 1 else ''}" if n else "no crops"]
        if page.cited:
            meta.append("★ cited")
        item.setText(f"{Path(page.source or page.key).name}\n{where} · {steps}\n{' · '.join(meta)}")
        item.setToolTip(f"{page.source or page.key}\n{page.key}")
        font = item.font()
        font.setBold(page.cited)
        item.setFont(font)
        if page.cited:
            item.setForeground(QBrush(CITED_COLOUR))
        else:
            item.setData(Qt.ItemDataRole.ForegroundRole, None)

    def _thumb_read(self, key: str, image: QImage) -> None:
        if not _alive(self):
            return
        for i in range(self.strip.count()):
            item = self.strip.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == key:
                if image.isNull():
                    item.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning))
                    item.setToolTip(item.toolTip() + "\n(image no longer on disk)")
                else:
                    item.setIcon(QIcon(QPixmap.fromImage(image)))

    def _select_strip(self, key: str) -> None:
        self.strip.blockSignals(True)
        for i in range(self.strip.count()):
            if self.strip.item(i).data(Qt.ItemDataRole.UserRole) == key:
                self.strip.setCurrentRow(i)
                break
        self.strip.blockSignals(False)

    def _strip_changed(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is not None:
            self.show_region(str(item.data(Qt.ItemDataRole.UserRole)), None)
            self._follow = False

    def _set_cards(self, regions: list[Region]) -> None:
        """Make the crop cards match ``regions`` (kept cards keep their pixels)."""
        wanted = {r.number for r in regions}
        for number in [n for n in self.cards if n not in wanted]:
            card = self.cards.pop(number)
            self.crop_layout.removeWidget(card)
            card.hide()  # at once: deletion waits for the event loop
            card.deleteLater()
        for r in regions:
            card = self.cards.get(r.number)
            if card is None:
                card = self.cards[r.number] = CropCard(r, self.crop_panel)
                card.clicked.connect(self._card_clicked)
                self.crop_layout.insertWidget(self.crop_layout.count() - 1, card)
            card.update_region(r, r.number == self.page_view.selected)

    def _card_clicked(self, number: int) -> None:
        if self.loaded == self.current:
            self.page_view.centre_on(number)
            self._highlight_card(number)

    def _highlight_card(self, number: int | None) -> None:
        page = self.current_page()
        if page is None:
            return
        for r in page.regions:
            card = self.cards.get(r.number)
            if card is not None:
                card.update_region(r, r.number == number)

    def _update_title(self, size: tuple[int, int] | None = None) -> None:
        page = self.current_page()
        if page is None:
            return
        size = size or (self._size if self.loaded == self.current else None)
        parts = [f"<b>{_html(page.label)}</b>"]
        if size:
            parts.append(f"{size[0]}×{size[1]} px")
        n = len(page.regions)
        parts.append(f"{n} crop{'s' if n != 1 else ''}" if n else "no crops")
        if page.cited:
            parts.append(f"<span style='color:{CITED_COLOUR.name()}'>★ cited in the answer</span>")
        self.title.setText(" · ".join(parts))

    def _update_buttons(self) -> None:
        page = self.current_page()
        self.open_button.setEnabled(page is not None)
        self.open_button.setToolTip(
            f"Open {Path(page.source or page.key).name}" + (f" at page {page.page}" if page.page else "")
            if page
            else "Open the source document at this page"
        )

    # ------------------------------------------------------------------ system viewer
    def open_source(self) -> bool:
        """Open the current page's source document (at the page when the viewer can) outside the app."""
        page = self.current_page()
        if page is None:
            return False
        src = page.source or page.key
        title = "Cannot open the source document"
        if not os.path.exists(src):
            error_sink().report(title, f"{src} is no longer on disk")
            return False
        argv: list[str] | None = None
        try:
            if sys.platform.startswith("win"):
                os.startfile(src)  # type: ignore[attr-defined]  (Windows file association)
                return True
            argv = viewer_command(src, page.page)
            if argv is None:
                if QDesktopServices.openUrl(QUrl.fromLocalFile(src)):
                    return True
                error_sink().report(
                    title,
                    f"No program to open {src} was found: install a PDF viewer (evince, okular) or xdg-utils.",
                )
                return False
            proc = subprocess.Popen(
                argv,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            threading.Thread(target=proc.wait, name="viewer-reaper", daemon=True).start()  # no zombie
            return True
        except OSError as exc:
            what = argv[0] if argv else src
            error_sink().report(title, f"{what}: {describe(exc)}")
            return False


def _alive(obj: QWidget) -> bool:
    """False once Qt deleted the widget (a thread's result may arrive after the view closed)."""
    import shiboken6

    return bool(shiboken6.isValid(obj))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["BadgeItem", "CropCard", "EvidenceView", "PageView", "RegionItem"]

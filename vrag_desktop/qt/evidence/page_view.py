"""The page and its regions: a :class:`PageView` whose scene coordinates *are* the raw image's pixels,
so each region from :mod:`vrag_desktop.core.run.evidence` is drawn at its numbers with no mapping, with a
numbered badge; zoom under the mouse, fit, 1:1, and a flash on the region being pointed at."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, QVariantAnimation, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QImage,
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
    QWidget,
)

from vrag_desktop.core.run.evidence import Region
from vrag_desktop.qt.infra.theme import MARKS
from vrag_desktop.qt.infra.zoom_view import ZoomView

REGION_COLOUR = QColor(MARKS["region"])
CITED_COLOUR = QColor(MARKS["cited"])


def region_colour(region: Region) -> QColor:
    return QColor(CITED_COLOUR if region.cited else REGION_COLOUR)


def _rect(region: Region) -> QRectF:
    x1, y1, x2, y2 = region.region
    return QRectF(x1, y1, x2 - x1, y2 - y1)


# ---------------------------------------------------------------------- graphics items
# The page, its regions and their badges are items the scene makes (``addRect``, ``addPixmap``), not
# Python subclasses. Qt draws them alone: opaque lines snapped to pixels (the view does not
# antialias), a badge a picture drawn once per number and colour. A Python ``paint`` had to win the
# GIL back for every region at every repaint of a live run, and so does every virtual method of an
# item *made* from Python the first time Qt calls it (PySide looks for an override): about ten an
# item, each up to 5 ms while a run or an indexing job runs Python.


def _cosmetic_pen(colour: QColor, width: float) -> QPen:
    pen = QPen(colour, width)
    pen.setCosmetic(True)
    pen.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
    return pen


def add_region(scene: QGraphicsScene, region: Region) -> tuple[QGraphicsRectItem, QGraphicsRectItem]:
    """A crop region at its exact raw-pixel rect, and its halo: a cosmetic pen keeps it a crisp line
    at any zoom, over a white halo (a child item behind it) that shows on dark photos and white
    pages alike."""
    item = scene.addRect(_rect(region))
    item.setZValue(1)
    halo = scene.addRect(item.rect())
    halo.setParentItem(item)
    halo.setFlag(QGraphicsItem.GraphicsItemFlag.ItemStacksBehindParent, True)
    return item, halo  # unstyled: see style_region


def style_region(item: QGraphicsRectItem, halo: QGraphicsRectItem, cited: bool, selected: bool) -> None:
    """Colour a region (cited or not) and thicken it when selected."""
    colour = QColor(CITED_COLOUR if cited else REGION_COLOUR)
    width = 3.0 if selected else 2.0
    item.setPen(_cosmetic_pen(colour, width))
    halo.setPen(_cosmetic_pen(QColor(255, 255, 255), width + 2.0))
    fill = QColor(colour)
    fill.setAlpha(46 if selected else 18 if cited else 0)
    item.setBrush(QBrush(fill) if fill.alpha() else Qt.BrushStyle.NoBrush)


#: Badge pictures by (number, colour): drawn once, then shared by every badge that shows them.
_BADGES: dict[tuple[int, int], tuple[QPixmap, QPointF]] = {}
BADGE_SCALE = 2  # drawn at twice its size: sharp on a high-density screen too


def _badge_picture(number: int, colour: QColor) -> tuple[QPixmap, QPointF]:
    key = (number, colour.rgba())
    found = _BADGES.get(key)
    if found is not None:
        return found
    font = QFont()
    font.setBold(True)
    font.setPointSizeF(max(9.0, font.pointSizeF()))
    fm = QFontMetrics(font)
    h = float(fm.height() + 4)
    w = float(max(h, fm.horizontalAdvance(str(number)) + 10))
    k = BADGE_SCALE
    image = QImage(round((w + 2) * k), round((h + 2) * k), QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(k)
    image.fill(Qt.GlobalColor.transparent)
    with QPainter(image) as painter:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = QRectF(1, 1, w, h)
        painter.setPen(QPen(QColor(255, 255, 255), 1.5))
        painter.setBrush(colour)
        painter.drawRoundedRect(r, h / 2, h / 2)
        painter.setPen(QColor(255, 255, 255))
        painter.setFont(font)
        painter.drawText(r, Qt.AlignmentFlag.AlignCenter, str(number))
    found = _BADGES[key] = (QPixmap.fromImage(image), QPointF(-(w + 2) / 2, -(h + 2) / 2))
    return found


def add_badge(scene: QGraphicsScene, region: Region) -> QGraphicsPixmapItem:
    """The region's number, centred on its top-left corner at a constant on-screen size (half outside
    the box, so it hides little of what was cropped)."""
    badge = scene.addPixmap(QPixmap())
    badge.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, True)
    badge.setTransformationMode(Qt.TransformationMode.SmoothTransformation)
    badge.setZValue(3)
    badge.setPos(region.region[0], region.region[1])
    badge.setToolTip(f"Region {region.number}")
    colour_badge(badge, region.number, region_colour(region))
    return badge


def colour_badge(badge: QGraphicsPixmapItem, number: int, colour: QColor) -> None:
    pixmap, offset = _badge_picture(number, colour)
    if badge.pixmap().cacheKey() != pixmap.cacheKey():
        badge.setPixmap(pixmap)
        badge.setOffset(offset)


# ---------------------------------------------------------------------- the page
class PageView(ZoomView):
    """A page image in raw-pixel scene coordinates with its regions; wheel zooms under the mouse,
    dragging pans. A message (loading, missing file) replaces the page when there is none."""

    regionClicked = Signal(int)
    zoomChanged = Signal(float)

    ZOOM_STEP = 1.25
    MAX_SCALE = 16.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        # No antialiasing: the regions are axis-aligned lines, crisper and far cheaper snapped to
        # pixels; the badges antialias themselves (once, cached).
        self.setRenderHints(QPainter.RenderHint.SmoothPixmapTransform)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setBackgroundBrush(self.palette().color(QPalette.ColorRole.Mid))
        self.message = ""
        self._note = self.viewport_note("", QPalette.ColorRole.WindowText)
        self.pixmap_item: QGraphicsPixmapItem | None = None
        self.region_items: dict[int, QGraphicsRectItem] = {}
        self.badges: dict[int, QGraphicsPixmapItem] = {}
        self._halos: dict[int, QGraphicsRectItem] = {}
        self._styles: dict[int, tuple[bool, bool]] = {}  # region -> (cited, selected) as drawn
        self.selected: int | None = None
        self._flash_item: QGraphicsRectItem | None = None
        self._fit_mode = True
        self._flash: QVariantAnimation | None = None

    # ---- content
    def clear_page(self, message: str = "") -> None:
        self._stop_flash()
        self.scene().clear()
        self.pixmap_item = None
        self.region_items.clear()
        self.badges.clear()
        self._halos.clear()
        self._styles.clear()
        self.selected = None
        self.message = message
        self._note.setText(message)
        self._note.setVisible(bool(message))
        self.scene().setSceneRect(QRectF())
        self.viewport().update()

    def set_page(self, size: tuple[int, int], image: QImage) -> None:
        """Show ``image`` as a page of ``size`` raw pixels (a downscaled image is scaled back up)."""
        self.clear_page()
        w, h = size
        self.scene().setSceneRect(QRectF(0, 0, w, h))
        item = self.scene().addPixmap(QPixmap.fromImage(image))
        item.setTransformationMode(Qt.TransformationMode.SmoothTransformation)
        # Scaled once per zoom, then blitted: a region or badge added in a live run repaints the whole
        # viewport, and smooth-scaling the page each time cost ~5 ms of the GUI thread per event.
        item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        if image.width() != w:
            item.setScale(w / image.width())
        item.setZValue(0)
        self.pixmap_item = item
        self._fit_mode = True
        self.fit()

    def set_regions(self, regions: Iterable[Region]) -> None:
        """Add the regions not drawn yet; restyle the rest (cited marks arrive with the answer)."""
        for r in regions:
            if r.number not in self.region_items:
                self.region_items[r.number], self._halos[r.number] = add_region(self.scene(), r)
                self.badges[r.number] = add_badge(self.scene(), r)
            self._style(r.number, r.cited, r.number == self.selected)
            colour_badge(self.badges[r.number], r.number, region_colour(r))

    def _style(self, number: int, cited: bool, selected: bool) -> None:
        """Restyle a region; a no-op when nothing changed (each event of a live run restyles every
        region, and a changed item repaints the page under it)."""
        if self._styles.get(number) != (cited, selected):
            self._styles[number] = (cited, selected)
            style_region(self.region_items[number], self._halos[number], cited, selected)

    def select(self, number: int | None) -> None:
        self.selected = number
        for n, (cited, _selected) in self._styles.items():
            self._style(n, cited, n == number)

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
        pen = QPen(QColor(MARKS["flash"]), 6.0)
        pen.setCosmetic(True)
        mark = self.scene().addRect(rect, pen)
        mark.setZValue(2)
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

    def wheel(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_at(self.ZOOM_STEP**steps, event.position())
        event.accept()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._fit_mode:
            self.fit()

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

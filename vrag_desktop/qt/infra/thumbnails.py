"""A strip of thumbnails (pages, images, clip keyframes) decoded off the GUI thread and cached.

Page renders can be several megapixels; ``QImageReader.setScaledSize`` decodes JPEGs straight at
thumbnail size (far cheaper than decoding then scaling), on the decode lane (``tasks.run_decode``).
Only ``QImage`` crosses threads; pixmaps are made on the GUI thread.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QIcon, QImage, QImageReader, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QListView, QListWidget, QListWidgetItem, QWidget

from vrag_desktop.core.corpus.status import PreviewItem
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.tasks import Task, run_decode
from vrag_desktop.qt.infra.theme import color

THUMB_PX = 160  # decoded size cap (longest side)
ICON_PX = 120  # shown size
PATH_ROLE = Qt.ItemDataRole.UserRole
STATE_ROLE = Qt.ItemDataRole.UserRole + 1  # "loading" | "ok" | "missing" | "text" | "failed"


def load_thumbnail(path: str, size: int | QSize = THUMB_PX, *, auto_transform: bool = True) -> QImage:
    """Decode ``path`` scaled to fit ``size`` (a square side or a box), on any thread; decoders that
    cannot scale while reading are scaled after. Raises OSError when unreadable. Upright (EXIF
    orientation applied, as core reads images and crop regions refer to) unless ``auto_transform``
    is False."""
    box = QSize(size, size) if isinstance(size, int) else size
    reader = QImageReader(path)
    reader.setAutoTransform(auto_transform)
    full = reader.size()
    if full.isValid() and (full.width() > box.width() or full.height() > box.height()):
        reader.setScaledSize(full.scaled(box, Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    if image.isNull():
        raise OSError(f"cannot read {path}: {reader.errorString()}")
    if image.width() > box.width() or image.height() > box.height():
        image = image.scaled(
            box, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
        )
    return image


class ThumbnailCache:
    """Decoded thumbnails by (path, mtime), least recently used dropped first."""

    def __init__(self, capacity: int = 600) -> None:
        self.capacity = capacity
        self._images: OrderedDict[tuple[str, int], QImage] = OrderedDict()

    @staticmethod
    def key(path: str) -> tuple[str, int] | None:
        try:
            return path, os.stat(path).st_mtime_ns
        except OSError:
            return None

    def get(self, key: tuple[str, int]) -> QImage | None:
        img = self._images.get(key)
        if img is not None:
            self._images.move_to_end(key)
        return img

    def put(self, key: tuple[str, int], image: QImage) -> None:
        self._images[key] = image
        self._images.move_to_end(key)
        while len(self._images) > self.capacity:
            self._images.popitem(last=False)

    def __len__(self) -> int:
        return len(self._images)


def placeholder(kind: str, size: int = ICON_PX) -> QPixmap:
    """A neutral tile for items with no picture: ``text``, ``missing``, ``failed`` or ``loading``."""
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    tone = {"failed": color("error"), "missing": color("warn")}.get(kind, color("muted"))
    fill = QColor(tone)
    fill.setAlphaF(0.10)
    border = QColor(tone)
    border.setAlphaF(0.45)
    rect = QRectF(6, 6, size - 12, size - 12) if kind != "text" else QRectF(22, 8, size - 44, size - 16)
    p.setPen(QPen(border, 1.2, Qt.PenStyle.DashLine if kind == "loading" else Qt.PenStyle.SolidLine))
    p.setBrush(fill)
    p.drawRoundedRect(rect, 6, 6)
    glyph = {"text": "Aa", "missing": "?", "failed": "!", "loading": "…"}.get(kind, "")
    font = QFont()
    font.setPixelSize(size // 5)
    font.setBold(kind != "loading")
    p.setFont(font)
    p.setPen(tone)
    p.drawText(rect, Qt.AlignmentFlag.AlignCenter, glyph)
    if kind == "text":  # a few ruled lines: reads as "a page of text"
        p.setPen(QPen(border, 1))
        for i in range(4):
            y = rect.bottom() - 14 - i * 9
            p.drawLine(int(rect.left()) + 10, int(y), int(rect.right()) - 10 - (i % 2) * 12, int(y))
    p.end()
    return pm


def item_keys(items: Sequence[PreviewItem]) -> list[tuple[str, int] | None]:
    """(Any thread.) The thumbnail cache keys of ``items``; None for text and for a missing file."""
    return [ThumbnailCache.key(it.image_path) if it.image_path else None for it in items]


class ThumbnailStrip(QListWidget):
    """Horizontal icon strip; ``show_items`` replaces its content, images arrive as they decode."""

    itemsLoaded = Signal()  # every requested thumbnail has arrived (or failed)

    def __init__(self, parent: QWidget | None = None, cache: ThumbnailCache | None = None) -> None:
        super().__init__(parent)
        self.cache = cache or ThumbnailCache()
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(False)
        self.setMovement(QListView.Movement.Static)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setUniformItemSizes(True)
        self.setIconSize(QSize(ICON_PX, ICON_PX))
        self.setGridSize(QSize(ICON_PX + 16, ICON_PX + 30))
        self.setSpacing(2)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.setMinimumHeight(ICON_PX + 40)
        self.empty_text = ""
        self._generation = 0
        self._decoding: list[Task] = []  # this generation's decodes (the lane runs one at a time)
        self._waiting = 0
        self._placeholders: dict[str, QIcon] = {}
        self._shown: list[tuple[PreviewItem, tuple[str, int] | None]] = []  # what the rows show

    def _placeholder(self, kind: str) -> QIcon:
        if kind not in self._placeholders:
            self._placeholders[kind] = QIcon(placeholder(kind))
        return self._placeholders[kind]

    def show_items(
        self, items: Sequence[PreviewItem], keys: Sequence[tuple[str, int] | None] | None = None
    ) -> None:
        """Show ``items``: cached thumbnails at once, the rest as they are decoded (off the GUI thread).

        ``keys``: the items' cache keys from :func:`item_keys`, read off the GUI thread (a file stat
        each, which also hands the GIL away each time). A list that only grew since the last call (a
        corpus being indexed, refreshed every half second) keeps the rows shown and adds the rest."""
        shown = list(zip(items, item_keys(items) if keys is None else keys, strict=True))
        if self._shown and shown[: len(self._shown)] == self._shown:
            new = shown[len(self._shown) :]
            self._decoding = [t for t in self._decoding if not t.done()]
        else:
            self._generation += 1
            for task in self._decoding:  # a list left: its thumbnails still queued are never decoded
                task.cancel()
            self._decoding = []
            self.clear()
            self._waiting = 0
            new = shown
        self._shown = shown
        gen = self._generation
        for it, key in new:
            row = QListWidgetItem(it.caption)
            row.setTextAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
            row.setData(PATH_ROLE, it.image_path)
            self.addItem(row)
            if it.error:
                self._set(row, "failed", self._placeholder("failed"), f"{it.name}: {it.error}")
            elif not it.image_path:
                snippet = it.text[:240] + ("…" if len(it.text) > 240 else "")
                self._set(row, "text", self._placeholder("text"), snippet or f"{it.name} (no text)")
            elif key is None:
                self._set(row, "missing", self._placeholder("missing"), f"image not found: {it.image_path}")
            else:
                cached = self.cache.get(key)
                if cached is not None:
                    self._set(row, "ok", QIcon(QPixmap.fromImage(cached)), it.name)
                else:
                    self._set(row, "loading", self._placeholder("loading"), it.name)
                    self._waiting += 1
                    self._request(gen, row, it.image_path, key)
        if self._waiting == 0:
            self.itemsLoaded.emit()

    def _set(self, row: QListWidgetItem, state: str, icon: QIcon, tip: str) -> None:
        row.setData(STATE_ROLE, state)
        row.setIcon(icon)
        row.setToolTip(tip)

    def _request(self, gen: int, row: QListWidgetItem, path: str, key: tuple[str, int]) -> None:
        def done(image: QImage) -> None:
            if not alive(self) or gen != self._generation:
                return
            self.cache.put(key, image)
            self._set(row, "ok", QIcon(QPixmap.fromImage(image)), row.toolTip())
            self._arrived()

        def failed(exc: BaseException) -> None:
            if not alive(self) or gen != self._generation:
                return
            self._set(row, "missing", self._placeholder("missing"), str(exc))
            self._arrived()

        self._decoding.append(run_decode(load_thumbnail, path, THUMB_PX, on_done=done, on_error=failed))

    def _arrived(self) -> None:
        self._waiting -= 1
        if self._waiting == 0:
            self.itemsLoaded.emit()

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if self.count() == 0 and self.empty_text:
            p = QPainter(self.viewport())
            p.setPen(color("muted"))
            p.drawText(
                self.viewport().rect().adjusted(12, 0, -12, 0),
                Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                self.empty_text,
            )
            p.end()

    def states(self) -> list[str]:
        return [self.item(i).data(STATE_ROLE) for i in range(self.count())]

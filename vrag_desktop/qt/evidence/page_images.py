"""Decoding evidence images off the GUI thread: a page in its raw pixel grid (downscaled only when
huge), its crops cut at full resolution, and the small thumbnails of the page strip."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QImage, QImageReader

from vrag_desktop.core.images import stored_box
from vrag_desktop.qt.infra.thumbnails import load_thumbnail

#: Pages above this many pixels are shown downscaled (the scene stays in raw pixels; crops stay full).
MAX_VIEW_PIXELS = 40_000_000
THUMB = QSize(60, 80)


# ---------------------------------------------------------------------- decoding (worker threads)
@dataclass
class PageRead:
    key: str
    image: QImage | None = None
    size: tuple[int, int] | None = None  # raw pixels
    crops: dict[int, QImage] = field(default_factory=dict)
    stand_in: set[int] = field(default_factory=set)  # crops shown from the model's copy (raw gone)
    error: str | None = None


def read_page(key: str, regions: list[tuple[int, tuple[int, int, int, int], str]]) -> PageRead:
    """(Worker thread.) Decode the raw page (downscaled only past MAX_VIEW_PIXELS) and cut its crops."""
    out = PageRead(key)
    if not os.path.isfile(key):
        out.error = f"image no longer on disk: {key}"
        for number, _box, seen in regions:  # the small copies the model saw may still be with the run
            img = QImage(seen) if seen and os.path.isfile(seen) else QImage()
            if not img.isNull():
                out.crops[number] = img
                out.stand_in.add(number)
        return out
    reader = QImageReader(key)
    reader.setAutoTransform(True)  # regions are in the upright (EXIF-turned) grid, as core reads it
    size = reader.size()  # as stored: scaling and clipping happen before the turn
    if not size.isValid():
        out.error = f"cannot read image {key}: {reader.errorString()}"
        return out
    w, h = size.width(), size.height()
    out.size = (h, w) if exif_turn(reader) in (5, 6, 7, 8) else (w, h)
    full = w * h <= MAX_VIEW_PIXELS
    if not full:
        k = math.sqrt(MAX_VIEW_PIXELS / (w * h))
        reader.setScaledSize(QSize(max(1, int(w * k)), max(1, int(h * k))))
    image = reader.read()
    if image.isNull():
        out.error = f"cannot decode image {key}: {reader.errorString()}"
        return out
    out.image = image
    out.crops = cut_crops(key, image if full else None, [(n, b) for n, b, _ in regions])
    return out


def exif_turn(reader: QImageReader) -> int:
    """The EXIF orientation (1–8) behind the reader's transformation flags."""
    flags = int(reader.transformation().value)  # mirror 1, flip 2, rotate90 4
    return {0: 1, 1: 2, 3: 3, 2: 4, 6: 5, 4: 6, 5: 7, 7: 8}.get(flags, 1)


def cut_crops(
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
            reader.setAutoTransform(True)
            sx1, sy1, sx2, sy2 = stored_box((x1, y1, x2, y2), exif_turn(reader), reader.size().toTuple())
            reader.setClipRect(QRect(sx1, sy1, max(1, sx2 - sx1), max(1, sy2 - sy1)))
            img = reader.read()
            if not img.isNull():
                out[number] = img
    return out


def read_thumb(key: str) -> QImage:
    """(Worker thread.) A strip thumbnail, upright; a null image if unreadable."""
    try:
        return load_thumbnail(key, THUMB)
    except OSError:
        return QImage()

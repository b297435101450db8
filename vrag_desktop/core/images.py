"""Images as a person sees them: phones store photos sideways and record the turn in the EXIF
Orientation tag (274). Every place that reads pixels goes through here, so indexing, OCR, what the
model is shown, the crops it asks for (computed on the upright image) and the app's drawing agree.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from PIL import Image

ImageSource: TypeAlias = "str | Path | bytes | bytearray | IO[bytes]"

ORIENTATION_TAG = 0x0112  # 274
_SWAPS_SIDES = frozenset({5, 6, 7, 8})  # orientations whose upright image has width and height swapped


def orientation(im: Image.Image) -> int:
    """The EXIF orientation (1–8) of an opened image; 1 when absent, unreadable or out of range."""
    try:
        value = im.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # a broken EXIF block must not make the picture unreadable
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def upright_size(im: Image.Image) -> tuple[int, int]:
    """(width, height) once turned upright, read from the header without decoding the pixels."""
    w, h = im.size
    return (h, w) if orientation(im) in _SWAPS_SIDES else (w, h)


def upright(im: Image.Image, turn: int | None = None) -> Image.Image:
    """``im`` turned and flipped as its EXIF says (``turn`` when the caller read it before a
    ``convert`` that may drop the tag); ``im`` itself when it is already upright."""
    from PIL import Image

    turn = orientation(im) if turn is None else turn
    method = {
        2: Image.Transpose.FLIP_LEFT_RIGHT,
        3: Image.Transpose.ROTATE_180,
        4: Image.Transpose.FLIP_TOP_BOTTOM,
        5: Image.Transpose.TRANSPOSE,
        6: Image.Transpose.ROTATE_270,
        7: Image.Transpose.TRANSVERSE,
        8: Image.Transpose.ROTATE_90,
    }.get(turn)
    return im if method is None else im.transpose(method)


def stored_box(
    box: tuple[int, int, int, int], turn: int, stored: tuple[int, int]
) -> tuple[int, int, int, int]:
    """The upright-image box ``(x1, y1, x2, y2)`` in the file's stored pixel grid (``stored`` = its
    (width, height) before turning), for decoders that clip before they turn."""
    x1, y1, x2, y2 = box
    w, h = stored
    return {
        2: (w - x2, y1, w - x1, y2),
        3: (w - x2, h - y2, w - x1, h - y1),
        4: (x1, h - y2, x2, h - y1),
        5: (y1, x1, y2, x2),
        6: (y1, h - x2, y2, h - x1),
        7: (w - y2, h - x2, w - y1, h - x1),
        8: (w - y2, x1, w - y1, x2),
    }.get(turn, box)


def open_upright(source: ImageSource) -> Image.Image:
    """The whole image, decoded, upright, with the file already closed (PIL's own errors propagate:
    callers word them for their context)."""
    from PIL import Image

    src = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    with Image.open(src) as im:
        im.load()
        turned = upright(im)
        return turned if turned is not im else im.copy()


def flatten_rgb(im: Image.Image) -> Image.Image:
    """RGB with any transparency laid on white (a model reads black-on-transparent text as black)."""
    from PIL import Image

    if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return im if im.mode == "RGB" else im.convert("RGB")


__all__ = [
    "ImageSource",
    "flatten_rgb",
    "open_upright",
    "orientation",
    "stored_box",
    "upright",
    "upright_size",
]

"""Which files the corpus understands, by extension (case-insensitive, unlike the original)."""

from __future__ import annotations

from pathlib import Path

PDF = "pdf"
IMAGE = "image"
VIDEO = "video"
TEXT = "text"

# Item kinds (what a source is split into).
ITEM_PAGE = "page"
ITEM_IMAGE = "image"
ITEM_CLIP = "clip"
ITEM_TEXT = "text"

EXTENSIONS: dict[str, str] = {
    ".pdf": PDF,
    ".jpg": IMAGE,
    ".jpeg": IMAGE,
    ".png": IMAGE,
    ".webp": IMAGE,
    ".bmp": IMAGE,
    ".tif": IMAGE,
    ".tiff": IMAGE,
    ".gif": IMAGE,
    ".mp4": VIDEO,
    ".mov": VIDEO,
    ".mkv": VIDEO,
    ".avi": VIDEO,
    ".webm": VIDEO,
    ".m4v": VIDEO,
    ".txt": TEXT,
    ".md": TEXT,
}


def kind_of(path: Path) -> str | None:
    """The source kind of ``path`` by its extension, or None if the corpus does not handle it."""
    return EXTENSIONS.get(path.suffix.lower())

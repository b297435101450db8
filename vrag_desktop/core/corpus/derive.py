"""Turn one source file into corpus items: PDF pages, images, video clips (:mod:`.derive_video`), text.

Every function here is a generator of :class:`Derived` and never raises for a bad *part* of a file
(a page that will not render becomes a failed item with its reason). A file that cannot be read at
all raises :class:`SourceError` with a message meant for the person who owns the file. A file only
partly indexed on purpose (a page limit, a video that stops decoding) is not a failure: the
generator *returns* one note for the whole file, which the corpus keeps beside the file's status.

Derived files are named after the source (``{stem}_{page}.jpg``, as the original's ``pdf2images``
does), with the stem cut to fit the file system's name limit; each source has its own folder, so
a cut stem never collides. The item's ``name`` keeps the whole stem: it is the original's page id.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.fsutil import NAME_MAX, atomic_save, shorten_name
from vrag_desktop.core.images import upright, upright_size

if TYPE_CHECKING:
    from PIL import Image

# A page/image is never rendered or stored above this many pixels, whatever the embedder asks.
MAX_RENDER_PIXELS = 4_000_000
# Anything larger is treated as a decompression bomb and refused (PIL's own default warns at 89 MP).
MAX_IMAGE_PIXELS = 120_000_000
# A page whose text layer has fewer non-space characters than this is treated as having none (OCR).
MIN_TEXT_CHARS = 20
JPEG_QUALITY = 88
DEFAULT_CLIP_SECONDS = 60.0
KEYFRAMES_PER_CLIP = 4
MAX_TEXT_BYTES = 20_000_000
#: Pages indexed per document unless the corpus says otherwise (``vrag-desktop index --max-pages``):
#: a 100,000-page file would otherwise render for hours and gigabytes before anything else is indexed.
DEFAULT_MAX_PAGES = 3_000
#: Clips indexed per video (33 hours at the default clip length): a header that claims billions of
#: frames, or a days-long recording, cannot fill the corpus with clips.
MAX_CLIPS_PER_VIDEO = 2_000
#: Bytes of a derived file name left for what follows the stem (``_12345_f4.jpg``, ``_12.mp4.part.mp4``).
_SUFFIX_ROOM = 40


class SourceError(Exception):
    """The whole file cannot be used; ``str(exc)`` says why in plain words."""


@dataclass
class Derived:
    """One item derived from a source, before embedding."""

    ordinal: int  # 1-based page / clip number; 1 for images and texts
    name: str  # original-compatible id: "{stem}_{page}" for pages, "{stem}_{clip}" for clips, else stem
    kind: str  # kinds.ITEM_*
    image_path: Path | None = None  # what a person or a VLM is shown for this item
    media_path: Path | None = None  # the raw item: original image file, clip video file
    frames: list[Path] = field(default_factory=list)  # video keyframes, in time order
    timestamps: list[float] = field(default_factory=list)
    width: int | None = None
    height: int | None = None
    text: str = ""
    text_source: str = "none"  # layer | ocr | file | none
    t_start: float | None = None
    t_end: float | None = None
    error: str | None = None  # set: the item failed (and is recorded as such)


@dataclass
class DeriveOptions:
    render_pixels: int = 1_843_200
    ocr: bool = True  # read text from pixels when there is no text layer (text embedders need it)
    clip_seconds: float = DEFAULT_CLIP_SECONDS
    write_clips: bool = True
    max_pages: int = DEFAULT_MAX_PAGES
    max_clips: int = MAX_CLIPS_PER_VIDEO


OCRFunc = Callable[[Path], str]
#: What deriving one source gives: its items, then one note for the whole file (None: nothing to say).
Derivation = Generator["Derived", None, "str | None"]


def safe_stem(path: Path) -> str:
    """The file stem made safe for derived file names (undecodable bytes and separators replaced)."""
    stem = os.fsencode(path.stem).decode("utf-8", "replace").replace("\ufffd", "_")
    return "".join(c if c not in "/\\\0" else "_" for c in stem) or "file"


def file_stem(path: Path) -> str:
    """:func:`safe_stem` cut (at a character boundary) so that every derived file name fits NAME_MAX."""
    return shorten_name(safe_stem(path), NAME_MAX - _SUFFIX_ROOM)


def expected_count(path: Path, kind: str, opts: DeriveOptions) -> int:
    """How many items the file will give (pages, clips) within the limits; cheap, for progress
    totals. Raises SourceError."""
    if kind == kinds.PDF:
        with _open_pdf(path) as doc:
            return min(int(doc.page_count), max(1, opts.max_pages))
    if kind == kinds.VIDEO:
        from vrag_desktop.core.corpus.derive_video import expected_clips

        return expected_clips(path, opts)
    return 1


def derive(
    path: Path, kind: str, out_dir: Path, opts: DeriveOptions, skip: set[int], ocr: OCRFunc | None
) -> Derivation:
    """Derived items of ``path`` (skipping ordinals in ``skip``), files written under ``out_dir``;
    returns the file's note (what was left out and why), or None."""
    if os.path.getsize(path) == 0:
        raise SourceError("empty file (0 bytes)")
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind == kinds.PDF:
        return (yield from _derive_pdf(path, out_dir, opts, skip, ocr))
    if kind == kinds.IMAGE:
        if 1 not in skip:
            yield _derive_image(path, out_dir, opts, ocr)
    elif kind == kinds.VIDEO:
        from vrag_desktop.core.corpus.derive_video import derive_video

        return (yield from derive_video(path, out_dir, opts, skip, ocr))
    elif kind == kinds.TEXT:
        if 1 not in skip:
            yield _derive_text(path)
    else:
        raise SourceError(f"unsupported file type '{path.suffix}'")
    return None


def page_limit_note(indexed: int, pages: int) -> str:
    """The note of a document cut at the page limit: what was left out and how to get it."""
    return (
        f"only the first {indexed:,} of {pages:,} pages indexed (page limit; raise it with "
        f"vrag-desktop index --max-pages {pages} and the remaining pages are indexed)"
    )


# ---------------------------------------------------------------- PDF
class _open_pdf:
    """Open a PDF for reading, turning pymupdf's many failure modes into one clear SourceError."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self):  # type: ignore[no-untyped-def]
        import pymupdf

        try:
            if _utf8_ok(self.path):
                doc = pymupdf.open(str(self.path), filetype="pdf")
            else:  # mupdf cannot open a name that is not valid UTF-8; read the bytes ourselves
                doc = pymupdf.open(stream=self.path.read_bytes(), filetype="pdf")
        except Exception as exc:
            raise SourceError(f"not a readable PDF (corrupt or truncated): {_msg(exc)}") from exc
        if doc.needs_pass and not doc.authenticate(""):
            doc.close()
            raise SourceError("encrypted PDF: it needs a password, which VRAG Desktop does not ask for")
        if doc.page_count == 0:
            doc.close()
            raise SourceError("PDF has no pages (corrupt or truncated)")
        self.doc = doc
        return doc

    def __exit__(self, *exc: object) -> None:
        self.doc.close()


def _derive_pdf(
    path: Path, out_dir: Path, opts: DeriveOptions, skip: set[int], ocr: OCRFunc | None
) -> Derivation:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)
    stem, fstem = safe_stem(path), file_stem(path)
    with _open_pdf(path) as doc:
        pages = int(doc.page_count)
        limit = min(pages, max(1, opts.max_pages))
        for index in range(limit):
            ordinal = index + 1
            if ordinal in skip:
                continue
            name = f"{stem}_{ordinal}"
            try:
                page = doc.load_page(index)
                if doc.is_repaired and doc.xref_get_key(page.xref, "Type") != ("name", "/Page"):
                    raise ValueError("missing from the file (truncated or corrupt PDF)")
                pymupdf.TOOLS.reset_mupdf_warnings()
                text = page.get_text("text").strip()
                if doc.is_repaired and not text and _lost_content(pymupdf.TOOLS.mupdf_warnings()):
                    raise ValueError("content is missing from the file (truncated or corrupt PDF)")
                rect = page.rect
                if rect.width <= 0 or rect.height <= 0:
                    raise ValueError("page has no area")
                pixels = min(opts.render_pixels, MAX_RENDER_PIXELS)
                zoom = math.sqrt(pixels / (rect.width * rect.height))
                pix = page.get_pixmap(
                    matrix=pymupdf.Matrix(zoom, zoom), alpha=False, colorspace=pymupdf.csRGB
                )
                image_path = out_dir / f"{fstem}_{ordinal}.jpg"
                # PIL's libjpeg-turbo encodes ~10x faster than pymupdf's own JPEG writer (bench/ingest.py).
                from PIL import Image

                _save_jpeg(Image.frombytes("RGB", (pix.width, pix.height), pix.samples), image_path)
                source = "layer"
                if len("".join(text.split())) < MIN_TEXT_CHARS:
                    source = "none"
                    if opts.ocr and ocr is not None:
                        ocr_text = ocr(image_path).strip()
                        if ocr_text:
                            text, source = ocr_text, "ocr"
                yield Derived(
                    ordinal=ordinal,
                    name=name,
                    kind=kinds.ITEM_PAGE,
                    image_path=image_path,
                    width=pix.width,
                    height=pix.height,
                    text=text,
                    text_source=source,
                )
            except SourceError:
                raise
            except Exception as exc:
                yield Derived(
                    ordinal=ordinal, name=name, kind=kinds.ITEM_PAGE, error=f"page {ordinal}: {_msg(exc)}"
                )
    return page_limit_note(limit, pages) if limit < pages else None


# ---------------------------------------------------------------- images
def _derive_image(path: Path, out_dir: Path, opts: DeriveOptions, ocr: OCRFunc | None) -> Derived:
    from PIL import Image

    stem = safe_stem(path)
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with Image.open(path) as im:
            w, h = upright_size(im)  # sideways phone photos are indexed, OCR'd and shown upright
            if w * h > MAX_IMAGE_PIXELS:
                raise SourceError(
                    f"image too large: {w}×{h} = {w * h / 1e6:.0f} megapixels (limit {MAX_IMAGE_PIXELS / 1e6:.0f}; "
                    "possible decompression bomb)"
                )
            im.seek(0)  # animated GIF/WebP: the first frame
            im.load()
            rgb = upright(im).convert("RGB")
    except SourceError:
        raise
    except Image.DecompressionBombError as exc:
        raise SourceError(f"image too large (possible decompression bomb): {_msg(exc)}") from exc
    except Exception as exc:
        raise SourceError(f"cannot decode image (corrupt or truncated): {_msg(exc)}") from exc
    image_path = out_dir / f"{file_stem(path)}.jpg"
    _save_jpeg(_shrink(rgb, opts.render_pixels), image_path)
    text, source = _ocr_text(image_path, opts, ocr)
    return Derived(
        ordinal=1,
        name=stem,
        kind=kinds.ITEM_IMAGE,
        image_path=image_path,
        media_path=path,
        width=w,
        height=h,
        text=text,
        text_source=source,
    )


def _shrink(image: Image.Image, pixels: int) -> Image.Image:
    """``image`` scaled down (never up) to at most ``pixels`` (capped by MAX_RENDER_PIXELS)."""
    from PIL import Image

    pixels = min(pixels, MAX_RENDER_PIXELS)
    w, h = image.size
    if w * h <= pixels:
        return image
    scale = math.sqrt(pixels / (w * h))
    return image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS)


def _ocr_text(image_path: Path, opts: DeriveOptions, ocr: OCRFunc | None) -> tuple[str, str]:
    """(text, origin) read from an image when OCR is on: origin "ocr", or "none" if nothing was read."""
    if not opts.ocr or ocr is None:
        return "", "none"
    text = ocr(image_path).strip()
    return text, "ocr" if text else "none"


def keyframe_offsets(first: int, last: int, count: int) -> list[int]:
    """Frame numbers of a clip's keyframes (frames ``first`` to ``last - 1``), evenly spread, in
    order; fewer than ``count`` when the clip is that short. The agent's zoom finds them again."""
    return sorted({first + round(j * (last - first - 1) / max(count - 1, 1)) for j in range(count)})


def sheet_grid(n: int) -> tuple[int, int]:
    """(columns, rows) of the contact sheet of ``n`` keyframes."""
    cols = 1 if n == 1 else 2
    return cols, math.ceil(n / cols)


# ---------------------------------------------------------------- text
def _derive_text(path: Path) -> Derived:
    size = os.path.getsize(path)
    if size > MAX_TEXT_BYTES:
        raise SourceError(f"text file too large ({size / 1e6:.0f} MB; limit {MAX_TEXT_BYTES / 1e6:.0f} MB)")
    data = path.read_bytes()
    for enc in ("utf-8-sig", "utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8-sig",):
        try:
            text = data.decode(enc)
            break
        except UnicodeDecodeError:
            continue
    else:
        text = data.decode("latin-1")  # never fails; better a few odd characters than a lost note
    if "\0" in text:
        raise SourceError("binary data in a text file")
    return Derived(
        ordinal=1,
        name=safe_stem(path),
        kind=kinds.ITEM_TEXT,
        media_path=path,
        text=text.strip(),
        text_source="file",
    )


# ---------------------------------------------------------------- helpers
def _utf8_ok(path: Path) -> bool:
    try:
        str(path).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _lost_content(warnings: str) -> bool:
    w = warnings.lower()
    return any(
        s in w for s in ("premature end", "length incorrect", "cannot find object", "object out of range")
    )


def _msg(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) < 300 else text[:297] + "…"


def _save_jpeg(image: Image.Image, path: Path) -> None:
    atomic_save(path, lambda fh: image.save(fh, format="JPEG", quality=JPEG_QUALITY))

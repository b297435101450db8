"""Zoom from the source: a crop the VRAG agent asks for is cut from the best pixels there are.

Why: VRAG's idea is coarse to fine. The page the model first sees is the indexed page image, which
is rendered at the *embedder's* pixel budget (200,704 px for a Qwen-VL embedder — less than the
401,408-px view); cropping that image only up-samples blur. So a region is made again from the
source, at exactly the size the model's image budget asks for:

- a PDF page region is re-rendered from the page itself (vector text stays sharp at any zoom);
- an image region is cut from the original file (EXIF-upright, JPEGs decoded at a reduced scale
  when that still covers the output);
- a video region is cut from the source frame behind the contact-sheet tile it lies in.

Regions stay in the indexed page image's pixel frame (what the evidence view draws). When the
source has moved, vanished or was replaced by another file of the same name (its page no longer
looks like the indexed one), the crop falls back to the page image and :class:`Zoomed` says why.

Open PDFs, the verdict "this source still is the indexed page" and the last decoded original are
kept, keyed by the file's path, size and modification time: nested zooms and later runs on the
same page pay only for the render. PyMuPDF is not thread-safe, so every call into it holds one lock.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.images import orientation, stored_box, upright, upright_size

if TYPE_CHECKING:
    from PIL import Image

    from vrag_desktop.core.search.hit import Hit

Region = tuple[int, int, int, int]

#: How the crop was made (the ``Crop`` event's ``zoomed_from``).
FROM_PDF, FROM_IMAGE, FROM_VIDEO, FROM_PAGE_IMAGE = "pdf", "image", "video", "page image"
#: Side of the thumbnails compared to decide that a source still shows the indexed page: coarse
#: enough that lines of text average into blocks (finer, their sub-pixel phase decides).
_THUMB = 32
#: Long side of the source render compared: MuPDF draws text lighter at much smaller scales.
_LOOK_SIDE = 400
#: Non-space characters of a page's text layer compared with the indexed text, when both have one.
_TEXT_PREFIX = 200
#: Pearson correlation of the two thumbnails above which they show the same page.
_SAME_PAGE = 0.8
#: Relative aspect-ratio difference tolerated between the source and its page image (rounding).
_ASPECT_TOL = 0.02

_lock = threading.RLock()  # PyMuPDF and the caches below
_docs: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_verdicts: dict[tuple[Any, ...], str] = {}
_original: list[tuple[tuple[Any, ...], Image.Image]] = []  # the last full decode of an original image
_MAX_DOCS = 8
_listings: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
_MAX_LISTINGS = 16


@dataclass(frozen=True)
class Zoomed:
    """A crop at the requested size; ``origin`` says where its pixels came from and ``note`` why the
    page image was used instead of the source (empty when the source was used)."""

    image: Image.Image
    origin: str
    note: str = ""


def _stat_key(path: str | os.PathLike[str]) -> tuple[Any, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.fspath(path), st.st_size, st.st_mtime_ns, st.st_ino)


class _Fallback(Exception):
    """The source cannot give this crop; the message says why (shown to the person)."""


class PageImage:
    """The indexed page image of a hit (upright): its size at once, a small view for the same-page
    check, and all its pixels only when a crop must come from it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from PIL import Image

        self.path = os.fspath(path)
        with Image.open(self.path) as im:
            self.size = upright_size(im)
        self._pixels: Image.Image | None = None

    @property
    def width(self) -> int:
        return self.size[0]

    @property
    def height(self) -> int:
        return self.size[1]

    def pixels(self) -> Image.Image:
        """All pixels, upright RGB (decoded once)."""
        if self._pixels is None:
            from PIL import Image

            with Image.open(self.path) as im:
                self._pixels = upright(im).convert("RGB")
        return self._pixels

    def small(self) -> Image.Image:
        """A reduced decode (JPEG draft scale) for comparing with the source."""
        if self._pixels is not None:
            return self._pixels
        from PIL import Image

        with Image.open(self.path) as im:
            im.draft("RGB", (_THUMB * 4, _THUMB * 4))
            return upright(im).convert("RGB")

    def crop(self, box: tuple[int, int, int, int]) -> Image.Image:
        return self.pixels().crop(box)


def zoom(hit: Hit, page_image: PageImage, region: Region, size: tuple[int, int]) -> Zoomed:
    """``region`` (pixels of ``page_image``, the indexed page image of ``hit``, upright) at ``size``.

    Never raises for a missing or changed source: the crop then comes from ``page_image``."""
    try:
        if _is_pdf_page(hit):
            assert hit.page is not None
            pdf = _from_pdf(Path(hit.source), hit.page, hit.text, page_image, region, size)
            return Zoomed(pdf, FROM_PDF)
        if hit.modality == "image" and (hit.media or hit.source):
            original = Path(hit.media or hit.source)
            return Zoomed(_from_image(original, page_image, region, size), FROM_IMAGE)
        if hit.modality == "clip" and hit.media:
            span = (hit.t_start, hit.t_end)
            return Zoomed(_from_video(Path(hit.media), span, page_image, region, size), FROM_VIDEO)
        note = ""
    except _Fallback as exc:
        note = str(exc)
    except Exception as exc:  # a source that breaks a decoder must not break the run
        note = f"the source could not be read ({type(exc).__name__}: {exc})"
    return Zoomed(_resized(page_image.crop(region), size), FROM_PAGE_IMAGE, note)


#: The resolution the original rendered PDF pages at (pdf2image's default): its crop padding of 56
#: "raw" pixels (reference §3.4) is 56 pixels of this raster.
ORIGINAL_PDF_DPI = 200


def raw_scale(hit: Hit, page_image: PageImage) -> float:
    """Page-image pixels per pixel of the original system's raw image for this hit — a 200-dpi
    raster of a PDF page, the original image file, the video frame — so a padding the original
    gave in raw pixels (56) keeps its size on the page. 1.0 when the source cannot tell."""
    try:
        if _is_pdf_page(hit) and hit.page:
            _, doc = _document(Path(hit.source))
            with _lock:
                if 1 <= hit.page <= doc.page_count:
                    width_pt = doc.load_page(hit.page - 1).rect.width
                    return page_image.width / (width_pt * ORIGINAL_PDF_DPI / 72)
        elif hit.modality == "image" and (hit.media or hit.source):
            from PIL import Image

            with Image.open(Path(hit.media or hit.source)) as im:
                return page_image.width / upright_size(im)[0]
        elif hit.modality == "clip" and hit.media:
            import cv2

            from vrag_desktop.core.corpus.derive import KEYFRAMES_PER_CLIP, sheet_grid

            cap = cv2.VideoCapture(str(hit.media))
            try:
                frame_w = float(cap.get(cv2.CAP_PROP_FRAME_WIDTH) or 0.0)
            finally:
                cap.release()
            if frame_w > 0:
                return page_image.width / sheet_grid(KEYFRAMES_PER_CLIP)[0] / frame_w
    except Exception:  # a missing or unreadable source: the crop will fall back and say why
        pass
    return 1.0


def _resized(img: Image.Image, size: tuple[int, int]) -> Image.Image:
    from PIL import Image

    from vrag_desktop.core.agents import imaging

    img = img if img.mode == "RGB" else img.convert("RGB")
    return img if img.size == size else imaging.resize(img, size, Image.Resampling.BICUBIC)


# ---------------------------------------------------------------- same page?
def _thumb_gray(img: Image.Image) -> Any:
    import numpy as np
    from PIL import Image

    small = img.convert("L").resize((_THUMB, _THUMB), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32)


def _same_page(a: Image.Image, b: Image.Image) -> bool:
    """Whether two renderings show the same page: correlated thumbnails (blank pages: equal tone)."""
    import numpy as np

    x, y = _thumb_gray(a).ravel(), _thumb_gray(b).ravel()
    sx, sy = float(x.std()), float(y.std())
    if sx < 2.0 or sy < 2.0:  # (nearly) uniform: compare the tone
        return abs(float(x.mean()) - float(y.mean())) < 12.0 and max(sx, sy) < 6.0
    return float(np.corrcoef(x, y)[0, 1]) >= _SAME_PAGE


def _check(
    key: tuple[Any, ...],
    page_image: PageImage,
    source_size: tuple[float, float],
    look: Any,
    same_text: Any = None,
) -> None:
    """Raise :class:`_Fallback` unless the source is the page that was indexed. ``same_text()``
    (True/False, or None when there is no text to compare) decides first; otherwise ``look()`` (a
    small render of the source) is compared with the page image. The verdict is kept per source
    file and page image."""
    pw, ph = page_image.size
    sw, sh = source_size
    if sw <= 0 or sh <= 0 or abs((sw / sh) / (pw / ph) - 1) > _ASPECT_TOL:
        raise _Fallback("the source file has changed since it was indexed (its page has another shape)")
    vkey = (*key, page_image.size)
    with _lock:
        verdict = _verdicts.get(vkey)
    if verdict is None:
        same = same_text() if same_text is not None else None
        if same is None:
            same = _same_page(look(), page_image.small())
        verdict = "same" if same else "changed"
        with _lock:
            _verdicts[vkey] = verdict
    if verdict != "same":
        raise _Fallback("the source file has changed since it was indexed (it no longer shows this page)")


def _text_key(text: str) -> str:
    return "".join(text.split())[:_TEXT_PREFIX]


def _scaled(region: Region, page_size: tuple[int, int], to: tuple[float, float]) -> tuple[float, ...]:
    sx, sy = to[0] / page_size[0], to[1] / page_size[1]
    x1, y1, x2, y2 = region
    return (x1 * sx, y1 * sy, x2 * sx, y2 * sy)


# ---------------------------------------------------------------- PDF
def _document(path: Path) -> tuple[tuple[Any, ...], Any]:
    import pymupdf

    key = _stat_key(path)
    if key is None:
        raise _Fallback(f"the source PDF is gone ({path})")
    with _lock:
        doc = _docs.get(key)
        if doc is None:
            try:
                doc = pymupdf.open(str(path), filetype="pdf")
            except Exception as exc:
                raise _Fallback(f"the source PDF cannot be opened ({exc})") from exc
            _docs[key] = doc
            while len(_docs) > _MAX_DOCS:
                _docs.popitem(last=False)[1].close()
        _docs.move_to_end(key)
    return key, doc


def _pdf_page(path: Path, page_no: int, indexed_text: str, page_image: PageImage) -> tuple[Any, Any]:
    """(page rectangle, display list) of the indexed page, once checked to still be that page.
    Call with ``_lock`` held."""
    import pymupdf
    from PIL import Image

    key, doc = _document(path)
    if not 1 <= page_no <= doc.page_count:
        raise _Fallback(f"the source PDF has changed: it has no page {page_no} now")
    rect, listing = _page_listing(key, doc, page_no)

    def look() -> Image.Image:
        s = _LOOK_SIDE / max(rect.width, rect.height)
        pix = listing.get_pixmap(matrix=pymupdf.Matrix(s, s), alpha=False, colorspace=pymupdf.csRGB)
        return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)

    def same_text() -> bool | None:
        """The indexed text is the page's text layer when it had one (derive): compare them."""
        indexed = _text_key(indexed_text)
        if len(indexed) < 20:
            return None
        layer = _text_key(doc.load_page(page_no - 1).get_text("text"))
        return None if len(layer) < 20 else layer == indexed[: len(layer)]

    _check((*key, page_no), page_image, (rect.width, rect.height), look, same_text)
    return rect, listing


def _from_pdf(
    path: Path, page_no: int, indexed_text: str, page_image: PageImage, region: Region, size: tuple[int, int]
) -> Image.Image:
    import pymupdf
    from PIL import Image

    with _lock:
        rect, listing = _pdf_page(path, page_no, indexed_text, page_image)
        x1, y1, x2, y2 = _scaled(region, page_image.size, (rect.width, rect.height))
        clip = pymupdf.Rect(x1, y1, x2, y2)  # page.rect coordinates: rotation already applied
        sx, sy = size[0] / clip.width, size[1] / clip.height
        # translated so the clip lands on whole device pixels: the pixmap is the region, no shift
        matrix = pymupdf.Matrix(sx, 0, 0, sy, -x1 * sx, -y1 * sy)
        pix = listing.get_pixmap(matrix=matrix, clip=clip, alpha=False, colorspace=pymupdf.csRGB)
        img = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    if img.width >= size[0] and img.height >= size[1]:  # rounded out to whole pixels: ≤ 1 px more
        return img.crop((0, 0, *size)) if img.size != size else img
    return _resized(img, size)


def prepare(hit: Hit, page_image: PageImage) -> None:
    """Do now what the first zoom into this hit's page would do first — open the PDF, interpret the
    page, check it is still the indexed one — so the agent can run it while the model reads the page
    it was shown. Never raises (a zoom that follows reports any problem)."""
    try:
        if _is_pdf_page(hit):
            with _lock:
                _pdf_page(Path(hit.source), int(hit.page or 0), hit.text, page_image)
    except Exception:
        pass


_preparer: Any = None


def prepare_soon(hit: Hit, page_image: str | os.PathLike[str]) -> None:
    """:func:`prepare` on a background thread (one at a time; a zoom waits for it on the lock)."""
    global _preparer
    if not _is_pdf_page(hit):
        return
    with _lock:
        if _preparer is None:
            from concurrent.futures import ThreadPoolExecutor

            _preparer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vrag-zoom-prepare")
    _preparer.submit(lambda: prepare(hit, PageImage(page_image)))


def settle() -> None:
    """Wait for the preparations asked for so far (benchmarks and tests)."""
    if _preparer is not None:
        _preparer.submit(lambda: None).result()


def _is_pdf_page(hit: Hit) -> bool:
    return hit.modality == "page" and bool(hit.page) and str(hit.source).lower().endswith(".pdf")


def _page_listing(key: tuple[Any, ...], doc: Any, page_no: int) -> tuple[Any, Any]:
    """(page rectangle, display list) of a page: interpreting the page's content is the slow part
    of a render, and a run zooms into the same page again (nested zooms, the same-page check)."""
    lkey = (*key, page_no)
    hit = _listings.get(lkey)
    if hit is None:
        page = doc.load_page(page_no - 1)
        hit = _listings[lkey] = (page.rect, page.get_displaylist())
        while len(_listings) > _MAX_LISTINGS:
            _listings.popitem(last=False)
    _listings.move_to_end(lkey)
    return hit


# ---------------------------------------------------------------- images
def _from_image(path: Path, page_image: PageImage, region: Region, size: tuple[int, int]) -> Image.Image:
    from PIL import Image

    from vrag_desktop.core.corpus.derive import MAX_IMAGE_PIXELS

    key = _stat_key(path)
    if key is None:
        raise _Fallback(f"the original image is gone ({path})")
    with Image.open(path) as im:
        im.seek(0)  # animated images: the first frame, as indexed
        turn = orientation(im)
        full = upright_size(im)
        stored = im.size
        if stored[0] * stored[1] > MAX_IMAGE_PIXELS:
            raise _Fallback(f"the original image is too large to decode ({stored[0]}×{stored[1]})")
        box = _scaled(region, page_image.size, full)
        bw, bh = box[2] - box[0], box[3] - box[1]
        # Decode at the smallest JPEG scale that still covers the output (draft is a no-op otherwise).
        scale = max(size[0] / max(bw, 1e-6), size[1] / max(bh, 1e-6))
        if scale < 1:
            im.draft("RGB", (max(1, math.ceil(stored[0] * scale)), max(1, math.ceil(stored[1] * scale))))
        factor = im.size[0] / stored[0]
        decoded = _decoded_original((*key, im.size), im)

    def look() -> Image.Image:
        return upright(decoded, turn)

    _check(key, page_image, full, look)
    sbox = stored_box(tuple(round(v * factor) for v in box), turn, decoded.size)  # type: ignore[arg-type]
    piece = upright(decoded.crop(sbox), turn)
    from vrag_desktop.core.images import flatten_rgb

    return _resized(flatten_rgb(piece), size)


def _decoded_original(key: tuple[Any, ...], im: Image.Image) -> Image.Image:
    """The decode of ``im`` (stored orientation), kept while the same file is zoomed into again."""
    with _lock:
        for k, img in _original:
            if k == key:
                return img
    im.load()
    img = im.copy()
    with _lock:
        _original[:] = [(key, img)]
    return img


# ---------------------------------------------------------------- video
def _from_video(
    path: Path,
    span: tuple[float | None, float | None],
    page_image: PageImage,
    region: Region,
    size: tuple[int, int],
) -> Image.Image:
    """The clip's page image is a contact sheet of keyframes (see ``derive``): find the tile the
    region lies in, read that frame from the clip's video and cut the same part of it. ``path`` is
    the clip file, or the whole source video (corpora indexed without clip files): then the clip's
    frames are found from its ``span`` in seconds."""
    import cv2
    from PIL import Image

    from vrag_desktop.core.corpus.derive import KEYFRAMES_PER_CLIP, keyframe_offsets, sheet_grid

    if _stat_key(path) is None:
        raise _Fallback(f"the clip video is gone ({path})")
    cap = cv2.VideoCapture(str(path))
    try:
        total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        if not cap.isOpened() or total <= 0 or fps <= 0:
            raise _Fallback(f"the clip video cannot be decoded ({path})")
        first, last = 0, total
        t0, t1 = span
        if t0 is not None and t1 is not None and total / fps > (t1 - t0) + 1.5 / fps:  # the whole video
            first, last = round(t0 * fps), min(total, round(t1 * fps))
        offsets = keyframe_offsets(first, last, KEYFRAMES_PER_CLIP)
        cols, rows = sheet_grid(len(offsets))
        tw, th = page_image.width / cols, page_image.height / rows
        x1, y1, x2, y2 = region
        col, row = min(int((x1 + x2) / 2 // tw), cols - 1), min(int((y1 + y2) / 2 // th), rows - 1)
        tile = row * cols + col
        if tile >= len(offsets):
            raise _Fallback("the region lies on an empty part of the clip's contact sheet")
        ox, oy = col * tw, row * th
        if x1 < ox - 1 or y1 < oy - 1 or x2 > ox + tw + 1 or y2 > oy + th + 1:
            raise _Fallback("the region spans several keyframes of the clip's contact sheet")
        cap.set(cv2.CAP_PROP_POS_FRAMES, offsets[tile])
        ok, frame = cap.read()
        if not ok:
            raise _Fallback(f"frame {offsets[tile]} of the clip video cannot be decoded")
    finally:
        cap.release()
    img = Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    fw, fh = img.size
    shown = page_image.crop((round(ox), round(oy), round(ox + tw), round(oy + th)))
    if abs((fw / fh) / (tw / th) - 1) > _ASPECT_TOL or not _same_page(img, shown):
        raise _Fallback("the clip video has changed since it was indexed (its frame no longer matches)")
    sx, sy = fw / tw, fh / th
    box = (
        max(0, round((x1 - ox) * sx)),
        max(0, round((y1 - oy) * sy)),
        min(fw, round((x2 - ox) * sx)),
        min(fh, round((y2 - oy) * sy)),
    )
    return _resized(img.crop(box), size)


def clear() -> None:
    """Close kept documents and forget verdicts and decodes (tests; a corpus re-indexed in place)."""
    with _lock:
        while _docs:
            _docs.popitem()[1].close()
        _verdicts.clear()
        _original.clear()
        _listings.clear()


__all__ = [
    "FROM_IMAGE",
    "FROM_PAGE_IMAGE",
    "FROM_PDF",
    "FROM_VIDEO",
    "PageImage",
    "Zoomed",
    "clear",
    "raw_scale",
    "zoom",
]

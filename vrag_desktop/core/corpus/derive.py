"""Turn one source file into corpus items: PDF pages, images, video clips, text.

Every function here is a generator of :class:`Derived` and never raises for a bad *part* of a file
(a page that will not render becomes a failed item with its reason). A file that cannot be read at
all raises :class:`SourceError` with a message meant for the person who owns the file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.fsutil import atomic_save
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


OCRFunc = Callable[[Path], str]


def safe_stem(path: Path) -> str:
    """The file stem made safe for derived file names (undecodable bytes and separators replaced)."""
    stem = os.fsencode(path.stem).decode("utf-8", "replace").replace("\ufffd", "_")
    return "".join(c if c not in "/\\\0" else "_" for c in stem) or "file"


def expected_count(path: Path, kind: str, opts: DeriveOptions) -> int:
    """How many items the file will give (pages, clips); cheap, for progress totals. Raises SourceError."""
    if kind == kinds.PDF:
        with _open_pdf(path) as doc:
            return int(doc.page_count)
    if kind == kinds.VIDEO:
        return _video_meta(path, opts.clip_seconds)[2]
    return 1


def derive(
    path: Path, kind: str, out_dir: Path, opts: DeriveOptions, skip: set[int], ocr: OCRFunc | None
) -> Iterator[Derived]:
    """Derived items of ``path`` (skipping ordinals in ``skip``), files written under ``out_dir``."""
    if os.path.getsize(path) == 0:
        raise SourceError("empty file (0 bytes)")
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind == kinds.PDF:
        yield from _derive_pdf(path, out_dir, opts, skip, ocr)
    elif kind == kinds.IMAGE:
        if 1 not in skip:
            yield _derive_image(path, out_dir, opts, ocr)
    elif kind == kinds.VIDEO:
        yield from _derive_video(path, out_dir, opts, skip, ocr)
    elif kind == kinds.TEXT:
        if 1 not in skip:
            yield _derive_text(path)
    else:
        raise SourceError(f"unsupported file type '{path.suffix}'")


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
) -> Iterator[Derived]:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)
    stem = safe_stem(path)
    with _open_pdf(path) as doc:
        for index in range(doc.page_count):
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
                image_path = out_dir / f"{name}.jpg"
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
    image_path = out_dir / f"{stem}.jpg"
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


# ---------------------------------------------------------------- video
def _video_meta(path: Path, clip_seconds: float) -> tuple[float, int, int]:
    """(fps, frame count, clip count) or SourceError for a file opencv cannot decode."""
    import cv2

    with _cv_path(path) as p:
        cap = cv2.VideoCapture(p)
    try:
        if not cap.isOpened():
            raise SourceError("cannot open video (corrupt file or unsupported codec)")
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        ok, _ = cap.read()
        if not ok or fps <= 0 or frames <= 0:
            raise SourceError("cannot decode video frames (corrupt file or unsupported codec)")
    finally:
        cap.release()
    duration = frames / fps
    return fps, frames, max(1, math.ceil(duration / clip_seconds - 1e-9))


def _derive_video(
    path: Path, out_dir: Path, opts: DeriveOptions, skip: set[int], ocr: OCRFunc | None
) -> Iterator[Derived]:
    import cv2
    from PIL import Image

    fps, total, n_clips = _video_meta(path, opts.clip_seconds)
    stem = safe_stem(path)
    frames_per_clip = max(1, round(opts.clip_seconds * fps))
    with _cv_path(path) as p:
        cap = cv2.VideoCapture(p)
    try:
        frame_no = 0
        for clip in range(1, n_clips + 1):
            first, last = frame_no, min(total, frame_no + frames_per_clip)
            name = f"{stem}_{clip}"
            want = set(keyframe_offsets(first, last, KEYFRAMES_PER_CLIP))
            todo = clip not in skip
            writer = None
            clip_path = out_dir / f"{name}.mp4"
            keyframes: list[tuple[float, Any]] = []
            read_ok = True
            while frame_no < last:
                ok, frame = cap.read()
                if not ok:
                    read_ok = False
                    break
                if todo:
                    if opts.write_clips:
                        if writer is None:
                            h, w = frame.shape[:2]
                            writer = cv2.VideoWriter(
                                str(clip_path) + ".part.mp4", cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h)
                            )
                        writer.write(frame)
                    if frame_no in want:
                        keyframes.append((frame_no / fps, frame))
                frame_no += 1
            if writer is not None:
                writer.release()
                os.replace(str(clip_path) + ".part.mp4", clip_path)
            if not todo:
                if not read_ok:
                    break
                continue
            if not keyframes:
                yield Derived(
                    ordinal=clip, name=name, kind=kinds.ITEM_CLIP, error=f"clip {clip}: no decodable frames"
                )
                if not read_ok:
                    yield from _unreadable_rest(stem, clip, n_clips, skip)
                    return
                continue
            frame_paths, stamps, images = [], [], []
            for j, (t, frame) in enumerate(keyframes):
                im = _shrink(Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)), opts.render_pixels)  # type: ignore[call-overload]
                fp = out_dir / f"{name}_f{j + 1}.jpg"
                _save_jpeg(im, fp)
                frame_paths.append(fp)
                stamps.append(round(t, 3))
                images.append(im)
            sheet = _contact_sheet(images)
            sheet_path = out_dir / f"{name}.jpg"
            _save_jpeg(sheet, sheet_path)
            text, source = _ocr_text(sheet_path, opts, ocr)
            yield Derived(
                ordinal=clip,
                name=name,
                kind=kinds.ITEM_CLIP,
                image_path=sheet_path,
                media_path=clip_path if opts.write_clips else path,
                frames=frame_paths,
                timestamps=stamps,
                width=sheet.width,
                height=sheet.height,
                text=text,
                text_source=source,
                t_start=round(first / fps, 3),
                t_end=round(frame_no / fps, 3),
            )
            if not read_ok:
                yield from _unreadable_rest(stem, clip, n_clips, skip)
                return
    finally:
        cap.release()


def _unreadable_rest(stem: str, clip: int, n_clips: int, skip: set[int]) -> Iterator[Derived]:
    """The video stopped decoding in ``clip``: report each remaining clip once, as failed."""
    for rest in range(clip + 1, n_clips + 1):
        if rest not in skip:
            yield Derived(
                ordinal=rest,
                name=f"{stem}_{rest}",
                kind=kinds.ITEM_CLIP,
                error=f"clip {rest}: video ends early (truncated or corrupt)",
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


def _contact_sheet(images: list[Image.Image]) -> Image.Image:
    """Keyframes in a grid (2×2 for four): one picture that shows a clip at a glance."""
    from PIL import Image

    cols, rows = sheet_grid(len(images))
    w, h = images[0].width, images[0].height
    sheet = Image.new("RGB", (w * cols, h * rows), "black")
    for i, im in enumerate(images):
        sheet.paste(im.resize((w, h)), ((i % cols) * w, (i // cols) * h))
    return sheet


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


class _cv_path:
    """A path opencv can open: itself, or an ASCII-named symlink to it (opencv crashes, not
    errors, on file names that are not valid UTF-8). Opening happens inside the ``with``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp: str | None = None

    def __enter__(self) -> str:
        if _utf8_ok(self.path):
            return str(self.path)
        import tempfile

        self.tmp = tempfile.mkdtemp(prefix="vrag-video-")
        link = os.path.join(
            self.tmp, "video" + (os.fsencode(self.path.suffix).decode("ascii", "ignore") or ".mp4")
        )
        os.symlink(os.path.abspath(self.path), link)
        return link

    def __exit__(self, *exc: object) -> None:
        # The capture keeps its file open; the link itself can go now.
        if self.tmp is not None:
            import shutil

            shutil.rmtree(self.tmp, ignore_errors=True)


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

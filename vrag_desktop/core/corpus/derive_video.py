"""A video's items: clips of ``clip_seconds`` with keyframes, a contact sheet and the clip's video file.

The clips come from what *decodes*, not from the frame count in the file's header: a header can
claim anything (an 18 KB AVI claiming two billion frames once produced 1.3 million failed clips).
A video that stops decoding early ends there, with one note for the file; a video longer than
:data:`~.derive.MAX_CLIPS_PER_VIDEO` clips is indexed up to that many, with a note too. The header's
count only shapes progress totals (bounded the same way) and the last clip's keyframes.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.derive import (
    KEYFRAMES_PER_CLIP,
    Derivation,
    Derived,
    DeriveOptions,
    OCRFunc,
    SourceError,
    _ocr_text,
    _save_jpeg,
    _shrink,
    _utf8_ok,
    file_stem,
    keyframe_offsets,
    safe_stem,
    sheet_grid,
)

if TYPE_CHECKING:
    from PIL import Image


def video_meta(path: Path) -> tuple[float, int]:
    """(fps, frame count the header claims) or SourceError for a file opencv cannot decode."""
    import cv2

    with _cv_path(path) as p:
        cap = cv2.VideoCapture(p)
    try:
        if not cap.isOpened():
            raise SourceError("cannot open video (corrupt file or unsupported codec)")
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        ok, _ = cap.read()
        if not ok or not fps > 0 or not math.isfinite(fps) or frames <= 0:
            raise SourceError("cannot decode video frames (corrupt file or unsupported codec)")
    finally:
        cap.release()
    return fps, frames


def expected_clips(path: Path, opts: DeriveOptions) -> int:
    """Clips the header promises, within the clip limit (progress totals; what decodes may be fewer)."""
    fps, frames = video_meta(path)
    claimed = max(1, math.ceil(frames / fps / opts.clip_seconds - 1e-9))
    return min(claimed, max(1, opts.max_clips))


def clip_limit_note(clips: int) -> str:
    return (
        f"only the first {clips:,} clips indexed (limit of {clips:,} clips per video; "
        "a longer clip length, --clip-seconds, covers more of it)"
    )


def truncated_note(claimed: int, decoded: int) -> str:
    return f"the file's header claims {claimed:,} frames; {decoded:,} decoded — indexed what decodes"


def derive_video(
    path: Path, out_dir: Path, opts: DeriveOptions, skip: set[int], ocr: OCRFunc | None
) -> Derivation:
    """Clips of ``path`` while frames decode, at most ``opts.max_clips``; returns the file's note."""
    import cv2

    fps, claimed = video_meta(path)
    stem, fstem = safe_stem(path), file_stem(path)
    per_clip = max(1, round(opts.clip_seconds * fps))
    max_clips = max(1, opts.max_clips)
    with _cv_path(path) as p:
        cap = cv2.VideoCapture(p)
    try:
        frame_no = clip = 0
        ended = False  # decoding stopped inside a clip
        while not ended:
            ok, frame = cap.read()  # the next clip's first frame: none at the end of the video
            if not ok:
                break
            if clip == max_clips:
                return clip_limit_note(max_clips)
            clip += 1
            first, last = frame_no, frame_no + per_clip
            if claimed > first:  # the header's count ends the last clip (keyframes spread over it)
                last = min(last, claimed)
            todo = clip not in skip
            want = set(keyframe_offsets(first, last, KEYFRAMES_PER_CLIP))
            clip_path = out_dir / f"{fstem}_{clip}.mp4"
            part = str(clip_path) + ".part.mp4"
            writer = None
            keyframes: list[tuple[float, Any]] = []
            while True:
                if todo:
                    if opts.write_clips:
                        if writer is None:
                            h, w = frame.shape[:2]
                            writer = cv2.VideoWriter(part, cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
                        writer.write(frame)
                    if frame_no in want:
                        keyframes.append((frame_no / fps, frame))
                frame_no += 1
                if frame_no >= last:
                    break
                ok, frame = cap.read()
                if not ok:
                    ended = True
                    break
            if writer is not None:
                writer.release()
                os.replace(part, clip_path)
            if not todo:
                continue
            if ended and opts.write_clips:  # cut short: keyframes spread over what decoded, as zoom expects
                keyframes = _refit_keyframes(clip_path, first, frame_no, fps) or keyframes
            yield _clip_item(
                Derived(
                    ordinal=clip,
                    name=f"{stem}_{clip}",
                    kind=kinds.ITEM_CLIP,
                    media_path=clip_path if opts.write_clips else path,
                    t_start=round(first / fps, 3),
                    t_end=round(frame_no / fps, 3),
                ),
                out_dir / f"{fstem}_{clip}",
                keyframes,
                opts,
                ocr,
            )
    finally:
        cap.release()
    if claimed - frame_no > max(1, round(fps)):  # more than a second short of what the header says
        return truncated_note(claimed, frame_no)
    return None


def _clip_item(
    item: Derived, base: Path, keyframes: list[tuple[float, Any]], opts: DeriveOptions, ocr: OCRFunc | None
) -> Derived:
    """``item`` with its keyframe files (``{base}_f{n}.jpg``) and contact sheet (``{base}.jpg``)."""
    import cv2
    from PIL import Image

    images = []
    for j, (t, frame) in enumerate(keyframes):
        im = _shrink(Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)), opts.render_pixels)  # type: ignore[call-overload]
        fp = base.with_name(f"{base.name}_f{j + 1}.jpg")
        _save_jpeg(im, fp)
        item.frames.append(fp)
        item.timestamps.append(round(t, 3))
        images.append(im)
    sheet = _contact_sheet(images)
    item.image_path = base.with_name(f"{base.name}.jpg")
    _save_jpeg(sheet, item.image_path)
    item.width, item.height = sheet.width, sheet.height
    item.text, item.text_source = _ocr_text(item.image_path, opts, ocr)
    return item


def _refit_keyframes(clip_path: Path, first: int, end: int, fps: float) -> list[tuple[float, Any]]:
    """The keyframes of a clip that stopped decoding at ``end``, read back from the clip file just
    written (one clip, at most once per video); empty when it cannot be read."""
    import cv2

    want = {o - first for o in keyframe_offsets(first, end, KEYFRAMES_PER_CLIP)}
    out: list[tuple[float, Any]] = []
    cap = cv2.VideoCapture(str(clip_path))
    try:
        for i in range(end - first):
            ok, frame = cap.read()
            if not ok:
                break
            if i in want:
                out.append(((first + i) / fps, frame))
    finally:
        cap.release()
    return out


def _contact_sheet(images: list[Image.Image]) -> Image.Image:
    """Keyframes in a grid (2×2 for four): one picture that shows a clip at a glance."""
    from PIL import Image

    cols, rows = sheet_grid(len(images))
    w, h = images[0].width, images[0].height
    sheet = Image.new("RGB", (w * cols, h * rows), "black")
    for i, im in enumerate(images):
        sheet.paste(im.resize((w, h)), ((i % cols) * w, (i // cols) * h))
    return sheet


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

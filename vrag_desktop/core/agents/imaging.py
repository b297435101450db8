"""Resizing the agents' images on every core, with the same pixels Pillow's one-call resize gives.

Why: sizing a page for the model is the largest part of an agent step that is not the model (a
bicubic resize of a 1000×1400 decode costs more than decoding and encoding it together), and
Pillow runs it on one core. Pillow resizes in two separable passes — every output row is a function
of one input row (horizontal pass), then every output column of one column (vertical pass), with an
8-bit image in between. So cutting the image into stripes of rows for the first pass and stripes of
columns for the second, resizing each on a thread (Pillow releases the GIL while it resamples) and
pasting them together yields the same bytes as ``img.resize(size, BICUBIC)``: the coefficients of
a pass depend only on the input and output lengths along its axis, which every stripe shares.
``tests/test_agent_imaging.py`` checks the equality over many sizes.

Also here: the few most recent reduced-scale decodes (:func:`decoded`), since a page is decoded
for a search and again, at the same scale, for the memory built from it; and the frames of a video
clip sampled as the original samples them (:func:`sample_video`); and a picture fitted to a pixel
budget and capped in bytes (:func:`encode_capped`), as VimRAG sends every picture.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PIL import Image

#: Modes Pillow resizes without a conversion of its own (RGBA/LA are premultiplied, P and 1 converted).
_PLAIN_MODES = frozenset({"RGB", "L"})
#: Below this many input pixels a single call is faster than handing stripes to threads.
_MIN_PARALLEL_PIXELS = 120_000

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def workers() -> int:
    """Threads a resize is split over: the cores this process may use, at most 4."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="vrag-resize")
        return _pool


def _bounds(length: int, parts: int) -> list[tuple[int, int]]:
    step = -(-length // parts)
    return [(a, min(length, a + step)) for a in range(0, length, step)]


def _pass(img: Image.Image, size: tuple[int, int], resample: int, axis: int) -> Image.Image:
    """One pass of the resize (``axis`` 0: widths change, over stripes of rows; 1: heights, over columns)."""
    w, h = img.size
    spans = _bounds(h if axis == 0 else w, workers())

    def piece(span: tuple[int, int]) -> Image.Image:
        a, b = span
        if axis == 0:
            return img.crop((0, a, w, b)).resize((size[0], b - a), resample)
        return img.crop((a, 0, b, h)).resize((b - a, size[1]), resample)

    others = [_executor().submit(piece, span) for span in spans[1:]]
    parts = [piece(spans[0]), *(f.result() for f in others)]  # this thread does a stripe too
    out = Image.new(img.mode, size, None)  # every pixel is pasted over: no fill
    for (a, _), part in zip(spans, parts, strict=True):
        out.paste(part, (0, a) if axis == 0 else (a, 0))
    return out


def resize(img: Image.Image, size: tuple[int, int], resample: int = Image.Resampling.BICUBIC) -> Image.Image:
    """``img.resize(size, resample)``, byte for byte, split over :func:`workers` threads."""
    w, h = img.size
    if (
        img.mode not in _PLAIN_MODES
        or w * h < _MIN_PARALLEL_PIXELS
        or size == img.size
        or not _parallel_ok()
        or not _cores_idle()
    ):
        return img.resize(size, resample)
    return _split(img, size, resample)


#: The machine's CPU counters over at least this many seconds decide whether a core is free.
_CPU_WINDOW = 0.25
_cpu_ref: tuple[float, float, float] | None = None  # (monotonic time, idle, total) at the window's start
_cpu_verdict: bool | None = None


def _cores_idle() -> bool:
    """Whether a core is free for the second stripe: with every core busy (other programs, our own
    indexing), the stripes wait for each other and the split resize is slower than one call.

    Read from the machine's idle time since the window began (``/proc/stat``; the last quarter
    second or more, our own work included): half a core idle or more. The 1-minute load average
    (the fallback elsewhere) trails a burst of other work by a minute either way."""
    global _cpu_ref, _cpu_verdict
    sample = _cpu_times()
    if sample is None:
        return _load_ok()
    now = time.monotonic()
    with _pool_lock:
        if _cpu_ref is None:
            _cpu_ref = (now, *sample)
        elif now - _cpu_ref[0] >= _CPU_WINDOW:
            d_idle, d_total = sample[0] - _cpu_ref[1], sample[1] - _cpu_ref[2]
            if d_total > 0:
                _cpu_verdict = d_idle / d_total * (os.cpu_count() or 1) >= 0.5
            _cpu_ref = (now, *sample)
        return _load_ok() if _cpu_verdict is None else _cpu_verdict


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) CPU time of the whole machine so far, in clock ticks; None where unknown."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 6 or fields[0] != b"cpu":
        return None
    ticks = [float(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return ticks[3] + ticks[4], sum(ticks)


def _load_ok() -> bool:
    getloadavg = getattr(os, "getloadavg", None)
    if getloadavg is None:
        return True
    try:
        return float(getloadavg()[0]) < workers() - 0.5
    except OSError:
        return True


def _vertical_first_13(w: int, h: int, nw: int, nh: int) -> bool:
    """Pillow ≥ 12's rule (libImaging/Resample.c): vertical pass first when the height shrinks more
    than twice as much as the width."""
    return (h - nh) > 0 and (h - nh) > (w - nw) * 2


def _never(w: int, h: int, nw: int, nh: int) -> bool:
    """Older Pillows: always the horizontal pass first."""
    return False


_ORDERS = (_vertical_first_13, _never)
_order: Any = None  # the rule this Pillow follows; False when none matched (then no splitting)


def _parallel_ok() -> bool:
    """Whether splitting pays (more than one core) and which pass order gives this Pillow's exact
    bytes: checked once, on a small image whose sizes tell the orders apart; a Pillow that matches
    none of them is never split."""
    global _order
    if _order is None:
        _order = False
        if workers() > 1:
            import random

            rnd = random.Random(0)
            probe = Image.frombytes("RGB", (120, 90), bytes(rnd.randrange(256) for _ in range(120 * 90 * 3)))
            sizes = ((70, 61), (110, 20), (200, 30), (50, 200), (118, 30))
            filters = (Image.Resampling.BICUBIC, Image.Resampling.LANCZOS)
            for order in _ORDERS:
                if all(
                    _split(probe, size, f, order).tobytes() == probe.resize(size, f).tobytes()
                    for size in sizes
                    for f in filters
                ):
                    _order = order
                    break
    return _order is not False


def _split(img: Image.Image, size: tuple[int, int], resample: int, order: Any = None) -> Image.Image:
    """Both passes over stripes, in ``order``'s sequence (default: the one found for this Pillow)."""
    w, h = img.size
    nw, nh = size
    vertical_first = (order or _order or _vertical_first_13)(w, h, nw, nh)
    if vertical_first:
        mid = _pass(img, (w, nh), resample, 1)
        return mid if nw == w else _pass(mid, size, resample, 0)
    mid = img if nw == w else _pass(img, (nw, h), resample, 0)
    return mid if nh == h else _pass(mid, size, resample, 1)


# ---------------------------------------------------------------- decodes

#: Decoded pictures kept (a 200-dpi page decoded at half scale is 5.6 MB).
DECODED_BYTES = 48 * 2**20
_decoded: OrderedDict[tuple[Any, ...], tuple[Image.Image, tuple[int, int]]] = OrderedDict()
_decoded_lock = threading.Lock()


def rgb(im: Image.Image) -> Image.Image:
    """``im.convert("RGB")`` without the copy when the decode already is RGB: the pixels are shared
    with a new image object, so they outlive ``im`` being closed."""
    im.load()
    return im._new(im.im) if im.mode == "RGB" else im.convert("RGB")


def _key(source: str | Path | bytes, im: Image.Image) -> tuple[Any, ...] | None:
    """What makes a decode the same: the file (path and stat, or the bytes' digest) and the scale
    chosen for it (``im.size`` after ``draft``)."""
    if isinstance(source, bytes):
        return ("bytes", hashlib.blake2b(source, digest_size=16).digest(), im.size, im.mode)
    try:
        st = os.stat(source)
    except OSError:
        return None
    return (os.fspath(source), st.st_mtime_ns, st.st_size, st.st_ino, im.size, im.mode)


def decoded(
    source: str | Path | bytes,
    im: Image.Image,
    make: Callable[[], tuple[Image.Image, tuple[int, int]]],
) -> tuple[Image.Image, tuple[int, int]]:
    """``make()`` (the decode of opened, drafted ``im``), or the same decode kept from an earlier
    call: identical pixels, since the file and the scale are the same."""
    key = _key(source, im)
    if key is not None:
        with _decoded_lock:
            hit = _decoded.get(key)
            if hit is not None:
                _decoded.move_to_end(key)
                return hit
    value = make()
    if key is not None:
        with _decoded_lock:
            _decoded[key] = value
            total = sum(v[0].width * v[0].height * 4 for v in _decoded.values())
            while len(_decoded) > 1 and total > DECODED_BYTES:
                _, old = _decoded.popitem(last=False)
                total -= old[0].width * old[0].height * 4
    return value


def clear() -> None:
    """Forget the kept decodes (tests and benchmarks that time a cold decode)."""
    with _decoded_lock:
        _decoded.clear()


# ---------------------------------------------------------------- encoding


def encode_capped(
    img: Image.Image, max_pixels: int, max_bytes: int, quality: int = 75
) -> tuple[bytes, tuple[int, int]]:
    """JPEG (q``quality``) of ``img`` fitted to ``max_pixels`` (never enlarged), then shrunk until it
    is ≤ ``max_bytes`` (the original's API payload cap). Returns (bytes, size). Best effort below
    16 px a side: such an image is returned even if still larger than the cap."""
    from vrag_desktop.core.agents import vrag_protocol as vp  # it imports this module

    img = vp.resize_for_model(img, 1, max(1, int(max_pixels)))
    while True:
        data = vp.jpeg_bytes(img, quality)
        w, h = img.size
        if len(data) <= max_bytes or min(w, h) <= 16:
            return data, (w, h)
        scale = min(0.95, max(0.5, math.sqrt(max_bytes / len(data)) * 0.97))
        img = resize(img, (max(16, int(w * scale)), max(16, int(h * scale))), Image.Resampling.BICUBIC)


class LRU(dict):  # type: ignore[type-arg]
    """A dict that keeps only its ``size`` most recently set or read entries."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            value = self.pop(key)
            super().__setitem__(key, value)  # most recent last
            return value
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        self.pop(key, None)
        super().__setitem__(key, value)
        while len(self) > self.size:
            del self[next(iter(self))]


# ---------------------------------------------------------------- video frames


def video_frame_count(n_frames: int, rate: float, fps: float, max_frames: int) -> int:
    """How many frames the original samples from ``n_frames`` at ``rate`` fps: one per 1/``fps``
    seconds of the clip, at least 1, at most ``max_frames`` (reference §4.4 step 3)."""
    duration = n_frames / rate
    return max(1, min(math.floor(duration * fps + 1e-9), max_frames, n_frames))


def sample_video(
    path: str, fps: float, max_frames: int, span: tuple[float, float] | None = None
) -> list[tuple[float, Image.Image]]:
    """The frames the original shows of a clip: :func:`video_frame_count` of them at
    ``linspace(0, total − 1, n)`` (rounded, as torch rounds) over the whole file or over ``span``
    (seconds) of it, as (seconds from the clip's start, RGB picture). Raises OSError with the
    reason when the file cannot be read as a video."""
    import cv2  # lazily: heavy, and only clips need it
    import numpy as np

    if not Path(path).is_file():
        raise OSError(f"the video file {path} does not exist")
    cap = cv2.VideoCapture(path)
    try:
        if not cap.isOpened():
            raise OSError(f"{Path(path).name} cannot be opened as a video")
        rate = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        if rate <= 0 or count <= 0:
            raise OSError(f"{Path(path).name} reports no frame rate or no frames")
        first, end = 0, count
        if span is not None:
            first = min(count - 1, max(0, round(span[0] * rate)))
            end = min(count, max(first + 1, round(span[1] * rate)))
        total = end - first
        n = video_frame_count(total, rate, fps, max_frames)
        wanted = sorted({int(i) for i in np.linspace(0, total - 1, n).round()})
        if first:
            cap.set(cv2.CAP_PROP_POS_FRAMES, first)
        frames: list[tuple[float, Image.Image]] = []
        at = 0  # frames read since ``first``
        for i in wanted:
            while at < i and cap.grab():
                at += 1
            ok, bgr = cap.read()
            if not ok or at != i:
                break  # the file ends early (a frame count from the header is an estimate)
            at += 1
            frames.append((i / rate, Image.fromarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))))
        if not frames:
            raise OSError(f"no frame of {Path(path).name} could be decoded")
        return frames
    finally:
        cap.release()


__all__ = [
    "DECODED_BYTES",
    "LRU",
    "clear",
    "decoded",
    "encode_capped",
    "resize",
    "rgb",
    "sample_video",
    "video_frame_count",
    "workers",
]

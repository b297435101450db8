"""Page views kept on disk: the JPEG a VRAG search step shows the model, made once per page.

Why: showing a page means decoding its JPEG, resizing it to the view's pixel budget and encoding
it again. For a 200-dpi, 5.6 MP page (the original's rasters, which an imported original index
points at) that is ~30 ms on two cores, half of it the decode, whose entropy decoding no reduced
scale avoids. A view depends only on the file and the view settings, so it is kept in the user's
cache directory keyed by both: made ahead when an original index is imported, and on first show
for every other page. A kept view holds exactly the bytes the step would make (the same decode,
resize and encoder), so the model sees the same thing either way.

The cache is only a cache: ``VRAG_DESKTOP_VIEW_CACHE`` moves it (``off`` turns it off), a file
that does not open as a JPEG is made again, and a full or read-only disk only costs the speed-up.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import time
from collections.abc import Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from vrag_desktop.core.agents import imaging
from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.images import upright_size
from vrag_desktop.core.progress import CancelToken, Progress

CACHE_ENV = "VRAG_DESKTOP_VIEW_CACHE"
#: Bump when the way a view is made changes (decode, resize or encoder), so old views are not used.
_FORMAT = 1


@dataclass(frozen=True)
class ViewSpec:
    """The settings a view depends on (a VRAG agent's)."""

    min_pixels: int = vp.MIN_PIXELS
    max_pixels: int = vp.MAX_PIXELS
    snap: int | None = None
    quality: int = 90


@dataclass(frozen=True)
class PageView:
    """A page as the model is shown it: its JPEG, that JPEG's size and the source's upright size."""

    jpeg: bytes
    shown_size: tuple[int, int]
    raw_size: tuple[int, int]


def cache_dir() -> Path | None:
    """Where views are kept (``$XDG_CACHE_HOME/vrag-desktop/views`` on Linux), or None when off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "none") else Path(chosen).expanduser()
    import platformdirs

    from vrag_desktop.core.paths import APP_NAME

    return platformdirs.user_cache_path(APP_NAME, appauthor=False) / "views"


def make(source: str | Path | bytes, spec: ViewSpec) -> PageView:
    """Decode ``source`` at the reduced JPEG scale that still covers the view, resize, encode."""
    decoded, raw_size = vp.open_for_pixels(source, max(spec.max_pixels, spec.min_pixels))
    size = vp.fit_pixels(*raw_size, spec.min_pixels, spec.max_pixels, snap=spec.snap)
    shown = decoded if decoded.size == size else imaging.resize(decoded, size, Image.Resampling.BICUBIC)
    return PageView(vp.jpeg_bytes(shown, spec.quality), shown.size, raw_size)


def _file(path: str | Path, spec: ViewSpec) -> Path | None:
    root = cache_dir()
    if root is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{_FORMAT}|{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|{spec}"
    digest = hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return root / digest[:2] / f"{digest}.jpg"


def cached(path: str | Path, spec: ViewSpec) -> PageView | None:
    """The kept view of the file at ``path`` as it is now, or None."""
    file = _file(path, spec)
    if file is None:
        return None
    try:
        jpeg = file.read_bytes()
        with Image.open(io.BytesIO(jpeg)) as im:
            shown = im.size
            if im.format != "JPEG":
                raise OSError("not a JPEG")
        with Image.open(path) as src:  # the header only
            raw = upright_size(src)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, Image.DecompressionBombError):
        with contextlib.suppress(OSError):
            file.unlink()  # torn by a crash or damaged: made again
        return None
    return PageView(jpeg, shown, raw)


def store(path: str | Path, spec: ViewSpec, view: PageView) -> None:
    """Keep ``view`` for the file at ``path``; a cache that cannot be written is skipped."""
    file = _file(path, spec)
    if file is None:
        return
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(view.jpeg)
        os.replace(tmp, file)  # readers see the whole view or none (no fsync: it is a cache)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def view(path: str | Path, spec: ViewSpec) -> PageView:
    """The view of a local page file: kept, or made now and kept (written by a background thread,
    so a first show pays nothing for keeping it)."""
    hit = cached(path, spec)
    if hit is None:
        hit = make(path, spec)
        with _writer_lock:
            _writes.append(_writer().submit(store, path, spec, hit))
    return hit


def flush() -> None:
    """Wait until every view :func:`view` handed to the writer is on disk (tests, benchmarks)."""
    with _writer_lock:
        pending, _writes[:] = list(_writes), []
    for f in pending:
        f.result()


_writer_lock = threading.Lock()
_writes: list[Future[None]] = []
_pool: list[ThreadPoolExecutor] = []


def _writer() -> ThreadPoolExecutor:
    """One thread writes kept views, in order (joined at exit, so none is cut short)."""
    if not _pool:
        _pool.append(ThreadPoolExecutor(1, thread_name_prefix="vrag-page-views"))
    _writes[:] = [f for f in _writes if not f.done()]
    return _pool[0]


def prepare(
    paths: Iterable[str | Path], spec: ViewSpec, token: CancelToken | None = None
) -> Generator[Progress, None, int]:
    """Make the views of ``paths`` that are not kept yet (an imported original index's pages).
    Yields progress; returns how many were made. Unreadable files are skipped (the search step
    says what is wrong with them when they are shown)."""
    todo = [p for p in dict.fromkeys(os.fspath(p) for p in paths) if _file(p, spec) is not None]
    made, t0 = 0, time.monotonic()
    for i, path in enumerate(todo):
        if token is not None and token.cancelled:
            break
        if cached(path, spec) is None:
            try:
                store(path, spec, make(path, spec))
                made += 1
            except (OSError, ValueError, Image.DecompressionBombError):
                pass
        if i % 8 == 7 or i == len(todo) - 1:
            rate = (i + 1) / max(time.monotonic() - t0, 1e-6)
            yield Progress("page views", i + 1, len(todo), rate, (len(todo) - i - 1) / rate)
    return made


__all__ = [
    "CACHE_ENV",
    "PageView",
    "ViewSpec",
    "cache_dir",
    "cached",
    "flush",
    "make",
    "prepare",
    "store",
    "view",
]

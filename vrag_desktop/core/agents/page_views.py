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

It is bounded (views are 60-150 KB a page and a person's corpora keep growing): a hit refreshes the
file's mtime, so the oldest mtime is the least recently used view, and the writer thread trims the
folder to 90 % of the cap when it is passed, checked on a process's first write and then every
64 MB written (a scan of the folder per write would cost more than the view). The cap is the app's
``view_cache_mb`` setting (:func:`configure`; the command line reads the saved one), or
``VRAG_DESKTOP_VIEW_CACHE_MB``; 0 keeps no views at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import stat
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
from vrag_desktop.core.settings import VIEW_CACHE_MB_MAX, saved_view_cache_mb

CACHE_ENV = "VRAG_DESKTOP_VIEW_CACHE"
LIMIT_ENV = "VRAG_DESKTOP_VIEW_CACHE_MB"
MB = 1024 * 1024
#: Bump when the way a view is made changes (decode, resize or encoder), so old views are not used.
_FORMAT = 1
#: How many bytes written between two checks of the folder's size.
TRIM_EVERY = 64 * MB
#: A trim goes down to this share of the cap, so the next few writes do not trim again.
TRIM_TO = 0.9
#: A temporary file this old was left by a crash mid-write (a live one lives for milliseconds).
_STALE_TMP_NS = 3600 * 10**9
# Only names the cache makes: ab/<32 hex>.jpg and ab/.<32 hex>.jpg.<pid>.tmp (see _file, store).
_SUBDIR = re.compile(r"[0-9a-f]{2}")
_VIEW = re.compile(r"[0-9a-f]{32}\.jpg")
_TMP = re.compile(r"\.[0-9a-f]{32}\.jpg\.[0-9]+\.tmp")
log = logging.getLogger(__name__)


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


def parse_limit_mb(text: str) -> int:
    """``VRAG_DESKTOP_VIEW_CACHE_MB``'s value in MB; ValueError saying what is allowed."""
    try:
        mb = int(text.strip())
    except ValueError:
        mb = -1
    if not 0 <= mb <= VIEW_CACHE_MB_MAX:
        raise ValueError(
            f"{LIMIT_ENV} must be a whole number of megabytes from 0 to {VIEW_CACHE_MB_MAX}, not {text!r}"
        )
    return mb


@dataclass
class _Cap:
    configured: int | None = None  # bytes, from configure() (the app's setting)
    saved: int | None = None  # bytes, the saved setting, read once (the command line)
    since_trim: int = -1  # bytes written since the last size check; -1: none yet in this process
    warned: bool = False


_cap = _Cap()


def cap_bytes() -> int:
    """The cap: ``VRAG_DESKTOP_VIEW_CACHE_MB``, else :func:`configure`'s, else the saved setting.
    Raises ValueError for a bad environment value (:func:`limit` falls back instead)."""
    env = os.environ.get(LIMIT_ENV, "")
    return parse_limit_mb(env) * MB if env.strip() else _setting()


def _setting() -> int:
    if _cap.configured is not None:
        return _cap.configured
    if _cap.saved is None:
        _cap.saved = saved_view_cache_mb() * MB
    return _cap.saved


def limit() -> int:
    """:func:`cap_bytes`, ignoring (with one warning) a bad ``VRAG_DESKTOP_VIEW_CACHE_MB``: a typo in
    a variable must not stop a search step."""
    try:
        return cap_bytes()
    except ValueError as exc:
        if not _cap.warned:
            _cap.warned = True
            log.warning("%s; using the app's setting", exc)
        return _setting()


def configure(limit_bytes: int | None) -> None:
    """Set the cap from the app's settings (at start, and when they change; None: the saved setting
    again). The next write checks the size; a lower cap than before is applied now, on the writer
    thread, so choosing 0 in the app empties the cache."""
    if limit_bytes is not None and limit_bytes < 0:
        raise ValueError(f"the page-view cache cap cannot be negative ({limit_bytes} bytes)")
    before, _cap.configured = _cap.configured, limit_bytes
    with _writer_lock:
        _cap.since_trim = -1
        if before is not None and limit_bytes is not None and limit_bytes < before:
            _writes.append(_writer().submit(_trim_here))


def _file(path: str | Path, spec: ViewSpec) -> Path | None:
    root = cache_dir()
    if root is None or limit() == 0:
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
    except FileNotFoundError:  # never kept, or trimmed meanwhile
        return None
    except (OSError, ValueError, Image.DecompressionBombError):
        with contextlib.suppress(OSError):
            file.unlink()  # torn by a crash or damaged: made again
        return None
    with contextlib.suppress(OSError):  # used now: the trim keeps it longest (read-only: it is kept anyway)
        os.utime(file)
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
        return
    _wrote(len(view.jpeg))


def _wrote(n: int) -> None:
    """Count a write; on the first in this process and every :data:`TRIM_EVERY` bytes, hand a trim to
    the writer thread (never the caller's: :func:`prepare` stores on its own)."""
    with _writer_lock:
        due = _cap.since_trim < 0 or _cap.since_trim + n >= TRIM_EVERY
        _cap.since_trim = 0 if due else _cap.since_trim + n
        if due:
            _writes.append(_writer().submit(_trim_here))


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
    """Wait until every view :func:`view` handed to the writer is on disk, and every trim it asked
    for has run (tests, benchmarks)."""
    while True:
        with _writer_lock:
            pending, _writes[:] = list(_writes), []
        if not pending:
            return
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


@dataclass(frozen=True)
class _Entry:
    mtime_ns: int
    size: int
    path: str
    tmp: bool


def _entries(root: Path) -> list[_Entry]:
    """The files the cache made under ``root``; one that vanishes during the scan is left out."""
    found: list[_Entry] = []
    try:
        subdirs = [d for d in os.scandir(root) if _SUBDIR.fullmatch(d.name)]
    except OSError:
        return found
    for sub in subdirs:
        try:
            if not sub.is_dir(follow_symlinks=False):
                continue
            names = list(os.scandir(sub.path))
        except OSError:
            continue
        for e in names:
            tmp = _TMP.fullmatch(e.name) is not None
            if not (tmp or _VIEW.fullmatch(e.name)) or e.name.lstrip(".")[:2] != sub.name:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append(_Entry(st.st_mtime_ns, st.st_size, e.path, tmp))
    return found


def _unlink(path: str) -> bool:
    """Remove a file; True when it is gone (also when something else removed it first)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def trim(limit_bytes: int | None = None) -> int:
    """Bring the cache under ``limit_bytes`` (default: :func:`limit`) when it is over, least recently
    used first, down to :data:`TRIM_TO` of it; temp files left by a crash go whatever the size.
    Returns the bytes freed. The module runs it on its writer thread only (a scan of a big cache
    takes a while); files that cannot be removed are skipped."""
    root = cache_dir()
    if root is None:
        return 0
    cap = limit() if limit_bytes is None else limit_bytes
    entries, freed, now = _entries(root), 0, time.time_ns()
    stale = [e for e in entries if e.tmp and now - e.mtime_ns > _STALE_TMP_NS]
    for e in stale:
        if _unlink(e.path):
            freed += e.size
    total = sum(e.size for e in entries) - sum(e.size for e in stale)
    if total <= cap:
        return freed
    target = int(cap * TRIM_TO)
    for e in sorted((e for e in entries if not e.tmp), key=lambda e: e.mtime_ns):
        if total <= target:
            break
        if _unlink(e.path):
            freed += e.size
            total -= e.size
    return freed


def _trim_here() -> None:
    """The writer thread's trim (a module attribute looked up when it runs: tests watch it)."""
    trim()


def usage() -> tuple[int, int]:
    """(files, bytes) the cache holds now; (0, 0) when it is off or empty. A scan: off the GUI thread."""
    root = cache_dir()
    entries = _entries(root) if root is not None else []
    return len(entries), sum(e.size for e in entries)


def size_text(n: int) -> str:
    """``512 KB`` or ``1,234.5 MB``: how the app and the command line say what the views take."""
    return f"{n / 1024:.0f} KB" if n < MB else f"{n / MB:,.1f} MB"


def clear() -> int:
    """Remove every kept view; returns the bytes freed. Only files the cache made are removed (the
    two-level ``ab/<hash>.jpg`` names and their temp files), never anything else in the folder:
    ``VRAG_DESKTOP_VIEW_CACHE`` can point anywhere, and a person's own files there are theirs."""
    root = cache_dir()
    if root is None:
        return 0
    freed = 0
    for e in _entries(root):
        if _unlink(e.path):
            freed += e.size
    with contextlib.suppress(OSError):
        for sub in os.scandir(root):
            if _SUBDIR.fullmatch(sub.name):
                with contextlib.suppress(OSError):
                    os.rmdir(sub.path)  # only when empty
    return freed


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
    "LIMIT_ENV",
    "MB",
    "PageView",
    "ViewSpec",
    "cache_dir",
    "cached",
    "cap_bytes",
    "clear",
    "configure",
    "flush",
    "limit",
    "make",
    "parse_limit_mb",
    "prepare",
    "size_text",
    "store",
    "trim",
    "usage",
    "view",
]

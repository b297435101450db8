"""Writing files so that a crash, a full disk or a kill never leaves half a file behind.

Every file VRAG Desktop owns (settings, profiles, state files, index segments, derived images) is
written here: a temporary file in the same folder, flushed and fsynced, renamed over the target,
then the folder fsynced so the rename itself survives a power cut. A failure removes the temporary
file and leaves the previous content in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

#: The longest file name (in bytes) the file systems VRAG Desktop writes to accept: ext4, APFS,
#: NTFS (255 UTF-16 units, at least 255 bytes of UTF-8 for the names we make), Btrfs, XFS.
NAME_MAX = 255
# mkstemp's random part: 8 characters between the prefix and the suffix.
_RANDOM = 8
_TMP_SUFFIX = ".tmp"


def name_bytes(name: str) -> int:
    """The length of ``name`` on disk (``os.fsencode``: undecodable bytes count as one each)."""
    return len(_encode(name))


def shorten_name(name: str, max_bytes: int) -> str:
    """``name`` cut at a character boundary to at most ``max_bytes`` bytes on disk (unchanged when
    it fits): a long but valid file name must never make a derived or temporary name too long."""
    if len(_encode(name)) <= max_bytes:
        return name
    used = 0
    for i, ch in enumerate(name):
        used += len(_encode(ch))
        if used > max_bytes:
            return name[:i]
    return name


def _encode(text: str) -> bytes:
    try:
        return os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate that is not an escaped byte
        return text.encode("utf-8", "surrogatepass")


def _tmp_prefix(name: str, room: int) -> str:
    """``.{name}.`` when that leaves ``room`` bytes within NAME_MAX; else a cut name plus a short
    hash of the whole one, so two long names in one folder still get different prefixes."""
    prefix = f".{name}."
    if name_bytes(prefix) + room <= NAME_MAX:
        return prefix
    tag = hashlib.sha1(_encode(name)).hexdigest()[:8]
    return f".{shorten_name(name, NAME_MAX - room - len(tag) - 3)}~{tag}."


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "wb", *, mkdir: bool = False, sole_writer: bool = False
) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on a clean exit it replaces ``path``.

    ``sole_writer``: the caller holds a lock over ``path`` (the index store under its corpus lock),
    so the temporary file can have the fixed name ``.<name>.tmp``: a crash leaves at most that one
    leftover, which the next write reuses, instead of a new random one each time. A name too long
    to take the temporary name's additions is cut for it (never the target's own name).
    """
    target = Path(path)
    if mkdir:
        target.parent.mkdir(parents=True, exist_ok=True)
    if sole_writer:
        tmp = str(target.with_name(_tmp_prefix(target.name, len("tmp")) + "tmp"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    else:
        prefix = _tmp_prefix(target.name, _RANDOM + len(_TMP_SUFFIX))
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=_TMP_SUFFIX, dir=target.parent)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, mkdir: bool = False, sole_writer: bool = False
) -> None:
    """``path`` holds either the old or the new bytes after any crash."""
    with atomic_open(path, "wb", mkdir=mkdir, sole_writer=sole_writer) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, mkdir: bool = False) -> None:
    """``path`` holds either the old or the new text (UTF-8) after any crash."""
    with atomic_open(path, "w", mkdir=mkdir) as fh:
        fh.write(text)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, mkdir: bool = False) -> None:
    """Pretty, UTF-8 JSON with a final newline, written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n", mkdir=mkdir)


def atomic_save(
    path: str | os.PathLike[str], save: Callable[[IO[bytes]], None], *, mkdir: bool = False
) -> None:
    """Let a library write into the temporary file (``image.save(fh, ...)``), then swap it in."""
    with atomic_open(path, "wb", mkdir=mkdir) as fh:
        save(fh)


def set_aside_if_damaged(path: str | os.PathLike[str], parse: Callable[[Path], object]) -> Path | None:
    """Before a save over a settings file: when ``parse`` finds it damaged (``OSError`` or
    ``ValueError``), move it to ``<name>.bad``, where a person can read it, rather than overwrite it.
    Only saves call this: a reader leaves a damaged file as it is (readers never write). Returns
    the ``.bad`` path, or None when the file is absent or sound; raises ``OSError`` when the move
    fails (then the caller must not save: nothing is lost)."""
    path = Path(path)
    try:
        parse(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        bad = path.with_name(path.name + ".bad")
        os.replace(path, bad)
        return bad
    return None

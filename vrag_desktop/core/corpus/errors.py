"""The corpus's errors, apart so that the manifest, the store and the corpus can all raise them, and
the one wording of a disk that refuses writes (full, read-only), shared by the CLI and the app.

Every one carries a message for the person: what happened, to which corpus, and what to do.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path


class CorpusError(RuntimeError):
    """A corpus-level problem the person must act on (message says what to do)."""


class CorpusBusy(CorpusError):
    """Another process is indexing this corpus right now."""


class ManifestError(CorpusError):
    """The manifest cannot be opened, is damaged, or is from an incompatible version."""


class ManifestTooNew(ManifestError):
    """The manifest was written by a newer app: not damage — it is never repaired nor changed."""


# Words of OSErrors that mean "the data directory cannot take writes", as core records them.
DISK_ERRORS = (
    *(os.strerror(e) for e in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)),
    "database or disk is full",
)


def is_disk_error(text: str | None) -> bool:
    return bool(text) and any(w.lower() in str(text).lower() for w in DISK_ERRORS)


def disk_problem(path: str | os.PathLike[str], min_free: int = 256 * 1024) -> str | None:
    """``"No space left on device"`` or ``"Read-only file system"`` when the disk holding ``path``
    cannot take writes (SQLite often reports only "disk I/O error" then); None when it can."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    if not hasattr(os, "statvfs"):
        return None
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if st.f_bavail * st.f_frsize < min_free:
        return os.strerror(errno.ENOSPC)
    return None


def storage_message(exc: BaseException, data_dir: str | os.PathLike[str]) -> str | None:
    """A sentence for an error the data directory's disk caused (full, read-only, no permission);
    None for any other error. Every front end that writes corpora says it the same way."""
    text = str(exc)
    errno_ = exc.errno if isinstance(exc, OSError) else None
    disk = disk_problem(data_dir)
    if disk is None and errno_ in (errno.ENOSPC, errno.EDQUOT):
        disk = os.strerror(errno.ENOSPC)
    if disk is None and errno_ in (errno.EROFS, errno.EACCES, errno.EPERM):
        disk = os.strerror(errno_) if errno_ is not None else None
    if (
        disk is None
        and isinstance(exc, sqlite3.OperationalError)
        and any(w in text for w in ("readonly database", "unable to open database"))
    ):
        disk = f"{text} (read-only, or not this user's to write)"
    if disk is None and not is_disk_error(text):
        return None
    words = disk or text
    where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
    return (
        f"cannot write to the data directory {data_dir}: {words}{where}. Everything indexed before is "
        "kept; free some space (or make it writable, or choose another --data-dir) and run the same "
        "command again to go on where it stopped."
    )


__all__ = [
    "DISK_ERRORS",
    "CorpusBusy",
    "CorpusError",
    "ManifestError",
    "ManifestTooNew",
    "disk_problem",
    "is_disk_error",
    "storage_message",
]

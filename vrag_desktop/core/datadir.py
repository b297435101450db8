"""The data directory's format stamp: a data directory written by a newer VRAG Desktop is refused
with a message and never touched, rather than half-read or "repaired" by an older app.

``<data>/vrag-desktop-data.json`` holds ``{"format": N, "written_by": "<app version>"}``. An app
reads data of format ``<= DATA_FORMAT``; the first one to use a directory stamps it. A newer format
is refused before anything else opens the directory (the desktop app and every CLI command check
it first). A damaged stamp is left as it is (and the directory used), so a stray edit never locks
anyone out; the per-corpus manifests keep their own schema check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vrag_desktop._version import __version__

STAMP_NAME = "vrag-desktop-data.json"
#: Bump when an older app could damage or misread what this one writes.
DATA_FORMAT = 1


class DataDirTooNew(RuntimeError):
    """The data directory was written by a newer app; nothing was changed."""


def read_format(root: str | os.PathLike[str]) -> tuple[int, str] | None:
    """``(format, written_by)`` of ``root``'s stamp; None if it has none or it cannot be read."""
    try:
        data = json.loads((Path(root) / STAMP_NAME).read_text(encoding="utf-8"))
        return int(data["format"]), str(data.get("written_by", "?"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def check(root: str | os.PathLike[str]) -> None:
    """Raise :class:`DataDirTooNew` if ``root`` holds data of a format this app does not know."""
    found = read_format(root)
    if found is not None and found[0] > DATA_FORMAT:
        fmt, by = found
        raise DataDirTooNew(
            f"The data directory {root} was written by a newer VRAG Desktop ({by}, data format {fmt}); "
            f"this is version {__version__} (data format {DATA_FORMAT}). Nothing in it was changed. "
            "Install the newer version, or open another data directory (--data-dir)."
        )


def check_and_stamp(root: str | os.PathLike[str]) -> None:
    """:func:`check`, then stamp a directory that has no stamp yet (created if missing).
    Raises :class:`DataDirTooNew`, or ``OSError`` if the stamp cannot be written (read-only)."""
    check(root)
    path = Path(root) / STAMP_NAME
    if path.exists():
        return
    from vrag_desktop.core.fsutil import atomic_write_json

    atomic_write_json(path, {"format": DATA_FORMAT, "written_by": __version__}, mkdir=True)


__all__ = ["DATA_FORMAT", "STAMP_NAME", "DataDirTooNew", "check", "check_and_stamp", "read_format"]

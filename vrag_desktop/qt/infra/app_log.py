"""The app log, ``<data>/logs/app.log`` (what the notification bar shows, with tracebacks), rolled over
at 2 MB with 3 old files kept.

Why in two steps: :mod:`logging.handlers` imports ``socket`` and ``pickle`` for handlers the app never
uses, ~6 ms of CPU before the window (issue 31: cold start), so the start writes through a plain
:class:`logging.FileHandler` and :func:`rotate_logs`, called once the window has painted, puts the
rotating handler on the same file in its place. The new handler is added before the old one goes, so
a line logged meanwhile may be written twice, never lost; the size check is made at each line, so a
file grown past the limit before the swap rolls over at the next.
"""

from __future__ import annotations

import logging
from pathlib import Path

LOG_NAME = "app.log"
MAX_BYTES = 2_000_000
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_start: logging.FileHandler | None = None  # the start's plain handler, until rotate_logs


def setup_logging(log_dir: Path) -> Path | None:
    """Log the app's records (INFO and above) to ``log_dir/app.log``; None when it cannot be opened."""
    global _start
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / LOG_NAME
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        return None  # the data directory problem is reported when a panel needs it
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger("vrag_desktop")
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    _start = handler
    return path


def rotate_logs() -> None:
    """Put the rotating handler in place of the start's plain one (nothing to do without one)."""
    global _start
    start, _start = _start, None
    if start is None:
        return
    import logging.handlers

    root = logging.getLogger("vrag_desktop")
    try:
        rotating = logging.handlers.RotatingFileHandler(
            start.baseFilename, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
        )
    except OSError:
        return  # keep logging through the plain handler
    rotating.setFormatter(start.formatter)
    root.addHandler(rotating)
    root.removeHandler(start)
    start.close()


__all__ = ["rotate_logs", "setup_logging"]

"""Opening a page's source document outside the app, at that page when the viewer can: the file
association on Windows, else the first viewer :func:`viewer_command` finds, else the desktop's
default. The viewer runs detached and is reaped, so it outlives nothing and leaves no zombie."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices

from vrag_desktop.core.run.evidence import viewer_command
from vrag_desktop.qt.infra.errors import describe, error_sink

TITLE = "Cannot open the source document"


def open_source(src: str, page: int | None) -> bool:
    """Open ``src`` (at ``page``); False after saying why it could not be opened."""
    if not os.path.exists(src):
        error_sink().report(TITLE, f"{src} is no longer on disk")
        return False
    argv: list[str] | None = None
    try:
        if sys.platform.startswith("win"):
            os.startfile(src)  # type: ignore[attr-defined,unused-ignore]  # Windows file association
            return True
        argv = viewer_command(src, page)
        if argv is None:
            if QDesktopServices.openUrl(QUrl.fromLocalFile(src)):
                return True
            error_sink().report(
                TITLE,
                f"No program to open {src} was found: install a PDF viewer (evince, okular) or xdg-utils.",
            )
            return False
        proc = subprocess.Popen(
            argv,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        threading.Thread(target=proc.wait, name="viewer-reaper", daemon=True).start()  # no zombie
        return True
    except OSError as exc:
        what = argv[0] if argv else src
        error_sink().report(TITLE, f"{what}: {describe(exc)}")
        return False

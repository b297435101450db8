"""Start the desktop app: QApplication on a qasync loop, theme, logging, the main window.

Only Qt and the app's own light modules load before the window shows; torch, faiss and the models
load later, in background threads, when first needed.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

NO_DISPLAY_HELP = """\
vrag-desktop: no display found, so the window cannot open.
  - On a desktop: run it from your desktop session (DISPLAY or WAYLAND_DISPLAY must be set).
  - Over SSH: use 'ssh -X', or run it under a virtual display: xvfb-run -a vrag-desktop
  - Without any display, everything works from the command line:
      vrag-desktop index PATH · vrag-desktop search "query" · vrag-desktop ask "question"
"""


def has_display(env: dict[str, str] | None = None, platform: str = sys.platform) -> bool:
    """Linux/BSD need an X11 or Wayland display unless a Qt platform plugin is forced."""
    env = dict(os.environ if env is None else env)
    if not platform.startswith(("linux", "freebsd", "openbsd")):
        return True
    if env.get("QT_QPA_PLATFORM"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def setup_logging(log_dir: Path) -> Path | None:
    """A rotating app log (what the notification bar shows, with tracebacks)."""
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / "app.log"
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
    except OSError:
        return None  # the data directory problem is reported when a panel needs it
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("vrag_desktop")
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    return path


_fault_log = None  # kept open for the whole process: faulthandler writes to its descriptor on a crash


def enable_faulthandler(log_dir: Path) -> None:
    """A native crash (segfault, abort) dumps every thread's Python stack to ``<data>/logs/faulthandler.log``
    (a GUI app's stderr is usually unseen; faulthandler takes one file), or to stderr when that cannot be
    opened or ``python -X faulthandler`` already chose stderr."""
    global _fault_log
    import faulthandler

    if faulthandler.is_enabled():
        return
    try:
        _fault_log = (log_dir / "faulthandler.log").open("a", encoding="utf-8")
        _fault_log.write(f"--- VRAG Desktop started {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}\n")
        _fault_log.flush()
        faulthandler.enable(_fault_log, all_threads=True)
    except OSError:
        faulthandler.enable(sys.stderr, all_threads=True)


def main(argv: Sequence[str] | None = None, data_dir: str | None = None) -> int:
    """Run the app until its window closes; returns the exit code."""
    t0 = time.perf_counter()
    if not has_display():
        sys.stderr.write(NO_DISPLAY_HELP)
        return 2
    os.environ.setdefault("QT_API", "pyside6")  # qasync must bind to PySide6
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication.instance() or QApplication([sys.argv[0], *(argv or [])])
    assert isinstance(app, QApplication)
    app.setApplicationName("VRAG Desktop")
    app.setOrganizationName("vrag-desktop")
    app.setDesktopFileName("vrag-desktop")

    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.infra.errors import error_sink, install_excepthooks
    from vrag_desktop.qt.infra.theme import apply_theme

    error_sink()  # created on the GUI thread
    install_excepthooks()
    ctx = AppContext.load(data_dir=data_dir)
    setup_logging(ctx.log_dir)
    enable_faulthandler(ctx.log_dir)
    apply_theme(app, ctx.settings.theme)

    from vrag_desktop.qt.main_window import MainWindow

    window = MainWindow(ctx)
    window.show()
    logging.getLogger("vrag_desktop").info("window shown %.2f s after start", time.perf_counter() - t0)
    if os.environ.get("VRAG_DESKTOP_STARTUP_PROBE"):  # cold-start benchmark: report and leave
        app.processEvents()
        print(f"window-visible {time.perf_counter() - t0:.4f}", flush=True)
        window.close()
        return 0
    from vrag_desktop.core import warmup

    warmup.start()  # torch & co. load now, mostly without the GIL, rather than in the first indexing

    import asyncio

    import qasync

    # The GUI thread's asyncio loop: GUI-side async handlers (tasks.run_handler) run here and await
    # work that runs elsewhere (docs/threading.md). Made after the window shows: nothing awaits before
    # the person can click, and the first paint does not wait for qasync's import.
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)
    with loop:
        loop.run_until_complete(closed.wait())
    return 0

"""Start the desktop app: QApplication on a qasync loop, theme, logging, the main window.

Only Qt and the app's own light modules load before the window shows; torch, faiss and the models
load later, in background threads, when first needed.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: Not needed to show the window: each loads on first use, in a worker or after the first paint. The
#: one list of them (tests/test_cold_start_imports.py refuses them before the window's first show;
#: bench/cold_start.py times their imports). sqlite3 is not here: the Corpora panel's listing reads
#: the corpora's manifests.
NOT_BEFORE_WINDOW = (
    "torch",
    "transformers",
    "sentence_transformers",
    "huggingface_hub",
    "faiss",
    "cv2",
    "fitz",
    "pymupdf",
    "numpy",
    "scipy",
    "PIL",
    "onnxruntime",
    "rapidocr_onnxruntime",
    "openai",
    "httpx",
    "asyncio",
    "qasync",
    "pyqtgraph",
    "keyring",
    "secretstorage",
    "cryptography",
    "pynvml",
    "psutil",
    "logging.handlers",  # socket, pickle: the app log rolls over once the window has painted
)

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


def main(argv: Sequence[str] | None = None, data_dir: str | None = None, paths: Sequence[str] = ()) -> int:
    """Run the app until its window closes; returns the exit code. ``paths`` (files and folders the
    app was opened with) are added to a corpus — by the instance already running for this data
    directory, if there is one (its window is raised and this launch ends)."""
    t0 = time.perf_counter()
    if not has_display():
        sys.stderr.write(NO_DISPLAY_HELP)
        return 2
    from vrag_desktop.core.long_lived import hold

    end_hold = hold()  # no collections until the window has painted; what the start made is frozen then
    try:
        return _main(argv, data_dir, paths, t0, end_hold)
    finally:
        end_hold()


def _main(
    argv: Sequence[str] | None,
    data_dir: str | None,
    paths: Sequence[str],
    t0: float,
    end_hold: Callable[[], None],
) -> int:
    """:func:`main` with the collector held (``end_hold`` releases it)."""
    os.environ.setdefault("QT_API", "pyside6")  # qasync must bind to PySide6
    from vrag_desktop.core.priority import derive_in_background, passive_omp_workers

    passive_omp_workers()  # before the warm-up imports torch
    derive_in_background()  # indexing's workers never take a core the window waits for
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication.instance() or QApplication([sys.argv[0], *(argv or [])])
    assert isinstance(app, QApplication)
    app.setApplicationName("VRAG Desktop")
    app.setOrganizationName("vrag-desktop")
    app.setDesktopFileName("vrag-desktop")
    install_translations(app)

    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.single_instance import absolute_paths, claim_or_forward, instance_key

    set_window_icon(app)
    ctx = AppContext.load(data_dir=data_dir)
    files = absolute_paths(list(paths))
    guard = claim_or_forward(instance_key(ctx.data_dir), files)
    if guard is None:
        given = ""
        if files:
            from vrag_desktop.core.corpus.scan import paths_summary

            given = f" and given {paths_summary(files)} to add (it asks which corpus)"
        sys.stderr.write(
            f"VRAG Desktop is already running for this data directory: its window was raised{given}.\n"
        )
        return 0
    try:
        return _run(app, ctx, files, guard, t0, end_hold)
    finally:
        guard.release()


def _run(app: Any, ctx: Any, files: list[str], guard: Any, t0: float, end_hold: Callable[[], None]) -> int:
    """The primary instance: refuse a data directory of a newer app, else the window until it closes."""
    refusal = data_dir_refusal(ctx.data_dir)
    if refusal:
        show_fatal(refusal)
        return 3

    from vrag_desktop.qt.infra.app_log import rotate_logs, setup_logging
    from vrag_desktop.qt.infra.errors import error_sink, install_excepthooks
    from vrag_desktop.qt.infra.theme import apply_theme

    error_sink()  # created on the GUI thread
    install_excepthooks()
    setup_logging(ctx.log_dir)
    enable_faulthandler(ctx.log_dir)
    apply_theme(app, ctx.settings.theme)

    from vrag_desktop.qt.infra import tasks
    from vrag_desktop.qt.infra.first_paint import after_first_paint
    from vrag_desktop.qt.main_window import MainWindow

    tasks.hold_starts()  # the panels' first look-ups start once the window has painted (cold start)
    try:
        window = MainWindow(ctx)
        window.show()
    finally:

        def painted() -> None:
            end_hold()  # before the held look-ups start: they import libraries and make garbage
            rotate_logs()  # the rotating log handler (logging.handlers) from now on
            tasks.release_starts()

        after_first_paint(window if "window" in locals() else None, painted)
    guard.received.connect(lambda received: _open_paths(window, received))
    if files:
        _open_paths(window, files)
    from vrag_desktop.qt import smoke

    smoke_report = smoke.requested()
    if smoke_report is not None:
        smoke.install(window, smoke_report)
    logging.getLogger("vrag_desktop").info("window shown %.2f s after start", time.perf_counter() - t0)
    if os.environ.get("VRAG_DESKTOP_STARTUP_PROBE"):  # cold-start benchmark: report and leave
        app.processEvents()
        # the process's CPU seconds too: on a loaded machine the wall time mostly says how long it waited
        print(f"window-visible {time.perf_counter() - t0:.4f} cpu {time.process_time():.4f}", flush=True)
        _wait_for_panels(app, window)  # and when the hidden docks' panels, made after it, were ready
        print(f"panels-built {time.perf_counter() - t0:.4f} cpu {time.process_time():.4f}", flush=True)
        window.close()
        return 0
    from vrag_desktop.core.agents import page_views

    page_views.configure(ctx.settings.view_cache_mb * page_views.MB)  # the kept page views' cap
    ctx.start_warmup()  # torch & co., then a small embedder, load now rather than in the first indexing

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


def _wait_for_panels(app: Any, window: Any, timeout_s: float = 30.0) -> None:
    """Process events until the panels made after the first paint are all made (the start-up probe)."""
    end = time.monotonic() + timeout_s
    while not all(p.built for p in window.panels.all()) and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.001)


def _open_paths(window: Any, paths: Sequence[str]) -> None:
    """Raise the window; ask which corpus the files and folders it was opened with go to (a new
    one named after the folder, or one of the corpora), then add them there."""
    from PySide6.QtCore import Qt

    if window.isMinimized():
        window.setWindowState(window.windowState() & ~Qt.WindowState.WindowMinimized)
    window.show()
    window.raise_()
    window.activateWindow()
    if paths:
        from vrag_desktop.qt.corpora.add_to_corpus import ask_and_add

        dialog = ask_and_add(window.corpora, list(paths))
        from vrag_desktop.qt import smoke

        if dialog is not None and smoke.requested() is not None:
            dialog.accept()  # the scripted self-check takes the default: a corpus named after the folder


def install_translations(app: Any, folder: Path | None = None, locale: Any = None) -> list[str]:
    """Qt's own and the app's translations for ``locale`` (the system's), where there are some:
    ``vrag_desktop_<lang>.qm`` in ``folder`` (resources/translations: ``pyside6-lupdate`` extracts
    the wrapped strings of vrag_desktop/qt into a .ts file, Qt Linguist translates it,
    ``pyside6-lrelease`` makes the .qm). Returns the files loaded."""
    from PySide6.QtCore import QLibraryInfo, QLocale, QTranslator

    from vrag_desktop.core.paths import resources_dir

    locale = locale if locale is not None else QLocale.system()
    folder = folder if folder is not None else resources_dir() / "translations"
    loaded = []
    for name, where in (
        ("qtbase", QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)),
        ("vrag_desktop", str(folder)),
    ):
        translator = QTranslator(app)
        if translator.load(locale, name, "_", where):
            app.installTranslator(translator)
            loaded.append(translator.filePath())
    return loaded


def set_window_icon(app: Any) -> None:
    """The application icon (window manager, task bar, dialogs), from the bundled resources."""
    from PySide6.QtGui import QIcon

    from vrag_desktop.core.paths import resources_dir

    icons = resources_dir() / "icons"
    icon = QIcon()
    for size in (16, 32, 48, 64, 128, 256):
        png = icons / f"vrag-desktop-{size}.png"
        if png.is_file():
            icon.addFile(str(png))
    svg = icons / "vrag-desktop.svg"
    if svg.is_file():
        icon.addFile(str(svg))
    if not icon.isNull():
        app.setWindowIcon(icon)


def data_dir_refusal(data_dir: Path) -> str | None:
    """Why this data directory cannot be opened (written by a newer app), else None; a data
    directory it can use is stamped with this app's format."""
    from vrag_desktop.core.datadir import DataDirTooNew, check_and_stamp

    try:
        check_and_stamp(data_dir)
    except DataDirTooNew as exc:
        return str(exc)
    except OSError as exc:  # read-only or missing: the panels report what they cannot do
        logging.getLogger("vrag_desktop").warning("data directory stamp: %s", exc)
    return None


def show_fatal(message: str) -> None:
    """A start-up refusal: on stderr, and in a message box (a double-clicked app has no terminal)."""
    sys.stderr.write(f"vrag-desktop: {message}\n")
    if os.environ.get("VRAG_DESKTOP_SMOKE") or os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        return  # nobody to click the box away
    from PySide6.QtWidgets import QMessageBox

    QMessageBox.critical(None, "VRAG Desktop", message)

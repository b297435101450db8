"""A real main window for the benches that drive one (offscreen unless a platform is set)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def open_window(size: tuple[int, int] = (1600, 1000)) -> tuple[Any, Any, Any, Path]:
    """(QApplication, AppContext, shown MainWindow, its temporary folder): a first run already done,
    data and settings in a fresh temporary folder, so nothing of the person's is touched; the theme
    applied as at the app's start."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from vrag_desktop.core.settings import AppSettings, save_settings
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.infra.theme import apply_theme
    from vrag_desktop.qt.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    apply_theme(app, "system")  # as the app starts: its stylesheet draws some widgets
    tmp = Path(tempfile.mkdtemp())
    save_settings(AppSettings(first_run_done=True), tmp / "cfg")
    ctx = AppContext.for_dirs(data_dir=tmp / "data", config_dir=tmp / "cfg")
    window = MainWindow(ctx, first_run=False)
    window.resize(*size)
    window.show()
    return app, ctx, window, tmp

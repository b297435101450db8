"""Open the main window on a screen of a given size and report how it fits, as JSON on stdout.

Run by ``test_window_layout.py`` in a process of its own, because the screen's size is chosen when
the platform starts: ``QT_QPA_PLATFORM=offscreen:configfile=<json>`` with one screen of that size.
Usage: ``layout_probe.py CONFIG_DIR DATA_DIR [--big]``; ``--big`` first saves the layout of a window
far larger than the screen (a monitor's), so the report shows the restored one clamped.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def settle(app: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def rect(r: Any) -> list[int]:
    return [r.x(), r.y(), r.width(), r.height()]


def report(app: Any, w: Any) -> dict[str, Any]:
    """Where the window and each dock are, and what would be cut off."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QTabBar

    from vrag_desktop.qt.history.run_table import STATUS

    docks = {}
    for d in w.docks():
        shown = d.isVisible() and not d.visibleRegion().isEmpty()
        inner = d.widget()
        docks[d.objectName()] = {
            "visible": d.isVisible(),
            "on_top": shown,  # in front (not behind another tab)
            "floating": d.isFloating(),
            "width": inner.width(),
            "height": inner.height(),
            "min_width": inner.minimumSizeHint().width(),
            "min_height": inner.minimumSizeHint().height(),
        }
    bars = [
        b
        for b in w.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly)
        if b.isVisible() and b.count() and w.rect().intersects(b.geometry())  # Qt parks spares outside
    ]
    return {
        "screen": rect(w.screen().availableGeometry()),
        "frame": rect(w.frameGeometry()),
        "min_size": [w.minimumSizeHint().width(), w.minimumSizeHint().height()],
        "docks": docks,
        "tabs": [
            {
                "texts": [b.tabText(i) for i in range(b.count())],
                "elided": b.elideMode() != Qt.TextElideMode.ElideNone,
            }
            for b in bars
        ],
        "ask_width": w.ask.width(),
        "ask_min": w.ask.minimumSizeHint().width(),
        "outcome_shown": not w.history.table.isColumnHidden(STATUS),
    }


def runtime_report(w: Any) -> dict[str, Any]:
    """Whether the Runtime panel's address and API key are in sight, and the address whole."""
    ed = w.runtime.editor
    area = w.runtime.tabs.currentWidget()
    port = area.viewport()

    def in_sight(field: Any) -> bool:
        top_left = field.mapTo(port, field.rect().topLeft())
        return bool(port.rect().contains(field.rect().translated(top_left)))

    url = ed.url_edit
    return {
        "on_top": not w.runtime_dock.visibleRegion().isEmpty(),
        "url_in_sight": in_sight(url),
        "key_in_sight": in_sight(ed.key_edit),
        "url_whole": url.fontMetrics().horizontalAdvance(url.text()) + 12 <= url.width(),
        "url": url.text(),
    }


def main() -> int:
    config, data = sys.argv[1], sys.argv[2]
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = config
    os.environ["VRAG_DESKTOP_DATA_DIR"] = data
    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.main_window import MainWindow

    out: dict[str, Any] = {}
    if "--big" in sys.argv:  # a layout saved on a monitor far larger than this screen
        w = MainWindow(AppContext.load(), first_run=False)
        w.show()
        settle(app, 0.3)
        w.setGeometry(0, 0, 3000, 2000)
        settle(app, 0.3)
        out["big_saved"] = rect(w.geometry())
        w.close()
        settle(app, 0.2)
    w = MainWindow(AppContext.load(), first_run=False)
    w.show()
    settle(app, 0.8)
    out["first"] = report(app, w)
    w.evidence_dock.raise_()  # where it is a tab behind the graph: what its tab shows
    settle(app, 0.3)
    ev = w.evidence
    out["evidence"] = {"page": ev.page_view.width(), "split": ev.splitter.sizes()}
    w.graph_dock.raise_()
    w.open_runtime()  # as a newcomer's "Connect a model" does: Runtime in front, its Endpoints tab
    settle(app, 0.5)
    out["runtime"] = runtime_report(w)
    w.reset_layout()
    settle(app, 0.3)
    out["restored_flag"] = w.window_layout.restored
    w.close()  # saves the layout
    settle(app, 0.2)
    w2 = MainWindow(AppContext.load(), first_run=False)
    w2.show()
    settle(app, 0.8)
    out["second"] = report(app, w2)
    out["second_restored"] = w2.window_layout.restored
    w2.close()
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # no slow teardown of the app's thread pools


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main())

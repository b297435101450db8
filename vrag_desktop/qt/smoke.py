"""A scripted self-check of the whole desktop app, used by the frozen bundle's smoke test.

With ``VRAG_DESKTOP_SMOKE=<report.json>`` set, the app starts as usual (first launch: the sample
corpus is indexed), and once the indexing jobs of the corpora named in ``VRAG_DESKTOP_SMOKE_WAIT``
(comma-separated; default ``sample``) have ended and the indexer is idle two seconds later — or
``VRAG_DESKTOP_SMOKE_TIMEOUT`` seconds (default 600) pass — it writes a JSON report (window title,
Qt platform, the indexing outcome, the corpora it sees) and closes its window, so the app quits
through its ordinary close path.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication

SMOKE_ENV = "VRAG_DESKTOP_SMOKE"
TIMEOUT_ENV = "VRAG_DESKTOP_SMOKE_TIMEOUT"
WAIT_ENV = "VRAG_DESKTOP_SMOKE_WAIT"
IDLE_GRACE_MS = 2000


def requested() -> Path | None:
    value = os.environ.get(SMOKE_ENV)
    return Path(value) if value else None


def install(window: Any, report: Path) -> None:
    """Watch ``window``'s indexer; report and close when the awaited corpora finished indexing (or at
    the timeout)."""
    t0 = time.monotonic()
    waiting = {c.strip() for c in os.environ.get(WAIT_ENV, "sample").split(",") if c.strip()}
    state: dict[str, Any] = {"jobs": [], "done": False}

    def finish(outcome: str) -> None:
        if state["done"]:
            return
        state["done"] = True
        try:
            names = window.ctx.library.names()
        except Exception as exc:  # reported, not raised: the report is what the test reads
            names = [f"error: {exc}"]
        data = {
            "title": window.windowTitle(),
            "visible": bool(window.isVisible()),
            "platform": QGuiApplication.platformName(),
            "application": QGuiApplication.applicationName(),
            "desktop_file": QGuiApplication.desktopFileName(),
            "outcome": outcome,
            "jobs": state["jobs"],
            "corpora": names,
            "data_dir": str(window.ctx.data_dir),
            "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),  # what the app's children get
            "seconds": round(time.monotonic() - t0, 2),
        }
        report.parent.mkdir(parents=True, exist_ok=True)
        tmp = report.with_name(report.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(report)
        window.close()

    def ended(name: str, outcome: str) -> None:
        state["jobs"].append([name, outcome])
        waiting.discard(name)
        if not waiting:
            QTimer.singleShot(IDLE_GRACE_MS, settle)

    def settle() -> None:
        """Finish once nothing more is queued (files handed over meanwhile are indexed first)."""
        if window.corpora.indexer.is_busy():
            return  # the next jobEnded checks again
        worst = next((o for _n, o in state["jobs"] if o != "done"), "done")
        finish(worst)

    window.corpora.indexer.jobEnded.connect(ended)
    timeout_ms = int(float(os.environ.get(TIMEOUT_ENV, "600")) * 1000)
    QTimer.singleShot(timeout_ms, lambda: finish("timeout"))

"""Run something once a window has painted its first frame.

Why: the cold start (issue 31) shows the window first and does the rest after: the panels' first
look-ups (``tasks.release_starts``) and the panels of the docks hidden until used
(``WindowPanels.build_later``) wait for the first paint, so the person sees the window before them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer


def after_first_paint(window: Any, then: Callable[[], Any], fallback_ms: int = 1000) -> None:
    """Call ``then()`` once ``window`` has painted (its first update request was handled), or after
    ``fallback_ms`` whatever happened (no window, or one that never paints, e.g. minimised)."""
    done = False

    def fire() -> None:
        nonlocal done
        if not done:
            done = True
            then()

    class FirstPaint(QObject):
        def eventFilter(self, obj: Any, event: Any) -> bool:
            if event.type() == QEvent.Type.UpdateRequest:
                obj.removeEventFilter(self)
                QTimer.singleShot(0, fire)  # after this paint is done
            return False

    if window is not None:
        spy = FirstPaint(window)
        filters = window.__dict__.setdefault("_first_paint_filters", [])
        filters.append(spy)  # kept alive with the window
        window.installEventFilter(spy)
    QTimer.singleShot(fallback_ms, fire)


__all__ = ["after_first_paint"]

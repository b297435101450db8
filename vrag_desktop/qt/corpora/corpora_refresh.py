"""When the corpora are read again: at once when asked, else at most every ``interval_s`` while
indexing changes them, never two reads at a time (a change during a read reads once more after)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from vrag_desktop.qt.corpora.corpora_tree import read_snapshot
from vrag_desktop.qt.infra.controllers import Controller
from vrag_desktop.qt.infra.tasks import run_call

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

Guard = Callable[[Callable[[Any], None]], Callable[[Any], None]]


class SnapshotReader(Controller):
    """Reads a :class:`CorporaSnapshot` on the worker pool; ``read(snapshot)`` or ``failed(exc)`` on
    the GUI thread, after which :meth:`done` must be called (the panel applies the result first).
    ``expanded()`` names the corpora whose files are read too; ``guard`` wraps the pool callbacks so
    that none runs once the panel is gone."""

    read = Signal(object)
    failed = Signal(object)

    def __init__(
        self,
        ctx: AppContext,
        expanded: Callable[[], list[str]],
        guard: Guard,
        interval_s: float,
        parent: QObject,
    ) -> None:
        super().__init__(ctx, parent)
        self._expanded = expanded
        self._guard = guard
        self.interval_s = interval_s
        self.reading = False
        self.closed = False
        self._dirty = False
        self._last = 0.0
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._start)

    def schedule(self, now: bool = False) -> None:
        if self.closed:
            return
        if self.reading:
            self._dirty = True
            return
        wait = 0.0 if now else self.interval_s - (time.monotonic() - self._last)
        if wait <= 0:
            self._timer.stop()
            self._start()
        elif not self._timer.isActive():
            self._timer.start(int(wait * 1000) + 1)

    def done(self) -> None:
        """The last result was applied: read again if something changed meanwhile."""
        self.reading = False
        if self._dirty:
            self.schedule()

    def close(self) -> None:
        self.closed = True
        self._timer.stop()

    def _start(self) -> None:
        if self.reading or self.closed:
            return
        self.reading = True
        self._dirty = False
        self._last = time.monotonic()
        run_call(
            read_snapshot,
            self.ctx,
            self._expanded(),
            on_done=self._guard(self.read.emit),
            on_error=self._guard(self.failed.emit),
        )

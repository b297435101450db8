"""A repeating timer that runs only while its widget is on screen (the Training dock's polling).

Why: each tick is a C++→Python entry on the GUI thread that must win the GIL, which a trainer's or
an indexing thread can hold for up to the interpreter's switch interval; a panel nobody sees has
nothing to show for it. Qt does not hide a dock tab behind another: it moves it out of the window,
so it stays ``isVisible()`` and gets no hide event; its dock's ``visibilityChanged`` says so.
A :class:`PolledWidget` calls :meth:`ScreenTimer.follow` from its own ``showEvent`` and ``hideEvent``:
an event filter would run Python at every event the widget gets, its repaints included.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QDockWidget, QWidget


def on_screen(w: QWidget) -> bool:
    """Shown where a person can see it (not a dock tab behind another)."""
    return w.isVisible() and not w.visibleRegion().isEmpty()


class ScreenTimer(QTimer):
    """Calls ``tick`` every ``interval`` ms while ``wants(on_screen(widget))`` (default: while on
    screen); when it starts to, at once (what came meanwhile is caught up)."""

    def __init__(
        self,
        widget: QWidget,
        interval: int,
        tick: Callable[[], None],
        wants: Callable[[bool], bool] = bool,
    ) -> None:
        super().__init__(widget, interval=interval)
        self._widget, self._tick, self._wants = widget, tick, wants
        self._dock: QDockWidget | None = None
        self.timeout.connect(self._on_timeout)

    def wanted(self) -> bool:
        return self._wants(on_screen(self._widget))

    def follow(self) -> None:
        """Start (ticking at once) or stop as :meth:`wanted` says; call it when that may change (the
        widget's show and hide events among others)."""
        if self._dock is None:  # known once the widget is in its dock (it is put there after it is made)
            self._watch_dock()
        if not self.wanted():
            self.stop()
        elif not self.isActive():
            self.start()
            self._tick()

    def _on_timeout(self) -> None:
        if self.wanted():
            self._tick()
        else:
            self.stop()

    def _watch_dock(self) -> None:
        w = self._widget.parentWidget()
        while w is not None and not isinstance(w, QDockWidget):
            w = w.parentWidget()
        if w is not None:
            self._dock = w
            w.visibilityChanged.connect(self._dock_moved)  # a method: dropped with this timer

    def _dock_moved(self, _visible: bool) -> None:
        QTimer.singleShot(0, self, self.follow)  # a turn later: the dock has moved in or out by then


class PolledWidget(QWidget):
    """A widget that polls with a :class:`ScreenTimer`, ``poll_timer`` (made by the subclass): its
    show and hide events tell the timer."""

    poll_timer: ScreenTimer

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.poll_timer.follow()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self.poll_timer.follow()

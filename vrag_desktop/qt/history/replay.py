"""Replay a saved run: its recorded events fed one by one to the same views a live run uses.

:class:`ReplayController` is the clock: it emits ``event(object)`` for each recorded
:class:`~vrag_desktop.core.agents.events.AgentEvent`, spaced by the gaps the run recorded (each
gap capped, so a minute-long model call replays in a second), faster or slower by a speed factor.
Opening a run "as it was" is :meth:`ReplayController.seek_end`: every event at once.
:class:`ReplayBar` is the small transport bar that drives one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPalette, QPixmap
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QToolButton, QWidget

from vrag_desktop.core.agents.events import AgentEvent

if TYPE_CHECKING:
    from vrag_desktop.core.run.store import RunStore

SPEEDS = (0.5, 1.0, 2.0, 4.0, 10.0)
_BATCH_S = 0.015  # events closer together than a frame are emitted in one tick


class ReplayController(QObject):
    """Emits a run's events in order; see the module docstring.

    Signals: ``event(object)`` per event; ``position(done, total)`` after every change;
    ``playingChanged(bool)``; ``restarted()`` when :meth:`reset` rewinds (views should clear);
    ``finished()`` once the last event has been emitted.
    """

    agentEvent = Signal(object)  # one AgentEvent, as a live run's controller emits
    position = Signal(int, int)
    playingChanged = Signal(bool)
    restarted = Signal()
    finished = Signal()

    def __init__(
        self,
        parent: QObject | None = None,
        events: Iterable[AgentEvent] = (),
        *,
        speed: float = 1.0,
        max_gap_s: float = 1.0,
    ) -> None:
        super().__init__(parent)
        self._events: list[AgentEvent] = list(events)
        self._pos = 0
        self._speed = 1.0
        self.set_speed(speed)
        self.max_gap_s = max_gap_s
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._tick)

    # ---------------------------------------------------------------- state
    @property
    def events(self) -> Sequence[AgentEvent]:
        return tuple(self._events)

    @property
    def pos(self) -> int:
        """How many events have been emitted."""
        return self._pos

    @property
    def total(self) -> int:
        return len(self._events)

    @property
    def speed(self) -> float:
        return self._speed

    def at_end(self) -> bool:
        return self._pos >= len(self._events)

    @property
    def is_playing(self) -> bool:
        return self._timer.isActive()

    def current_step(self) -> int:
        """The model step of the last emitted event (0 before any)."""
        return self._events[self._pos - 1].step if self._pos else 0

    def last_step(self) -> int:
        return max((e.step for e in self._events), default=0)

    def set_events(self, events: Iterable[AgentEvent]) -> None:
        """Load another run (rewinds; no events are emitted)."""
        self._stop()
        self._events = list(events)
        self._pos = 0
        self.position.emit(0, len(self._events))

    def set_speed(self, factor: float) -> None:
        if not factor > 0:
            raise ValueError(f"speed must be positive, not {factor!r}")
        self._speed = float(factor)

    def gap_before(self, index: int) -> float:
        """Seconds (at 1×, capped) to wait before emitting event ``index``."""
        if index <= 0 or index >= len(self._events):
            return 0.0
        gap = self._events[index].time - self._events[index - 1].time
        return min(max(gap, 0.0), self.max_gap_s)

    # ---------------------------------------------------------------- transport
    def play(self) -> None:
        """Emit the remaining events paced by their recorded gaps."""
        if self.at_end() or self.is_playing:
            return
        self._schedule()
        self.playingChanged.emit(True)

    def pause(self) -> None:
        if self.is_playing:
            self._stop()

    def step(self) -> None:
        """Pause, then emit every event up to the end of the next model step."""
        self.pause()
        if self.at_end():
            return
        step = self._events[self._pos].step
        while not self.at_end() and self._events[self._pos].step == step:
            self._emit_next()
        self._announce()

    def seek_end(self) -> None:
        """Pause and emit every remaining event now (opening a run as it ended)."""
        self.pause()
        if self.at_end():
            return
        while not self.at_end():
            self._emit_next()
        self._announce()

    def reset(self) -> None:
        """Pause and rewind; ``restarted`` tells views to clear."""
        self.pause()
        self._pos = 0
        self.restarted.emit()
        self.position.emit(0, len(self._events))

    # ---------------------------------------------------------------- internals
    def _emit_next(self) -> None:
        ev = self._events[self._pos]
        self._pos += 1
        self.agentEvent.emit(ev)

    def _announce(self) -> None:
        self.position.emit(self._pos, len(self._events))
        if self.at_end():
            self.finished.emit()

    def _schedule(self) -> None:
        delay_s = self.gap_before(self._pos) / self._speed
        self._timer.start(round(delay_s * 1000))

    def _tick(self) -> None:
        self._emit_next()
        waited = 0.0
        while not self.at_end():  # the next events are due within this frame: emit them too
            waited += self.gap_before(self._pos) / self._speed
            if waited > _BATCH_S:
                break
            self._emit_next()
        self.position.emit(self._pos, len(self._events))
        if self.at_end():
            self.playingChanged.emit(False)
            self.finished.emit()
        else:
            self._schedule()

    def _stop(self) -> None:
        was = self._timer.isActive()
        self._timer.stop()
        if was:
            self.playingChanged.emit(False)


class ReplayBar(QWidget):
    """Restart / play-pause / next step / to the end, a speed menu and where the replay is."""

    def __init__(self, controller: ReplayController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.restart_button = self._button("Restart")
        self.play_button = self._button("Play")
        self.step_button = self._button("Next step")
        self.end_button = self._button("To the end")
        self.speed_combo = QComboBox()
        for factor in SPEEDS:
            self.speed_combo.addItem(f"{factor:g}×", factor)
        self.speed_combo.setCurrentIndex(SPEEDS.index(1.0))
        self.speed_combo.setToolTip("Replay speed (recorded pauses are capped at one second at 1×)")
        self.position_label = QLabel()
        self.position_label.setProperty("role", "muted")

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        for w in (self.restart_button, self.play_button, self.step_button, self.end_button):
            layout.addWidget(w)
        layout.addSpacing(8)
        layout.addWidget(self.speed_combo)
        layout.addSpacing(8)
        layout.addWidget(self.position_label, 1)

        self.restart_button.clicked.connect(controller.reset)
        self.play_button.clicked.connect(self._toggle)
        self.step_button.clicked.connect(controller.step)
        self.end_button.clicked.connect(controller.seek_end)
        self.speed_combo.currentIndexChanged.connect(
            lambda i: controller.set_speed(float(self.speed_combo.itemData(i)))
        )
        controller.position.connect(self._update)
        controller.playingChanged.connect(self._playing_changed)  # methods: dropped if the bar is deleted
        self._update(controller.pos, controller.total)

    def _button(self, text: str) -> QToolButton:
        b = QToolButton()
        b.setText(text)
        b.setToolTip(text)
        b.setAutoRaise(True)
        b.setIconSize(QSize(20, 20))
        return b

    def _playing_changed(self, _playing: bool) -> None:
        self._update(self.controller.pos, self.controller.total)

    def _toggle(self) -> None:
        if self.controller.is_playing:
            self.controller.pause()
        else:
            self.controller.play()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self._update(self.controller.pos, self.controller.total)  # icons follow the theme
        super().changeEvent(event)

    def _update(self, done: int, total: int) -> None:
        c = self.controller
        playing = c.is_playing
        ink = self.palette().color(QPalette.ColorRole.ButtonText)
        for button, shape in (
            (self.restart_button, "restart"),
            (self.play_button, "pause" if playing else "play"),
            (self.step_button, "step"),
            (self.end_button, "end"),
        ):
            button.setIcon(transport_icon(shape, ink))
        self.play_button.setText("Pause" if playing else "Play")
        self.play_button.setToolTip(self.play_button.text())
        at_end = done >= total
        self.play_button.setEnabled(total > 0 and (playing or not at_end))
        self.step_button.setEnabled(not at_end)
        self.end_button.setEnabled(not at_end)
        self.restart_button.setEnabled(done > 0)
        if not total:
            self.position_label.setText("No events recorded")
        else:
            self.position_label.setText(
                f"Step {c.current_step()} of {c.last_step()} · event {done} of {total}"
                + (" · end" if at_end else "")
            )


def transport_icon(shape: str, ink: QColor, size: int = 32) -> QIcon:
    """Media-transport glyphs drawn in ``ink`` (the platform's icons vanish on dark themes).

    ``shape``: play, pause, step, end, restart. The disabled look is the same glyph, faded.
    """
    path = _glyph(shape, size / 32.0)
    icon = QIcon()
    faded = QColor(ink)
    faded.setAlphaF(0.35)
    for mode, colour in ((QIcon.Mode.Normal, ink), (QIcon.Mode.Disabled, faded)):
        pm = QPixmap(size, size)
        pm.fill(Qt.GlobalColor.transparent)
        p = QPainter(pm)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillPath(path, colour)
        p.end()
        icon.addPixmap(pm, mode)
    return icon


def _glyph(shape: str, u: float) -> QPainterPath:
    """The outline of a transport glyph on a 32-unit grid scaled by ``u``."""
    path = QPainterPath()

    def tri(x0: float, x1: float, right: bool = True) -> None:
        tip, base = (x1, x0) if right else (x0, x1)
        path.moveTo(QPointF(base * u, 8 * u))
        path.lineTo(QPointF(tip * u, 16 * u))
        path.lineTo(QPointF(base * u, 24 * u))
        path.closeSubpath()

    def bar(x: float, w: float = 3.0) -> None:
        path.addRoundedRect(QRectF(x * u, 8 * u, w * u, 16 * u), u, u)

    if shape == "play":
        tri(10, 24)
    elif shape == "pause":
        bar(10, 4.5)
        bar(17.5, 4.5)
    elif shape == "step":
        tri(9, 20)
        bar(21)
    elif shape == "end":
        tri(5, 14)
        tri(14, 23)
        bar(24)
    elif shape == "restart":
        bar(5)
        tri(9, 18, right=False)
        tri(18, 27, right=False)
    else:
        raise ValueError(f"unknown transport icon {shape!r}")
    return path


def load_events(
    store: RunStore,
    run_id: str,
    on_done: Callable[[list[AgentEvent]], None],
    on_error: Callable[[BaseException], None] | None = None,
) -> None:
    """Read a run's events off the GUI thread (a long run's log is megabytes of streamed text)."""
    from vrag_desktop.qt.infra.tasks import run_call

    run_call(
        lambda: list(store.events(run_id)),
        on_done=on_done,
        on_error=on_error,
        error_title=f"Could not open run {run_id}",
    )

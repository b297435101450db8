"""The base of the views the zoom shortcuts act on (the reasoning graph, the evidence page).

Each says when the person touches it (a press, the wheel, focus) with ``touched``, so the window
aims its zoom shortcuts at the view last touched: an event filter on the views ran Python at each
of their events, every repaint of a live run included. A press's position is kept in ``_press``
(a click, not a drag, is told by how far it moved). :meth:`ZoomView.viewport_note` makes the line
an empty view shows: a label over the viewport, not a Python ``drawForeground`` (a GIL round-trip at
every repaint)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QFocusEvent, QMouseEvent, QPalette, QWheelEvent
from PySide6.QtWidgets import QGraphicsView, QLabel, QVBoxLayout, QWidget


class ZoomView(QGraphicsView):
    touched = Signal()  # pressed, wheeled or focused

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._press: QPointF | None = None

    def viewport_note(self, text: str, role: QPalette.ColorRole) -> QLabel:
        """A centred, word-wrapped line over the viewport, in ``role``'s colour; clicks and drags go
        through it to the view. Hidden until shown."""
        note = QLabel(text, self.viewport())
        note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        note.setWordWrap(True)
        note.setForegroundRole(role)
        note.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        note.hide()
        over = QVBoxLayout(self.viewport())
        over.setContentsMargins(24, 24, 24, 24)
        over.addWidget(note)
        return note

    def focusInEvent(self, event: QFocusEvent) -> None:
        self.touched.emit()
        super().focusInEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.touched.emit()
        self._press = event.position()
        super().mousePressEvent(event)

    def wheelEvent(self, event: QWheelEvent) -> None:
        self.touched.emit()
        self.wheel(event)

    def wheel(self, event: QWheelEvent) -> None:
        """Zoom by the wheel (each view its own way)."""
        super().wheelEvent(event)

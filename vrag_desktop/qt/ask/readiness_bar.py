"""The line over the question box that says why Ask is off, with the one button that goes to the fix.

Why a bar and not a disabled button alone: a greyed-out Ask says nothing. The reason comes from the
core's rule (:mod:`vrag_desktop.core.endpoints.readiness`), the button's words too; the window
decides where the button leads (``fixRequested``).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from vrag_desktop.core.endpoints.readiness import Readiness
from vrag_desktop.qt.infra.theme import set_role


class ReadinessBar(QFrame):
    """Hidden while the model can answer (or while it is being checked)."""

    fixRequested = Signal(object)  # the Readiness whose fix the person asked for

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("readinessBar")
        set_role(self, "role", "banner-warn")
        self._readiness = Readiness(True)
        self.label = QLabel(self)
        self.label.setObjectName("readinessReason")
        self.button = QPushButton(self)
        self.button.setObjectName("readinessFix")
        self.button.clicked.connect(lambda: self.fixRequested.emit(self._readiness))
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 4, 4, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.button)
        self.hide()

    @property
    def readiness(self) -> Readiness:
        return self._readiness

    def show_readiness(self, value: Readiness) -> None:
        """Show why the model cannot answer, or hide (ready, or no fix to offer yet)."""
        self._readiness = value
        if value.ready or not value.fix:
            self.hide()
            return
        self.label.setText(f"⚠ {value.reason}")
        self.label.setToolTip("Ask stays off until this is fixed.")
        self.button.setText(value.action)
        self.show()

    def reason(self) -> str:
        return "" if self.isHidden() else self.label.text()


__all__ = ["ReadinessBar"]

"""The Local vLLM tab's status card: a coloured dot, a headline and a detail, Start and Stop, and
"Use for questions" once the server is ready.

Why a widget of its own: it only shows what :class:`~.vllm_section.VLLMSection` decides (the
server's life stays there), so showing a state is one call instead of a dozen widget updates.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from vrag_desktop.qt.infra.widgets import button, row
from vrag_desktop.qt.runtime.style import text_label, tone


class ServerCard(QFrame):
    """Status and the start/stop buttons of the app's own server."""

    def __init__(
        self,
        parent: QWidget,
        *,
        start: Callable[[], object],
        stop: Callable[[], object],
        use: Callable[[], object],
    ) -> None:
        super().__init__(parent)
        self.setObjectName("statusCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.dot = QLabel("●", self)
        self.dot.setStyleSheet("font-size: 16px;")  # its colour: the state's tone (show_state)
        self.head = QLabel("Stopped", self)
        self.head.setObjectName("vllmStatus")
        f = self.head.font()
        f.setBold(True)
        f.setPointSizeF(f.pointSizeF() * 1.1)
        self.head.setFont(f)
        self.head.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.head.setWordWrap(True)
        self.detail = text_label(self, "vllmDetail")
        self.start_button = button(self, "Start", start, name="startServer")
        self.stop_button = button(self, "Stop", stop, name="stopServer")
        self.use_button = button(
            self, "Use for questions", use, tip="Make the Local vLLM profile the active endpoint"
        )
        self.use_button.setVisible(False)
        layout = QVBoxLayout(self)
        layout.addLayout(row(self.dot, self.head, self.start_button, self.stop_button, grow=self.head))
        layout.addWidget(self.detail)
        layout.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignLeft)

    def show_state(self, head: str, detail: str, color: str, full: str) -> None:
        """Headline (and its dot) in the tone ``color`` (a theme role); ``full`` (the whole story) as
        their tooltip."""
        tone(self.dot, color)
        self.head.setText(head)
        tone(self.head, color)
        self.detail.setText(detail)
        self.detail.setVisible(bool(detail))
        self.head.setToolTip(full)
        self.detail.setToolTip(full)

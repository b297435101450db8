"""Where reported messages surface in the window: the notification bar over the ask panel (the
latest message, tinted by level) and the dialog that lists every message of this session."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.theme import is_dark

ICONS = {"error": "⚠", "warning": "⚠", "info": "ℹ"}


class NotificationBar(QWidget):
    """The latest message from the error sink, tinted by level; errors stay until dismissed."""

    INFO_MS = 8000  # an info message leaves by itself; warnings and errors wait for the person

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("notification")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.more = QPushButton("All messages…")
        self.more.setFlat(True)
        close = QPushButton("✕")
        close.setFlat(True)
        close.setFixedWidth(28)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.more)
        lay.addWidget(close)
        self.setAutoFillBackground(True)
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self.hide)
        self.level = ""
        self.hide()

    def show_message(self, level: str, title: str, message: str) -> None:
        self.level = level
        icon = ICONS.get(level, "")
        self.label.setText(
            f"{icon} <b>{html.escape(title, quote=False)}</b>: {html.escape(message, quote=False)}"
        )
        dark = is_dark(self.palette())
        colours = {
            "error": ("#5c1f1f", "#fbe3e1") if dark else ("#fbe3e1", "#5c1f1f"),
            "warning": ("#4d3b12", "#fff1cc") if dark else ("#fff4d6", "#5a4300"),
            "info": ("#1b3350", "#dceaff") if dark else ("#e3eefc", "#173a66"),
        }
        bg, fg = colours.get(level, colours["info"])
        self.setStyleSheet(f"#notification {{ background: {bg}; }} #notification QLabel {{ color: {fg}; }}")
        self.show()
        self._timer.stop()
        if level == "info":
            self._timer.start(self.INFO_MS)


def messages_dialog(parent: QWidget) -> QDialog:
    """Every message reported this session, oldest first, in a non-modal dialog (shown)."""
    dlg = QDialog(parent)
    dlg.setWindowTitle("Messages")
    text = QPlainTextEdit()
    text.setReadOnly(True)
    text.setPlainText(
        "\n".join(
            f"{r.when:%H:%M:%S}  {r.level.upper():7}  {r.title}: {r.message}" for r in error_sink().history
        )
        or "No messages."
    )
    lay = QVBoxLayout(dlg)
    lay.addWidget(text)
    dlg.resize(760, 400)
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dlg.show()
    return dlg

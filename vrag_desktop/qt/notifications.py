"""Where reported messages surface in the window: the notification bar over the ask panel (the
latest message, tinted by level) and the dialog that lists every message of this session.

The bar is a theme banner (``QFrame[role="banner-<level>"]``), so its colours come from the theme
and follow a switch while it shows (a colour picked when it was shown stayed light on a dark window).
Info leaves by itself after a while; warnings and errors stay until closed, unless the message is
withdrawn because it is no longer true (:meth:`ErrorSink.withdraw`).
"""

from __future__ import annotations

import html

from PySide6.QtCore import QCoreApplication, Qt, QTimer
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.theme import set_role

ICONS = {"error": "⚠", "warning": "⚠", "info": "ℹ"}
BANNERS = {"error": "banner-error", "warning": "banner-warn", "info": "banner-info"}


class NotificationBar(QFrame):
    """The latest message from the error sink, tinted by level; see the module docstring."""

    INFO_MS = 8000  # an info message leaves by itself; warnings and errors wait for the person

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("notification")
        self.label = QLabel()
        self.label.setObjectName("notificationText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.more = QPushButton(self.tr("All messages…"))
        self.more.setFlat(True)
        self.close_button = QPushButton("✕")
        self.close_button.setFlat(True)
        self.close_button.setFixedWidth(28)
        self.close_button.setToolTip(self.tr("Dismiss"))
        self.close_button.setAccessibleName(self.tr("Dismiss message"))
        self.close_button.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.more)
        lay.addWidget(self.close_button)
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self.hide)
        self.level = ""
        self.title = ""
        error_sink().withdrawn.connect(self._withdrawn)
        set_role(self, "role", BANNERS["info"])
        self.hide()

    def show_message(self, level: str, title: str, message: str) -> None:
        self.level, self.title = level, title
        icon = ICONS.get(level, "")
        self.label.setText(
            f"{icon} <b>{html.escape(title, quote=False)}</b>: {html.escape(message, quote=False)}"
        )
        set_role(self, "role", BANNERS.get(level, BANNERS["info"]))
        self.show()
        self._timer.stop()
        if level == "info":
            self._timer.start(self.INFO_MS)

    def _withdrawn(self, title: str) -> None:
        """The message shown is no longer true: take it down."""
        if not self.isHidden() and title == self.title:
            self._timer.stop()
            self.hide()


def messages_dialog(parent: QWidget) -> QDialog:
    """Every message reported this session, oldest first, in a non-modal dialog (shown)."""
    dlg = QDialog(parent)
    dlg.setWindowTitle(QCoreApplication.translate("NotificationBar", "Messages"))
    text = QPlainTextEdit()
    text.setReadOnly(True)
    text.setPlainText(
        "\n".join(
            f"{r.when:%H:%M:%S}  {r.level.upper():7}  {r.title}: {r.message}" for r in error_sink().history
        )
        or QCoreApplication.translate("NotificationBar", "No messages.")
    )
    lay = QVBoxLayout(dlg)
    lay.addWidget(text)
    dlg.resize(760, 400)
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dlg.show()
    return dlg

"""What the corpora panel says instead of a list: no corpora yet (how to add some), or a data
directory that cannot be used (the banner with the reason, and what to do)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from vrag_desktop.qt.infra.theme import color, set_role


class Banner(QFrame):
    """A tinted strip (``role`` picks the theme's tint) with a wrapped message; hidden at first."""

    def __init__(self, role: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        set_role(self, "role", role)
        self.box = QVBoxLayout(self)
        self.box.setContentsMargins(8, 6, 8, 6)
        self.box.setSpacing(4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.box.addWidget(self.label)
        self.hide()


class DataDirBanner(Banner):
    """The reason the data directory cannot be used, selectable so it can be copied."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("banner-error", parent)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def show_problem(self, text: str) -> None:
        self.label.setText(
            f"<b>Cannot use the data directory.</b><br>{html.escape(text)}<br>"
            "Choose another data directory in Settings; nothing is written until then."
        )
        self.show()


class EmptyState(QLabel):
    """Centred text in a frame where the tree would be."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setFrameShape(QFrame.Shape.StyledPanel)

    def show_state(self, unusable: bool) -> None:
        """No corpora yet, or (``unusable``) none can be listed until the data directory is fixed."""
        muted = color("muted").name()
        if unusable:
            self.setText(
                "<p style='font-size:11pt'><b>Corpora unavailable</b></p>"
                f"<p style='color:{muted}'>Choose a data directory that can be written,<br>"
                "then your corpora appear here.</p>"
            )
        else:
            self.setText(
                "<p style='font-size:11pt'><b>No corpora yet</b></p>"
                "<p>Drop folders or files here,<br>or click <b>New corpus</b>.</p>"
                f"<p style='color:{muted}'>PDFs, images, videos and notes are indexed on this "
                "machine, in the background.</p>"
            )

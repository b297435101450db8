"""Open a file or folder with the desktop's program for it, and say so when there is none.

Why: ``QDesktopServices.openUrl`` returns False when no program is registered for the file (no
browser on a fresh Linux box, no ``xdg-open`` in a minimal session), and the button that called it
then did nothing visible. Here the person is told, shown where the file is, and offered to copy
its path or open its folder instead. The message is not modal: nothing waits on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QMessageBox, QWidget

from vrag_desktop.qt.infra.errors import error_sink

#: What opens a URL (tests replace it); True when a program took it.
opener: Callable[[QUrl], bool] = QDesktopServices.openUrl


def open_path(parent: QWidget | None, path: str | Path, what: str) -> bool:
    """Open ``path`` (``what`` names it for the person: "the HTML report"); False after showing
    :class:`NotOpened` when no program took it."""
    path = Path(path)
    if opener(QUrl.fromLocalFile(str(path))):
        return True
    NotOpened(parent, path, what).show()
    return False


class NotOpened(QMessageBox):
    """No program opened ``path``: where it is, with Copy path and (for a file) Open folder."""

    def __init__(self, parent: QWidget | None, path: Path, what: str) -> None:
        super().__init__(parent)
        self.path = path
        self.setObjectName("notOpened")
        self.setIcon(QMessageBox.Icon.Information)
        self.setWindowTitle(f"Cannot open {what}")
        self.setText(f"No program on this computer is set up to open {what}.")
        self.setInformativeText(f"It is saved at:\n{path}")
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_button = self.addButton("Copy path", QMessageBox.ButtonRole.ActionRole)
        self.folder_button = (
            self.addButton("Open folder", QMessageBox.ButtonRole.ActionRole) if not path.is_dir() else None
        )
        self.addButton(QMessageBox.StandardButton.Close)
        self.copy_button.clicked.connect(self.copy_path)
        if self.folder_button is not None:
            self.folder_button.clicked.connect(self.open_folder)
        self.setModal(False)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

    def copy_path(self) -> None:
        QGuiApplication.clipboard().setText(str(self.path))

    def open_folder(self) -> bool:
        """Open the file's folder (a file manager is more often there than a browser); with none
        either, the path goes to the clipboard and the messages say so."""
        if opener(QUrl.fromLocalFile(str(self.path.parent))):
            return True
        self.copy_path()
        error_sink().report(
            "Cannot open the folder",
            f"No program is set up to open folders either; the path is on the clipboard: {self.path}",
            "warning",
        )
        return False

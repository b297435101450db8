"""The Dataset field of a form that uses one (New evaluation…, a training run's): the app's datasets,
the files picked so far, and a last entry that opens a file dialog for another file."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtWidgets import QComboBox, QFileDialog, QWidget

OTHER_FILE = "__file__"


class DatasetPicker(QComboBox):
    """A combo box whose entries carry what names a dataset (a path, or a name the caller resolves);
    :meth:`chosen` gives the picked one's."""

    def __init__(
        self, file_filter: str, other_text: str = "Other file…", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._filter, self._other = file_filter, other_text
        self.activated.connect(self._picked)

    def set_datasets(self, entries: Iterable[tuple[str, str]]) -> None:
        """Show ``(text, data)`` entries, then the file entry, in place of what was shown."""
        self.clear()
        for text, data in entries:
            self.addItem(text, data)
        self.addItem(self._other, OTHER_FILE)

    def set_file(self, path: str) -> None:
        """Pick ``path`` (what choosing the file entry does, without the file dialog); a file already
        listed is picked again, not listed twice."""
        at = self.findData(path)
        if at < 0:
            at = max(0, self.count() - 1)
            self.insertItem(at, path, path)
        self.setCurrentIndex(at)

    def chosen(self) -> str:
        """The picked entry's data; empty while none is picked (or the file entry is)."""
        data = self.currentData()
        return "" if not data or data == OTHER_FILE else str(data)

    def _picked(self) -> None:
        if self.currentData() != OTHER_FILE:
            return
        path, _ = QFileDialog.getOpenFileName(self.window(), "Dataset file", "", self._filter)
        if path:
            self.set_file(path)
        else:
            self.setCurrentIndex(0)


__all__ = ["OTHER_FILE", "DatasetPicker"]

"""The Settings dialog's line about the kept page views: "Page views kept: N pages, X MB" and Clear.

The views (core/agents/page_views.py) live in the user's cache folder, outside the data directory,
so this line is where a person sees what they cost and empties them. Counting is a scan of up to
tens of thousands of files and clearing unlinks them all, so both run off the GUI thread
(tasks.run_call); the line says what it is doing meanwhile.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from vrag_desktop.core.agents import page_views
from vrag_desktop.qt.infra import tasks


def describe(files: int, size: int) -> str:
    """``Page views kept: 1,234 pages, 98.2 MB``."""
    if files == 0:
        return "Page views kept: none"
    return f"Page views kept: {files:,} page{'s' if files != 1 else ''}, {page_views.size_text(size)}"


class ViewCacheRow(QWidget):
    """The usage line and its Clear button; ``usageShown(files, bytes)`` after each count."""

    usageShown = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Remove every kept page view; each is made again when its page is shown")
        self.clear_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.clear_button.clicked.connect(self.clear)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.clear_button)
        self._slot = tasks.TaskSlot()
        self.refresh()

    def refresh(self) -> None:
        """Count the kept views (in the background) and show them."""
        root = page_views.cache_dir()
        if root is None:
            self._slot.drop()
            self.label.setText(f"Page views are not kept ({page_views.CACHE_ENV} is off).")
            self.label.setToolTip("")
            self.clear_button.setEnabled(False)
            return
        self.label.setText("Page views kept: counting…")
        self.label.setToolTip(f"Kept in {root}")
        self.clear_button.setEnabled(False)
        self._slot.start(
            tasks.run_call, page_views.usage, name="Counting kept page views", on_done=self._shown
        )

    def clear(self) -> None:
        """Empty the cache (in the background), then count again."""
        if page_views.cache_dir() is None:
            return
        self.label.setText("Page views kept: clearing…")
        self.clear_button.setEnabled(False)
        self._slot.start(
            tasks.run_call, page_views.clear, name="Clearing kept page views", on_done=self._cleared
        )

    def busy(self) -> bool:
        """A count or a clear is running (tests, and the dialog's close)."""
        return self._slot.running

    def _cleared(self, _freed: int) -> None:
        self.refresh()

    def _shown(self, usage: tuple[int, int]) -> None:
        files, size = usage
        self.label.setText(describe(files, size))
        self.clear_button.setEnabled(files > 0)
        self.usageShown.emit(files, size)

"""The evidence view's left column: one row per page the run looked at, with its thumbnail (read off
the GUI thread), file, page number, steps, crop count and whether the answer cites it.

Why a widget of its own: keeping the rows in step with the run (added, removed, re-described in
place, so the selection survives) is list bookkeeping the view need not carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QBrush, QIcon, QImage, QPixmap, QResizeEvent
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QStyle, QWidget

from vrag_desktop.core.run.evidence import EvidencePage
from vrag_desktop.qt.evidence.page_images import THUMB, read_thumb
from vrag_desktop.qt.evidence.page_view import CITED_COLOUR
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.tasks import Task, run_decode

KEY = Qt.ItemDataRole.UserRole  # where a row keeps its page's key (raw image path)


class PageStrip(QListWidget):
    """The run's pages; programmatic changes do not emit ``currentItemChanged`` (only a click does)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setIconSize(THUMB)
        self.setSpacing(2)
        # Narrow by design: the thumbnail above its lines, which get the strip's whole width (beside
        # it they got what the thumbnail left, a few letters); each line ends in "…" at that width
        # (the tooltip has it whole), rather than running under its edge with a scroll bar.
        self.setViewMode(QListWidget.ViewMode.IconMode)
        self.setFlow(QListWidget.Flow.TopToBottom)
        self.setWrapping(False)
        self.setMovement(QListWidget.Movement.Static)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.setMinimumWidth(90)
        self._reading: dict[str, Task] = {}  # thumbnails asked for, by page key, until they arrive

    def resizeEvent(self, event: QResizeEvent) -> None:
        """One cell per row, as wide as the strip: the thumbnail and three lines of text."""
        super().resizeEvent(event)
        lines = self.fontMetrics().lineSpacing() * 3
        self.setGridSize(QSize(max(THUMB.width(), self.viewport().width() - 4), THUMB.height() + lines + 10))

    def sync(self, pages: Mapping[str, EvidencePage]) -> None:
        """Rows for exactly ``pages``, in their order; a new row's thumbnail is read off-thread."""
        self.blockSignals(True)
        for row in reversed(range(self.count())):
            if self.item(row).data(KEY) not in pages:
                self._forget(self.item(row).data(KEY))
                self.takeItem(row)
        present = {self.item(i).data(KEY): self.item(i) for i in range(self.count())}
        for key, page in pages.items():
            item = present.get(key)
            if item is None:
                item = QListWidgetItem(self)
                item.setData(KEY, key)
                item.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon))
                self._reading[key] = run_decode(
                    read_thumb, key, on_done=partial(self._thumb_read, key), on_error=lambda _exc: None
                )
            _describe(item, page)
        self.blockSignals(False)

    def select_key(self, key: str) -> None:
        self.blockSignals(True)
        for i in range(self.count()):
            if self.item(i).data(KEY) == key:
                self.setCurrentRow(i)
                break
        self.blockSignals(False)

    def remove_all(self) -> None:
        for key in list(self._reading):
            self._forget(key)
        self.blockSignals(True)
        self.clear()
        self.blockSignals(False)

    def _forget(self, key: str) -> None:
        """A page gone from the strip: its thumbnail, if not decoded yet, never will be (the decode
        lane runs one at a time; the next run's pages should not wait behind it)."""
        task = self._reading.pop(key, None)
        if task is not None:
            task.cancel()

    def _thumb_read(self, key: str, image: QImage) -> None:
        if not alive(self):  # the view closed while the thumbnail was read
            return
        self._reading.pop(key, None)
        for i in range(self.count()):
            item = self.item(i)
            if item.data(KEY) == key:
                if image.isNull():
                    item.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning))
                    item.setToolTip(item.toolTip() + "\n(image no longer on disk)")
                else:
                    item.setIcon(QIcon(QPixmap.fromImage(image)))


def _describe(item: QListWidgetItem, page: EvidencePage) -> None:
    n = len(page.regions)
    where = f"p. {page.page}" if page.page is not None else "image"
    steps = f"step {', '.join(map(str, page.steps))}" if page.steps else "named by the answer"
    meta = [f"{n} crop{'s' if n != 1 else ''}" if n else "no crops"]
    if page.cited:
        meta.append("★ cited")
    item.setText(f"{Path(page.source or page.key).name}\n{where} · {steps}\n{' · '.join(meta)}")
    item.setToolTip(f"{page.source or page.key}\n{page.key}")
    font = item.font()
    font.setBold(page.cited)
    item.setFont(font)
    if page.cited:
        item.setForeground(QBrush(CITED_COLOUR))
    else:
        item.setData(Qt.ItemDataRole.ForegroundRole, None)

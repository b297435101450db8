"""The node details' tables (retrieved items, crops, memory, images shown): every row shown, the
numbers always in view.

Why a class: each table is as tall as its rows so the details pane scrolls as a whole, and that
height was computed once, before the table had its width, so wrapped rows and a horizontal scroll
bar that appeared later covered the last rows (about 1.5 of 3 showed), and the score column was
the one scrolled out of sight. Here the numeric columns are sized to their contents, the text
columns share the rest (long names elided in the middle, so ``… · p.2`` stays), and the height is
recomputed whenever the width changes (a resize, never a repaint).
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHeaderView, QTableWidget, QWidget

from vrag_desktop.qt.infra.tables import read_only_table


class DetailsTable(QTableWidget):
    """A read-only table as tall as its rows. ``text``: the columns that stretch (the rest are
    sized to their contents); ``row_height``: a fixed row height (thumbnails), else rows fit their
    text (wrapped only where ``wrap``)."""

    def __init__(self, headers: list[str], parent: QWidget | None = None, *, wrap: bool = False) -> None:
        super().__init__(0, len(headers), parent)
        read_only_table(self, wrap=wrap)
        self.setHorizontalHeaderLabels(headers)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.row_height: int | None = None
        self._width = -1

    def finish(self, text: tuple[int, ...], *, fixed: dict[int, int] | None = None) -> None:
        """Size the columns (``text`` stretch, ``fixed`` {column: width}, the rest to contents) and
        the table's height to its rows."""
        head = self.horizontalHeader()
        head.setMinimumSectionSize(36)
        for c in range(self.columnCount()):
            head.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        for c in text:
            head.setSectionResizeMode(c, QHeaderView.ResizeMode.Stretch)
        for c, width in (fixed or {}).items():
            head.setSectionResizeMode(c, QHeaderView.ResizeMode.Fixed)
            self.setColumnWidth(c, width)
        self._width = -1
        self.fit_height()

    def fit_height(self) -> None:
        """As tall as the header, every row and the horizontal scroll bar when there is one."""
        if self.row_height is not None:
            for r in range(self.rowCount()):
                self.setRowHeight(r, self.row_height)
        else:
            self.resizeRowsToContents()
        height = self.horizontalHeader().height() + 2 * self.frameWidth() + 2
        height += sum(self.rowHeight(r) for r in range(self.rowCount()))
        bar = self.horizontalScrollBar()
        if self.horizontalHeader().length() > self.viewport().width() > 0:
            height += bar.sizeHint().height()
        self.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != self._width:  # wrapped rows and the scroll bar follow the width
            self._width = event.size().width()
            self.fit_height()

    def minimumSizeHint(self) -> QSize:
        return QSize(120, super().minimumSizeHint().height())


__all__ = ["DetailsTable"]

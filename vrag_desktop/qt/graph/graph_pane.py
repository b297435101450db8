"""The reasoning graph dock's content: the graph view and the selected node's details, side by side
where the dock is wide and one above the other where it is narrow.

Why it turns: beside a graph in a half-width column the details pane was ~200 px wide, so its
*Retrieved items* and *Crops* tables showed their first column and cut the scores off; below the
graph they get the column's whole width. The turn happens only on a resize (never per repaint) and
only when the side of the threshold changes, so a handle the person dragged stays where they put it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSplitter, QWidget

#: From this width on the details sit beside the graph; below it, under it.
SIDE_BY_SIDE = 760
#: The graph's share of the pane (the details get the rest).
GRAPH_SHARE = 0.6


class GraphPane(QSplitter):
    """``view`` and ``details`` in a splitter whose orientation follows the pane's width."""

    def __init__(self, view: QWidget, details: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.setObjectName("graphPane")
        self.addWidget(view)
        self.addWidget(details)
        self.setStretchFactor(0, 3)
        self.setStretchFactor(1, 2)
        self.setChildrenCollapsible(False)

    def wanted(self) -> Qt.Orientation:
        """The orientation for the current width."""
        if self.width() >= SIDE_BY_SIDE:
            return Qt.Orientation.Horizontal
        return Qt.Orientation.Vertical

    def reset(self) -> None:
        """The orientation for the current width, the graph taking :data:`GRAPH_SHARE`."""
        self.setOrientation(self.wanted())
        total = self.width() if self.orientation() == Qt.Orientation.Horizontal else self.height()
        total = max(total, 2)
        self.setSizes([round(total * GRAPH_SHARE), total - round(total * GRAPH_SHARE)])

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.wanted() != self.orientation():
            self.reset()


__all__ = ["SIDE_BY_SIDE", "GraphPane"]

"""Dropping folders and files on the corpora panel: the corpus under the pointer receives them (else
the selected one, else "default"), and the hint line says where they will go before the release."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QPoint
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent

if TYPE_CHECKING:
    from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel

DEFAULT_CORPUS = "default"  # as core.library.DEFAULT_CORPUS (not imported: it pulls in numpy)
DROP_HINT = "Drop folders or files on a corpus to add them."


def local_paths(event: QDropEvent | QDragEnterEvent | QDragMoveEvent) -> list[str]:
    """The local files and folders a drag carries (links to elsewhere are not ours to add)."""
    md = event.mimeData()
    if md is None or not md.hasUrls():
        return []
    return [u.toLocalFile() for u in md.urls() if u.isLocalFile() and u.toLocalFile()]


class DropTarget(QObject):
    """An event filter on the panel that takes its drag and drop events."""

    def __init__(self, panel: CorporaPanel) -> None:
        super().__init__(panel)
        self.panel = panel
        panel.setAcceptDrops(True)
        panel.installEventFilter(self)

    def corpus_at(self, pos: QPoint) -> str | None:
        """The corpus under ``pos`` (panel coordinates), if the point is over a tree row."""
        tree = self.panel.tree
        vp = tree.viewport()
        p = vp.mapFrom(self.panel, pos)
        if self.panel.stack.currentWidget() is not tree or not vp.rect().contains(p):
            return None
        return tree.corpus_at(p)

    def target(self, pos: QPoint) -> str:
        return self.corpus_at(pos) or self.panel.selected_corpus() or DEFAULT_CORPUS

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is not self.panel:
            return False
        if isinstance(event, QDragEnterEvent | QDragMoveEvent):  # QDragEnterEvent is a QDragMoveEvent
            if local_paths(event):
                event.acceptProposedAction()
                self.panel.hint.setText(f"Release to add to '{self.target(event.position().toPoint())}'")
            else:
                event.ignore()
            return True
        if event.type() == QEvent.Type.DragLeave:
            self.panel.hint.setText(DROP_HINT)
            return False
        if isinstance(event, QDropEvent):
            self._drop(event)
            return True
        return False

    def _drop(self, event: QDropEvent) -> None:
        paths = local_paths(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        target = self.target(event.position().toPoint())
        self.panel.hint.setText(f"Adding {len(paths)} item{'s' if len(paths) != 1 else ''} to '{target}'…")
        self.panel.add_paths(paths, target)

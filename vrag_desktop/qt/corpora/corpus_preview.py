"""The strip under the corpora tree: thumbnails of the pages, images and clip keyframes of the selected
corpus or file, read off the GUI thread (the first ``LIMIT`` items)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from vrag_desktop.core.corpus.status import read_items
from vrag_desktop.qt.corpora.corpora_tree import PreviewTarget
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.infra.thumbnails import ThumbnailStrip, item_keys

NOTHING_SELECTED = "Select a corpus or a file to see its pages."

Guard = Callable[[Callable[[Any], None]], Callable[[Any], None]]


class CorpusPreview(QWidget):
    """A caption and a :class:`ThumbnailStrip`; ``guard`` wraps pool callbacks so that none runs once
    the panel is gone."""

    LIMIT = 120

    def __init__(self, guard: Guard, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._guard = guard
        self.target: PreviewTarget | None = None
        self._reading = TaskSlot()  # the items of the row shown last
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.label = QLabel(NOTHING_SELECTED)
        set_role(self.label, "role", "hint")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.strip = ThumbnailStrip()
        self.strip.empty_text = "Pages, images and clip keyframes appear here."
        lay.addWidget(self.label)
        lay.addWidget(self.strip, 1)

    def forget(self) -> None:
        """The next :meth:`reload_if_changed` will not compare with what is shown (the row changed)."""
        self.target = None

    def reload_if_changed(self, target: PreviewTarget | None, corpora_dir: Path | None) -> None:
        """After a refresh: read again only when the row shown now has different contents."""
        if target is not None and self.target is not None and target != self.target:
            self.load(target, corpora_dir)

    def load(self, target: PreviewTarget | None, corpora_dir: Path | None) -> None:
        """Show ``target``'s items; ``corpora_dir`` None (data directory unusable) shows only its name."""
        self.target = target
        self._reading.drop()
        if target is None:
            self.strip.show_items([])
            self.label.setText(NOTHING_SELECTED)
            return
        name, sid, label, _known = target
        self.label.setText(f"{label}…")
        if corpora_dir is None:
            return

        def show(result: tuple[list[Any], int, list[Any]]) -> None:
            items, total, keys = result
            self.strip.show_items(items, keys)
            if total == 0:
                self.label.setText(f"{label}: nothing indexed yet")
            elif len(items) < total:
                self.label.setText(f"{label} · first {len(items)} of {total} items")
            else:
                self.label.setText(f"{label} · {total} item{'s' if total != 1 else ''}")

        self._reading.start(
            run_call,
            _read_with_keys,
            corpora_dir / name,
            sid,
            self.LIMIT,
            on_done=self._guard(show),
            on_error=self._guard(lambda _exc: None),  # removed meanwhile: the refresh will say so
        )


def _read_with_keys(corpus_dir: Path, sid: int | None, limit: int) -> tuple[list[Any], int, list[Any]]:
    """(Pool.) The items to show, their total, and their thumbnail cache keys."""
    items, total = read_items(corpus_dir, sid, limit)
    return items, total, item_keys(items)

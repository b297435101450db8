"""The indexing banner under the corpora tree: what is being indexed, how far, what is queued, and a
Cancel button (everything indexed so far is kept)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QWidget

from vrag_desktop.core.corpus.status import progress_text
from vrag_desktop.core.progress import Progress
from vrag_desktop.qt.corpora.corpora_rows import line_icon
from vrag_desktop.qt.corpora.corpora_states import Banner
from vrag_desktop.qt.infra.theme import color


class IndexingProgress(Banner):
    """Label, bar and Cancel; hidden while nothing is being indexed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("banner-info", parent)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(8)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop indexing; everything indexed so far is kept")
        self.restyle()
        row.addWidget(self.bar, 1)
        row.addWidget(self.cancel_button)
        self.box.addLayout(row)

    def restyle(self) -> None:
        self.cancel_button.setIcon(line_icon("stop", color("error")))

    def started(self, name: str) -> None:
        """A job began: a busy bar until the first batch says how many items there are."""
        self.show()
        self.bar.setRange(0, 0)
        self.label.setText(f"<b>Indexing {html.escape(name)}…</b>")
        self.cancel_button.setEnabled(True)

    def show_progress(self, name: str, p: Progress, queued: int) -> None:
        head, _, rest = progress_text(name, p).partition(" · ")
        if queued:
            rest += (" · " if rest else "") + f"{queued} more queued"
        muted = color("muted").name()
        self.label.setText(
            f"<b>{html.escape(head)}</b>"
            + (f"<br><span style='color:{muted}'>{html.escape(rest)}</span>" if rest else "")
        )
        if p.phase == "index" and p.total > 0:
            self.bar.setRange(0, p.total)
            self.bar.setValue(min(p.done, p.total))
        else:
            self.bar.setRange(0, 0)

    def set_busy(self, busy: bool) -> None:
        self.setVisible(busy)
        if not busy:
            self.bar.setRange(0, 1)
            self.bar.setValue(0)

    def stopping(self) -> None:
        """Cancel was pressed: say so until the current batch ends."""
        self.cancel_button.setEnabled(False)
        self.label.setText("<b>Stopping after the current batch…</b>")

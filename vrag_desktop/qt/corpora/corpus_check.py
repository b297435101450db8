"""Check… and Repair in the Corpora panel: the app's ``vrag-desktop corpus check NAME [--repair]``.

The check (:func:`~vrag_desktop.core.corpus.integrity.check_corpus`, a reader that reads every byte
of the index) runs on the worker pool; its report shows in a banner at the top of the panel, not a
dialog, so nothing waits on the person. When something is damaged the banner offers **Repair**: the
ordinary indexing job with ``repair=True`` through the panel's :class:`Indexer`, after which the
corpus is checked again and the banner says what was mended and whether anything is left.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from vrag_desktop.qt.corpora.corpora_states import Banner
from vrag_desktop.qt.infra.errors import describe
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.theme import set_role

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.integrity import CheckReport
    from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel

#: How a manifest written by a newer app is described (core/corpus/manifest.py, status.py): that is
#: not damage, and a rebuild would set the newer app's corpus aside, so Repair is not offered.


class CheckBanner(Banner):
    """The report of the last check: verdict in bold, the details, then Repair (when something is
    damaged) and Close."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("banner-info", parent)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.repair_button = QPushButton("Repair")
        self.repair_button.setToolTip("Drop the damaged index files and embed their items again")
        self.close_button = QPushButton("Close")
        row.addWidget(self.repair_button)
        row.addWidget(self.close_button)
        self.box.addLayout(row)
        self.close_button.clicked.connect(self.hide)

    def say(self, tone: str, title: str, lines: Iterable[str] = (), *, repair: bool = False) -> None:
        """Show ``title`` (bold) over ``lines`` in a banner of ``tone`` (info / warn / error)."""
        set_role(self, "role", f"banner-{tone}")
        # the report's indented lines (one per damaged file) as a list; all of it a little smaller
        # than the verdict, so the banner leaves the corpus list room
        body = "<br>".join(
            ("• " if line[:1].isspace() else "") + html.escape(line.strip()) for line in lines if line.strip()
        )
        small = f"<br><span style='font-size:9pt'>{body}</span>" if body else ""
        self.label.setText(f"<b>{html.escape(title)}</b>{small}")
        self.repair_button.setVisible(repair)
        self.repair_button.setEnabled(repair)
        self.show()


class CorpusChecker:
    """Runs checks and repairs for the panel and keeps its banner up to date (one corpus at a time:
    a new check replaces the one before)."""

    def __init__(self, panel: CorporaPanel, banner: CheckBanner) -> None:
        self.panel = panel
        self.banner = banner
        self.name: str | None = None  # the corpus the banner is about
        self.repairing: str | None = None  # the corpus a Repair was asked for, until its job ends
        self._repaired: list[str] = []
        self.last: CheckReport | None = None
        self._slot = TaskSlot()
        banner.repair_button.clicked.connect(lambda _=False: self.repair())
        banner.close_button.clicked.connect(lambda _=False: self._forget())
        ix = panel.indexer
        ix.repaired.connect(self._on_repaired)
        ix.jobEnded.connect(self._on_job_ended)
        panel.viewRefreshed.connect(self._on_refreshed)

    def check(self, name: str | None = None) -> None:
        """Read corpus ``name`` (else the selected one) whole, off the GUI thread; show the report."""
        name = name or self.panel.selected_corpus()
        if name is None:
            self.panel.hint.setText("Select a corpus to check.")
            return
        self.name = name
        self.banner.say("info", f"Checking '{name}'…", ["Reading every byte of its index and manifest."])
        self._start(name, None)

    def repair(self) -> None:
        """Queue the repair job for the corpus the banner reports on."""
        name = self.name
        if name is None:
            return
        self.repairing = name
        self._repaired = []
        self.panel.indexer.enqueue(name, repair=True)
        self.banner.say(
            "info",
            f"Repairing '{name}'…",
            ["Damaged index files are set aside and their items embedded again; progress shows below."],
        )

    # ---------------------------------------------------------------- results
    def _start(self, name: str, repaired: list[str] | None) -> None:
        """Check ``name``; ``repaired``: after a repair job, with what it mended."""
        from vrag_desktop.core.corpus.integrity import check_corpus

        lib = self.panel.ctx.library
        self._slot.start(
            run_call,
            check_corpus,
            lib,
            name,
            on_done=lambda report: self._show(report, repaired),
            on_error=lambda exc: self._failed(name, exc),
        )

    def _show(self, report: CheckReport, repaired: list[str] | None) -> None:
        if report.name != self.name:
            return
        self.last = report
        self._reveal(report.name)
        lines = report.lines()
        if repaired is not None:
            verdict = "nothing is left damaged." if report.ok else "something is still damaged."
            title = (
                f"Repaired '{report.name}': {verdict}"
                if repaired
                else f"'{report.name}' after the repair: {verdict}"
            )
            details = [f"  mended {line}" for line in repaired] + ([] if report.ok else lines)
            self.banner.say("info" if report.ok else "error", title, details, repair=not report.ok)
            return
        if report.ok:
            self.banner.say("info", lines[0], lines[1:])
            return
        newer = report.newer is not None
        if report.indexing and not newer:
            lines.append("It is being indexed right now; check again once that is done.")
        self.banner.say("warn" if newer else "error", lines[0], lines[1:], repair=not newer)

    def _reveal(self, name: str) -> None:
        """The corpus the report is about, selected now and scrolled into view once the banner has
        taken its room from the list (the layout settles on the next turn of the event loop)."""
        item = self.panel.corpus_item(name)
        if item is None or name != self.name:
            return
        self.panel.tree.setCurrentItem(item)
        QTimer.singleShot(0, lambda: self._scroll_to(name))

    def _scroll_to(self, name: str) -> None:
        item = self.panel.corpus_item(name)
        if item is not None:
            self.panel.tree.scrollToItem(item)

    def _failed(self, name: str, exc: BaseException) -> None:
        if name == self.name:
            self.banner.say("error", f"Could not check '{name}'", [describe(exc)])

    def _on_repaired(self, name: str, lines: list[str]) -> None:
        if name == self.repairing:
            self._repaired += lines

    def _on_job_ended(self, name: str, outcome: str) -> None:
        if name != self.repairing:
            return
        self.repairing = None
        if name != self.name:
            return
        if outcome == "done":
            self.banner.say("info", f"Checking '{name}' again…")
            self._start(name, list(self._repaired))
        else:
            why = "it was stopped" if outcome == "cancelled" else "see the messages for why"
            self.banner.say(
                "error",
                f"The repair of '{name}' did not finish ({why}).",
                ["Press Repair to try again."],
                repair=True,
            )

    def _on_refreshed(self) -> None:
        """A corpus the banner is about that was renamed or removed: the report no longer applies."""
        name = self.name
        if name is not None and name != self.repairing and name not in self.panel.tree.summaries:
            self._forget()
            self.banner.hide()

    def _forget(self, *_: Any) -> None:
        self._slot.drop()
        self.name = None

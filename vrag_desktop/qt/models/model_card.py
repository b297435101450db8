"""One model in the Models view: what it is, its size and licence, whether it fits this machine,
where it stands here, a download's progress, and the buttons that act on it.

Why a card of plain widgets: a download's progress reaches one card a few times a second; labels
and a progress bar redraw in Qt's own code (docs/threading.md: no Python in paint or layout).
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core.models import DownloadProgress, Fit, ModelRow, human_bytes
from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.models.downloads import CHECKING, DOWNLOADING, STOPPING, Active
from vrag_desktop.qt.models.texts import (
    KIND_TEXT,
    VERDICT_CHIP,
    VERDICT_TEXT,
    fit_tooltip,
    progress_text,
    size_text,
    state_text,
)

_ACTIVE_STATE = {CHECKING: "Looking it up…", DOWNLOADING: "Downloading…", STOPPING: "Stopping…"}
_LEVEL_ROLE = {"ok": "ok", "info": "muted", "warn": "warn", "error": "error"}
BAR_STEPS = 1000


def _label(parent: QWidget, name: str, *, wrap: bool = False, selectable: bool = False) -> QLabel:
    label = QLabel(parent)
    label.setObjectName(name)
    label.setWordWrap(wrap)
    if selectable:  # people copy ids, paths and error messages
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class ModelCard(QFrame):
    """See the module docstring. The view fills it with :meth:`show_row` and :meth:`show_progress`;
    the buttons ask the view (``downloadRequested(spec)``, ``pauseRequested()``,
    ``cancelRequested(row)``, ``useRequested(row)``, ``deleteRequested(row)``)."""

    downloadRequested = Signal(str)
    pauseRequested = Signal()
    cancelRequested = Signal(object)
    useRequested = Signal(object)
    deleteRequested = Signal(object)

    def __init__(self, row: ModelRow, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.row = row
        self.title = _label(self, "modelTitle")
        self.recommended = _label(self, "modelRecommended")
        set_role(self.recommended, "chip", "accent")
        self.recommended.setText("★ Recommended")
        self.in_use = _label(self, "modelInUse")
        set_role(self.in_use, "chip", "ok")
        self.fit = _label(self, "modelFit")
        self.details = _label(self, "modelDetails", wrap=True, selectable=True)
        set_role(self.details, "role", "muted")
        self.why = _label(self, "modelWhy", wrap=True)  # the verdict's first reason, in words
        set_role(self.why, "role", "hint")
        self.note = _label(self, "modelNote", wrap=True)
        set_role(self.note, "role", "hint")
        self.state = _label(self, "modelState")
        self.bar = QProgressBar(self)
        self.bar.setObjectName("modelProgress")
        self.bar.setRange(0, BAR_STEPS)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.line = _label(self, "modelLine", wrap=True, selectable=True)

        self.download_button = self._button("Download", "downloadModel")
        self.pause_button = self._button("Pause", "pauseModel")
        self.cancel_button = self._button("Cancel", "cancelModel")
        self.use_button = self._button("Serve…", "useModel")
        self.delete_button = self._button("Delete", "deleteModel")
        self.download_button.clicked.connect(lambda: self.downloadRequested.emit(self.spec))
        self.pause_button.clicked.connect(self.pauseRequested)
        self.cancel_button.clicked.connect(lambda: self.cancelRequested.emit(self.row))
        self.use_button.clicked.connect(lambda: self.useRequested.emit(self.row))
        self.delete_button.clicked.connect(lambda: self.deleteRequested.emit(self.row))

        head = QHBoxLayout()
        for w in (self.title, self.recommended, self.in_use):
            head.addWidget(w)
        head.addStretch(1)
        head.addWidget(self.fit)
        actions = QHBoxLayout()
        actions.addWidget(self.state, 1)
        for b in (
            self.download_button,
            self.pause_button,
            self.cancel_button,
            self.use_button,
            self.delete_button,
        ):
            actions.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(4)
        lay.addLayout(head)
        lay.addWidget(self.details)
        lay.addWidget(self.why)
        lay.addWidget(self.note)
        lay.addLayout(actions)
        lay.addWidget(self.bar)
        lay.addWidget(self.line)

    def _button(self, text: str, name: str) -> QPushButton:
        b = QPushButton(text, self)
        b.setObjectName(name)
        b.setAutoDefault(False)
        return b

    @property
    def spec(self) -> str:
        """What a download of this row asks the hub for (a folder's row has no hub id)."""
        return self.row.id

    # ---- filling
    def show_row(
        self,
        row: ModelRow,
        *,
        active: Active | None = None,
        message: tuple[str, str] | None = None,
        discarding: bool = False,
        other_busy: bool = False,
        in_use: str = "",
        sized: bool = True,
    ) -> None:
        """Show ``row`` as the list has it, with the download under way (``active``), the last
        outcome (``message``: level, sentence), and whether another download holds the one slot.
        ``sized``: False for a hub id typed in, not looked up yet (no size, no verdict)."""
        self.row = row
        fit = active.inspection.fit if active is not None and active.inspection is not None else row.fit
        self.title.setText(f"<b>{html.escape(row.title)}</b>")
        self.recommended.setVisible(bool(row.entry and row.entry.recommended))
        self.in_use.setVisible(bool(in_use))
        self.in_use.setText(in_use)
        self._show_fit(fit if sized or (active is not None and active.inspection is not None) else None)
        self._show_details(row, active)
        note = row.problem or (row.entry.note if row.entry is not None else "")
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.state.setText(
            state_text(row) if active is None else _ACTIVE_STATE.get(active.phase, "Downloading…")
        )
        self._show_buttons(row, active, discarding, other_busy)
        self._show_line(row, active, message, discarding)

    def _show_fit(self, fit: Fit | None) -> None:
        reason = fit.reasons[0] if fit is not None and fit.reasons else ""
        self.why.setText(reason[:1].upper() + reason[1:] + "." if reason else "")
        self.why.setVisible(bool(reason))
        if fit is None:
            self.fit.setText("Fit: not known yet")
            set_role(self.fit, "chip", "muted")
            self.fit.setToolTip("Its size and architecture are read from the hub when the download starts.")
            return
        verdict = fit.verdict.value
        self.fit.setText(VERDICT_TEXT.get(verdict, verdict))
        set_role(self.fit, "chip", VERDICT_CHIP.get(verdict, "muted"))
        self.fit.setToolTip(fit_tooltip(fit))

    def _show_details(self, row: ModelRow, active: Active | None) -> None:
        parts = [row.id, KIND_TEXT.get(row.kind, "Model")]
        found = active.inspection if active is not None else None
        if found is not None:
            parts.append(
                f"{human_bytes(found.remote.total_bytes)} download ({len(found.remote.files)} files)"
            )
        elif row.state in ("available", "partial"):
            parts.append(size_text(row))
        if row.licence:
            parts.append(f"licence: {row.licence}")
        self.details.setText(" · ".join(parts))

    def _show_buttons(self, row: ModelRow, active: Active | None, discarding: bool, other_busy: bool) -> None:
        state = row.state
        running = active is not None
        hub = state in ("available", "partial") or (state == "downloaded" and running)
        self.download_button.setVisible(hub and not running)
        self.download_button.setText("Resume" if state == "partial" else "Download")
        self.download_button.setEnabled(not other_busy and not discarding)
        self.download_button.setToolTip(
            "One download at a time: pause the other one first" if other_busy else
            "Continue from what is already here" if state == "partial" else
            "Look up its real size, check that it fits, then download it"
        )  # fmt: skip
        self.pause_button.setVisible(running)
        self.pause_button.setEnabled(
            running and active is not None and active.phase not in (STOPPING, CHECKING)
        )
        self.pause_button.setToolTip(
            "Stop for now and keep what came: Resume continues (after a restart too)"
        )
        self.cancel_button.setVisible(running or state == "partial")
        self.cancel_button.setEnabled(
            not discarding and not (active is not None and active.phase == STOPPING)
        )
        self.cancel_button.setToolTip("Stop and delete what was downloaded of it")
        usable = state in ("builtin", "downloaded", "local") and not running
        self.use_button.setVisible(usable and row.kind in ("answer", "embedder"))
        if row.kind == "embedder":
            self.use_button.setText("Use for new corpora")
            self.use_button.setToolTip("Index new corpora with this embedder (Settings → Default embedder)")
        else:
            self.use_button.setText("Serve…")
            self.use_button.setToolTip(
                "Put it in the Runtime panel's Local vLLM server and go there to start it; once it is "
                "ready, Ask uses it"
            )
        self.delete_button.setVisible(state in ("downloaded", "local", "missing") and not running)
        self.delete_button.setText("Delete" if state == "downloaded" else "Remove from list")
        self.delete_button.setToolTip(
            "Delete its files from the models folder" if state == "downloaded" else
            "Forget this folder (its files are kept)"
        )  # fmt: skip
        self.delete_button.setEnabled(not discarding)

    def _show_line(
        self, row: ModelRow, active: Active | None, message: tuple[str, str] | None, discarding: bool
    ) -> None:
        if active is not None:
            self.bar.show()
            if active.phase == STOPPING:
                self._say("Cancelling…" if active.discard else "Pausing…", "info")
            elif active.progress is not None:
                self.show_progress(active.progress)
                return
            else:
                self.bar.setRange(0, 0)  # busy: looking it up
                self._say("Looking up its files and real size…", "info")
            return
        self.bar.setRange(0, BAR_STEPS)
        partial = row.partial if row.state == "partial" else None
        self.bar.setVisible(partial is not None)
        if partial is not None:
            self.bar.setValue(int(partial.fraction * BAR_STEPS))
        if discarding:
            self._say("Deleting the partial download…", "info")
        elif message is not None:
            self._say(message[1], message[0])
        elif partial is not None:
            self._say("Paused. Resume continues from what is here.", "info")
        else:
            self._say("", "info")

    def show_progress(self, p: DownloadProgress) -> None:
        """A progress report of this card's download (bytes, speed, time left, file)."""
        self.bar.show()
        if p.phase in ("resolve", "wait") or p.total <= 0:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, BAR_STEPS)
            self.bar.setValue(int(p.fraction * BAR_STEPS))
        self._say(progress_text(p), "info")

    def _say(self, text: str, level: str) -> None:
        self.line.setText(text)
        self.line.setVisible(bool(text))
        set_role(self.line, "role", _LEVEL_ROLE.get(level, "muted"))


__all__ = ["ModelCard"]

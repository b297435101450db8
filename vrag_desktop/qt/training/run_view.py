"""One training run, live: its state, plots, searchable log tail and sample trajectories.

Why polling: the trainer is another process (maybe started by an earlier session or a terminal)
and its run directory is the interface, so the view reads what was appended to ``metrics.jsonl``
and ``train.log`` about once a second, off the GUI thread (``tasks.run_call``), one poll in
flight at a time. Plots redraw on their own timer (see :mod:`.plots`), the log view batches lines.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.infra.tasks import Task, run_call
from vrag_desktop.qt.runtime.log_view import LogView
from vrag_desktop.qt.runtime.style import if_alive
from vrag_desktop.qt.training.plots import MetricPlots
from vrag_desktop.qt.training.run_files import Poll, SampleRow, list_samples, poll

POLL_MS = 1000
SAMPLES_EVERY_S = 5.0
STATUS_COLOURS = {
    "running": "#2563eb",
    "stopping": "#d97706",
    "finished": "#16a34a",
    "stopped": "#6b7280",
    "failed": "#dc2626",
    "interrupted": "#d97706",
}


class RunView(QWidget):
    """See the module docstring. Buttons emit requests; the panel acts on them."""

    stopRequested = Signal(object)  # run root (Path)
    resumeRequested = Signal(object)
    exportRequested = Signal(object)
    deleteRequested = Signal(object)
    openSampleRequested = Signal(object, str)  # samples root (Path), sample run id
    polled = Signal(object)  # the Poll just applied (the panel follows the state)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.root: Path | None = None
        self.state: dict[str, Any] = {}
        self.pid: int | None = None
        self.rows_seen = 0
        self._metrics_offset = 0
        self._log_offset: int | None = None
        self._poll_task: Task | None = None
        self._samples_at = 0.0
        self._busy = False  # a stop or launch from this app is in progress
        self._ours = False

        self.title = QLabel("No run selected")
        self.title.setStyleSheet("font-weight: 600;")
        self.status = QLabel("")
        self.status.setObjectName("trainingStatus")
        self.detail = QLabel("")
        self.detail.setObjectName("trainingDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop at the next step boundary (a checkpoint is kept), then kill")
        self.resume_button = QPushButton("Resume")
        self.resume_button.setToolTip("Go on from the last complete checkpoint")
        self.export_button = QPushButton("Export")
        self.export_button.setToolTip("Write the trained model to <run>/export (vLLM can serve it)")
        self.delete_button = QPushButton("Delete…")
        self.folder_button = QPushButton("Open folder")
        self.stop_button.clicked.connect(lambda: self._emit(self.stopRequested))
        self.resume_button.clicked.connect(lambda: self._emit(self.resumeRequested))
        self.export_button.clicked.connect(lambda: self._emit(self.exportRequested))
        self.delete_button.clicked.connect(lambda: self._emit(self.deleteRequested))
        self.folder_button.clicked.connect(self._open_folder)

        self.plots = MetricPlots(self)
        self.log_view = LogView(self, placeholder="The trainer's log appears here.")
        self.samples = QTreeWidget()
        self.samples.setObjectName("trainingSamples")
        self.samples.setHeaderLabels(["Step", "Reward", "Correct", "Agent", "Masked", "Question"])
        self.samples.setRootIsDecorated(False)
        self.samples.setToolTip("Double-click a sample to open it in the reasoning graph and evidence views")
        self.samples.itemDoubleClicked.connect(self._sample_activated)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.plots, "Plots")
        self.tabs.addTab(self.log_view, "Log")
        self.tabs.addTab(self.samples, "Samples")
        self.tabs.currentChanged.connect(lambda _i: self._refresh_samples(force=True))

        head = QHBoxLayout()
        head.addWidget(self.title)
        head.addWidget(self.status)
        head.addStretch(1)
        for b in (self.stop_button, self.resume_button, self.export_button, self.delete_button):
            head.addWidget(b)
        head.addWidget(self.folder_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
        lay.addWidget(self.detail)
        lay.addWidget(self.tabs, 1)

        self._timer = QTimer(self, interval=POLL_MS)
        self._timer.timeout.connect(self.poll_now)
        self.set_run(None)

    # ---------------------------------------------------------------- which run
    def set_run(self, root: Path | None) -> None:
        """Show ``root`` (None: nothing); the plots and log start over from its files."""
        if self._poll_task is not None:
            self._poll_task.cancel()
            self._poll_task = None
        self.root, self.state, self.pid, self.rows_seen = root, {}, None, 0
        self._metrics_offset, self._log_offset, self._samples_at = 0, None, 0.0
        self.plots.clear()
        self.log_view.clear()
        self.log_view.set_log_file(root / "train.log" if root else None)
        self.samples.clear()
        self.detail.setText("")
        self.title.setText(root.name if root else "No run selected")
        self._render()
        if root is None:
            self._timer.stop()
            return
        self._timer.start()
        self.poll_now()

    def set_busy(self, busy: bool, ours: bool = False) -> None:
        """A launch or stop from this app is under way (buttons follow); ``ours``: started here."""
        self._busy, self._ours = busy, ours
        self._render()

    def show_message(self, text: str, level: str = "info") -> None:
        """A run's outcome or a launch problem (a crash's classified reason), under the title."""
        colour = {"error": "#dc2626", "warning": "#d97706"}.get(level, "")
        self.detail.setStyleSheet(f"color: {colour};" if colour else "")
        self.detail.setText(text)
        if level == "error":
            self.tabs.setCurrentWidget(self.log_view)  # the log tail says the rest

    @property
    def running(self) -> bool:
        return self.pid is not None or self._ours

    # ---------------------------------------------------------------- polling
    def poll_now(self) -> None:
        """Read what the run appended (ignored while a poll is in flight)."""
        root = self.root
        if root is None or (self._poll_task is not None and not self._poll_task.done()):
            return
        self._poll_task = run_call(
            poll,
            root,
            self._metrics_offset,
            self._log_offset,
            name="Read training metrics",
            on_done=if_alive(self, lambda p: self._apply(root, p)),
            report=False,
        )

    def _apply(self, root: Path, p: Poll) -> None:
        if root != self.root:
            return  # another run was selected meanwhile
        if p.metrics_reset:
            self.plots.clear()
            self.rows_seen = 0
        self.rows_seen += self.plots.add_rows(p.rows)
        self._metrics_offset, self._log_offset = p.metrics_offset, p.log_offset
        if p.lines:
            self.log_view.append_lines(p.lines)
        self.state, self.pid = p.state, p.pid
        self._render(p.checkpoint)
        self._refresh_samples()
        self.polled.emit(p)

    def _refresh_samples(self, force: bool = False) -> None:
        root = self.root
        if root is None or self.tabs.currentWidget() is not self.samples:
            return
        if not force and time.monotonic() - self._samples_at < SAMPLES_EVERY_S:
            return
        self._samples_at = time.monotonic()
        run_call(
            list_samples,
            root / "samples",
            name="Read sample trajectories",
            on_done=if_alive(self, lambda rows: self._show_samples(root, rows)),
            report=False,
        )

    def _show_samples(self, root: Path, rows: list[SampleRow]) -> None:
        if root != self.root:
            return
        self.samples.clear()
        for r in rows:
            reward = "–" if r.reward is None else f"{r.reward:.3f}"
            correct = {True: "yes", False: "no"}.get(r.correct, "–") if r.correct is not None else "–"
            item = QTreeWidgetItem(
                [str(r.step), reward, correct, r.agent, str(r.masked) if r.masked else "", r.question]
            )
            item.setData(0, Qt.ItemDataRole.UserRole, r.run_id)
            self.samples.addTopLevelItem(item)

    def sample_count(self) -> int:
        return self.samples.topLevelItemCount()

    def open_sample(self, index: int) -> None:
        item = self.samples.topLevelItem(index)
        if item is not None:
            self._sample_activated(item, 0)

    def _sample_activated(self, item: QTreeWidgetItem, _col: int) -> None:
        if self.root is not None:
            self.openSampleRequested.emit(self.root / "samples", str(item.data(0, Qt.ItemDataRole.UserRole)))

    # ---------------------------------------------------------------- look
    @property
    def status_text(self) -> str:
        status = str(self.state.get("status", "")) if self.root else ""
        if self.pid is not None and status not in ("running", "stopping"):
            status = "running"
        elif self.pid is None and not self._ours and status in ("running", "stopping"):
            status = "interrupted"
        return status

    def _render(self, checkpoint: int | None = None) -> None:
        has = self.root is not None
        status = self.status_text
        step = self.state.get("step", 0)
        text = f"{status or '…'} · step {step}" if has else ""
        if checkpoint is not None:
            text += f" · checkpoint {checkpoint}"
        self.status.setText(text)
        colour = STATUS_COLOURS.get(status, "")
        self.status.setStyleSheet(f"color: {colour};" if colour else "")
        live = self.running or self._busy
        self.stop_button.setEnabled(has and live)
        self.resume_button.setEnabled(has and not live and status not in ("finished", ""))
        self.export_button.setEnabled(has and not live and status in ("finished", "stopped", "interrupted"))
        self.delete_button.setEnabled(has and not live)
        self.folder_button.setEnabled(has)

    def _emit(self, signal: Any) -> None:
        if self.root is not None:
            signal.emit(self.root)

    def _open_folder(self) -> None:
        if self.root is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.root)))

    def shutdown(self) -> None:
        self._timer.stop()
        if self._poll_task is not None:
            self._poll_task.cancel()

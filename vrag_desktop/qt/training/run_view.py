"""One training run, live: its state, plots, searchable log tail and sample trajectories.

Why polling: the trainer is another process (maybe started by an earlier session or a terminal)
and its run directory is the interface, so the view reads what was appended to ``metrics.jsonl``
and ``train.log`` about once a second, off the GUI thread (``tasks.run_call``), one poll in
flight at a time; on a timer only while on screen (or a Serve waits for its export): hidden, its
wake-ups would serve nobody and each is a GIL round-trip other threads delay. Showing it polls at
once (the offsets catch up). Plots redraw when rows come (:mod:`.plots`), the log batches lines.

"Serve…" (:mod:`.run_serving`) hands the run's exported model to the Runtime dock's one vLLM supervisor
(:meth:`VLLMSection.serve_model`) and, once the server is ready, keeps a ``local-vllm`` endpoint
profile named after the run pointing at it (:mod:`vrag_desktop.core.training.serve`); a start that
fails leaves no profile behind and its classified reason is shown here. A run with only a checkpoint
is exported first (the Export button's path), then served. The button is on only for a run with an
export or a complete checkpoint, and nothing working on it.

A run that validates (``validation.eval_steps``) shows its best validation under the buttons, with
"Export best", which exports that step's checkpoint instead of the last one (``export --best``), or
the warm start's weights when no validation beat them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.runs import Poll, SampleRow, effective_status, list_samples, poll, status_line
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.open_file import open_path
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.widgets import button
from vrag_desktop.qt.runtime.log_view import LogView
from vrag_desktop.qt.runtime.style import tone
from vrag_desktop.qt.training.best_row import BestRow
from vrag_desktop.qt.training.run_serving import SERVE_TIP, RunServing
from vrag_desktop.qt.training.screen_timer import PolledWidget, ScreenTimer

if TYPE_CHECKING:
    from vrag_desktop.core.training.validation import BestChoice
    from vrag_desktop.qt.training.plots import MetricPlots

POLL_MS = 1000
SAMPLES_EVERY_S = 5.0
#: A run's status -> the theme's tone for it (``QLabel[role=…]``: it follows a theme switch).
STATUS_TONES = {
    "running": "info",
    "stopping": "warn",
    "finished": "ok",
    "stopped": "muted",
    "failed": "error",
    "crashed": "warn",
}

#: The run's buttons' tooltips (Serve's is SERVE_TIP, which also says when it is off).
TIPS = {
    "stop": "Stop after the current step (a checkpoint is kept)",
    "resume": "Go on from the last complete checkpoint",
    "export": "Write the trained model to <run>/export (vLLM can serve it)",
}


class RunView(PolledWidget, RunServing):
    """See the module docstring. Buttons emit requests; the panel acts on them."""

    stopRequested = Signal(object)  # run root (Path)
    resumeRequested = Signal(object)
    exportRequested = Signal(object)
    exportBestRequested = Signal(object)  # the run whose best (or warm start) is to be exported
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
        self._polling = TaskSlot()  # one poll at a time, of the run shown
        self._sampling = TaskSlot()  # the newest reading of its samples wins
        self._samples_at = 0.0
        self._busy = False  # a stop or launch from this app is in progress
        self._ours = False
        self._init_serving()
        self.checkpoint: int | None = None  # the last complete checkpoint's step (polled)
        self.exported = False  # <run>/export exists (polled)
        self.best: BestChoice | None = None  # what "Export best" writes (polled)
        self._val_offset = 0

        self.title = QLabel("No run selected")
        self.title.setStyleSheet("font-weight: 600;")
        self.status = QLabel("")
        self.status.setObjectName("trainingStatus")
        self.detail = QLabel("")
        self.detail.setObjectName("trainingDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stop_button = button(self, "Stop", lambda: self._emit(self.stopRequested), tip=TIPS["stop"])
        self.resume_button = button(
            self, "Resume", lambda: self._emit(self.resumeRequested), tip=TIPS["resume"]
        )
        self.export_button = button(
            self, "Export", lambda: self._emit(self.exportRequested), tip=TIPS["export"]
        )
        self.serve_button = button(self, "Serve…", self.serve, tip=SERVE_TIP, name="trainingServe")
        self.delete_button = button(self, "Delete…", lambda: self._emit(self.deleteRequested))
        self.folder_button = button(self, "Open folder", self._open_folder)
        self.best_row = BestRow(self)
        self.best_row.exportBestRequested.connect(lambda: self._emit(self.exportBestRequested))

        self._plots: MetricPlots | None = None  # made when a run has rows (pyqtgraph: ~0.3-1 s to import)
        self._plots_live = True
        self._plots_slot = QWidget()  # the Plots tab until then
        self.log_view = LogView(self, placeholder="The trainer's log appears here.")
        self.samples = QTreeWidget()
        self.samples.setObjectName("trainingSamples")
        self.samples.setHeaderLabels(["Step", "Reward", "Correct", "Agent", "Masked", "Question"])
        self.samples.setRootIsDecorated(False)
        self.samples.setToolTip("Double-click a sample to open it in the reasoning graph and evidence views")
        self.samples.itemDoubleClicked.connect(self._sample_activated)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._plots_slot, "Plots")
        self.tabs.addTab(self.log_view, "Log")
        self.tabs.addTab(self.samples, "Samples")
        self.tabs.currentChanged.connect(lambda _i: self._refresh_samples(force=True))

        head = QHBoxLayout()
        head.addWidget(self.title)
        head.addWidget(self.status)
        head.addStretch(1)
        # two rows of three, so the dock stays narrow enough to share a 1280 px screen
        buttons = QGridLayout()
        order = (
            self.stop_button,
            self.resume_button,
            self.export_button,
            self.serve_button,
            self.delete_button,
            self.folder_button,
        )
        for i, b in enumerate(order):
            buttons.addWidget(b, i // 3, i % 3)
        buttons.setColumnStretch(3, 1)  # wide docks: the buttons keep their size, on the left
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
        lay.addLayout(buttons)
        lay.addWidget(self.best_row)
        lay.addWidget(self.detail)
        lay.addWidget(self.tabs, 1)

        self.poll_timer = ScreenTimer(self, POLL_MS, self.poll_now, self._wants_polls)
        self.set_run(None)

    @property
    def plots(self) -> MetricPlots:
        """The metric plots, made on first use: the window opens without importing pyqtgraph."""
        if self._plots is None:
            from vrag_desktop.qt.training.plots import MetricPlots

            self._plots = MetricPlots(self)
            self._plots.set_live(self._plots_live)
            current = self.tabs.currentIndex()
            self.tabs.blockSignals(True)
            self.tabs.removeTab(0)
            self.tabs.insertTab(0, self._plots, "Plots")
            self.tabs.setCurrentIndex(current)
            self.tabs.blockSignals(False)
            self._plots_slot.deleteLater()
        return self._plots

    # ---------------------------------------------------------------- which run
    def set_run(self, root: Path | None) -> None:
        """Show ``root`` (None: nothing); the plots and log start over from its files."""
        self._polling.drop()  # the run before's files are not heard any more
        self._sampling.drop()
        self.root, self.state, self.pid, self.rows_seen = root, {}, None, 0
        self.checkpoint, self.exported, self.best, self._val_offset = None, False, None, 0
        if self._serve_after_export != root:
            self._serve_after_export = None
        self._metrics_offset, self._log_offset, self._samples_at = 0, None, 0.0
        if self._plots is not None:
            self._plots.clear()
        self.log_view.clear()
        self.log_view.set_log_file(root / "train.log" if root else None)
        self.samples.clear()
        self.detail.setText("")
        self.title.setText(root.name if root else "No run selected")
        self._render()
        if root is None:
            self.poll_timer.stop()
            return
        self.poll_timer.follow()
        self.poll_now()

    def set_busy(self, busy: bool, ours: bool = False) -> None:
        """A launch or stop from this app is under way (buttons follow); ``ours``: started here."""
        self._busy, self._ours = busy, ours
        self._render()

    def show_message(self, text: str, level: str = "info") -> None:
        """A run's outcome or a launch problem (a crash's classified reason), under the title."""
        tone(self.detail, {"error": "error", "warning": "warn"}.get(level))
        self.detail.setText(text)
        if level == "error":
            self.tabs.setCurrentWidget(self.log_view)  # the log tail says the rest

    @property
    def running(self) -> bool:
        return self.pid is not None or self._ours

    # ---------------------------------------------------------------- polling
    def _wants_polls(self, on_screen: bool) -> bool:
        """On screen, or a Serve waits for the export that the polls find."""
        return self.root is not None and (on_screen or self._serve_after_export == self.root)

    def poll_now(self) -> None:
        """Read what the run appended (ignored while a poll is in flight)."""
        root = self.root
        if root is None or self._polling.running:
            return
        self._polling.start(
            run_call,
            poll,
            root,
            self._metrics_offset,
            self._log_offset,
            self._val_offset,
            name="Read training metrics",
            on_done=if_alive(self, lambda p: self._apply(root, p)),
            report=False,
        )

    def _apply(self, root: Path, p: Poll) -> None:
        if p.metrics_reset or p.val_reset:  # a resume truncated the run's metrics: plot from scratch
            if self._plots is not None:
                self._plots.clear()
            self.rows_seen = 0
            read_on = self._val_offset if p.metrics_reset else self._metrics_offset
            if not (p.metrics_reset and p.val_reset) and read_on:  # the other file: read again
                p.rows, p.val_rows, p.metrics_offset, p.val_offset = [], [], 0, 0
        if p.rows or p.val_rows:  # the plots are made for a run's first rows
            self.rows_seen += self.plots.add_rows(p.rows)
            self.plots.add_rows(p.val_rows)
        self._metrics_offset, self._log_offset, self._val_offset = (
            p.metrics_offset,
            p.log_offset,
            p.val_offset,
        )
        self.best = p.best
        if p.lines:
            self.log_view.append_lines(p.lines)
        self.state, self.pid = p.state, p.pid
        self.checkpoint, self.exported = p.checkpoint, p.exported
        self._render()
        self._refresh_samples()
        self._serve_when_exported(root)
        self.polled.emit(p)

    def _refresh_samples(self, force: bool = False) -> None:
        root = self.root
        if root is None or self.tabs.currentWidget() is not self.samples:
            return
        if not force and time.monotonic() - self._samples_at < SAMPLES_EVERY_S:
            return
        self._samples_at = time.monotonic()
        self._sampling.start(
            run_call,
            list_samples,
            root / "samples",
            name="Read sample trajectories",
            on_done=self._show_samples,
            report=False,
        )

    def _show_samples(self, rows: list[SampleRow]) -> None:
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
        if self.root is None:
            return ""
        if self.pid is None and self._ours:  # the app's own trainer, starting or ending: as recorded
            return str(self.state.get("status", ""))
        return effective_status(self.state, self.pid is not None)

    def _render(self) -> None:
        checkpoint = self.checkpoint
        has = self.root is not None
        status = self.status_text
        step = self.state.get("step", 0)
        text = f"{status or '…'} · step {step}" if has else ""
        if has and status == "crashed" and self.root is not None:  # and where a resume starts
            text = status_line(TrainRun(self.root), self.state, alive=False)
        if checkpoint is not None:
            text += f" · checkpoint {checkpoint}"
        self.status.setText(text)
        tone(self.status, STATUS_TONES.get(status))
        self._plots_live = status in ("running", "stopping", "")
        if self._plots is not None:
            self._plots.set_live(self._plots_live)
        live = self.running or self._busy
        self.stop_button.setEnabled(has and live)
        self.resume_button.setEnabled(has and not live and status not in ("finished", ""))
        self.export_button.setEnabled(has and not live and status in ("finished", "stopped", "crashed"))
        servable = self.exported or checkpoint is not None
        self.serve_button.setEnabled(has and not live and servable)
        self.serve_button.setToolTip(
            SERVE_TIP
            if servable or not has
            else "Nothing to serve yet: the run has no exported model and no complete checkpoint"
            if not live
            else "Serve once the trainer has stopped"
        )
        self.delete_button.setEnabled(has and not live)
        self.folder_button.setEnabled(has)
        self.best_row.show_best(self.best if has else None, has and not live)

    def _emit(self, signal: Any) -> None:
        if self.root is not None:
            signal.emit(self.root)

    def _open_folder(self) -> None:
        if self.root is not None:
            open_path(self, self.root, "the run's folder")

    def shutdown(self) -> None:
        self.poll_timer.stop()
        self._polling.cancel()

"""The Training dock: runs under ``<data>/training`` with their state, one run watched live, and
the controls of a run (new, stop, resume, export, delete).

Why this shape: a run is a directory the trainer process writes (see
:mod:`vrag_desktop.core.training.rundir`), so the list and the view only read files, off the GUI
thread, and work the same for a run this session started, one an earlier session left running
(found again through its ``process.json``) or one started from a terminal. Launching goes through
the supervisor in the trainer's own environment (:mod:`.launcher`); without that environment the
panel says so and offers to create it (:mod:`.env_box`).

The list is re-read every ``LIST_EVERY_MS`` only while the panel is on screen (its dock tab behind
another is not), and once when it comes on screen: it is what the person sees, and a hidden panel's
timer would wake the GUI thread for nobody (:mod:`.screen_timer`). Closing the app re-reads it.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.training import launch
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.runs import RunRow, remove_run, scan_runs
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import Task, TaskSlot, run_call
from vrag_desktop.qt.training.env_box import EnvBox
from vrag_desktop.qt.training.launcher import TrainerProcesses, stopping_text
from vrag_desktop.qt.training.run_view import RunView
from vrag_desktop.qt.training.screen_timer import PolledWidget, ScreenTimer

COLUMNS = ("Run", "Status", "Step", "Reward", "Started")
ROOT_ROLE = Qt.ItemDataRole.UserRole + 1
LIST_EVERY_MS = 3000


def confirm(parent: QWidget, title: str, text: str) -> bool:
    """Ask yes/no (tests replace this)."""
    answer = QMessageBox.question(parent, title, text)
    return answer == QMessageBox.StandardButton.Yes


def ask_on_close(parent: QWidget, names: list[str]) -> str:
    """``stop``, ``leave`` or ``cancel`` for trainings still running at quit (tests replace this)."""
    box = QMessageBox(parent)
    box.setWindowTitle("Trainings are running")
    box.setText(f"{len(names)} training run(s) are still going: {', '.join(names)}.")
    box.setInformativeText(
        "Leave them running (they are found again at the next start), or stop them at the next "
        "step boundary (a checkpoint is kept; resume goes on from it)?"
    )
    leave = box.addButton("Leave running", QMessageBox.ButtonRole.AcceptRole)
    stop = box.addButton("Stop them", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    clicked = box.clickedButton()
    return "leave" if clicked is leave else "stop" if clicked is stop else "cancel"


class TrainingPanel(PolledWidget):
    """See the module docstring."""

    openSampleRequested = Signal(object, str)  # samples root (a RunStore root), sample run id
    runsChanged = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.rows: list[RunRow] = []
        self._lines: list[tuple[tuple[str, ...], str, str]] = []  # what the list shows (see _show_rows)
        self.extra_roots: set[Path] = set()  # runs launched here outside <data>/training
        self._listing = TaskSlot()  # one reading of the run list at a time
        self._list_again = False  # a refresh asked for while one was reading: read once more after it
        self._want: Path | None = None  # select this run once the list has it
        self.messages: dict[Path, tuple[str, str]] = {}  # a run's last outcome or launch line, shown again
        self.processes = TrainerProcesses(self)
        self.env_box = EnvBox(ctx.layout.trainer_env)
        self.env_box.hide()
        self.env_box.created.connect(lambda _p: self.check_env())
        self.env_state = ""  # ready / missing / broken once checked

        self.new_button = QPushButton("New run…")
        self.new_button.setObjectName("newTrainingRun")
        self.file_button = QPushButton("From config file…")
        self.file_button.setToolTip("Launch a run from a config file, as 'vrag-desktop train grpo --config'")
        self.refresh_button = QPushButton("Refresh")
        self.file_button.clicked.connect(self.open_config_file)
        self.new_button.clicked.connect(self.new_run)
        self.refresh_button.clicked.connect(self.refresh)
        self.list = QTreeWidget()
        self.list.setObjectName("trainingRuns")
        self.list.setHeaderLabels(list(COLUMNS))
        self.list.setRootIsDecorated(False)
        self.list.currentItemChanged.connect(lambda cur, _prev: self._selected(cur))
        self.view = RunView()
        self.view.stopRequested.connect(self.stop_run)
        self.view.resumeRequested.connect(self.resume_run)
        self.view.exportRequested.connect(self.export_run)
        self.view.exportBestRequested.connect(lambda root: self.export_run(root, best=True))
        self.view.deleteRequested.connect(self.delete_run)
        self.view.openSampleRequested.connect(self.openSampleRequested)
        self.view.polled.connect(lambda _p: self._follow_view())
        self.processes.ended.connect(self._ended)
        self.processes.stopDone.connect(self._stop_done)

        bar = QHBoxLayout()
        bar.addWidget(self.new_button)
        bar.addWidget(self.file_button)
        bar.addWidget(self.refresh_button)
        bar.addStretch(1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.list)
        split.addWidget(self.view)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 4)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.env_box)
        lay.addLayout(bar)
        lay.addWidget(split, 1)
        self.poll_timer = ScreenTimer(self, LIST_EVERY_MS, self.refresh)  # runs while on screen
        self.check_env()
        self.refresh()

    # ---------------------------------------------------------------- the list
    @property
    def training_root(self) -> Path:
        return self.ctx.layout.training

    def refresh(self) -> None:
        """Re-read the run list (off the GUI thread); a run still alive shows as running. Asked while
        a reading is under way, it reads again after it (no timer may come to catch up)."""
        if self._listing.running:
            self._list_again = True
            return
        self._list_again = False
        self._listing.start(
            run_call,
            scan_runs,
            self.training_root,
            tuple(self.extra_roots),
            name="Read training runs",
            on_done=self._show_rows,
            on_end=self._listed,
            error_title="Could not read the training runs",
        )

    def _listed(self) -> None:
        if self._list_again:
            self.refresh()

    def _show_rows(self, rows: list[RunRow]) -> None:
        """The list as read; rebuilt only when a line of it changed. Why: it is read every few
        seconds while on screen and at once when the dock is raised, and rebuilding every item (with
        the re-layout and repaint that follow) was work on the GUI thread at each tab switch for a
        list that had mostly not changed."""
        self.rows = rows
        current = self.view.root
        want = self._want or current
        lines = [self._line(r) for r in rows]
        changed = lines != self._lines
        if changed:
            self._lines = lines
            self.list.blockSignals(True)
            self.list.clear()
            for texts, tip, root in lines:
                item = QTreeWidgetItem(list(texts))
                item.setData(0, ROOT_ROLE, root)
                item.setToolTip(0, tip)
                self.list.addTopLevelItem(item)
            self.list.blockSignals(False)
        pick = next(
            (
                self.list.topLevelItem(i)
                for i, (_t, _tip, root) in enumerate(lines)
                if want is not None and root == str(want)
            ),
            None,
        )
        if pick is not None:
            if self.list.currentItem() is not pick:
                self.list.setCurrentItem(pick)
            if pick.data(0, ROOT_ROLE) != str(current):
                self._selected(pick)
            self._want = None
        elif current is None and (first := self.list.topLevelItem(0)) is not None:
            self.list.setCurrentItem(first)
        if changed:
            self.runsChanged.emit()

    def _line(self, r: RunRow) -> tuple[tuple[str, ...], str, str]:
        """A run's line in the list: its column texts, tooltip and root."""
        status = r.status
        if self.processes.is_ours(r.root) and status in ("created", "crashed", "stopped", "failed"):
            status = "starting"
        if r.root in self.processes.stopping and status == "running":
            status = "stopping"
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)) if r.started else ""
        reward = "" if r.reward is None else f"{r.reward:.3f}"
        tip = str(r.root) + (f"\n{r.error}" if r.error else "")
        return (r.name, status, str(r.step), reward, started), tip, str(r.root)

    def row(self, root: Path) -> RunRow | None:
        return next((r for r in self.rows if r.root == root), None)

    def _selected(self, item: QTreeWidgetItem | None) -> None:
        root = Path(item.data(0, ROOT_ROLE)) if item is not None else None
        if root != self.view.root:
            self.view.set_run(root)
            if root in self.messages:
                self.view.show_message(*self.messages[root])
            self._follow_view()

    def select(self, root: Path) -> None:
        self._want = Path(root)
        self.refresh()

    def _follow_view(self) -> None:
        root = self.view.root
        ours = root is not None and self.processes.is_ours(root)
        self.view.set_busy(root is not None and root in self.processes.stopping, ours)

    # ---------------------------------------------------------------- the trainer env
    def trainer_python(self) -> Path | None:
        """The trainer env's interpreter, or None with the banner offering to create it."""
        try:
            python = launch.resolve_trainer_python(self.ctx.layout.trainer_env)
        except launch.TrainerEnvMissing as exc:
            self.env_box.show_missing(str(exc))
            return None
        return python

    def check_env(self) -> Task | None:
        """Ask (off the GUI thread: it runs the env's interpreter) whether the trainer environment is
        ready, missing or broken; the banner follows (:attr:`env_state`)."""
        from vrag_desktop.core.training import preflight as pf

        if self.trainer_python() is None:
            self.env_state = "missing"
            return None

        def done(status: pf.EnvStatus) -> None:
            self.env_state = status.state
            if status.state == "broken":
                self.env_box.show_broken(status.message)
            elif status.state == "missing":
                self.env_box.show_missing(status.message)
            else:
                self.env_box.hide()

        return run_call(
            pf.env_status, self.ctx.layout.trainer_env, name="Check the trainer environment",
            on_done=if_alive(self, done), report=False,
        )  # fmt: skip

    # ---------------------------------------------------------------- launching
    def new_run(self) -> QDialog:
        """The New-run dialog (form, preview, pre-flight); its Start launches the run (a refusal is
        shown in the dialog, which stays open with its values)."""
        from vrag_desktop.qt.training.new_run_dialog import NewRunDialog

        dlg = NewRunDialog(self.ctx, self, launch=self.start_new)
        dlg.open()
        return dlg

    def open_config_file(self) -> None:
        """A run from a config file (as ``vrag-desktop train``), validated before anything runs."""
        path, _ = QFileDialog.getOpenFileName(
            self, "Training config", str(Path.home()), "Training config (*.json *.toml)"
        )
        if path:
            self.launch_config_file(Path(path))

    def launch_config_file(self, path: Path) -> Path | None:
        from vrag_desktop.core.training.config import ConfigError, load_config

        try:
            cfg = load_config(path)
        except (ConfigError, OSError, ValueError) as exc:
            error_sink().report("The training config is not valid", exc)
            return None
        return self.launch_new(cfg, cfg.resolved_output_dir(self.ctx.layout.root))

    def launch_new(self, cfg: TrainConfig, run_dir: Path) -> Path | None:
        """Start a new GRPO/GGPO run of ``cfg`` in ``run_dir``; returns the run directory (None:
        refused, said through the error sink)."""
        try:
            return self.start_new(cfg, run_dir)
        except launch.TrainLaunchError as exc:
            error_sink().report("Cannot start the training", str(exc))
            return None

    def start_new(self, cfg: TrainConfig, run_dir: Path) -> Path:
        """:meth:`launch_new` raising :class:`~launch.TrainLaunchError` with a person's message (the
        New-run dialog shows it and stays open, its values kept). The checks, the launch config and
        the command are :func:`core.training.plan.new_run`'s, as for ``vrag-desktop train``."""
        from vrag_desktop.core.training import plan
        from vrag_desktop.core.training.config import ConfigError

        python = self.trainer_python()
        if python is None:
            raise launch.TrainerEnvMissing(self.env_box.message.text().split("\n")[0])
        try:
            p = plan.new_run(cfg, Path(run_dir), python)
        except ConfigError as exc:  # a field refused (engine, gpus): named, as in the form
            raise launch.TrainLaunchError(str(exc)) from exc
        return self._start(p.run.root, p.argv, p.what)

    def resume_run(self, root: Path) -> Path | None:
        from vrag_desktop.core.training import plan
        from vrag_desktop.core.training.config import ConfigError
        from vrag_desktop.core.training.rundir import TrainRun

        python = self.trainer_python()
        if python is None:
            return None
        try:
            p = plan.resume_run(TrainRun(root), python)
        except (ConfigError, launch.TrainLaunchError) as exc:
            error_sink().report("Cannot resume the training", str(exc))
            return None
        return self._launch(root, p.argv, p.what)

    def export_run(self, root: Path, best: bool = False) -> Path | None:
        """Export the run's last checkpoint (``best``: its best validation's) to ``<run>/export``."""
        from vrag_desktop.core.training import plan
        from vrag_desktop.core.training.rundir import TrainRun

        python = self.trainer_python()
        if python is None:
            return None
        try:
            p = plan.export_run(TrainRun(root), python, best=best)
        except launch.TrainLaunchError as exc:  # no best checkpoint: said, nothing launched
            error_sink().report("Cannot export", str(exc))
            return None
        return self._launch(root, p.argv, p.what)

    def _launch(self, root: Path, argv: list[str], what: str) -> Path | None:
        try:
            return self._start(root, argv, what)
        except launch.TrainLaunchError as exc:
            error_sink().report("Cannot start the training", str(exc))
            return None

    def _start(self, root: Path, argv: list[str], what: str) -> Path:
        row = self.row(root)
        if (row is not None and row.pid is not None) or self.processes.is_ours(root):
            raise launch.TrainLaunchError(f"A trainer is already working on {root}.")
        try:
            self.processes.launch(root, argv, what)
        except OSError as exc:
            raise launch.TrainLaunchError(f"Could not start the trainer: {describe(exc)}") from exc
        if root.parent != self.training_root:
            self.extra_roots.add(root)
        self._message(root, f"{what}: {' '.join(argv[1:])}")
        self.select(root)
        self._follow_view()
        return root

    def _ended(self, root_text: str, outcome: str, message: str) -> None:
        root = Path(root_text)
        self._message(root, message, "error" if outcome in ("failed", "bad_input") else "info")
        if root == self.view.root:
            self._follow_view()
            self.view.poll_now()
        if outcome in ("failed", "bad_input"):
            error_sink().report(f"Training {root.name} failed", message)
        self.refresh()

    def _message(self, root: Path, text: str, level: str = "info") -> None:
        self.messages[root] = (text, level)
        if root == self.view.root:
            self.view.show_message(text, level)

    # ---------------------------------------------------------------- controls
    def stop_run(self, root: Path) -> Task:
        self._message(root, stopping_text(self.processes.grace_s))
        task = self.processes.stop(root)
        self._follow_view()
        return task

    def _stop_done(self, root_text: str, how: str) -> None:
        if how == "killed":
            self._message(
                Path(root_text),
                "The trainer did not finish its step in time and was ended by force; resume goes on "
                "from the last checkpoint.",
                "warning",
            )
        self._follow_view()
        self.refresh()

    def delete_run(self, root: Path) -> Task | None:
        """Delete a run after asking; refused while a trainer works on it."""
        row = self.row(root)
        if self.processes.is_ours(root) or (row is not None and row.pid is not None):
            error_sink().report("Cannot delete a running training", f"Stop {root.name} first.", "warning")
            return None
        if not confirm(self, "Delete training run", f"Delete {root} with its checkpoints and samples?"):
            return None
        if self.view.root == root:
            self.view.set_run(None)
        self.extra_roots.discard(root)
        return run_call(
            remove_run,
            root,
            name="Delete training run",
            on_end=self.refresh,
            error_title=f"Could not delete {root.name}",
        )

    # ---------------------------------------------------------------- quitting
    def running_roots(self) -> list[Path]:
        alive = {r.root for r in self.rows if r.pid is not None}
        return sorted(alive | set(self.processes.running()))

    def ask_close(self) -> str:
        """Before the window closes: ``stop``, ``leave`` (or ``cancel``); ``none`` when nothing runs.
        A hidden panel's list may be old (it is read only while shown): read it now."""
        if not self.poll_timer.isActive():
            with contextlib.suppress(OSError):
                self.rows = scan_runs(self.training_root, tuple(self.extra_roots))
        roots = self.running_roots()
        if not roots:
            return "none"
        return ask_on_close(self, [r.name for r in roots])

    def shutdown(self, choice: str = "leave", timeout_s: float = 30.0) -> None:
        """Stop polling; then stop the running trainings, or let them outlive the app."""
        self.poll_timer.stop()
        self._list_again = False
        self.view.shutdown()
        self.env_box.shutdown()
        if choice == "stop":
            for root in self.running_roots():
                self.processes.stopping.add(root)
            self.processes.stop_all(timeout_s, self.running_roots())
        else:
            self.processes.leave_running()

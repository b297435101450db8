"""The trainer environment's banner: shown when it is missing or broken, with a button that creates
(or re-creates) it.

Why: training needs TRL and accelerate (and vLLM on a GPU) in an environment of their own
(:mod:`vrag_desktop.core.runtime.trainer_env`); creating it takes minutes of pip, so it runs as a
cancellable generator task with its progress lines shown here, and the panel rechecks after.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core.progress import CancelToken
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.tasks import Task, TaskSlot, run_generator
from vrag_desktop.qt.runtime.style import advice_box


def make_env(target: Path, cancel: CancelToken, force: bool = False) -> Generator[str, None, Path]:
    """Create the trainer env at ``target``: without a GPU layered on this env (standalone in the
    frozen app), full with one;
    ``force``: again, over a broken one (its marker says ready but it does not import)."""
    from vrag_desktop.core.runtime.gpu import detect_gpus
    from vrag_desktop.core.runtime.trainer_env import create_trainer_env, default_mode

    report = detect_gpus()
    mode = default_mode(report.available)
    yield report.summary() if report.available else f"No GPU: a {mode} environment (CPU)"
    return (yield from create_trainer_env(target, mode=mode, cancel=cancel, force=force))


class EnvBox(QFrame):
    """See the module docstring. ``created(python)`` when the environment is ready."""

    created = Signal(str)

    def __init__(self, target: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.target = target
        self.creating = TaskSlot()
        self.broken = False  # the next creation re-creates (force)
        self.message = QLabel("")
        self.message.setObjectName("trainerEnvMessage")
        self.message.setWordWrap(True)
        self.progress = QLabel("")
        self.progress.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)
        self.bar.setMaximumHeight(10)
        self.create_button = QPushButton("Create the trainer environment")
        self.create_button.setObjectName("createTrainerEnv")
        self.cancel_button = QPushButton("Cancel")
        self.create_button.clicked.connect(self.create_env)
        self.cancel_button.clicked.connect(self.cancel)
        row = QHBoxLayout()
        row.addWidget(self.create_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.bar, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.message)
        lay.addLayout(row)
        lay.addWidget(self.progress)
        advice_box(self)  # the theme's warning box: readable in both themes
        self._idle()

    def show_missing(self, why: str) -> None:
        self._show(why, broken=False)

    def show_broken(self, why: str) -> None:
        """The environment exists but cannot run the trainer: offer to re-create it."""
        self._show(why, broken=True)

    def _show(self, why: str, broken: bool) -> None:
        self.broken = broken
        self.create_button.setText(
            "Re-create the trainer environment" if broken else "Create the trainer environment"
        )
        self.message.setText(
            f"{why}\n\nTraining runs in an environment of its own (TRL, accelerate; vLLM on a GPU). "
            f"{'Re-create' if broken else 'Create'} it here (several minutes; a few GB with a GPU) at "
            f"{self.target}, or from a terminal: vrag-desktop train env{' --force' if broken else ''}"
        )
        self.show()

    def _idle(self) -> None:
        running = self.creating.running
        self.create_button.setEnabled(not running)
        self.cancel_button.setVisible(running)
        self.bar.setVisible(running)

    def create_env(self) -> Task:
        target, force = self.target, self.broken
        task = self.creating.start(
            run_generator,
            lambda token: make_env(target, token, force),
            "Trainer environment",
            nice=10,
            on_progress=self._progress,
            on_done=self._done,
            on_error=if_alive(self, lambda exc: self.progress.setText(f"Could not create it: {exc}")),
            on_cancelled=if_alive(
                self,
                lambda: self.progress.setText(
                    "Cancelled: the environment is incomplete; create it again to finish it."
                ),
            ),
            on_end=self._idle,
            report=False,
        )
        self._idle()
        return task

    def cancel(self) -> None:
        self.creating.cancel()

    def _progress(self, value: Any) -> None:
        self.progress.setText(str(value))

    def _done(self, python: Any) -> None:
        self.progress.setText(f"Trainer environment ready: {python}")
        self.hide()
        self.created.emit(str(python))

    def shutdown(self) -> None:
        self.creating.cancel()
        self.creating.wait(5)

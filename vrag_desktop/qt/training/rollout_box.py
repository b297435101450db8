"""The New-run dialog's rollout-server box: for a run whose rollouts come from the app's vLLM server
(``vllm_mode: app_server``), whether that server runs with what the run needs, and one button that
starts it (or restarts it) through the Runtime dock's own vLLM section with the right flags.

Why through the Runtime dock: one supervisor owns the app's vLLM process (its log, stop, crash
report, the Local vLLM profile); the flags come from :mod:`vrag_desktop.core.training.rollout_server`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QApplication, QFrame, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.core.training.rollout_server import (
    CANNOT_START,
    needs_rollout_server,
    rollout_problem,
    rollout_settings,
)
from vrag_desktop.qt.runtime.style import BAD, MUTED, OK, advice_box, text_label, tone

if TYPE_CHECKING:
    from vrag_desktop.core.training.config import TrainConfig
    from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel
    from vrag_desktop.qt.runtime.vllm_section import VLLMSection


def find_runtime() -> RuntimePanel | None:
    """The app's Runtime dock panel (a top-level widget or inside one), None without one."""
    from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel

    for w in QApplication.topLevelWidgets():
        found = w if isinstance(w, RuntimePanel) else w.findChild(RuntimePanel)
        if found is not None:
            return found
    return None


class RolloutServerBox(QFrame):
    """See the module docstring. ``changed``: the server's state moved (the dialog re-validates)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rolloutServer")
        advice_box(self)
        self.label = text_label(self, "rolloutServerText")
        self.button = QPushButton("Start the rollout server", self)
        self.button.setObjectName("startRolloutServer")
        self.button.clicked.connect(self.start)
        lay = QVBoxLayout(self)
        lay.addWidget(self.label)
        lay.addWidget(self.button)
        self.setVisible(False)
        self.config: TrainConfig | None = None
        self.problem: str | None = None
        self._hooked: set[int] = set()
        self._restart = False  # stop asked by the button: start again once stopped

    def section(self) -> VLLMSection | None:
        panel = find_runtime()
        if panel is None:
            return None
        if id(panel.vllm) not in self._hooked:
            self._hooked.add(id(panel.vllm))
            panel.vllm.stateChanged.connect(self._state_changed)
        return panel.vllm

    def url(self) -> str:
        """The app's server's OpenAI base URL while it answers, else ""."""
        section = self.section()
        server = section.server if section is not None else None
        ready = section is not None and section.status is ProcessStatus.READY
        return server.base_url if server is not None and ready else ""

    def update_for(self, cfg: TrainConfig | None) -> str | None:
        """Show what the run ``cfg`` needs; returns why Start must wait (None: nothing)."""
        self.config = cfg
        if cfg is None or not needs_rollout_server(cfg):
            self.setVisible(False)
            self.problem = None
            return None
        self.setVisible(True)
        section = self.section()
        if section is None:
            self.problem = "the Runtime dock is not available to start the rollout server"
        elif section.starting or self._restart:
            self.problem = "the rollout server is starting"
        else:
            server = section.server
            ready = section.status is ProcessStatus.READY
            self.problem = rollout_problem(cfg, server.config if server is not None else None, ready)
        busy = section is not None and section.busy
        startable = not (self.problem or "").startswith(CANNOT_START)
        self.button.setVisible(self.problem is not None and section is not None and startable)
        self.button.setEnabled(section is not None and not section.starting and not self._restart)
        self.button.setText("Restart the rollout server for this run" if busy else "Start the rollout server")
        if self.problem is None:
            self.label.setText(f"Rollouts: the app's vLLM server at {self.url()} (LoRA loaded each step).")
            tone(self.label, OK)
        elif section is not None and (section.starting or self._restart):
            self.label.setText("Starting the rollout server (the Runtime dock shows its log)…")
            tone(self.label, MUTED)
        else:
            self.label.setText(self.problem[0].upper() + self.problem[1:] + ".")
            tone(self.label, BAD)
        return self.problem

    def start(self) -> bool:
        """Start the server with the run's flags (stopping a running one first)."""
        section, cfg = self.section(), self.config
        if section is None or cfg is None:
            return False
        if section.busy:
            self._restart = section.stop()
            self.changed.emit()
            return self._restart
        try:
            settings = rollout_settings(section.settings(), cfg)
        except ValueError as exc:  # nothing to serve before the run starts (said by update_for)
            self.label.setText(str(exc))
            return False
        ok = section.start_with(settings)
        self.changed.emit()
        return ok

    def _state_changed(self) -> None:
        section = self.section()
        if self._restart and section is not None and not section.busy:
            self._restart = False
            self.start()
            return
        self.changed.emit()

"""Servers left running by an earlier session, offered for stopping when the app starts.

Why: an app that was killed (or a ``vrag-desktop runtime start`` from a terminal) can leave a vLLM
server holding the GPU. The core finds them through their state files
(:func:`~vrag_desktop.core.runtime.state.live_processes`, which never mistakes another program for
one of ours); this notice says so without blocking anything, and offers Stop (the whole process
tree, off the GUI thread) or Keep (leave it running and point the Local vLLM profile at it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core.runtime.settings import runtime_dir
from vrag_desktop.core.runtime.state import live_processes
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.runtime.style import advice_box, text_label

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.state import RecordedProcess

_STOP_REASON = "stopped when VRAG Desktop started (left over from an earlier session)"


def _stop_each(found: list[RecordedProcess]) -> list[str]:
    """Stop every one (their trees too); the sentences about any that survived."""
    problems = []
    for rec in found:
        left = rec.stop(grace=10.0, reason=_STOP_REASON)
        if left:
            problems.append(f"{rec.describe()}: still alive after SIGKILL: {left}")
    return problems


class LeftoverNotice(QFrame):
    """The warning notice at the top of the runtime panel; hidden while there is nothing to say."""

    found = Signal(int)  # how many servers of earlier sessions are still running (after a scan)
    kept = Signal(str, str)  # base URL, served model name of a kept vLLM server
    stopped = Signal()

    def __init__(self, data_dir: str | os.PathLike[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data_dir = data_dir
        self._found: list[RecordedProcess] = []
        self.setObjectName("leftovers")
        advice_box(self)
        self.label = text_label(self, "leftoversText")
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setObjectName("stopLeftovers")
        self.stop_button.setToolTip("Stop them and every process they started (frees the GPU)")
        self.keep_button = QPushButton("Keep", self)
        self.keep_button.setObjectName("keepLeftovers")
        self.keep_button.setToolTip("Leave them running; the Local vLLM profile points at the server")
        self.stop_button.clicked.connect(self.stop_all)
        self.keep_button.clicked.connect(self.keep)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.keep_button)
        buttons.addWidget(self.stop_button)
        v = QVBoxLayout(self)
        v.setContentsMargins(8, 6, 8, 6)
        v.addWidget(self.label)
        v.addLayout(buttons)
        self.setVisible(False)

    @property
    def processes(self) -> list[RecordedProcess]:
        return list(self._found)

    def scan(self) -> None:
        """Look for them off the GUI thread (a stale file may mean stopping a dead server's workers)."""
        folder = runtime_dir(self.data_dir)
        run_call(
            lambda: live_processes(folder, others_only=True),
            name="Looking for servers left running",
            on_done=if_alive(self, self._show),
            error_title="Could not look for servers left running",
        )

    def _show(self, found: list[RecordedProcess]) -> None:
        self._found = list(found)
        if not found:
            self.setVisible(False)
            return
        n = len(found)
        lines = "\n".join(f"• {rec.describe()}" for rec in found)
        self.label.setText(
            f"{'A server' if n == 1 else f'{n} servers'} from an earlier session "
            f"{'is' if n == 1 else 'are'} still running:\n{lines}\n"
            "Stop frees the GPU; Keep leaves it running and uses it for questions."
        )
        self.stop_button.setEnabled(True)
        self.keep_button.setEnabled(True)
        self.setVisible(True)
        self.found.emit(n)

    def stop_all(self) -> None:
        """Stop every listed server and its workers (off the GUI thread)."""
        found = self._found
        if not found:
            return
        self.stop_button.setEnabled(False)
        self.keep_button.setEnabled(False)
        self.label.setText(f"Stopping {len(found)} server{'s' if len(found) > 1 else ''}…")

        def done(problems: list[str]) -> None:
            self._found = []
            if problems:
                error_sink().report("Some servers did not stop", "\n".join(problems))
            self.setVisible(False)
            self.stopped.emit()

        def failed(exc: BaseException) -> None:
            self.label.setText(f"Stopping failed: {describe(exc)}")
            self.stop_button.setEnabled(True)
            self.keep_button.setEnabled(True)

        run_call(
            _stop_each,
            list(found),
            name="Stopping servers left running",
            on_done=if_alive(self, done),
            on_error=if_alive(self, failed),
        )

    def keep(self) -> None:
        """Leave them running; a vLLM server among them becomes the Local vLLM endpoint."""
        served = next((rec for rec in self._found if rec.state.get("base_url")), None)
        self._found = []
        self.setVisible(False)
        if served is not None:
            model = served.state.get("served_model_name") or served.state.get("model") or ""
            self.kept.emit(str(served.state["base_url"]), str(model))

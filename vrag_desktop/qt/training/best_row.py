"""The best validation of a run and its export, under the run view's buttons.

Why a row of its own: only a run that validates (``validation.eval_steps``) has a best step, and
what to export then is a choice (the last checkpoint or the best one), so the row shows what
"Export best" writes (core's :func:`~vrag_desktop.core.training.validation.best_choice`: the best
checkpoint, or the warm start's weights when no validation beat them) and stays hidden for every
other run.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from vrag_desktop.core.training.validation import BEST_METRIC, BestChoice
from vrag_desktop.qt.infra.widgets import button

TIP = "Write the checkpoint of the best validation reward to <run>/export (vLLM can serve it)"


def best_label(choice: BestChoice) -> str:
    """The row's words for ``choice`` (values to three places, as the plots'; the button's tooltip
    has core's whole reason)."""
    if choice.best is not None:  # a best checkpoint, kept or gone
        gone = "" if choice.path is not None else " (its checkpoint is gone)"
        return f"Best validation: step {choice.step} · {BEST_METRIC} {choice.value:.3f}{gone}"
    if choice.start is not None:
        beaten = f"No validation beat the warm start ({BEST_METRIC} {choice.start:.3f} at step 0)"
    else:
        beaten = "No validation scored above 0"
    if choice.source == "warm_start":
        return f"{beaten}: Export best writes the warm start's weights"
    return f"{beaten}: Export best has nothing to write"


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

    def show_best(self, choice: BestChoice | None, can_export: bool) -> None:
        """``choice`` None or not validated: hidden. ``can_export``: no trainer works on the run."""
        shown = choice is not None and choice.validated
        self.setVisible(shown)
        if choice is None or not shown:
            return
        self.label.setText(best_label(choice))
        self.export_button.setEnabled(can_export and choice.exportable)
        if choice.source == "checkpoint":
            tip = f"{TIP}: step {choice.step}"
        elif choice.source == "warm_start":
            tip = f"Write the warm start's weights ({choice.path}) to <run>/export: {choice.reason}"
        else:
            tip = choice.reason
        self.export_button.setToolTip(tip)

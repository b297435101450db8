"""The panels of the docks hidden until used (Runtime, Datasets, Evaluations, Training), the Evidence
view when its dock starts as a tab behind the graph, and the Models entry: made after the window's
first paint, or at once when something needs one first.

Why: building them, and importing what they import (the runtime supervisor and its environments, the
training configs, the model catalogue, the evaluation code), was about half of the CPU the app spent
before its window showed (issue 31: cold start ≤ 1.0 s), for docks the default layout does not show.
Each dock gets an empty placeholder; its panel is made on first use (the dock shown, or the window
asking for ``win.runtime`` & co.) or, once the window has painted, one panel per event-loop turn, so
their start-up look-ups (the GPU, servers a killed session left, the training runs) still run at
start and the window answers input between two panels.

The Evidence view (its import and build were ~10 % of the CPU before the window) is made as the
window shows when its dock is on screen (a wide screen splits the graph and it); on a smaller one it
starts as a tab behind the graph and is made first after the paint. Its dock is never hidden, only
covered, so unlike the tools it is not made by :meth:`WindowPanels.build_shown`: the dock says when
it is shown (``visibilityChanged``), and Qt says so while the window shows, before its first paint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QDockWidget, QWidget

from vrag_desktop.qt.infra.alive import alive

if TYPE_CHECKING:
    from vrag_desktop.qt.datasets.datasets_panel import DatasetsPanel
    from vrag_desktop.qt.evaluation.evaluations_panel import EvaluationsPanel
    from vrag_desktop.qt.evidence.evidence_view import EvidenceView
    from vrag_desktop.qt.main_window import MainWindow
    from vrag_desktop.qt.models.entry import ModelsEntry
    from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel
    from vrag_desktop.qt.training.training_panel import TrainingPanel

log = logging.getLogger("vrag_desktop")

T = TypeVar("T")

#: Between two deferred panels: the first frame is on screen and input is handled in between.
GAP_MS = 1


class Deferred(Generic[T]):
    """One panel made on first :meth:`get`: put into its dock (if any), then wired by ``wire``."""

    def __init__(self, name: str, make: Callable[[], T], wire: Callable[[T], None]) -> None:
        self.name = name
        self._make = make
        self._wire = wire
        self._built: T | None = None
        self.dock: QDockWidget | None = None

    @property
    def built(self) -> bool:
        return self._built is not None

    def get(self) -> T:
        if self._built is None:
            t0 = time.perf_counter()
            panel = self._built = self._make()
            if self.dock is not None and isinstance(panel, QWidget):
                self.dock.setWidget(panel)
            self._wire(panel)  # may read win.<panel> again: it is built by now
            log.debug("%s panel made in %.0f ms", self.name, (time.perf_counter() - t0) * 1000)
        return self._built

    def placeholder_dock(self, dock: QDockWidget) -> None:
        """``dock`` holds this panel; until it is made, an empty widget. Shown, it makes the panel."""
        self.dock = dock
        dock.setWidget(QWidget())
        dock.visibilityChanged.connect(lambda visible: visible and self.get())


class WindowPanels:
    """The deferred panels of ``win`` and how each is wired into the window once made."""

    def __init__(self, win: MainWindow) -> None:
        self.win = win
        self.runtime: Deferred[RuntimePanel] = Deferred("Runtime", self._make_runtime, self._wire_runtime)
        self.datasets: Deferred[DatasetsPanel] = Deferred(
            "Datasets", self._make_datasets, self._wire_datasets
        )
        self.evaluations: Deferred[EvaluationsPanel] = Deferred(
            "Evaluations", self._make_evaluations, self._wire_evaluations
        )
        self.training: Deferred[TrainingPanel] = Deferred(
            "Training", self._make_training, self._wire_training
        )
        self.models: Deferred[ModelsEntry] = Deferred("Models", self._make_models, lambda _m: None)
        self.evidence: Deferred[EvidenceView] = Deferred("Evidence", self._make_evidence, self._wire_evidence)
        self._pending: list[Deferred[Any]] = []

    def all(self) -> tuple[Deferred[Any], ...]:
        """Every deferred panel, in the order :meth:`build_later` makes them (the likeliest first)."""
        return (self.evidence, *self.tools())

    def tools(self) -> tuple[Deferred[Any], ...]:
        """The panels of the docks hidden until used, and the Models entry."""
        return (self.runtime, self.training, self.models, self.datasets, self.evaluations)

    def build_all(self) -> None:
        """Every panel now (tests, and a window that needs them all)."""
        for part in self.all():
            part.get()

    def build_shown(self) -> None:
        """The tools whose docks a restored layout shows: made before the window shows them."""
        for part in self.tools():
            if part.dock is not None and not part.dock.isHidden():
                part.get()

    def build_later(self, done: Callable[[], None] | None = None) -> None:
        """The panels not made yet, one per event-loop turn (after the first paint); then ``done``."""
        self._pending = [p for p in self.all() if not p.built]
        self._done = done

        def next_one() -> None:
            if not alive(self.win) or self.win._closing:  # closed, or gone without a close
                return
            while self._pending and self._pending[0].built:
                self._pending.pop(0)
            if self._pending:
                self._pending.pop(0).get()
                QTimer.singleShot(GAP_MS, next_one)
            elif self._done is not None:
                self._done()

        QTimer.singleShot(GAP_MS, next_one)

    # ------------------------------------------------------------------ makers and wiring
    def _make_runtime(self) -> RuntimePanel:
        from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel

        return RuntimePanel(self.win.ctx)

    def _wire_runtime(self, runtime: RuntimePanel) -> None:
        win = self.win
        runtime.statusChanged.connect(win.show_model_status)
        runtime.gpuChanged.connect(lambda text: win.gpu_label.setText(text))
        runtime.profilesChanged.connect(win.ask.refresh_profiles)  # the current model: ask follows it
        runtime.leftoversFound.connect(lambda _n: win.open_runtime())  # servers of a killed session
        win.show_model_status(runtime.status_text())

    def _make_datasets(self) -> DatasetsPanel:
        from vrag_desktop.qt.datasets.datasets_panel import DatasetsPanel

        return DatasetsPanel(self.win.ctx)

    def _wire_datasets(self, datasets: DatasetsPanel) -> None:
        datasets.corpora_names = self.win.ask.selected_corpora
        self.win.corpora.corporaChanged.connect(lambda: datasets.show_items())

    def _make_evaluations(self) -> EvaluationsPanel:
        from vrag_desktop.qt.evaluation.evaluations_panel import EvaluationsPanel

        return EvaluationsPanel(self.win.ctx)

    def _wire_evaluations(self, evaluations: EvaluationsPanel) -> None:
        win = self.win
        evaluations.openRunRequested.connect(win.open_run)  # a question's run, as History opens it
        evaluations.evaluationEnded.connect(lambda *_: win.history.refresh())
        evaluations.refresh()

    def _make_training(self) -> TrainingPanel:
        from vrag_desktop.qt.training.training_panel import TrainingPanel

        return TrainingPanel(self.win.ctx)

    def _wire_training(self, training: TrainingPanel) -> None:
        training.openSampleRequested.connect(self.win.open_sample)  # a trajectory, as History opens a run

    def _make_evidence(self) -> EvidenceView:
        from vrag_desktop.qt.evidence.evidence_view import EvidenceView

        return EvidenceView(self.win.ctx)

    def _wire_evidence(self, evidence: EvidenceView) -> None:
        # zoom shortcuts act on the view last touched (see MainWindow._wire)
        evidence.page_view.touched.connect(lambda: setattr(self.win, "_zoom_target", "evidence"))

    def _make_models(self) -> ModelsEntry:
        from vrag_desktop.qt.models.entry import ModelsEntry

        return ModelsEntry(self.win)  # the Models window itself is made when first opened


__all__ = ["Deferred", "WindowPanels"]

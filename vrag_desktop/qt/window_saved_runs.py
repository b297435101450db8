"""The main window's saved runs: opened whole, replayed step by step, shown from a training run's
samples, or added to a dataset; all through the same views a live run uses.

Why a mixin of :class:`~vrag_desktop.qt.main_window.MainWindow` rather than its own object: these
are the window's own verbs (the History panel, the menus and tests call ``window.open_run``), and
they only drive views the window owns; apart, the window module stays about 400 lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from vrag_desktop.core.agents.events import AgentEvent
from vrag_desktop.core.agents.names import agent_name
from vrag_desktop.qt.infra.errors import error_sink

if TYPE_CHECKING:
    from PySide6.QtWidgets import QDockWidget, QWidget

    from vrag_desktop.qt.ask.ask_panel import AskPanel
    from vrag_desktop.qt.ask.run_controller import RunController
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.datasets.datasets_panel import DatasetsPanel
    from vrag_desktop.qt.guide import Guide
    from vrag_desktop.qt.window_layout import WindowLayout


class SavedRuns:
    """The saved-run verbs of the main window (mixed into it: the attributes below are its own)."""

    if TYPE_CHECKING:
        ctx: AppContext
        ask: AskPanel
        controller: RunController
        guide: Guide
        graph_scene: Any
        graph_view: Any
        evidence: Any
        replay: Any
        replay_bar: Any
        evidence_dock: QDockWidget
        datasets_dock: QDockWidget
        window_layout: WindowLayout
        add_dialog: Any
        _current_run: str | None

        @property
        def datasets(self) -> DatasetsPanel: ...

        def tr(self, sourceText: str, disambiguation: str | None = None, n: int = -1) -> str: ...

        def _clear_views(self) -> None: ...

        def _follow_run(self) -> None: ...

    def _with_run(self, run_id: str, verb: str, show: Any, store: Any = None) -> None:
        """Read a saved run's events off the GUI thread, then ``show(summary, events)``; ``store``:
        another RunStore than the app's (a training run's samples)."""
        from vrag_desktop.qt.history.replay import load_events

        if self.controller.running:
            error_sink().report(
                self.tr("A run is in progress"),
                self.tr("Stop it before {doing} another run.").format(doing=verb),
                "warning",
            )
            return
        runs = store if store is not None else self.ctx.runs
        load_events(runs, run_id, lambda events: show(runs.summary(run_id), events))

    def open_sample(self, samples_root: Any, run_id: str) -> None:
        """A training sample trajectory (a run under ``<run>/samples``) in the graph and evidence views."""
        from vrag_desktop.core.run.store import RunStore

        self.open_run(run_id, RunStore(samples_root))
        self.window_layout.show_run_views()

    def open_run(self, run_id: str, store: Any = None) -> None:
        """Show a saved run exactly as it was (all events at once); a training sample's nodes show
        whether they were trained or masked."""
        from vrag_desktop.core.run.training_roles import sample_training

        def show(summary: Any, events: list[AgentEvent]) -> None:
            self.guide.leave_example()
            status = self.tr("Run {run} · {agent} · {model} · {status}").format(
                run=run_id,
                agent=agent_name(summary.agent),
                model=summary.model or "model?",
                status=summary.status,
            )
            self.show_saved(summary.question, events, status)
            training = sample_training(summary.settings, self.graph_scene.graph.ids())
            if training is not None:  # a training sample: each node's part in the update
                self.graph_scene.set_training(training)
            self._current_run = run_id

        self._with_run(run_id, self.tr("opening"), show, store)

    def show_saved(self, question: str, events: list[AgentEvent], status: str) -> None:
        """A recorded run's events in every view at once, exactly as recorded (a saved run, an example)."""
        self.replay.pause()
        self.replay_bar.hide()
        self._clear_views()
        self.graph_view.set_live(False)
        self.ask.load(question, events)
        self.ask.set_status(status)
        self.graph_scene.load(events)
        self.evidence.load(events)
        self.window_layout.show_run_views()
        self.graph_view.fit()

    def clear_all(self) -> None:
        """Empty transcript, graph and evidence (an example closed)."""
        self._clear_views()
        self.ask.question_edit.clear()
        self.ask.clear()

    def replay_run(self, run_id: str) -> None:
        """Replay a saved run step by step, through the same views a live run uses."""

        def start(summary: Any, events: list[AgentEvent]) -> None:
            self.guide.leave_example()
            self._clear_views()
            self.ask.clear(summary.question)
            self.ask.question_edit.setPlainText(summary.question)
            self.replay.set_events(events)
            self.replay_bar.show()
            self.ask.set_status(self.tr("Replaying run {run}").format(run=run_id))
            self._follow_run()

        self._with_run(run_id, self.tr("replaying"), start)

    def add_run_to_dataset(self, run_id: str) -> None:
        """Show the run, then the Add-to-dataset dialog with the evidence view in pick mode (not while
        a live run owns the evidence view)."""
        from vrag_desktop.qt.datasets.add_to_dataset import add_run_to_dataset

        live = self.controller.running
        if not live:
            self.open_run(run_id)
            self.evidence_dock.show()
            self.evidence_dock.raise_()

        def opened(dialog: Any) -> None:
            self.add_dialog = dialog
            dialog.saved.connect(lambda name, _item: self.datasets.refresh(name))
            dialog.saved.connect(lambda *_: self.datasets_dock.show())  # where the item went (a tab)

        add_run_to_dataset(
            self.ctx,
            run_id,
            view=None if live else self.evidence,
            parent=cast("QWidget", self),
            opened=opened,
        )

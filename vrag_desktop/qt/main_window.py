"""The main window: docks around the ask panel, menus and shortcuts, status bar, notifications.

It wires panels together and owns nothing else: a run's events go to the transcript, the graph and
the evidence view alike (live, reopened or replayed: the same code path), and every error reported
anywhere lands in the notification bar.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QT_TRANSLATE_NOOP, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QLabel,
    QMainWindow,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.events import AgentEvent, Evidence
from vrag_desktop.qt.ask.ask_panel import AskPanel
from vrag_desktop.qt.ask.run_controller import ANSWERED, CANCELLED, RunController, RunRequest
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.guide import Guide
from vrag_desktop.qt.help_dialogs import about_box, help_dialog
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.first_paint import after_first_paint
from vrag_desktop.qt.notifications import NotificationBar, messages_dialog
from vrag_desktop.qt.runtime.server_text import model_status
from vrag_desktop.qt.window_layout import WindowLayout
from vrag_desktop.qt.window_menus import WindowMenus
from vrag_desktop.qt.window_panels import WindowPanels
from vrag_desktop.qt.window_saved_runs import SavedRuns

if TYPE_CHECKING:
    from vrag_desktop.qt.datasets.datasets_panel import DatasetsPanel
    from vrag_desktop.qt.evaluation.evaluations_panel import EvaluationsPanel
    from vrag_desktop.qt.evidence.evidence_view import EvidenceView
    from vrag_desktop.qt.models.entry import ModelsEntry
    from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel
    from vrag_desktop.qt.training.training_panel import TrainingPanel

log = logging.getLogger("vrag_desktop")

WINDOW_TITLE = str(QT_TRANSLATE_NOOP("MainWindow", "VRAG Desktop"))


class MainWindow(SavedRuns, QMainWindow):
    """Docks around the ask panel; routes a run's events to every view (see the module docstring)."""

    def __init__(self, ctx: AppContext, *, first_run: bool | None = None) -> None:
        super().__init__()
        self.ctx = ctx
        self.setWindowTitle(self.tr(WINDOW_TITLE))
        self.setObjectName("MainWindow")
        self.setDockNestingEnabled(True)
        self._zoom_target = "graph"
        self._closing = False
        self._shown = False
        self._current_run: str | None = None
        self._messages: QDialog | None = None

        self.controller = RunController(ctx, self)
        self.window_layout = WindowLayout(self)
        self.panels = WindowPanels(self)  # Evidence, Runtime, Datasets, Evaluations, Training, Models: later
        self._build_panels()
        self._build_docks()
        self.menus = WindowMenus(self)
        self._build_status_bar()
        self._wire()
        self.window_layout.watch()
        self.window_layout.start()  # as saved, else the default for this screen
        self.panels.build_shown()  # a tool dock the saved layout shows is made before it shows
        sink = error_sink()
        sink.reported.connect(self._on_report)
        if ctx.settings_message:
            QTimer.singleShot(
                0, lambda: sink.report(self.tr("Settings reset"), ctx.settings_message or "", "warning")
            )
        want_first_run = (not ctx.settings.first_run_done) if first_run is None else first_run
        QTimer.singleShot(0, self._start_background)
        if ctx.settings.update_check_at_start and ctx.settings.update_url.strip():
            QTimer.singleShot(5000, self._check_updates_at_start)  # a few seconds in: the window's work first
        if want_first_run:
            QTimer.singleShot(50, self.first_run)

    # ------------------------------------------------------------------ building
    def _build_panels(self) -> None:
        from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel
        from vrag_desktop.qt.graph.graph_pane import GraphPane
        from vrag_desktop.qt.graph.graph_scene import GraphScene
        from vrag_desktop.qt.graph.graph_view import GraphView
        from vrag_desktop.qt.graph.node_details import NodeDetails, link_details
        from vrag_desktop.qt.history.history_panel import HistoryPanel
        from vrag_desktop.qt.history.replay import ReplayBar, ReplayController

        ctx = self.ctx
        self.ask = AskPanel(ctx)
        self.notifications = NotificationBar()
        self.replay = ReplayController(self)
        self.replay_bar = ReplayBar(self.replay)
        self.replay_bar.hide()
        self.guide = Guide(self)
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.notifications)
        lay.addWidget(self.replay_bar)
        lay.addWidget(self.guide.example_bar)
        lay.addWidget(self.ask, 1)
        self.setCentralWidget(central)

        self.graph_scene = GraphScene(self)
        self.graph_view = GraphView(self.graph_scene)
        self.node_details = NodeDetails()
        link_details(self.graph_scene, self.node_details)
        self.graph_pane = GraphPane(self.graph_view, self.node_details)
        self.corpora = CorporaPanel(ctx)
        self.history = HistoryPanel(ctx)

    # The panels made after the first paint (qt/window_panels.py): reading one makes it now.
    @property
    def evidence(self) -> EvidenceView:
        return self.panels.evidence.get()

    @property
    def runtime(self) -> RuntimePanel:
        return self.panels.runtime.get()

    @property
    def datasets(self) -> DatasetsPanel:
        return self.panels.datasets.get()

    @property
    def evaluations(self) -> EvaluationsPanel:
        return self.panels.evaluations.get()

    @property
    def training(self) -> TrainingPanel:
        return self.panels.training.get()

    @property
    def models(self) -> ModelsEntry:
        """The Models entry (its window is made when first opened)."""
        return self.panels.models.get()

    def _dock(self, title: str, name: str, widget: QWidget | Any, area: Qt.DockWidgetArea) -> QDockWidget:
        """A dock for ``widget``, or for a deferred panel (a placeholder until the panel is made)."""
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        if isinstance(widget, QWidget):
            dock.setWidget(widget)
        else:
            widget.placeholder_dock(dock)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        self.addDockWidget(area, dock)
        return dock

    def docks(self) -> tuple[QDockWidget, ...]:
        """The panels' docks, in the order the View menu lists them."""
        return (
            self.corpora_dock,
            self.history_dock,
            self.datasets_dock,
            self.evaluations_dock,
            self.training_dock,
            self.runtime_dock,
            self.graph_dock,
            self.evidence_dock,
        )

    def _build_docks(self) -> None:
        """The docks; where they go is :class:`WindowLayout`'s (for the screen, or as saved)."""
        L, R = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        self.corpora_dock = self._dock(self.tr("Corpora"), "corporaDock", self.corpora, L)
        self.history_dock = self._dock(self.tr("History"), "historyDock", self.history, L)
        p = self.panels
        self.datasets_dock = self._dock(self.tr("Datasets"), "datasetsDock", p.datasets, R)
        self.evaluations_dock = self._dock(self.tr("Evaluations"), "evaluationsDock", p.evaluations, R)
        self.training_dock = self._dock(self.tr("Training"), "trainingDock", p.training, R)
        self.runtime_dock = self._dock(self.tr("Runtime"), "runtimeDock", p.runtime, R)
        self.graph_dock = self._dock(self.tr("Reasoning graph"), "graphDock", self.graph_pane, R)
        self.evidence_dock = self._dock(self.tr("Evidence"), "evidenceDock", p.evidence, R)

    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        self.work_label = QLabel("")
        self.work_bar = QProgressBar()
        self.work_bar.setRange(0, 0)
        self.work_bar.setMaximumWidth(120)
        self.work_bar.setMaximumHeight(14)
        self.work_bar.hide()
        self.runtime_label = QLabel()
        self.ctx.current_model.changed.connect(lambda _name: self.show_model_status())
        self.show_model_status()
        self.gpu_label = QLabel(self.tr("GPU: checking…"))
        for w in (self.work_label, self.work_bar, self.runtime_label, self.gpu_label):
            sb.addPermanentWidget(w)

    def show_model_status(self, status: str | None = None) -> None:
        """The status bar's current model: the Runtime panel's words, or before it is made (no
        server started yet), the current model's."""
        if status is None:
            p = self.panels.runtime
            status = self.runtime.status_text() if p.built else model_status(self.ctx.current_model.name)
        self.runtime_label.setText(self.tr("Model: {status}").format(status=status))

    def _wire(self) -> None:
        ask, ctl = self.ask, self.controller
        ask.sendRequested.connect(self.start_run)
        ask.stopRequested.connect(self.stop_run)
        ask.evidenceClicked.connect(self.open_evidence)
        ask.fixRequested.connect(self.guide.fix)
        ask.exampleRequested.connect(self.guide.open_example)
        ctl.started.connect(self._run_started)
        ctl.agentEvent.connect(self._route_event)
        ctl.finished.connect(self._run_finished)
        self.replay.agentEvent.connect(self._route_event)
        self.replay.restarted.connect(self._restart_views)
        self.replay.finished.connect(self._replay_finished)
        self.history.openRequested.connect(self.open_run)
        self.history.replayRequested.connect(self.replay_run)
        self.history.addToDatasetRequested.connect(self.add_run_to_dataset)
        self.corpora.corporaChanged.connect(lambda: ask.refresh_corpora())
        self.corpora.busyChanged.connect(self._work_changed)
        # Zoom shortcuts act on the view the person last touched (not on one that zoomed by itself).
        # The views say so (``touched``): an event filter on them ran Python at each of their events,
        # every repaint of a live run included.
        self.graph_view.touched.connect(lambda: setattr(self, "_zoom_target", "graph"))
        self.notifications.more.clicked.connect(self.show_messages)

    # ------------------------------------------------------------------ state
    def save_state(self) -> None:
        self.window_layout.save()

    def reset_layout(self) -> None:
        """View → Reset layout: the default layout for the screen the window is on."""
        self.window_layout.reset()

    # ------------------------------------------------------------------ start-up
    def _start_background(self) -> None:
        """After the window is up: resume interrupted indexing, warm the embedder, look at the GPU."""
        if self._closing:
            return
        self.corpora.resume_pending()
        self.history.refresh()

    def _check_updates_at_start(self) -> None:
        if not self._closing:
            from vrag_desktop.qt.updates import check_at_start

            check_at_start(self)

    def first_run(self) -> QDialog:
        """First launch: the model chooser; the bundled sample corpus is indexed meanwhile."""
        return self.guide.first_run()

    # ------------------------------------------------------------------ runs
    def start_run(self, request: RunRequest) -> None:
        if self.controller.running:
            return
        self.replay.pause()
        self.replay_bar.hide()
        self.guide.leave_example()
        self._clear_views()
        self.ask.begin(request.question)
        try:
            self.controller.start(request)
        except Exception as exc:
            self.ask.set_running(False)
            self.ask.set_status("")
            error_sink().report(self.tr("Cannot start the run"), exc)
            return
        self.menus.stop.setEnabled(True)
        self._follow_run()

    def stop_run(self) -> None:
        if self.controller.running:
            self.ask.set_status(self.tr("Stopping…"))
            self.controller.stop()
        elif self.replay.is_playing:
            self.replay.pause()

    def _run_started(self, run_id: str) -> None:
        if run_id:
            self._current_run = run_id

    def _follow_run(self) -> None:
        """A live run or a replay: its views in front, the graph following its newest node."""
        self.window_layout.show_run_views()
        self.graph_view.set_live(True)

    def _replay_finished(self) -> None:
        self.graph_view.set_live(False)
        self.statusBar().showMessage(self.tr("Replay finished"), 4000)

    def _run_finished(self, status: str, run_id: str) -> None:
        self.graph_view.set_live(False)
        self.ask.set_running(False)
        self.menus.stop.setEnabled(False)
        self.ask.render_transcript()
        self.ask.scroll_to_end()
        text = {
            ANSWERED: self.tr("Answered"),
            CANCELLED: self.tr("Stopped; the run is saved as cancelled"),
        }.get(status, self.tr("Ended: {status}").format(status=status))
        self.ask.set_status(text + (self.tr(" · run {run}").format(run=run_id) if run_id else ""))
        self.history.refresh()

    def _route_event(self, ev: AgentEvent) -> None:
        self.ask.apply(ev)
        self.graph_scene.apply(ev)
        self.evidence.apply(ev)

    def _restart_views(self) -> None:
        """A replay starts over (rewound, or seeking back): empty views, following again."""
        self._clear_views()
        self.ask.clear(self.ask.question)
        self.graph_view.set_live(True)

    def _clear_views(self) -> None:
        self.graph_scene.clear_graph()
        self.node_details.clear()
        self.evidence.clear()

    def open_evidence(self, evidence: Evidence) -> None:
        self.evidence_dock.show()
        self.evidence_dock.raise_()
        self.evidence.focus(evidence.source, evidence.page, evidence.region)

    # ------------------------------------------------------------------ view
    def zoom(self, how: str) -> None:
        target: Any = self.evidence.page_view if self._zoom_target == "evidence" else self.graph_view
        {"in": target.zoom_in, "out": target.zoom_out, "fit": target.fit}[how]()

    def set_theme(self, theme: str) -> None:
        from vrag_desktop.qt.infra.theme import apply_theme

        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
        self.ctx.settings.theme = theme
        self.menus.check_theme(theme)
        self.ask.render_transcript()
        try:
            self.ctx.save()
        except Exception as exc:
            error_sink().report(self.tr("Could not save settings"), exc, "warning")

    def open_settings(self) -> QDialog:
        from vrag_desktop.qt.settings_dialog import SettingsDialog

        dlg = SettingsDialog(self.ctx, self)
        dlg.settingsApplied.connect(self._settings_applied)
        dlg.setModal(True)
        dlg.show()
        return dlg

    def _settings_applied(self, changed: list[str]) -> None:
        if "theme" in changed:  # the dialog applied and saved it; follow it in the menu and transcript
            self.menus.check_theme(self.ctx.settings.theme)
            self.ask.render_transcript()
        if "data_dir" in changed:
            self.ctx.current_model.sync()  # the new directory's profiles say which model is current
            self.corpora.reload()
            self.history.refresh()
            self.datasets.refresh()
            self.evaluations.refresh()
            self.ask.refresh_corpora()
            self.ask.refresh_profiles()
        if {"agent", "top_k", "max_steps", "thinking"} & set(changed):
            self.ask.load_defaults()

    def show_help(self, html_text: str, title: str) -> QDialog:
        """A help dialog; one that explains connecting a model offers to open the Runtime panel."""
        self.help_dialog = help_dialog(
            self, html_text, title, self.open_runtime if "Connect" in html_text else None
        )
        return self.help_dialog

    def check_for_updates(self) -> QDialog:
        """Help → Check for updates… (qt/updates.py; loaded on first use, not before the window)."""
        from vrag_desktop.qt.updates import check_for_updates

        self.update_dialog = check_for_updates(self)
        return self.update_dialog

    def open_runtime(self) -> None:
        self.window_layout.show_tool(self.runtime_dock)

    def about(self) -> None:
        about_box(self, str(self.ctx.data_dir), str(self.ctx.config_dir))

    # ------------------------------------------------------------------ messages
    def _on_report(self, level: str, title: str, message: str) -> None:
        self.notifications.show_message(level, title, message)
        self.statusBar().showMessage(f"{title}: {message}", 10000)

    def show_messages(self) -> QDialog:
        self._messages = messages_dialog(self)
        return self._messages

    def _work_changed(self, busy: bool, text: str) -> None:
        self.work_label.setText(text if busy else "")
        self.work_bar.setVisible(busy)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            QTimer.singleShot(0, self.window_layout.shown)
            # the hidden docks' panels, after the frame; then the warm-up may start (AppContext)
            after_first_paint(self, lambda: self.panels.build_later(done=self.ctx.window_settled.set))

    # ------------------------------------------------------------------ closing
    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the layout; stop the run, indexing (kept, resumed next time) and the local server;
        running trainings are stopped or left running, as the person chooses."""
        # a Training panel not made yet launched nothing here: nothing to ask about
        self._training_choice = self.training.ask_close() if self.panels.training.built else "leave"
        if self._training_choice == "cancel":
            event.ignore()
            return
        self._closing = True
        self.save_state()
        self.shutdown()
        event.accept()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        from vrag_desktop.qt.infra import tasks

        self.replay.pause()
        if self.controller.running:
            self.controller.stop()
            self.controller.wait(3)
        p = self.panels
        try:
            if p.training.built:
                self.training.shutdown(getattr(self, "_training_choice", "leave"))
        except Exception as exc:
            log.warning("shutdown of the training panel: %s", exc)
        parts: list[tuple[Any, float]] = [(self.corpora, 10.0)]  # a panel not made has nothing to stop
        later = ((p.evaluations, 5.0), (p.models, 5.0), (p.runtime, timeout_s))
        parts += [(d.get(), seconds) for d, seconds in later if d.built]
        for part, seconds in parts:  # a download pauses: the Models view resumes it next time
            try:
                part.shutdown(seconds)
            except Exception as exc:
                log.warning("shutdown of %s: %s", type(part).__name__, exc)
        tasks.shutdown(5, loop_timeout_s=3)


__all__ = ["WINDOW_TITLE", "MainWindow"]

"""The main window: docks around the ask panel, menus and shortcuts, status bar, notifications.

It wires panels together and owns nothing else: a run's events go to the transcript, the graph and
the evidence view alike (live, reopened or replayed: the same code path), and every error reported
anywhere lands in the notification bar.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QByteArray, QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.events import AgentEvent, Evidence
from vrag_desktop.core.paths import sample_corpus_dir
from vrag_desktop.qt.ask.ask_panel import AskPanel
from vrag_desktop.qt.ask.run_controller import ANSWERED, CANCELLED, RunController, RunRequest
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra.errors import error_sink

log = logging.getLogger("vrag_desktop")

WINDOW_TITLE = "VRAG Desktop"
STATE_VERSION = 1
SAMPLE_CORPUS = "sample"

CONNECT_HELP = """
<h3>Connect a model</h3>
<p>VRAG Desktop searches your corpora on this machine; the reasoning needs a vision-language model
behind an OpenAI-compatible API. Pick one in the <b>Runtime</b> panel:</p>
<ul>
<li><b>Local vLLM</b> (a GPU workstation): set the model (e.g. the released
<code>Qwen/Qwen2.5-VL-7B-VRAG</code> checkpoint or a local folder) and press <b>Start</b>. The app runs
and supervises the server. One-time setup of vLLM's own environment:
<code>vrag-desktop runtime setup</code>.</li>
<li><b>DashScope</b> (Alibaba Cloud, for VimRAG with Qwen3.5): paste your API key; it is kept in the
system keyring, never in a file.</li>
<li><b>Custom</b>: any OpenAI-compatible server (vLLM or SGLang elsewhere, LM Studio, a gateway):
its base URL, model name and key.</li>
</ul>
<p>Then <b>Test connection</b>, and ask. VRAG (search, crop and zoom) suits the released VRAG model;
VimRAG (memory graph) suits strong general models such as Qwen3.5.</p>
"""

SHORTCUTS_HELP = """
<h3>Keyboard shortcuts</h3>
<table cellpadding='3'>
<tr><td><b>Ctrl+N</b></td><td>New question</td></tr>
<tr><td><b>Ctrl+Enter</b></td><td>Ask</td></tr>
<tr><td><b>Esc</b></td><td>Stop the run</td></tr>
<tr><td><b>Ctrl+F</b></td><td>Find in the reasoning</td></tr>
<tr><td><b>Ctrl++ / Ctrl+− / Ctrl+0</b></td>
<td>Zoom in / out / fit (the graph or the evidence, whichever you used last)</td></tr>
<tr><td><b>Ctrl+O</b></td><td>Add a folder to a corpus</td></tr>
<tr><td><b>Ctrl+,</b></td><td>Settings</td></tr>
<tr><td><b>Ctrl+Q</b></td><td>Quit</td></tr>
</table>
"""


class NotificationBar(QWidget):
    """The latest message from the error sink, tinted by level; errors stay until dismissed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("notification")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.more = QPushButton("All messages…")
        self.more.setFlat(True)
        close = QPushButton("✕")
        close.setFlat(True)
        close.setFixedWidth(28)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.more)
        lay.addWidget(close)
        self.setAutoFillBackground(True)
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self.hide)
        self.level = ""
        self.hide()

    def show_message(self, level: str, title: str, message: str) -> None:
        self.level = level
        icon = {"error": "⚠", "warning": "⚠", "info": "ℹ"}.get(level, "")
        self.label.setText(f"{icon} <b>{_esc(title)}</b>: {_esc(message)}")
        colours = {
            "error": ("#5c1f1f", "#fbe3e1") if _dark(self) else ("#fbe3e1", "#5c1f1f"),
            "warning": ("#4d3b12", "#fff1cc") if _dark(self) else ("#fff4d6", "#5a4300"),
            "info": ("#1b3350", "#dceaff") if _dark(self) else ("#e3eefc", "#173a66"),
        }
        bg, fg = colours.get(level, colours["info"])
        self.setStyleSheet(f"#notification {{ background: {bg}; }} #notification QLabel {{ color: {fg}; }}")
        self.show()
        self._timer.stop()
        if level == "info":
            self._timer.start(8000)


class MainWindow(QMainWindow):
    def __init__(self, ctx: AppContext, *, first_run: bool | None = None) -> None:
        super().__init__()
        self.ctx = ctx
        self.setWindowTitle(WINDOW_TITLE)
        self.setObjectName("MainWindow")
        self.setDockNestingEnabled(True)
        self._zoom_target = "graph"
        self._closing = False
        self._current_run: str | None = None
        self._messages: QDialog | None = None

        self.controller = RunController(ctx, self)
        self._build_panels()
        self._build_docks()
        self._build_actions()
        self._build_status_bar()
        self._wire()
        self._restore_state()
        sink = error_sink()
        sink.reported.connect(self._on_report)
        if ctx.settings_message:
            QTimer.singleShot(0, lambda: sink.report("Settings reset", ctx.settings_message or "", "warning"))
        want_first_run = (not ctx.settings.first_run_done) if first_run is None else first_run
        QTimer.singleShot(0, self._start_background)
        if want_first_run:
            QTimer.singleShot(50, self.first_run)

    # ------------------------------------------------------------------ building
    def _build_panels(self) -> None:
        from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel
        from vrag_desktop.qt.evidence.evidence_view import EvidenceView
        from vrag_desktop.qt.graph.graph_scene import GraphScene
        from vrag_desktop.qt.graph.graph_view import GraphView
        from vrag_desktop.qt.graph.node_details import NodeDetails, link_details
        from vrag_desktop.qt.history.history_panel import HistoryPanel
        from vrag_desktop.qt.history.replay import ReplayBar, ReplayController
        from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel

        ctx = self.ctx
        self.ask = AskPanel(ctx)
        self.notifications = NotificationBar()
        self.replay = ReplayController(self)
        self.replay_bar = ReplayBar(self.replay)
        self.replay_bar.hide()
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.notifications)
        lay.addWidget(self.replay_bar)
        lay.addWidget(self.ask, 1)
        self.setCentralWidget(central)

        self.graph_scene = GraphScene(self)
        self.graph_view = GraphView(self.graph_scene)
        self.node_details = NodeDetails()
        link_details(self.graph_scene, self.node_details)
        self.graph_split = QSplitter(Qt.Orientation.Horizontal)
        self.graph_split.addWidget(self.graph_view)
        self.graph_split.addWidget(self.node_details)
        self.graph_split.setStretchFactor(0, 3)
        self.graph_split.setStretchFactor(1, 2)
        self.evidence = EvidenceView(ctx)
        self.corpora = CorporaPanel(ctx)
        self.runtime = RuntimePanel(ctx)
        self.history = HistoryPanel(ctx)

    def _dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        self.addDockWidget(area, dock)
        return dock

    def _build_docks(self) -> None:
        L, R = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        self.corpora_dock = self._dock("Corpora", "corporaDock", self.corpora, L)
        self.history_dock = self._dock("History", "historyDock", self.history, L)
        self.runtime_dock = self._dock("Runtime", "runtimeDock", self.runtime, L)
        self.graph_dock = self._dock("Reasoning graph", "graphDock", self.graph_split, R)
        self.evidence_dock = self._dock("Evidence", "evidenceDock", self.evidence, R)
        self.splitDockWidget(self.corpora_dock, self.history_dock, Qt.Orientation.Vertical)
        self.tabifyDockWidget(self.history_dock, self.runtime_dock)
        self.history_dock.raise_()
        self.splitDockWidget(self.graph_dock, self.evidence_dock, Qt.Orientation.Vertical)
        self.resize(1600, 1000)
        self.resizeDocks([self.corpora_dock, self.graph_dock], [340, 700], Qt.Orientation.Horizontal)
        self.resizeDocks([self.corpora_dock, self.history_dock], [520, 440], Qt.Orientation.Vertical)
        self.resizeDocks([self.graph_dock, self.evidence_dock], [430, 530], Qt.Orientation.Vertical)
        self._default_state = self.saveState(STATE_VERSION)

    def _action(
        self, menu: Any, text: str, slot: Any, shortcut: Any = None, tip: str = "", checkable: bool = False
    ) -> QAction:
        a = QAction(text, self)
        if shortcut is not None:
            if isinstance(shortcut, list):
                a.setShortcuts(shortcut)
            else:
                a.setShortcut(shortcut)
        a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        if tip:
            a.setStatusTip(tip)
        a.setCheckable(checkable)
        a.triggered.connect(slot)
        menu.addAction(a)
        self.addAction(a)
        return a

    def _build_actions(self) -> None:
        mb = self.menuBar()
        f = mb.addMenu("&File")
        self.act_add_folder = self._action(
            f,
            "Add folder…",
            lambda: self.corpora.add_folder(),
            QKeySequence("Ctrl+O"),
            "Add a folder to a corpus",
        )
        self._action(f, "Add files…", lambda: self.corpora.add_files())
        self._action(f, "New corpus…", lambda: self.corpora.new_corpus())
        f.addSeparator()
        self.act_settings = self._action(
            f, "Settings…", self.open_settings, [QKeySequence("Ctrl+,"), QKeySequence.StandardKey.Preferences]
        )
        f.addSeparator()
        self._action(f, "Quit", self.close, QKeySequence("Ctrl+Q"))

        r = mb.addMenu("&Run")
        self.act_new = self._action(r, "New question", self.ask.new_question, QKeySequence("Ctrl+N"))
        self.act_send = self._action(
            r, "Ask", self.ask.send, [QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")]
        )
        self.act_stop = self._action(
            r, "Stop", self.stop_run, [QKeySequence("Esc"), QKeySequence("Ctrl+.")], "Stop the running agent"
        )
        self.act_stop.setEnabled(False)
        r.addSeparator()
        self.act_find = self._action(r, "Find in reasoning…", self.ask.show_find, QKeySequence("Ctrl+F"))

        v = mb.addMenu("&View")
        self.act_zoom_in = self._action(
            v, "Zoom in", lambda: self._zoom("in"), [QKeySequence("Ctrl++"), QKeySequence("Ctrl+=")]
        )
        self.act_zoom_out = self._action(v, "Zoom out", lambda: self._zoom("out"), QKeySequence("Ctrl+-"))
        self.act_fit = self._action(v, "Fit", lambda: self._zoom("fit"), QKeySequence("Ctrl+0"))
        v.addSeparator()
        for dock in (
            self.corpora_dock,
            self.history_dock,
            self.runtime_dock,
            self.graph_dock,
            self.evidence_dock,
        ):
            v.addAction(dock.toggleViewAction())
        v.addSeparator()
        theme_menu = v.addMenu("Theme")
        group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for key, label in (("system", "System"), ("light", "Light"), ("dark", "Dark")):
            a = QAction(label, self, checkable=True)
            a.setChecked(self.ctx.settings.theme == key)
            a.triggered.connect(lambda _=False, k=key: self.set_theme(k))
            group.addAction(a)
            theme_menu.addAction(a)
            self.theme_actions[key] = a
        self._action(v, "Reset layout", self.reset_layout)

        h = mb.addMenu("&Help")
        self._action(h, "Connect a model…", lambda: self.show_help(CONNECT_HELP, "Connect a model"))
        self._action(h, "Keyboard shortcuts", lambda: self.show_help(SHORTCUTS_HELP, "Keyboard shortcuts"))
        self._action(h, "About VRAG Desktop", self.about)

    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        self.work_label = QLabel("")
        self.work_bar = QProgressBar()
        self.work_bar.setRange(0, 0)
        self.work_bar.setMaximumWidth(120)
        self.work_bar.setMaximumHeight(14)
        self.work_bar.hide()
        self.runtime_label = QLabel("Model: –")
        self.gpu_label = QLabel("GPU: checking…")
        for w in (self.work_label, self.work_bar, self.runtime_label, self.gpu_label):
            sb.addPermanentWidget(w)
        self.runtime_label.setText(f"Model: {self.runtime.status_text()}")

    def _wire(self) -> None:
        ask, ctl = self.ask, self.controller
        ask.sendRequested.connect(self.start_run)
        ask.stopRequested.connect(self.stop_run)
        ask.evidenceClicked.connect(self.open_evidence)
        ctl.started.connect(self._run_started)
        ctl.event.connect(self._route_event)
        ctl.finished.connect(self._run_finished)
        self.replay.event.connect(self._route_event)
        self.replay.restarted.connect(self._restart_views)
        self.replay.finished.connect(lambda: self.statusBar().showMessage("Replay finished", 4000))
        self.history.openRequested.connect(self.open_run)
        self.history.replayRequested.connect(self.replay_run)
        self.corpora.corporaChanged.connect(lambda: ask.refresh_corpora())
        self.corpora.busyChanged.connect(self._work_changed)
        self.runtime.statusChanged.connect(lambda text: self.runtime_label.setText(f"Model: {text}"))
        self.runtime.gpuChanged.connect(lambda text: self.gpu_label.setText(text))
        self.runtime.profilesChanged.connect(ask.refresh_profiles)
        self.runtime.activeProfileChanged.connect(lambda _name: ask.refresh_profiles())
        ask.profile_combo.currentIndexChanged.connect(self._ask_profile_changed)
        # Zoom shortcuts act on the view the person last touched (not on one that zoomed by itself).
        for view in (self.graph_view, self.evidence.page_view):
            view.installEventFilter(self)
            view.viewport().installEventFilter(self)
        self.notifications.more.clicked.connect(self.show_messages)

    # ------------------------------------------------------------------ state
    def _qsettings(self) -> QSettings:
        return QSettings(str(self.ctx.config_dir / "window.ini"), QSettings.Format.IniFormat)

    def _restore_state(self) -> None:
        s = self._qsettings()
        geometry = s.value("geometry")
        state = s.value("state")
        try:
            if isinstance(geometry, QByteArray):
                self.restoreGeometry(geometry)
            if isinstance(state, QByteArray):
                self.restoreState(state, STATE_VERSION)
            split = s.value("graph_split")
            if isinstance(split, QByteArray):
                self.graph_split.restoreState(split)
        except Exception as exc:  # a damaged window.ini only costs the layout
            log.warning("could not restore the window layout: %s", exc)

    def save_state(self) -> None:
        s = self._qsettings()
        s.setValue("geometry", self.saveGeometry())
        s.setValue("state", self.saveState(STATE_VERSION))
        s.setValue("graph_split", self.graph_split.saveState())
        s.sync()

    def reset_layout(self) -> None:
        self.restoreState(self._default_state, STATE_VERSION)
        for dock in (
            self.corpora_dock,
            self.history_dock,
            self.runtime_dock,
            self.graph_dock,
            self.evidence_dock,
        ):
            dock.show()
        self.history_dock.raise_()

    # ------------------------------------------------------------------ start-up
    def _start_background(self) -> None:
        """After the window is up: resume interrupted indexing, warm the embedder, look at the GPU."""
        if self._closing:
            return
        self.corpora.resume_pending()
        self.history.refresh()

    def first_run(self) -> None:
        """First launch: explain how to connect a model, index the bundled sample corpus."""
        self.show_help(
            "<h3>Welcome to VRAG Desktop</h3>"
            "<p>Drop folders of PDFs, images and videos on the <b>Corpora</b> panel to index them. "
            "A small sample corpus is being indexed now so you can try a question straight away.</p>"
            + CONNECT_HELP,
            "Welcome",
        )
        sample = sample_corpus_dir()
        try:
            if sample is not None and SAMPLE_CORPUS not in self.ctx.library.names():
                self.corpora.add_and_index(SAMPLE_CORPUS, [sample])
        except Exception as exc:
            error_sink().report("Could not index the sample corpus", exc)
        self.ctx.settings.first_run_done = True
        try:
            self.ctx.save()
        except Exception as exc:
            error_sink().report("Could not save settings", exc, "warning")

    # ------------------------------------------------------------------ runs
    def start_run(self, request: RunRequest) -> None:
        if self.controller.running:
            return
        self.replay.pause()
        self.replay_bar.hide()
        self._clear_views()
        self.ask.begin(request.question)
        try:
            self.controller.start(request)
        except Exception as exc:
            self.ask.set_running(False)
            self.ask.set_status("")
            error_sink().report("Cannot start the run", exc)
            return
        self.act_stop.setEnabled(True)

    def stop_run(self) -> None:
        if self.controller.running:
            self.ask.set_status("Stopping…")
            self.controller.stop()
        elif self.replay.is_playing:
            self.replay.pause()

    def _ask_profile_changed(self) -> None:
        """The model picked for asking becomes the active profile, so the status bar tells the truth."""
        name = self.ask.profile_combo.currentData()
        if not name or name == self.ctx.profiles.active:
            return
        try:
            self.ctx.profiles.set_active(name)
        except Exception as exc:
            error_sink().report("Cannot switch the endpoint profile", exc, "warning")
            return
        self.runtime.refresh()
        self.ask.refresh_profiles()

    def _run_started(self, run_id: str) -> None:
        if run_id:
            self._current_run = run_id

    def _run_finished(self, status: str, run_id: str) -> None:
        self.ask.set_running(False)
        self.act_stop.setEnabled(False)
        self.ask.render()
        self.ask.scroll_to_end()
        text = {ANSWERED: "Answered", CANCELLED: "Stopped; the run is saved as cancelled"}.get(
            status, f"Ended: {status}"
        )
        self.ask.set_status(text + (f" · run {run_id}" if run_id else ""))
        self.history.refresh()

    def _route_event(self, ev: AgentEvent) -> None:
        self.ask.apply(ev)
        self.graph_scene.apply(ev)
        self.evidence.apply(ev)

    def _restart_views(self) -> None:
        self._clear_views()
        self.ask.clear(self.ask.question)

    def _clear_views(self) -> None:
        self.graph_scene.clear_graph()
        self.node_details.clear()
        self.evidence.clear()

    def _with_run(self, run_id: str, verb: str, show: Any) -> None:
        """Read a saved run's events off the GUI thread, then ``show(summary, events)``."""
        from vrag_desktop.qt.history.replay import load_events

        if self.controller.running:
            error_sink().report("A run is in progress", f"Stop it before {verb} another run.", "warning")
            return
        load_events(self.ctx.runs, run_id, lambda events: show(self.ctx.runs.summary(run_id), events))

    def open_run(self, run_id: str) -> None:
        """Show a saved run exactly as it was (all events at once)."""

        def show(summary: Any, events: list[AgentEvent]) -> None:
            self.replay.pause()
            self.replay_bar.hide()
            self._clear_views()
            self.ask.load(summary.question, events)
            self.ask.set_status(
                f"Run {run_id} · {summary.agent} · {summary.model or 'model?'} · {summary.status}"
            )
            self.graph_scene.load(events)
            self.evidence.load(events)
            self.graph_view.fit()
            self._current_run = run_id

        self._with_run(run_id, "opening", show)

    def replay_run(self, run_id: str) -> None:
        """Replay a saved run step by step, through the same views a live run uses."""

        def start(summary: Any, events: list[AgentEvent]) -> None:
            self._clear_views()
            self.ask.clear(summary.question)
            self.ask.question_edit.setPlainText(summary.question)
            self.replay.set_events(events)
            self.replay_bar.show()
            self.ask.set_status(f"Replaying run {run_id}")

        self._with_run(run_id, "replaying", start)

    def open_evidence(self, evidence: Evidence) -> None:
        self.evidence_dock.show()
        self.evidence_dock.raise_()
        self.evidence.focus(evidence.source, evidence.page, evidence.region)

    # ------------------------------------------------------------------ view
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.MouseButtonPress, QEvent.Type.Wheel, QEvent.Type.FocusIn):
            if watched in (self.graph_view, self.graph_view.viewport()):
                self._zoom_target = "graph"
            elif watched in (self.evidence.page_view, self.evidence.page_view.viewport()):
                self._zoom_target = "evidence"
        return super().eventFilter(watched, event)

    def _zoom(self, how: str) -> None:
        target: Any = self.evidence.page_view if self._zoom_target == "evidence" else self.graph_view
        {"in": target.zoom_in, "out": target.zoom_out, "fit": target.fit}[how]()

    def set_theme(self, theme: str) -> None:
        from vrag_desktop.qt.infra.theme import apply_theme

        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
        self.ctx.settings.theme = theme
        if theme in self.theme_actions:
            self.theme_actions[theme].setChecked(True)
        self.ask.render()
        try:
            self.ctx.save()
        except Exception as exc:
            error_sink().report("Could not save settings", exc, "warning")

    def open_settings(self) -> QDialog:
        from vrag_desktop.qt.settings_dialog import SettingsDialog

        dlg = SettingsDialog(self.ctx, self)
        dlg.settingsApplied.connect(self._settings_applied)
        dlg.setModal(True)
        dlg.show()
        return dlg

    def _settings_applied(self, changed: list[str]) -> None:
        if "theme" in changed:  # the dialog applied and saved it; follow it in the menu and transcript
            action = self.theme_actions.get(self.ctx.settings.theme)
            if action is not None:
                action.setChecked(True)
            self.ask.render()
        if "data_dir" in changed:
            self.corpora.reload()
            self.history.refresh()
            self.ask.refresh_corpora()
            self.ask.refresh_profiles()
        if {"agent", "top_k", "max_steps", "thinking"} & set(changed):
            self.ask.load_defaults()

    def show_help(self, html_text: str, title: str) -> QDialog:
        dlg = QDialog(self)
        dlg.setWindowTitle(title)
        view = QTextBrowser()
        view.setOpenExternalLinks(True)
        view.setHtml(html_text)
        ok = QPushButton("Open the Runtime panel" if "Connect" in html_text else "Close")
        close = QPushButton("Close")
        lay = QVBoxLayout(dlg)
        lay.addWidget(view)
        row = QHBoxLayout()
        row.addStretch(1)
        if "Connect" in html_text:
            row.addWidget(ok)
            ok.clicked.connect(lambda: (self.runtime_dock.show(), self.runtime_dock.raise_(), dlg.accept()))
        row.addWidget(close)
        close.clicked.connect(dlg.accept)
        lay.addLayout(row)
        dlg.resize(620, 520)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.show()
        self.help_dialog = dlg
        return dlg

    def about(self) -> None:
        from vrag_desktop import __version__

        QMessageBox.about(
            self,
            "About VRAG Desktop",
            f"<b>VRAG Desktop {__version__}</b><p>Multimodal retrieval-augmented reasoning over your own "
            "documents, images and videos, with the VRAG and VimRAG agents.</p>"
            f"<p>Data: {_esc(str(self.ctx.data_dir))}<br>Settings: {_esc(str(self.ctx.config_dir))}</p>",
        )

    # ------------------------------------------------------------------ messages
    def _on_report(self, level: str, title: str, message: str) -> None:
        self.notifications.show_message(level, title, message)
        self.statusBar().showMessage(f"{title}: {message}", 10000)

    def show_messages(self) -> QDialog:
        dlg = QDialog(self)
        dlg.setWindowTitle("Messages")
        text = QPlainTextEdit()
        text.setReadOnly(True)
        text.setPlainText(
            "\n".join(
                f"{r.when:%H:%M:%S}  {r.level.upper():7}  {r.title}: {r.message}"
                for r in error_sink().history
            )
            or "No messages."
        )
        lay = QVBoxLayout(dlg)
        lay.addWidget(text)
        dlg.resize(760, 400)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.show()
        self._messages = dlg
        return dlg

    def _work_changed(self, busy: bool, text: str) -> None:
        self.work_label.setText(text if busy else "")
        self.work_bar.setVisible(busy)

    # ------------------------------------------------------------------ closing
    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the layout; stop the run, indexing (kept, resumed next time) and the local server."""
        self._closing = True
        self.save_state()
        self.shutdown()
        event.accept()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        from vrag_desktop.qt.infra import workers
        from vrag_desktop.qt.infra.async_runner import async_runner

        self.replay.pause()
        if self.controller.running:
            self.controller.stop()
            self.controller.wait(3)
        for part, seconds in ((self.corpora, 10.0), (self.runtime, timeout_s)):
            try:
                part.shutdown(seconds)
            except Exception as exc:
                log.warning("shutdown of %s: %s", type(part).__name__, exc)
        workers.shutdown(5)
        async_runner().stop(3)


def _esc(text: str) -> str:
    import html

    return html.escape(text, quote=False)


def _dark(widget: QWidget) -> bool:
    return widget.palette().window().color().lightness() < 128


__all__ = ["WINDOW_TITLE", "MainWindow"]

"""The ask panel: choose agent, model, corpora and limits; ask; watch the reasoning stream in.

The model box shows and changes the one current model (:class:`~vrag_desktop.qt.current_model.
CurrentModel`: the profile store's active profile, which the CLI reads too), so what it shows is what
a run uses. While that model cannot answer (no model chosen, no key, no server), Ask is off and a
line over the question says why, with a button to where it is fixed (:mod:`.readiness_bar`).

The transcript is a :class:`~vrag_desktop.core.run.transcript.Transcript` (core), drawn by a
:class:`.transcript_view.TranscriptView` at most ten times a second, so a fast token stream never floods
the GUI thread. Thinking blocks fold; the answer lists its evidence as links that open in the evidence
view.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QT_TRANSLATE_NOOP, QSignalBlocker, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QTextDocument
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.events import AgentEvent, Evidence
from vrag_desktop.core.agents.names import AGENT_CHOICES
from vrag_desktop.core.endpoints.readiness import Readiness
from vrag_desktop.core.run.transcript import Transcript
from vrag_desktop.qt.ask.readiness_bar import ReadinessBar
from vrag_desktop.qt.ask.run_controller import RunRequest
from vrag_desktop.qt.ask.transcript_view import TranscriptView
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.flow_layout import FlowLayout
from vrag_desktop.qt.infra.widgets import clear_button, column, icon_only, row

AGENTS = tuple((label, kind) for kind, label in AGENT_CHOICES)
RENDER_INTERVAL_MS = 100
NO_MODEL = str(QT_TRANSLATE_NOOP("AskPanel", "No model chosen"))  # the model box's entry while none is


class AskPanel(QWidget):
    sendRequested = Signal(object)  # RunRequest
    stopRequested = Signal()
    evidenceClicked = Signal(object)  # Evidence
    fixRequested = Signal(object)  # Readiness: the person asked to fix why the model cannot answer
    exampleRequested = Signal(str)  # an example run's key ("vrag", "vimrag")

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.view = TranscriptView()
        self.view.anchorClicked.connect(self._on_link)
        self._running = False
        self._render_timer = QTimer(self, singleShot=True, interval=RENDER_INTERVAL_MS)
        self._render_timer.timeout.connect(self.render_transcript)

        # ---- options
        self.agent_combo = QComboBox()
        for label, key in AGENTS:
            self.agent_combo.addItem(label, key)
        self.profile_combo = QComboBox()
        self.profile_combo.setToolTip(
            self.tr(
                "The model that answers (an endpoint profile; edit them in the Runtime panel). Choosing one "
                "here makes it the current model everywhere, the command line included."
            )
        )
        self.corpora_button = QPushButton(
            self.tr("All corpora")
        )  # a push button leaves room for its menu arrow
        self.corpora_menu = QMenu(self.corpora_button)
        self.corpora_button.setMenu(self.corpora_menu)
        self.corpora_button.setToolTip(self.tr("Which corpora the agent searches"))
        self.top_k = QSpinBox(minimum=1, maximum=50)
        self.top_k.setToolTip(self.tr("Items retrieved per search"))
        self.max_steps = QSpinBox(minimum=1, maximum=100)
        self.max_steps.setToolTip(self.tr("Model turns before the agent must answer"))
        self.thinking = QCheckBox(self.tr("Thinking"))
        self.thinking.setToolTip(
            self.tr("VimRAG: let the model think before acting (VRAG's model always thinks)")
        )

        self.agent_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)  # never clipped
        self.profile_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.profile_combo.setMinimumContentsLength(14)
        # The options wrap in a narrow column instead of setting the window's minimum width: what
        # answers (agent, model) on one line, how (corpora, top-k, steps, thinking) on the next.
        self.options = QWidget()
        model_group = _group(QLabel(self.tr("Model")), self.profile_combo)
        model_group.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        limits = (
            self.corpora_button,
            _group(QLabel(self.tr("Top-k")), self.top_k),
            _group(QLabel(self.tr("Steps")), self.max_steps),
            self.thinking,
        )
        lines = QVBoxLayout(self.options)
        lines.setContentsMargins(0, 0, 0, 0)
        lines.setSpacing(4)
        for groups in ((_group(QLabel(self.tr("Agent")), self.agent_combo), model_group), limits):
            flow = FlowLayout()
            for group in groups:
                flow.addWidget(group)
            lines.addLayout(flow)

        # ---- question
        self.question_edit = QPlainTextEdit()
        self.question_edit.setPlaceholderText(
            self.tr("Ask a question about your documents…  (Ctrl+Enter to send)")
        )
        self.question_edit.setFixedHeight(64)
        self.question_edit.setTabChangesFocus(True)  # Tab moves on to Ask (a question needs no tab)
        self.send_button = QPushButton(self.tr("Ask"))
        self.send_button.setDefault(True)
        self.send_button.setObjectName("primary")
        self.send_button.setToolTip(self.tr("Send the question (Ctrl+Enter)"))
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setToolTip(self.tr("Stop the run (Esc); it is kept as cancelled"))
        self.stop_button.setEnabled(False)
        qrow = row(
            self.question_edit, column(None, self.send_button, self.stop_button), grow=self.question_edit
        )
        self.readiness_bar = ReadinessBar(self)
        self.readiness_bar.fixRequested.connect(self.fixRequested)

        # ---- transcript + find bar
        self.status_label = QLabel()
        self.status_label.setObjectName("muted")
        self.status_label.setWordWrap(True)  # a long "Run … · model · status" must not widen the column
        self.find_edit = QLineEdit(placeholderText=self.tr("Find in the reasoning…"))
        self.find_edit.returnPressed.connect(self.find_next)
        clear_button(self.find_edit)
        self.find_bar = QWidget()
        fb = QHBoxLayout(self.find_bar)
        fb.setContentsMargins(0, 0, 0, 0)
        prev_b, next_b, close_b = QToolButton(), QToolButton(), QToolButton()
        for b, arrow, name in (
            (prev_b, "↑", self.tr("Previous match")),
            (next_b, "↓", self.tr("Next match")),
            (close_b, "✕", self.tr("Close find bar")),
        ):
            b.setText(arrow)
            icon_only(b, name)
        prev_b.clicked.connect(lambda: self.find_next(backward=True))
        next_b.clicked.connect(self.find_next)
        close_b.clicked.connect(self.find_bar.hide)
        self.find_result = QLabel()
        for part in (self.find_edit, prev_b, next_b, self.find_result, close_b):
            fb.addWidget(part)
        self.find_bar.hide()

        column(
            self,
            self.options,
            self.readiness_bar,
            qrow,
            self.find_bar,
            self.view,
            self.status_label,
            grow=self.view,
            margins=6,
        )

        self.send_button.clicked.connect(self.send)
        self.stop_button.clicked.connect(self.stopRequested)
        self.agent_combo.currentIndexChanged.connect(self._agent_changed)
        self.profile_combo.currentIndexChanged.connect(self._profile_chosen)
        model = ctx.current_model
        model.changed.connect(lambda _name: self.refresh_profiles())
        model.readinessChanged.connect(self._readiness_changed)
        self.load_defaults()
        self.refresh_profiles()
        self._readiness_changed(model.readiness)
        self.refresh_corpora()
        self.render_transcript()

    # ------------------------------------------------------------------ options
    def load_defaults(self) -> None:
        s = self.ctx.settings
        self.agent_combo.setCurrentIndex(max(0, self.agent_combo.findData(s.agent)))
        self.top_k.setValue(s.top_k)
        self.max_steps.setValue(s.max_steps)
        self.thinking.setChecked(s.thinking)
        self._agent_changed()

    def _agent_changed(self) -> None:
        self.thinking.setEnabled(self.agent_combo.currentData() == "vimrag")

    def refresh_profiles(self) -> None:
        """List the profiles, the current model selected (an entry saying so while none is chosen)."""
        try:
            names = self.ctx.profiles.names()
        except Exception as exc:  # a damaged profiles file must not take the panel down
            error_sink().report(self.tr("Cannot read endpoint profiles"), exc)
            names = []
        active = self.ctx.current_model.name
        with QSignalBlocker(self.profile_combo):
            self.profile_combo.clear()
            if active is None:
                self.profile_combo.addItem(self.tr(NO_MODEL), None)
            for n in names:
                self.profile_combo.addItem(n, n)
            self.profile_combo.setCurrentIndex(max(0, self.profile_combo.findData(active)))

    def _profile_chosen(self) -> None:
        """The person picked a model here: it becomes the current model everywhere."""
        name = self.profile_combo.currentData()
        if name and name != self.ctx.current_model.name and not self.ctx.current_model.choose(name):
            self.refresh_profiles()  # refused (reported): show the model that is still current

    def _readiness_changed(self, value: Readiness) -> None:
        self.readiness_bar.show_readiness(value)
        self.send_button.setEnabled(not self._running and value.ready)
        self.send_button.setToolTip(
            self.tr("Send the question (Ctrl+Enter)")
            if value.ready
            else value.reason or self.tr("Checking the model…")
        )

    @property
    def ready(self) -> bool:
        """Whether the current model can answer, as far as the app knows without trying."""
        return self.ctx.current_model.readiness.ready

    def refresh_corpora(self, names: Iterable[str] | None = None) -> None:
        if names is None:
            try:
                names = self.ctx.library.names()
            except Exception as exc:
                error_sink().report(self.tr("Cannot list corpora"), exc)
                names = []
        chosen = set(self.selected_corpora() or self.ctx.settings.corpora or [])
        self.corpora_menu.clear()
        self._corpus_actions: list[QAction] = []
        all_action = self.corpora_menu.addAction(self.tr("All corpora"))
        all_action.triggered.connect(self._select_all_corpora)
        self.corpora_menu.addSeparator()
        for n in names:
            a = self.corpora_menu.addAction(n)
            a.setCheckable(True)
            a.setChecked(n in chosen)
            a.toggled.connect(self._update_corpora_label)
            self._corpus_actions.append(a)
        self._update_corpora_label()

    def _select_all_corpora(self) -> None:
        for a in self._corpus_actions:
            with QSignalBlocker(a):
                a.setChecked(False)
        self._update_corpora_label()

    def _update_corpora_label(self) -> None:
        sel = self.selected_corpora()
        self.corpora_button.setText(
            self.tr("All corpora")
            if not sel
            else sel[0]
            if len(sel) == 1
            else self.tr("%n corpora", "", len(sel))
        )

    def selected_corpora(self) -> list[str]:
        return [a.text() for a in getattr(self, "_corpus_actions", []) if a.isChecked()]

    def request(self) -> RunRequest:
        sel = self.selected_corpora()
        return RunRequest(
            question=self.question_edit.toPlainText().strip(),
            agent=str(self.agent_combo.currentData()),
            profile=self.profile_combo.currentData(),
            corpora=tuple(sel) if sel else None,
            top_k=self.top_k.value(),
            max_steps=self.max_steps.value(),
            thinking=self.thinking.isChecked(),
        )

    # ------------------------------------------------------------------ actions
    def send(self) -> None:
        if self._running:
            return
        req = self.request()
        if not req.question:
            self.set_status(self.tr("Type a question first."))
            self.question_edit.setFocus()
            return
        readiness = self.ctx.current_model.readiness
        if not readiness.ready:  # Ctrl+Enter while Ask is off
            self.set_status(readiness.reason or self.tr("Checking the model…"))
            return
        self.sendRequested.emit(req)

    def new_question(self) -> None:
        """Ctrl+N: empty question, focus it (the last run stays in history)."""
        if self._running:
            return
        self.question_edit.clear()
        self.clear()
        self.question_edit.setFocus()

    def set_running(self, running: bool) -> None:
        self._running = running
        self.send_button.setEnabled(not running and self.ready)
        self.stop_button.setEnabled(running)
        self.question_edit.setReadOnly(running)

    def set_status(self, text: str) -> None:
        self.status_label.setText(text)

    # ------------------------------------------------------------------ transcript
    @property
    def transcript(self) -> Transcript:
        return self.view.transcript

    @property
    def question(self) -> str:
        """The question of the transcript shown (a live run's, or a saved run's)."""
        return self.view.question

    def clear(self, question: str = "") -> None:
        self.view.reset(question)
        self.set_status("")
        self.render_transcript()

    def begin(self, question: str) -> None:
        """A live run starts."""
        self.clear(question)
        self.set_running(True)
        self.set_status(self.tr("Running…"))

    def apply(self, ev: AgentEvent) -> None:
        self.transcript.apply(ev)
        if not self._render_timer.isActive():
            self._render_timer.start()

    def load(self, question: str, events: Iterable[AgentEvent]) -> None:
        """Show a saved run (all at once, exactly as recorded)."""
        self.clear(question)
        self.question_edit.setPlainText(question)
        for ev in events:
            self.transcript.apply(ev)
        self.render_transcript()

    def render_transcript(self) -> None:
        self.view.running = self._running
        self.view.draw()

    def scroll_to_end(self) -> None:
        bar = self.view.verticalScrollBar()
        bar.setValue(bar.maximum())

    def to_html(self) -> str:
        return self.view.to_html()

    def _on_link(self, url: QUrl) -> None:
        text = url.toString()
        kind, _, arg = text.partition(":")
        if kind == "example":
            self.exampleRequested.emit(arg)
        elif kind == "toggle" and arg.isdigit() and int(arg) < len(self.transcript.blocks):
            self.view.toggle(int(arg))
        elif kind == "evidence" and arg.isdigit() and self.transcript.answer is not None:
            evidence = self.transcript.answer.evidence
            i = int(arg)
            if 0 <= i < len(evidence):
                self.evidenceClicked.emit(evidence[i])

    def evidence_links(self) -> list[Evidence]:
        return list(self.transcript.answer.evidence) if self.transcript.answer else []

    # ------------------------------------------------------------------ find
    def show_find(self) -> None:
        self.find_bar.show()
        self.find_edit.setFocus()
        self.find_edit.selectAll()

    def find_next(self, backward: bool = False) -> bool:
        text = self.find_edit.text()
        if not text:
            return False
        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        found = self.view.find(text, flags)
        if not found:  # wrap around
            cursor = self.view.textCursor()
            cursor.movePosition(cursor.MoveOperation.End if backward else cursor.MoveOperation.Start)
            self.view.setTextCursor(cursor)
            found = self.view.find(text, flags)
        self.find_result.setText("" if found else self.tr("not found"))
        return found


def _group(label: QLabel, field: QWidget) -> QWidget:
    """A label and its field, kept together on one line when the options wrap."""
    group = QWidget()
    lay = QHBoxLayout(group)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(6)
    lay.addWidget(label)
    lay.addWidget(field, 1)
    return group


__all__ = ["AskPanel"]

"""New evaluation…: what to measure (retrieval or answers), on which dataset (one of the app's, or a
file) and which corpora; for answers the agent, its endpoint profile, the judge and the step limit.
It only gathers an :class:`EvalRequest`; the runner does the work."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSpinBox,
    QWidget,
)

from vrag_desktop.core.agents.names import AGENT_CHOICES
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.datasets.dataset_picker import DatasetPicker
from vrag_desktop.qt.evaluation.runner import EvalRequest
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.widgets import column

NO_MODEL = "No model chosen"  # the model boxes' entry while none is chosen
JUDGES = (("exact", "Exact match (no model)"), ("anls", "ANLS (no model)"), ("model", "A judge model"))


class NewEvaluationDialog(QDialog):
    """Gathers an :class:`EvalRequest`; :meth:`request` reads it after ``accept``."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("New evaluation")
        form = QFormLayout()
        self.kind = QComboBox()
        self.kind.addItem("Retrieval: are the evidence pages found?", "retrieval")
        self.kind.addItem("Answers: does the agent answer right?", "answers")
        self.dataset = DatasetPicker("Datasets (*.json *.jsonl);;All files (*)")
        self.corpora = QListWidget()
        self.corpora.setMaximumHeight(110)
        self.agent = QComboBox()
        for kind, label in AGENT_CHOICES:
            self.agent.addItem(label, kind)
        self.profile = QComboBox()
        self.judge = QComboBox()
        for key, label in JUDGES:
            self.judge.addItem(label, key)
        self.judge_profile = QComboBox()
        self.max_steps = QSpinBox()
        self.max_steps.setRange(1, 50)
        self.max_steps.setValue(min(50, ctx.settings.max_steps))
        form.addRow("Measure", self.kind)
        form.addRow("Dataset", self.dataset)
        form.addRow("Corpora", self.corpora)
        self._answer_rows: list[QWidget] = [
            self.agent,
            self.profile,
            self.judge,
            self.judge_profile,
            self.max_steps,
        ]
        form.addRow("Agent", self.agent)
        form.addRow("Model profile", self.profile)
        form.addRow("Judge", self.judge)
        form.addRow("Judge profile", self.judge_profile)
        form.addRow("Max steps", self.max_steps)
        self.form = form
        self.note = QLabel(
            "Results are saved item by item under the data folder's evaluations/: a stopped evaluation "
            "resumes where it stopped. Each answer is a run kept in History."
        )
        self.note.setWordWrap(True)
        self.note.setProperty("role", "muted")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Start")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        column(self, form, self.note, self.buttons)
        self._fill()
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.judge.currentIndexChanged.connect(self._kind_changed)
        self._kind_changed()
        self.resize(520, self.sizeHint().height())

    def _fill(self) -> None:

        datasets: list[tuple[str, str]] = []
        try:
            datasets += [(name, str(self.ctx.datasets.path(name))) for name in self.ctx.datasets.names()]
        except Exception as exc:
            error_sink().report("Cannot list the datasets", exc, "warning")
        self.dataset.set_datasets(datasets)
        try:
            names = self.ctx.library.names()
        except Exception as exc:
            error_sink().report("Cannot list the corpora", exc, "warning")
            names = []
        for name in names:
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            self.corpora.addItem(item)
        try:
            profiles = self.ctx.profiles.names()
        except Exception as exc:
            error_sink().report("Cannot read the endpoint profiles", exc, "warning")
            profiles = []
        active = self.ctx.current_model.name  # the one current model, as Ask uses
        for combo in (self.profile, self.judge_profile):
            if active is None:  # none chosen yet: none is picked for the person either
                combo.addItem(NO_MODEL, None)
            for name in profiles:
                combo.addItem(name, name)
            combo.setCurrentIndex(max(0, combo.findData(active)))

    def _kind_changed(self) -> None:
        answers = self.kind.currentData() == "answers"
        for w in self._answer_rows:
            show = answers and (w is not self.judge_profile or self.judge.currentData() == "model")
            self.form.setRowVisible(w, show)
        self.adjustSize()

    def request(self) -> EvalRequest | None:
        """The request, or None (said in the dialog's note) when something is missing."""
        dataset = self.dataset.chosen()
        if not dataset:
            self.note.setText("Choose a dataset first.")
            return None
        chosen = [
            self.corpora.item(i).text()
            for i in range(self.corpora.count())
            if self.corpora.item(i).checkState() == Qt.CheckState.Checked
        ]
        if self.corpora.count() and not chosen:
            self.note.setText("Tick at least one corpus.")
            return None
        if len(chosen) == self.corpora.count():
            chosen = []  # all: the indexed ones (a corpus not yet indexed is left out, not refused)
        kind = str(self.kind.currentData())
        if kind == "retrieval":
            return EvalRequest("retrieval", str(dataset), tuple(chosen))
        judge = str(self.judge.currentData())
        if self.profile.currentData() is None or (
            judge == "model" and self.judge_profile.currentData() is None
        ):
            self.note.setText("Choose the model first: none is chosen yet.")
            return None
        return EvalRequest(
            "answers",
            str(dataset),
            tuple(chosen),
            agent=str(self.agent.currentData()),
            profile=self.profile.currentData(),
            judge=judge,
            judge_profile=self.judge_profile.currentData() if judge == "model" else None,
            max_steps=self.max_steps.value(),
        )

    def accept(self) -> None:
        if self.request() is not None:
            super().accept()

"""The dataset item dialog: "Add to dataset…" for a saved run, and editing an item in the Datasets view.

Ground truth is what the person confirms, never the agent's answer: from a run, the reference answer
is pre-filled but marked as to be checked, and saving needs the "I checked it" tick. The item is
written off the GUI thread; a refusal (empty field, taken uid, damaged dataset) is shown in the dialog,
which stays open so nothing typed is lost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QLabel,
    QLayout,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.datasets.store import DatasetStore, check_name, evidence_regions, with_regions
from vrag_desktop.qt.datasets.evidence_choice import EvidenceChoice, Pick, candidates, evidence_fields
from vrag_desktop.qt.infra import theme
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.infra.widgets import editable_combo

if TYPE_CHECKING:
    from vrag_desktop.core.run.evidence import EvidenceBoard

QUERY_TYPES = ("", "Single-Hop", "Multi-Hop", "Single-Hop_Single-Span", "Single-Hop_Multi-Span")
CHECK_NOTE = (
    "Pre-filled with the run's answer — the agent's, not yet ground truth. Check it against the "
    "evidence and correct it: the dataset keeps what you confirm."
)


class ItemDialog(QDialog):
    """Add (``board`` given: a run's evidence to tick) or edit (``item`` given) one dataset item.
    ``saved(dataset, item)`` after the write; ``picksChanged(list)`` for the evidence view."""

    saved = Signal(str, object)
    picksChanged = Signal(list)

    def __init__(
        self,
        store: DatasetStore,
        *,
        question: str = "",
        answer: str = "",
        board: EvidenceBoard | None = None,
        dataset: str = "",
        item: DatasetItem | None = None,
        names: Iterable[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.item = item
        self.from_run = board is not None
        self._busy = False
        self.setWindowTitle("Edit dataset item" if item else "Add to dataset")
        self._build(list(names), dataset)
        if item is not None:
            self._fill_item(item)
        else:
            self.question.setPlainText(question)
            self.answer.setPlainText(answer)
            if board is not None:
                found = candidates(board)
                cited = {(k, n) for k, n in board.answer_evidence()}
                self.evidence.set_candidates(found, [c.pick for c in found if c.pick in cited])
        self._evidence_changed()

    # ---------------------------------------------------------------- layout
    def _build(self, names: list[str], dataset: str) -> None:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.question = QPlainTextEdit()
        self.question.setPlaceholderText("The question, as a person would ask it")
        self.question.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 16)
        self.question.setMinimumWidth(self.fontMetrics().horizontalAdvance("x") * 72)
        form.addRow("Question", self.question)
        self.answer = QPlainTextEdit()
        self.answer.setPlaceholderText("The correct answer (ground truth)")
        self.answer.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 16)
        form.addRow("Reference answer", self.answer)
        self.note = QLabel(CHECK_NOTE)
        self.note.setWordWrap(True)
        self.note.setProperty("role", "warn")
        self.checked = QCheckBox("I checked the reference answer: it is correct")
        if self.from_run:
            form.addRow("", self.note)
            form.addRow("", self.checked)
        else:
            self.note.hide()
            self.checked.hide()

        self.dataset = editable_combo(names, "Pick a dataset or type a new name")
        self.dataset.setCurrentText(dataset or (names[0] if names else ""))
        self.dataset.setEnabled(self.item is None)
        self.dataset_hint = QLabel()
        self.dataset_hint.setProperty("role", "hint")
        self.dataset.currentTextChanged.connect(self._dataset_changed)
        form.addRow("Dataset", self.dataset)
        form.addRow("", self.dataset_hint)
        self.uid = QLineEdit()
        self.uid.setPlaceholderText("left empty: a new uid is made")
        if self.item is not None:
            form.addRow("Uid", self.uid)
        self.query_type = editable_combo(QUERY_TYPES, "optional, e.g. Single-Hop or Multi-Hop")
        form.addRow("Query type", self.query_type)

        self.evidence = EvidenceChoice()
        self.evidence.setMinimumHeight(self.fontMetrics().lineSpacing() * 6)
        self.evidence.changed.connect(self._evidence_changed)
        if self.from_run:
            hint = QLabel(
                "Ticked: what the answer cited. Tick pages or regions here, or click them in the "
                "Evidence panel (pick mode is on while this dialog is open)."
            )
            hint.setWordWrap(True)
            hint.setProperty("role", "hint")
            form.addRow("Evidence", self.evidence)
            form.addRow("", hint)
        else:
            self.evidence.hide()
        self.file_name = QLineEdit()
        self.file_name.setPlaceholderText("the evidence document's file name, e.g. report.pdf")
        self.pages = QLineEdit()
        self.pages.setPlaceholderText("page numbers from 1, e.g. 2, 5")
        self.regions_label = QLabel()
        self.regions_label.setProperty("role", "hint")
        for w in (self.file_name, self.pages):
            w.setReadOnly(self.from_run)
        form.addRow("Evidence file", self.file_name)
        form.addRow("Pages", self.pages)
        form.addRow("", self.regions_label)

        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setProperty("role", "error")
        self.message.hide()
        banner = QFrame()
        banner.setProperty("role", "banner-error")
        QVBoxLayout(banner).addWidget(self.message)
        banner.setVisible(False)
        self.banner = banner

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.submit)
        self.buttons.rejected.connect(self.reject)
        root = QVBoxLayout(self)
        root.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)  # a message grows the dialog
        root.addLayout(form, 1)
        root.addWidget(banner)
        root.addWidget(self.buttons)
        self._dataset_changed(self.dataset.currentText())

    def _fill_item(self, item: DatasetItem) -> None:
        self.question.setPlainText(item.query)
        self.answer.setPlainText(item.reference_answer)
        self.uid.setText(item.uid)
        self.query_type.setCurrentText(item.query_type)
        self.file_name.setText(item.file_name)
        self.pages.setText(", ".join(map(str, item.reference_page)))

    # ---------------------------------------------------------------- reacting
    def _dataset_changed(self, text: str) -> None:
        name = text.strip()
        if not name or self.item is not None:
            hint = "" if self.item else "Type a name to start a new dataset."
        else:
            try:
                check_name(name)
                known = name in {self.dataset.itemText(i) for i in range(self.dataset.count())}
                hint = "" if known else f"A new dataset “{name}” will be created."
            except ValueError as exc:
                hint = str(exc)
        self.dataset_hint.setText(hint)
        self.dataset_hint.setVisible(bool(hint))

    def _evidence_changed(self) -> None:
        if self.from_run:
            try:
                file, pages, regions = evidence_fields(self.evidence.chosen())
            except ValueError as exc:
                self.regions_label.setText(str(exc))
                self.picksChanged.emit(self.evidence.picks())
                return
            self.file_name.setText(file)
            self.pages.setText(", ".join(map(str, pages)))
            n = len(regions)
            self.regions_label.setText(
                f"{n} region{'s' if n != 1 else ''} picked" if n else "No region picked"
            )
            self.picksChanged.emit(self.evidence.picks())
        elif self.item is not None:
            n = len(evidence_regions(self.item))
            self.regions_label.setText(f"{n} picked region{'s' if n != 1 else ''} kept" if n else "")

    def toggle_pick(self, key: str, number: Any) -> None:
        """A click in the evidence view's pick mode."""
        self.evidence.toggle((key, number if isinstance(number, int) else None))

    def picks(self) -> list[Pick]:
        return self.evidence.picks()

    # ---------------------------------------------------------------- saving
    def collect(self) -> tuple[str, DatasetItem]:
        """(dataset name, item) from the fields; ValueError with the message for the person."""
        question = self.question.toPlainText().strip()
        answer = self.answer.toPlainText().strip()
        if not question:
            raise ValueError("The question is empty: write the question the item asks.")
        if not answer:
            raise ValueError("The reference answer is empty: write the correct answer.")
        if self.from_run and not self.checked.isChecked():
            raise ValueError(
                "Tick “I checked the reference answer” once you have checked it: the dataset's "
                "answers are ground truth."
            )
        name = check_name(self.dataset.currentText())
        if self.from_run:
            file, pages, regions = evidence_fields(self.evidence.chosen())
        else:
            file, pages = self.file_name.text().strip(), _pages(self.pages.text())
            regions = evidence_regions(self.item) if self.item else []
        base = self.item or DatasetItem("", question, answer)
        item = dataclasses.replace(
            base,
            uid=self.uid.text().strip() if self.item else "",
            query=question,
            reference_answer=answer,
            file_name=file,
            reference_page=pages,
            query_type=self.query_type.currentText().strip(),
        )
        return name, with_regions(item, regions)

    def submit(self) -> bool:
        """Check the fields and write the item in a worker; False (and a message) when refused."""
        if self._busy:
            return False
        try:
            name, item = self.collect()
        except ValueError as exc:
            self.show_message(str(exc))
            return False
        store, original = self.store, self.item

        def work() -> DatasetItem:
            if original is None:
                return store.add_item(name, item, create=True)
            return store.update_item(name, original.uid, item)

        self._set_busy(True)
        run_call(work, on_done=lambda written: self._saved(name, written), on_error=self._failed)
        return True

    def _saved(self, name: str, item: DatasetItem) -> None:
        if not alive(self):
            return
        self._set_busy(False)
        verb = "Saved" if self.item else "Added"
        error_sink().report(f"{verb} to dataset {name}", f"item {item.uid}: {item.query[:80]}", "info")
        self.saved.emit(name, item)
        self.accept()

    def _failed(self, exc: BaseException) -> None:
        error_sink().report("Could not save the dataset item", exc, "warning")
        if alive(self):
            self._set_busy(False)
            self.show_message(describe(exc))

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(not busy)

    def show_message(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
        self.banner.setVisible(bool(text))
        theme.set_role(self.message, "role", "error")


def _pages(text: str) -> tuple[int, ...]:
    parts = [p for p in text.replace(";", ",").replace(" ", ",").split(",") if p]
    if not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"Pages are numbers counted from 1, separated by commas (got “{text}”).")
    return tuple(sorted({int(p) for p in parts}))


__all__ = ["QUERY_TYPES", "ItemDialog"]

"""Where an imported dataset file goes: a new dataset named after the file (the default), or one
the person picks. Why a question: an import used to append to whichever dataset happened to be
selected (often the one just labelled by hand), silently mixing two sets of questions."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)


def new_name(source: str, taken: list[str]) -> str:
    """The file's stem, made unique among ``taken`` (``more``, ``more-2``, …)."""
    stem = Path(source).stem.strip() or "imported"
    name, n = stem, 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}"
    return name


class ImportTargetDialog(QDialog):
    """Asks for the target of importing ``source``; :meth:`target` is the chosen dataset's name."""

    def __init__(
        self, source: str, names: list[str], current: str | None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import a dataset file")
        layout = QVBoxLayout(self)
        head = QLabel(f"Import the items of <b>{Path(source).name}</b> into:")
        head.setWordWrap(True)
        layout.addWidget(head)
        self.new_button = QRadioButton("A new dataset")
        self.existing_button = QRadioButton("An existing dataset, after its items")
        self.new_name = QLineEdit(new_name(source, names))
        self.new_name.setAccessibleName("New dataset's name")
        self.existing = QComboBox()
        self.existing.setAccessibleName("Existing dataset")
        self.existing.addItems(names)
        if current in names:
            self.existing.setCurrentText(current)
        group = QButtonGroup(self)
        group.addButton(self.new_button)
        group.addButton(self.existing_button)
        form = QFormLayout()
        form.addRow(self.new_button, self.new_name)
        form.addRow(self.existing_button, self.existing)
        layout.addLayout(form)
        self.note = QLabel("")
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.existing_button.setEnabled(bool(names))
        self.existing.setEnabled(False)
        self.new_button.setChecked(True)
        self._names = names
        for w in (self.new_button, self.existing_button):
            w.toggled.connect(self._update)
        self.new_name.textChanged.connect(self._update)
        self._update()

    def target(self) -> str | None:
        """The dataset the items go to; None while the choice cannot be taken (an empty or taken name)."""
        if self.existing_button.isChecked():
            return self.existing.currentText() or None
        name = self.new_name.text().strip()
        return name if name and name not in self._names else None

    def _update(self) -> None:
        new = self.new_button.isChecked()
        self.new_name.setEnabled(new)
        self.existing.setEnabled(not new)
        name = self.new_name.text().strip()
        if new and name in self._names:
            self.note.setText(
                f"A dataset named “{name}” exists: pick it below to add to it, or choose another name."
            )
        elif new and not name:
            self.note.setText("Give the new dataset a name.")
        else:
            self.note.setText("")
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(self.target() is not None)


def ask_import_target(parent: QWidget, source: str, names: list[str], current: str | None) -> str | None:
    """The modal question; None when cancelled."""
    dialog = ImportTargetDialog(source, names, current, parent)
    return dialog.target() if dialog.exec() == QDialog.DialogCode.Accepted else None


__all__ = ["ImportTargetDialog", "ask_import_target", "new_name"]

"""The inline name field for a new or renamed corpus (never a modal): it checks the name as the person
types and says under the field why a name cannot be used. A new corpus also gets its embedder here
(the settings' default first): a corpus keeps the embedder it was made with, and choosing it later
would mean embedding everything again."""

from __future__ import annotations

from collections.abc import Callable, Collection

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.infra.widgets import clear_button


def check_name(name: str) -> str:
    """core.library.check_name, imported when first needed (the window opens without numpy)."""
    from vrag_desktop.core.corpus.library import check_name as check

    return check(name)


class CorpusNameEditor(QFrame):
    """Name field, Create/Rename and Cancel, and the problem line. ``accepted(mode, old, text)`` on
    Enter or the button (``mode`` is "new" or "rename"); ``cancelled`` on Cancel."""

    accepted = Signal(str, str, str)
    cancelled = Signal()

    def __init__(
        self,
        taken: Callable[[], Collection[str]],
        parent: QWidget | None = None,
        default_embedder: Callable[[], str] = lambda: "minilm",
    ) -> None:
        super().__init__(parent)
        self._taken = taken
        self._default_embedder = default_embedder
        self.editing: tuple[str, str] | None = None  # ("new", "") or ("rename", old name)
        ed = QVBoxLayout(self)
        ed.setContentsMargins(0, 0, 0, 0)
        ed.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(4)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("Name of the new corpus")
        clear_button(self.name_edit)
        self.name_ok = QPushButton("Create")
        self.name_ok.setDefault(True)
        self.name_cancel = QToolButton()
        self.name_cancel.setText("Cancel")
        row.addWidget(self.name_edit, 1)
        row.addWidget(self.name_ok)
        row.addWidget(self.name_cancel)
        ed.addLayout(row)
        self.embedder_row = QWidget()
        er = QHBoxLayout(self.embedder_row)
        er.setContentsMargins(0, 0, 0, 0)
        er.setSpacing(4)
        self.embedder_combo = QComboBox()
        self.embedder_combo.setObjectName("newCorpusEmbedder")
        self.embedder_combo.setEditable(True)  # a local model folder or another hub id works too
        self.embedder_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.embedder_combo.setToolTip(
            "What embeds this corpus's pages; it stays with the corpus (Settings chooses the default)"
        )
        er.addWidget(QLabel("Embedder"))
        er.addWidget(self.embedder_combo, 1)
        ed.addWidget(self.embedder_row)
        self.embedder_row.hide()
        self.name_error = QLabel()
        self.name_error.setWordWrap(True)
        set_role(self.name_error, "role", "error")
        self.name_error.hide()
        ed.addWidget(self.name_error)
        self.hide()
        self.name_ok.clicked.connect(self._accept)
        self.name_cancel.clicked.connect(self.cancelled.emit)
        self.name_edit.returnPressed.connect(self._accept)
        self.name_edit.textChanged.connect(self._validate)

    def open(self, mode: str, name: str) -> None:
        self.editing = (mode, name)
        self.name_ok.setText("Create" if mode == "new" else "Rename")
        self.name_edit.setPlaceholderText("Name of the new corpus" if mode == "new" else "New name")
        self.name_edit.setText(name)
        self.name_error.hide()
        self.embedder_row.setVisible(mode == "new")
        if mode == "new":
            self._fill_embedders()
        self.show()
        self.name_edit.setFocus()
        self.name_edit.selectAll()

    def _fill_embedders(self) -> None:
        """The app's embedders, the settings' default chosen (listed first if it is none of them)."""
        from vrag_desktop.core.embedders import KNOWN_EMBEDDERS, same_embedder

        combo, default = self.embedder_combo, self._default_embedder()
        combo.clear()
        for spec, tip in KNOWN_EMBEDDERS:
            combo.addItem(spec)
            combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        at = next((i for i, (spec, _t) in enumerate(KNOWN_EMBEDDERS) if same_embedder(spec, default)), None)
        if at is None:
            combo.insertItem(0, default)
            combo.setItemData(0, "the default in Settings", Qt.ItemDataRole.ToolTipRole)
            at = 0
        combo.setCurrentIndex(at)

    def embedder(self) -> str:
        """The embedder chosen for the new corpus."""
        return self.embedder_combo.currentText().strip() or self._default_embedder()

    def close_editor(self) -> None:
        self.editing = None
        self.hide()
        self.name_error.hide()

    def problem(self, text: str) -> None:
        """Say why the name cannot be used (opening the field for a new corpus if it is closed)."""
        if not self.isVisible() and self.editing is None:
            self.open("new", "")
        self.name_error.setText(text[:1].upper() + text[1:])
        self.name_error.show()

    def usable(self, text: str, current: str | None = None) -> str | None:
        """``text`` as the name of a new corpus (or of ``current``, renamed), or None after saying
        under the field why it cannot be."""
        try:
            name = check_name(text)
        except Exception as exc:
            self.problem(str(exc))
            return None
        if name != current and name in self._taken():
            self.problem(f"a corpus named '{name}' already exists")
            return None
        return name

    def _validate(self, text: str) -> None:
        if not text.strip():
            self.name_error.hide()
            self.name_ok.setEnabled(False)
            return
        problem = None
        try:
            name = check_name(text)
            old = self.editing[1] if self.editing else ""
            if name in self._taken() and name != old:
                problem = f"a corpus named '{name}' already exists"
        except Exception as exc:
            problem = str(exc)
        self.name_ok.setEnabled(problem is None)
        if problem:
            self.problem(problem)
        else:
            self.name_error.hide()

    def _accept(self) -> None:
        if self.editing is not None:
            mode, old = self.editing
            self.accepted.emit(mode, old, self.name_edit.text())

"""Which corpus files and folders opened with the app go to (``vrag-desktop gui <folder>``, the
desktop's "Open with", a second launch handing its paths over).

Why ask: these paths come from outside the window, so the corpus selected in the panel says
nothing about where the person wants them; adding them there silently mixed a new folder into
whatever corpus happened to be selected. The dialog offers a new corpus named after the folder
(the usual wish for a folder) or any existing one, and says what was given: "1 folder (12
files)", counted off the GUI thread. It is window-modal but never blocks the event loop
(``open``, not ``exec``); ``chosen(name, new)`` says where to add.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.corpora.corpus_name_editor import check_name
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.infra.theme import set_role

if TYPE_CHECKING:
    from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel


def suggested_name(paths: list[str]) -> str:
    """A corpus name from the first folder's (or file's) name, made valid; "" when none can be."""
    if not paths:
        return ""
    first = Path(paths[0])
    base = first.name if first.is_dir() else first.stem
    text = "".join(c if c.isalnum() or c in "-_." else "-" for c in base).strip("-.") or "corpus"
    try:
        return check_name(text)
    except Exception:
        return ""


def given_text(paths: list[str]) -> str:
    """What was given, before it is counted: "the folder 'reports'", "3 files"."""
    folders = [p for p in paths if os.path.isdir(p)]
    if len(paths) == 1:
        kind = "folder" if folders else "file"
        return f"the {kind} '{Path(paths[0]).name}'"
    return (
        f"{len(folders)} folder(s) and {len(paths) - len(folders)} file(s)"
        if folders
        else f"{len(paths)} files"
    )


class AddToCorpusDialog(QDialog):
    """See the module docstring."""

    chosen = Signal(str, bool)  # corpus name, whether it is a new one

    def __init__(
        self, paths: list[str], corpora: list[str], selected: str | None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.paths = paths
        self.corpora = corpora
        self.setWindowTitle("Add to a corpus")
        self.setObjectName("addToCorpus")
        self.what = QLabel(f"Add {given_text(paths)} to:")
        self.what.setWordWrap(True)
        self.what.setObjectName("addWhat")
        self.new_radio = QRadioButton("A new corpus named")
        self.new_name = QLineEdit(suggested_name(paths))
        self.new_name.setObjectName("newCorpusName")
        self.existing_radio = QRadioButton("The corpus")
        self.existing = QComboBox()
        self.existing.setObjectName("existingCorpus")
        self.existing.addItems(corpora)
        group = QButtonGroup(self)
        group.addButton(self.new_radio)
        group.addButton(self.existing_radio)
        self.problem = QLabel("")
        set_role(self.problem, "role", "error")
        self.problem.setWordWrap(True)
        self.problem.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Add")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        grid = QGridLayout()
        grid.addWidget(self.new_radio, 0, 0)
        grid.addWidget(self.new_name, 0, 1)
        grid.addWidget(self.existing_radio, 1, 0)
        grid.addWidget(self.existing, 1, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.what)
        lay.addLayout(grid)
        lay.addWidget(self.problem)
        lay.addWidget(self.buttons)

        same = self.new_name.text()
        if same and same in corpora:  # the folder's own corpus exists: add to it, by default
            self.existing.setCurrentText(same)
            self.existing_radio.setChecked(True)
        elif same or not corpora:
            self.new_radio.setChecked(True)
        else:
            self.existing.setCurrentText(selected or corpora[0])
            self.existing_radio.setChecked(True)
        self.existing_radio.setVisible(bool(corpora))  # no corpus yet: only a new one to name
        self.existing.setVisible(bool(corpora))
        self.setMinimumWidth(380)
        self.new_name.textEdited.connect(lambda _t: self.new_radio.setChecked(True))
        self.existing.activated.connect(lambda _i: self.existing_radio.setChecked(True))
        group.buttonToggled.connect(lambda *_a: self._validate())
        self.new_name.textChanged.connect(lambda _t: self._validate())
        self._validate()

    def count(self, summary: Callable[[list[str]], str]) -> None:
        """Count what was given off the GUI thread; the line then says "1 folder (12 files)"."""
        run_call(
            summary,
            self.paths,
            name="Count the files to add",
            on_done=if_alive(self, lambda text: self.what.setText(f"Add {text} to:")),
            report=False,
        )

    def choice(self) -> tuple[str, bool] | None:
        """``(name, new)`` as chosen now, or None (the problem shown) when it cannot be used."""
        if self.existing_radio.isChecked():
            name = self.existing.currentText()
            return (name, False) if name else None
        try:
            name = check_name(self.new_name.text())
        except Exception as exc:
            self._say(str(exc))
            return None
        if name in self.corpora:
            return name, False  # named like an existing one: that one, as a person would mean
        return name, True

    def _validate(self) -> None:
        self.problem.hide()
        self.ok_button.setEnabled(self.choice() is not None)

    def _say(self, text: str) -> None:
        self.problem.setText(text[:1].upper() + text[1:])
        self.problem.show()

    def accept(self) -> None:
        got = self.choice()
        if got is None:
            return
        super().accept()
        self.chosen.emit(*got)


def ask_and_add(panel: CorporaPanel, paths: list[str]) -> AddToCorpusDialog | None:
    """Ask which corpus ``paths`` go to, then add and index them there (a new corpus is created)."""
    if not paths:
        return None
    from vrag_desktop.core.corpus.scan import paths_summary
    from vrag_desktop.qt.infra.errors import error_sink

    try:
        names = panel.ctx.library.names()
    except Exception as exc:  # an unusable data directory: said, and nothing is added
        error_sink().report("Cannot add the files", exc)
        return None
    dlg = AddToCorpusDialog(list(paths), names, panel.selected_corpus(), panel)
    dlg.chosen.connect(if_alive(panel, lambda name, _new: panel.add_paths(list(paths), corpus=name)))
    dlg.finished.connect(dlg.deleteLater)
    dlg.count(paths_summary)
    dlg.open()
    return dlg

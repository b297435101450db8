"""The corpora panel's commands: the tool bar above the tree (New corpus, Add…, Re-scan, Check,
Rename, Remove) with their keys, the right-click menu of a row (with Check… and the folder-watching
switch), and the dialogs they open (the panel's defaults for ``confirm``, ``choose_folder`` and
``choose_files``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QColor, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QMenu,
    QMessageBox,
    QToolButton,
    QTreeWidgetItem,
    QWidget,
)

from vrag_desktop.core.corpus import kinds
from vrag_desktop.qt.corpora.corpora_rows import KEY_ROLE, KIND_ROLE, NAME_ROLE, line_icon

if TYPE_CHECKING:
    from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel


def tool_button(
    label: str, icon: str, tip: str, slot: Callable[[], Any] | None, *, text: bool = False
) -> QToolButton:
    """A flat tool button whose line icon (``icon``) is drawn in the theme's ink by ``restyle``."""
    b = QToolButton()
    b.setText(label)
    b.setProperty("icon_shape", icon)
    b.setToolTip(tip)
    b.setAutoRaise(True)
    b.setIconSize(QSize(16, 16))
    b.setToolButtonStyle(
        Qt.ToolButtonStyle.ToolButtonTextBesideIcon if text else Qt.ToolButtonStyle.ToolButtonIconOnly
    )
    if slot is not None:
        b.clicked.connect(lambda _=False: slot())
    return b


class CorporaToolbar(QWidget):
    """New corpus and Add… on the left; Re-scan, Check, Rename, Remove (for the selected corpus) on the
    right.
    F2, F5 and Delete work anywhere in the panel."""

    def __init__(self, panel: CorporaPanel) -> None:
        super().__init__(panel)
        bar = QHBoxLayout(self)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.setSpacing(4)
        self.new_button = tool_button(
            "New corpus", "plus", "Create an empty corpus", panel.new_corpus, text=True
        )
        self.add_button = tool_button(
            "Add", "folder", "Add folders or files to the selected corpus", None, text=True
        )
        add_menu = QMenu(self.add_button)
        self.act_add_folder = add_menu.addAction("Add folder…", panel.add_folder)
        self.act_add_files = add_menu.addAction("Add files…", panel.add_files)
        self.add_button.setMenu(add_menu)
        self.add_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.add_button.setText("Add…")
        self.add_button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.rescan_button = tool_button(
            "Re-scan", "refresh", "Re-scan: pick up new, changed and deleted files (F5)", panel.rescan
        )
        self.check_button = tool_button(
            "Check", "check", "Check the selected corpus for damage (Repair mends what is found)", panel.check
        )
        self.rename_button = tool_button(
            "Rename", "pencil", "Rename the selected corpus (F2)", panel.start_rename
        )
        self.remove_button = tool_button(
            "Remove", "trash", "Remove the selected corpus (your files are not touched)", panel.remove_corpus
        )
        for w in (self.new_button, self.add_button):
            bar.addWidget(w)
        bar.addStretch(1)
        for w in self.selection_buttons():
            bar.addWidget(w)
        for key, fn in (("F2", panel.start_rename), ("F5", panel.rescan), ("Delete", panel.remove_corpus)):
            act = QAction(panel)
            act.setShortcut(QKeySequence(key))
            act.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            act.triggered.connect(lambda _=False, fn=fn: fn())
            panel.addAction(act)

    def selection_buttons(self) -> tuple[QToolButton, ...]:
        """The buttons that act on the selected corpus."""
        return (self.rescan_button, self.check_button, self.rename_button, self.remove_button)

    def set_selected(self, has: bool) -> None:
        for b in self.selection_buttons():
            b.setEnabled(has)

    def restyle(self, ink: QColor) -> None:
        for b in (self.new_button, self.add_button, *self.selection_buttons()):
            b.setIcon(line_icon(str(b.property("icon_shape")), ink))


def row_menu(panel: CorporaPanel, item: QTreeWidgetItem | None) -> QMenu:
    """The right-click menu: New corpus on empty space; on a row, adding, re-scanning, checking,
    watching, removing. A damaged or unreadable corpus has Check… first, in bold."""
    menu = QMenu(panel)
    if item is None:
        menu.addAction("New corpus…", panel.new_corpus)
        return menu
    name = str(item.data(0, NAME_ROLE))
    kind = item.data(0, KIND_ROLE)
    s = panel.summary(name)
    broken = s is not None and s.state in ("damaged", "unreadable")
    check = QAction("Check…", menu)
    check.setToolTip("Read the whole index for damage; Repair mends what is found")
    check.triggered.connect(lambda _=False: panel.check(name))
    if broken:
        menu.addAction(check)
        menu.setDefaultAction(check)
        menu.addSeparator()
    menu.addAction("Add folder…", panel.add_folder)
    menu.addAction("Add files…", panel.add_files)
    menu.addAction("Re-scan", lambda: panel.rescan(name))
    if not broken:
        menu.addAction(check)
    watch = menu.addAction("Watch folders for changes")
    watch.setCheckable(True)
    watch.setChecked(s is None or s.watch)
    watch.setEnabled(s is not None and not s.problem)
    watch.toggled.connect(lambda on: panel.watch.set_enabled(name, on))
    menu.addSeparator()
    root = str(item.data(0, KEY_ROLE)) if kind == "root" else None
    if kind == "file":
        root = panel.tree.root_of_file(name, item)
    if root:
        menu.addAction("Remove from corpus…", lambda: panel.remove_folder(name, root))
    menu.addAction("Rename…", panel.start_rename)
    menu.addAction("Remove corpus…", lambda: panel.remove_corpus(name))
    return menu


def ask_confirm(parent: QWidget, title: str, text: str) -> bool:
    answer = QMessageBox.question(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    return answer == QMessageBox.StandardButton.Yes


def ask_folder(parent: QWidget) -> str | None:
    return QFileDialog.getExistingDirectory(parent, "Add a folder") or None


def ask_files(parent: QWidget) -> list[str]:
    pattern = " ".join(f"*{e}" for e in kinds.EXTENSIONS)
    files, _ = QFileDialog.getOpenFileNames(parent, "Add files", "", f"Documents, images, videos ({pattern})")
    return list(files)

"""Small widget builders every dock uses, so a button, a row of them or a field with a hint is made
one way: a push button with its tooltip and handler (and its menu), an action, a row of widgets, an
editable combo box."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QMenu, QPushButton, QWidget


def button(
    parent: QWidget | None,
    text: str,
    clicked: Callable[[], object] | None = None,
    *,
    tip: str = "",
    name: str = "",
) -> QPushButton:
    """A push button wired to ``clicked``, with its tooltip and object name when given."""
    b = QPushButton(text, parent)
    if clicked is not None:
        b.clicked.connect(clicked)
    if tip:
        b.setToolTip(tip)
    if name:
        b.setObjectName(name)
    return b


def action(parent: QObject, text: str, triggered: Callable[..., object], *, tip: str = "") -> QAction:
    """A menu or shortcut action wired to ``triggered``, with its tooltip when given."""
    a = QAction(text, parent)
    a.triggered.connect(triggered)
    if tip:
        a.setToolTip(tip)
    return a


def with_menu(b: QPushButton, actions: Iterable[QAction | None]) -> QPushButton:
    """``b`` opening a menu of ``actions`` (``None``: a separator) when pressed."""
    menu = QMenu(b)
    for a in actions:
        if a is None:
            menu.addSeparator()
        else:
            menu.addAction(a)
    b.setMenu(menu)
    return b


def row(*widgets: QWidget, grow: QWidget | None = None) -> QHBoxLayout:
    """``widgets`` left to right; ``grow`` takes the spare width (without it, the row ends in a stretch)."""
    layout = QHBoxLayout()
    for w in widgets:
        layout.addWidget(w, 1 if w is grow else 0)
    if grow is None:
        layout.addStretch(1)
    return layout


def editable_combo(choices: Iterable[str], placeholder: str) -> QComboBox:
    """A combo box offering ``choices`` that also takes typed text; ``placeholder`` shows while empty."""
    combo = QComboBox()
    combo.setEditable(True)
    combo.addItems(list(choices))
    edit = combo.lineEdit()
    if edit is not None:
        edit.setPlaceholderText(placeholder)
    return combo


__all__ = ["action", "button", "editable_combo", "row", "with_menu"]

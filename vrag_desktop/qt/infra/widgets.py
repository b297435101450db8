"""Small widget builders every dock uses, so a button, a row of them or a field with a hint is made
one way: a push button with its tooltip and handler (and its menu), an action, a row or a column of
widgets and layouts, an editable combo box."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from PySide6.QtCore import QCoreApplication, QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractButton,
    QBoxLayout,
    QComboBox,
    QHBoxLayout,
    QLayout,
    QLineEdit,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

_B = TypeVar("_B", bound=QAbstractButton)


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


def row(*items: QWidget | QLayout, grow: QWidget | QLayout | None = None) -> QHBoxLayout:
    """``items`` left to right; ``grow`` takes the spare width (without it, the row ends in a stretch)."""
    layout = QHBoxLayout()
    _add(layout, items, grow)
    if grow is None:
        layout.addStretch(1)
    return layout


def column(
    parent: QWidget | None,
    *items: QWidget | QLayout,
    grow: QWidget | QLayout | None = None,
    margins: int | None = None,
) -> QVBoxLayout:
    """``items`` top to bottom, in a layout set on ``parent`` when given; ``grow`` takes the spare
    height (no stretch is added); ``margins``: the same on all four sides, else the style's."""
    layout = QVBoxLayout(parent) if parent is not None else QVBoxLayout()
    if margins is not None:
        layout.setContentsMargins(margins, margins, margins, margins)
    _add(layout, items, grow)
    return layout


def _add(layout: QBoxLayout, items: Iterable[QWidget | QLayout], grow: QWidget | QLayout | None) -> None:
    for item in items:
        if isinstance(item, QLayout):
            layout.addLayout(item, 1 if item is grow else 0)
        else:
            layout.addWidget(item, 1 if item is grow else 0)


def editable_combo(choices: Iterable[str], placeholder: str) -> QComboBox:
    """A combo box offering ``choices`` that also takes typed text; ``placeholder`` shows while empty."""
    combo = QComboBox()
    combo.setEditable(True)
    combo.addItems(list(choices))
    edit = combo.lineEdit()
    if edit is not None:
        edit.setPlaceholderText(placeholder)
    return combo


def icon_only(b: _B, name: str, tip: str = "") -> _B:
    """``b`` shows an icon or a symbol (✕, ▲, …, +): ``name`` is what a screen reader says for it,
    and its tooltip when it has none (``tip`` overrides). Translated by the caller."""
    b.setAccessibleName(name)
    if tip or not b.toolTip():
        b.setToolTip(tip or name)
    return b


def clear_button(edit: QLineEdit) -> QLineEdit:
    """``edit`` with Qt's clear button, named for screen readers (Qt leaves its action unnamed)."""
    edit.setClearButtonEnabled(True)
    clear = edit.findChild(QAction, "_q_qlineeditclearaction")
    if clear is not None:
        clear.setText(QCoreApplication.translate("widgets", "Clear"))
    return edit


__all__ = ["action", "button", "clear_button", "column", "editable_combo", "icon_only", "row", "with_menu"]

"""What the runtime tabs share: their status colours and small widget helpers.

Why a module: the Endpoints and Local vLLM tabs must colour a verdict the same way and guard
late background results the same way; one place keeps them from drifting apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QSpinBox, QVBoxLayout, QWidget

OK_COLOR, BAD_COLOR, WARN_COLOR, MUTED = "#15803d", "#b91c1c", "#b45309", "palette(placeholder-text)"


def if_alive(owner: QObject, fn: Callable[..., None]) -> Callable[..., None]:
    """``fn`` that does nothing once ``owner`` is deleted: background results may arrive after
    the panel closed, and touching its widgets then would raise."""

    def call(*args: Any) -> None:
        if shiboken6.isValid(owner):
            fn(*args)

    return call


ZWSP = "\u200b"


def breakable(text: str) -> str:
    """``text`` with a line-break chance after each ``/``: a wrapped label holding a long path
    would otherwise be as wide as the path and push a narrow dock's whole form out of sight.
    Display only (the break marks are invisible but would be copied): paths to copy live in fields."""
    return text.replace("/", "/" + ZWSP)


def amber(name: str) -> str:
    """The style sheet of a warning box (object name ``name``): advice, never a blocker."""
    return (
        f"#{name} {{ background: #fef3c7; border: 1px solid #f59e0b; border-radius: 4px; }}"
        f"#{name} QLabel {{ color: #78350f; background: transparent; }}"
    )


def text_label(parent: QWidget, name: str, text: str = "") -> QLabel:
    """A wrapping, selectable label (people copy error messages and paths)."""
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def error_label(parent: QWidget) -> QLabel:
    """A hidden, red, selectable label for an inline error under a field."""
    label = QLabel(parent)
    label.setWordWrap(True)
    label.setStyleSheet(f"color: {BAD_COLOR};")
    label.setVisible(False)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def stacked(parent: QWidget, top: QWidget, below: QWidget) -> QWidget:
    """A form field with its note or inline error right under it."""
    box = QWidget(parent)
    v = QVBoxLayout(box)
    v.setContentsMargins(0, 0, 0, 0)
    v.setSpacing(2)
    v.addWidget(top)
    v.addWidget(below)
    return box


def line_edit(parent: QWidget, placeholder: str = "", *, tip: str = "") -> QLineEdit:
    """A one-line field showing ``placeholder`` while empty."""
    edit = QLineEdit(parent)
    edit.setPlaceholderText(placeholder)
    if tip:
        edit.setToolTip(tip)
    return edit


def spin_box(
    parent: QWidget, low: int, high: int, *, special: str = "", suffix: str = "", step: int = 1, tip: str = ""
) -> QSpinBox:
    """A whole-number field from ``low`` to ``high``; ``special`` is shown for ``low`` (e.g. "auto")."""
    spin = QSpinBox(parent)
    spin.setRange(low, high)
    spin.setSingleStep(step)
    spin.setSpecialValueText(special)
    spin.setSuffix(suffix)
    if tip:
        spin.setToolTip(tip)
    return spin

"""What the runtime tabs share: their status tones and small widget helpers.

Why a module: the Endpoints and Local vLLM tabs must colour a verdict the same way; one place keeps
them from drifting apart. Tones are the theme's named roles (:mod:`vrag_desktop.qt.infra.theme`),
never colours: a colour chosen here would be the same in the dark theme and the light one.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QSpinBox, QVBoxLayout, QWidget

from vrag_desktop.qt.infra.theme import set_role

#: The tones a status text takes (``QLabel[role=…]`` in the theme's stylesheet).
OK, BAD, WARN, MUTED = "ok", "error", "warn", "muted"


def tone(widget: QWidget, name: str | None) -> None:
    """Colour ``widget``'s text with the theme's ``name`` tone (None: the plain text colour); it
    follows a theme switch."""
    if widget.property("role") != name:
        set_role(widget, "role", name)


def advice_box(frame: QWidget) -> None:
    """Style ``frame`` as a warning box (advice, never a blocker): the theme's warning banner."""
    set_role(frame, "role", "banner-warn")


ZWSP = "\u200b"


def breakable(text: str) -> str:
    """``text`` with a line-break chance after each ``/``: a wrapped label holding a long path
    would otherwise be as wide as the path and push a narrow dock's whole form out of sight.
    Display only (the break marks are invisible but would be copied): paths to copy live in fields."""
    return text.replace("/", "/" + ZWSP)


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
    tone(label, BAD)
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

"""The fields of one endpoint profile, with an inline error under each.

Why a widget of its own: reading the fields back is validation (names, URLs, JSON objects), and
the errors belong next to the field that caused them; the list, saving and keys live elsewhere.
The fields a first connection does not need (sampling, extra body, timeouts, attempts, key
variable) fold under *Advanced*, so the address, the model and, below the form, the API key fit
in a dock of ordinary height; they unfold by themselves when they hold something or are wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QToolButton,
    QWidget,
)

from vrag_desktop.core.endpoints.profiles import KINDS, EndpointProfile, ProfileError
from vrag_desktop.qt.runtime.profile_text import KIND_LABELS
from vrag_desktop.qt.runtime.style import error_label, line_edit, spin_box, stacked

_URL = re.compile(r"https?://[^\s/]+")


class _JsonEdit(QPlainTextEdit):
    """A small monospace box for a JSON object."""

    def __init__(self, placeholder: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.setPlaceholderText(placeholder)
        self.setTabChangesFocus(True)
        font = QFont("monospace")
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.setFont(font)
        self.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 14)


class ProfileFields(QWidget):
    """Name, kind, URL, model, sampling, extra body, timeouts, attempts and key variable."""

    changed = Signal()  # the person edited a field (not while a profile is being shown)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._loading = False
        self.name_edit = QLineEdit(self)
        self.kind_combo = QComboBox(self)
        for kind in KINDS:
            self.kind_combo.addItem(KIND_LABELS[kind], kind)
        self.url_edit = line_edit(self, "https://host/v1")
        self.model_edit = line_edit(self, "served model name, e.g. qwen3.5-plus")
        self.params_edit = _JsonEdit('{"temperature": 0.7, "max_tokens": 2048}', self)
        self.params_edit.setToolTip("Default sampling parameters sent with every request (a JSON object)")
        self.extra_edit = _JsonEdit('{"chat_template_kwargs": {"enable_thinking": true}}', self)
        self.extra_edit.setToolTip("Extra fields merged into every request body (a JSON object)")
        self.connect_spin = self._seconds(0.5, 600.0, "connect ", "Seconds to open a connection")
        self.total_spin = self._seconds(1.0, 86400.0, "total ", "Seconds for one whole request")
        self.attempts_spin = spin_box(self, 1, 20, suffix=" ×", tip="Requests per call, retries included")
        self.env_edit = line_edit(
            self, "optional, e.g. MY_SERVICE_KEY", tip="An environment variable the key may also be read from"
        )
        self.name_error, self.url_error = error_label(self), error_label(self)
        self.params_error, self.extra_error = error_label(self), error_label(self)
        self.form_error = error_label(self)
        for label, name in (
            (self.name_error, "name"),
            (self.url_error, "base_url"),
            (self.params_error, "params"),
            (self.extra_error, "extra_body"),
            (self.form_error, "form"),
        ):
            label.setObjectName(f"error_{name}")

        timeouts = QHBoxLayout()
        timeouts.setSpacing(6)
        timeouts.addWidget(self.connect_spin)
        timeouts.addWidget(self.total_spin)
        timeouts.addStretch(1)

        self.advanced_button = QToolButton(self)
        self.advanced_button.setObjectName("advancedFields")
        self.advanced_button.setText("Advanced (sampling, extra body, timeouts, attempts, key variable)")
        self.advanced_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.advanced_button.setArrowType(Qt.ArrowType.RightArrow)
        self.advanced_button.setAutoRaise(True)
        self.advanced_button.setCheckable(True)
        self.advanced_button.toggled.connect(self.show_advanced)

        self._form = form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("Name", stacked(self, self.name_edit, self.name_error))
        form.addRow("Kind", self.kind_combo)
        form.addRow("Base URL", stacked(self, self.url_edit, self.url_error))
        form.addRow("Model", self.model_edit)
        form.addRow(self.advanced_button)
        attempts = QHBoxLayout()
        attempts.addWidget(self.attempts_spin)
        attempts.addStretch(1)
        self._advanced: list[QWidget | QHBoxLayout] = [
            stacked(self, self.params_edit, self.params_error),
            stacked(self, self.extra_edit, self.extra_error),
            timeouts,
            attempts,
            self.env_edit,
        ]
        for caption, field in zip(
            ("Sampling", "Extra body", "Timeouts", "Attempts", "Key variable"), self._advanced, strict=True
        ):
            form.addRow(caption, field)
        form.addRow(self.form_error)
        self.show_advanced(False)

        for w in (self.name_edit, self.url_edit, self.model_edit, self.env_edit):
            w.textChanged.connect(self._changed)
        for box in (self.params_edit, self.extra_edit):
            box.textChanged.connect(self._changed)
        for s in (self.connect_spin, self.total_spin, self.attempts_spin):
            s.valueChanged.connect(self._changed)
        self.kind_combo.currentIndexChanged.connect(self._changed)
        self.name_edit.textChanged.connect(lambda _t: self.name_error.setVisible(False))
        self.url_edit.textChanged.connect(lambda _t: self.url_error.setVisible(False))
        self.params_edit.textChanged.connect(lambda: self.params_error.setVisible(False))
        self.extra_edit.textChanged.connect(lambda: self.extra_error.setVisible(False))

    def show_advanced(self, on: bool) -> None:
        """Unfold (or fold) the fields under *Advanced*."""
        if self.advanced_button.isChecked() != on:
            self.advanced_button.setChecked(on)  # comes back here through toggled
            return
        self.advanced_button.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        for field in self._advanced:
            self._form.setRowVisible(field, on)

    def advanced_shown(self) -> bool:
        return self.advanced_button.isChecked()

    def _changed(self, *_args: object) -> None:
        if not self._loading:
            self.changed.emit()

    def _seconds(self, low: float, high: float, prefix: str, tip: str) -> QDoubleSpinBox:
        spin = QDoubleSpinBox(self)
        spin.setRange(low, high)
        spin.setDecimals(1)
        spin.setPrefix(prefix)
        spin.setSuffix(" s")
        spin.setToolTip(tip)
        return spin

    def fill(self, p: EndpointProfile, *, draft: bool) -> None:
        """Show ``p``; a draft's name and kind stay editable."""
        self._loading = True
        try:
            self.name_edit.setText(p.name)
            self.name_edit.setReadOnly(not draft)
            self.kind_combo.setCurrentIndex(max(0, self.kind_combo.findData(p.kind)))
            self.kind_combo.setEnabled(not p.builtin or draft)
            self.url_edit.setText(p.base_url)
            if p.kind == "local-vllm":
                self.url_edit.setPlaceholderText("filled in when the Local vLLM tab starts the server")
            else:
                self.url_edit.setPlaceholderText("https://host/v1")
            self.model_edit.setText(p.model)
            self.params_edit.setPlainText(json.dumps(p.params, indent=None) if p.params else "")
            self.extra_edit.setPlainText(json.dumps(p.extra_body, indent=None) if p.extra_body else "")
            self.connect_spin.setValue(p.connect_timeout)
            self.total_spin.setValue(p.total_timeout)
            self.attempts_spin.setValue(p.max_attempts)
            self.env_edit.setText(p.api_key_env)
            if p.params or p.extra_body or p.api_key_env:  # something is set there: show it
                self.show_advanced(True)
            for edit in (self.name_edit, self.url_edit, self.model_edit, self.env_edit):
                edit.setCursorPosition(0)  # show where a long URL begins
            for label in (
                self.name_error,
                self.url_error,
                self.params_error,
                self.extra_error,
                self.form_error,
            ):
                label.setVisible(False)
        finally:
            self._loading = False

    def _json_field(self, edit: QPlainTextEdit, error: QLabel, example: str) -> tuple[dict[str, Any], bool]:
        text = edit.toPlainText().strip()
        if not text:
            return {}, True
        try:
            value = json.loads(text)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            where = ""
            if isinstance(exc, json.JSONDecodeError):
                where = f" (line {exc.lineno}, column {exc.colno})"
            error.setText(f"Not valid JSON: {msg}{where}. Example: {example}")
            error.setVisible(True)
            return {}, False
        if not isinstance(value, dict):
            error.setText(f"Must be a JSON object, e.g. {example}")
            error.setVisible(True)
            return {}, False
        return value, True

    def read(self, *, draft: bool, taken: list[str]) -> EndpointProfile | None:
        """The fields as a profile, or None after showing what is wrong next to each field.
        ``taken``: names a draft may not use."""
        ok = True
        name = self.name_edit.text().strip()
        if not name or len(name) > 80:
            self.name_error.setText("Give the profile a name (at most 80 characters).")
            self.name_error.setVisible(True)
            ok = False
        elif draft and name in taken:
            self.name_error.setText(f"A profile named {name!r} exists already.")
            self.name_error.setVisible(True)
            ok = False
        url = self.url_edit.text().strip()
        if url and not _URL.match(url):
            self.url_error.setText(
                "The base URL must start with http:// or https://, e.g. http://127.0.0.1:8000/v1"
            )
            self.url_error.setVisible(True)
            ok = False
        params, params_ok = self._json_field(self.params_edit, self.params_error, '{"temperature": 0.7}')
        extra, extra_ok = self._json_field(self.extra_edit, self.extra_error, '{"top_k": 20}')
        if not (params_ok and extra_ok):
            self.show_advanced(True)  # what is wrong must be in sight
        if not (ok and params_ok and extra_ok):
            return None
        kind = self.kind_combo.currentData()
        profile = EndpointProfile(
            name=name,
            kind=kind,
            base_url=url,
            model=self.model_edit.text().strip(),
            extra_body=extra,
            params=params,
            connect_timeout=self.connect_spin.value(),
            total_timeout=self.total_spin.value(),
            max_attempts=self.attempts_spin.value(),
            api_key_env=self.env_edit.text().strip(),
        )
        try:
            profile.validate()
        except ProfileError as exc:
            target = self.params_error if "credential" in str(exc) else self.form_error
            target.setText(str(exc))
            target.setVisible(True)
            if target is self.params_error:
                self.show_advanced(True)
            return None
        self.form_error.setVisible(False)
        return profile

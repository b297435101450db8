"""Edit endpoint profiles, their API keys, and test a connection — without ever showing a key.

Why the key field is write-only: a key shown once is a key in a screenshot. The field is never
filled from the store; its placeholder says where the key comes from (keyring, session, an
environment variable), "Save key" hands it to the keyring and empties the field. Keyring calls may
block (a locked Secret Service asks for a password), so they run off the GUI thread, as does
"Test connection" (on the app's async runner); a second click cancels a running test.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import re
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.endpoints.profiles import (
    KINDS,
    ApiKeyStoreError,
    EndpointProfile,
    NoSecureStoreError,
    ProfileError,
)
from vrag_desktop.qt.infra.async_runner import async_runner
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.workers import run_in_thread

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable

    from vrag_desktop.core.endpoints.client import ConnectionCheck
    from vrag_desktop.core.endpoints.profiles import ProfileStore

KIND_LABELS = {
    "local-vllm": "Local vLLM server",
    "dashscope": "DashScope (Alibaba Cloud)",
    "custom": "OpenAI-compatible",
}
_URL = re.compile(r"https?://[^\s/]+")
OK_COLOR, BAD_COLOR, WARN_COLOR, MUTED = "#15803d", "#b91c1c", "#b45309", "palette(placeholder-text)"
_VERDICT_HEAD = {
    "unreachable": "Cannot connect",
    "auth": "Key rejected",
    "not_found": "Model not found",
    "timeout": "No answer",
    "rate_limit": "Rate limited",
    "server": "Server error",
}


def if_alive(owner: QObject, fn: Callable[..., None]) -> Callable[..., None]:
    """``fn`` that does nothing once ``owner`` is deleted: background results may arrive after
    the panel closed, and touching its widgets then would raise."""

    def call(*args: Any) -> None:
        if shiboken6.isValid(owner):
            fn(*args)

    return call


def key_source_text(source: str | None, needs_key: bool, env_vars: list[str] | None = None) -> str:
    """Where a key comes from, in words (never the key)."""
    if source == "keyring":
        return "Key stored in the system keyring"
    if source == "session":
        return "Key kept for this session only (forgotten when the app quits)"
    if source and source.startswith("env:"):
        return f"Key from ${source[4:]}"
    if not needs_key:
        return "No key needed for a local server"
    alt = f" (or set ${env_vars[-1]})" if env_vars else ""
    return f"No key set{alt}"


def key_placeholder(source: str | None) -> str:
    """Short enough for the key field: where the key is, and that typing replaces it."""
    if source == "keyring":
        return "In the system keyring; type to replace"
    if source == "session":
        return "Kept for this session; type to replace"
    if source and source.startswith("env:"):
        return f"From ${source[4:]}; type to override"
    return "Type or paste the API key"


def verdict_text(check: ConnectionCheck, model: str) -> tuple[str, str]:
    """(headline, detail) for a connection check."""
    if check.ok:
        n = len(check.models)
        ms = f", {check.latency * 1000:.0f} ms" if check.latency is not None else ""
        head = f"Connected: {n} model{'s' if n != 1 else ''}{ms}"
        return head, check.message
    head = _VERDICT_HEAD.get(check.kind or "", "Connection failed")
    if check.kind == "auth" and "none is set" in check.message:
        head = "Key needed"
    return head, check.message


def _error_label(parent: QWidget) -> QLabel:
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


class ProfileEditor(QWidget):
    """The "Endpoints" tab: profile list, form, key box and the connection test."""

    profilesChanged = Signal()
    activeProfileChanged = Signal(str)
    verdictChanged = Signal(bool, str)  # ok, headline (also for tests)

    def __init__(self, store: ProfileStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._current: str | None = None
        self._draft = False  # a new profile not saved yet
        self._loading = False
        self._dirty = False
        self._pending_key: str | None = None  # typed, waiting for "use for this session only"
        self._test: concurrent.futures.Future[Any] | None = None
        self._test_gen = 0
        self._source_gen = 0
        self._build()
        self.refresh(select=store.active)

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        self.list = QListWidget(self)
        self.list.setObjectName("profileList")
        self.list.currentItemChanged.connect(self._on_current_item)

        self.new_button = QPushButton("New", self)
        self.delete_button = QPushButton("Delete", self)
        self.reset_button = QPushButton("Reset", self)
        self.reset_button.setToolTip("Put this built-in profile back to its defaults (its key is kept)")
        self.active_button = QPushButton("Make active", self)
        self.active_button.setToolTip("Questions are asked through the active endpoint")
        self.new_button.clicked.connect(self.new_profile)
        self.delete_button.clicked.connect(self._on_delete_clicked)
        self.reset_button.clicked.connect(self.reset_current)
        self.active_button.clicked.connect(self.make_active)
        self._delete_armed = False
        self._disarm = QTimer(self, singleShot=True, interval=4000)
        self._disarm.timeout.connect(self._disarm_delete)
        list_buttons = QHBoxLayout()
        for b in (self.new_button, self.delete_button, self.reset_button):
            list_buttons.addWidget(b)
        list_buttons.addStretch(1)

        # form
        self.name_edit = QLineEdit(self)
        self.kind_combo = QComboBox(self)
        for kind in KINDS:
            self.kind_combo.addItem(KIND_LABELS[kind], kind)
        self.url_edit = QLineEdit(self)
        self.url_edit.setPlaceholderText("https://host/v1")
        self.model_edit = QLineEdit(self)
        self.model_edit.setPlaceholderText("served model name, e.g. qwen3.5-plus")
        self.params_edit = _JsonEdit('{"temperature": 0.7, "max_tokens": 2048}', self)
        self.params_edit.setToolTip("Default sampling parameters sent with every request (a JSON object)")
        self.extra_edit = _JsonEdit('{"chat_template_kwargs": {"enable_thinking": true}}', self)
        self.extra_edit.setToolTip("Extra fields merged into every request body (a JSON object)")
        self.connect_spin = self._seconds(0.5, 600.0, "connect ", "Seconds to open a connection")
        self.total_spin = self._seconds(1.0, 86400.0, "total ", "Seconds for one whole request")
        self.attempts_spin = QSpinBox(self)
        self.attempts_spin.setRange(1, 20)
        self.attempts_spin.setSuffix(" ×")
        self.attempts_spin.setToolTip("Requests per call, retries included")
        self.env_edit = QLineEdit(self)
        self.env_edit.setPlaceholderText("optional, e.g. MY_SERVICE_KEY")
        self.env_edit.setToolTip("An environment variable the key may also be read from")
        self.name_error, self.url_error = _error_label(self), _error_label(self)
        self.params_error, self.extra_error = _error_label(self), _error_label(self)
        self.form_error = _error_label(self)
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

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("Name", self._stack(self.name_edit, self.name_error))
        form.addRow("Kind", self.kind_combo)
        form.addRow("Base URL", self._stack(self.url_edit, self.url_error))
        form.addRow("Model", self.model_edit)
        form.addRow("Sampling", self._stack(self.params_edit, self.params_error))
        form.addRow("Extra body", self._stack(self.extra_edit, self.extra_error))
        form.addRow("Timeouts", timeouts)
        attempts = QHBoxLayout()
        attempts.addWidget(self.attempts_spin)
        attempts.addStretch(1)
        form.addRow("Attempts", attempts)
        form.addRow("Key variable", self.env_edit)

        self.save_button = QPushButton("Save", self)
        self.save_button.setDefault(True)
        self.revert_button = QPushButton("Revert", self)
        self.dirty_label = QLabel("", self)
        self.dirty_label.setStyleSheet(f"color: {MUTED};")
        self.save_button.clicked.connect(self.save)
        self.revert_button.clicked.connect(self.revert)
        save_row = QHBoxLayout()
        save_row.addWidget(self.active_button)
        save_row.addWidget(self.dirty_label, 1)
        save_row.addWidget(self.revert_button)
        save_row.addWidget(self.save_button)

        self.form_box = QGroupBox("Profile", self)
        fb = QVBoxLayout(self.form_box)
        fb.addLayout(form)
        fb.addWidget(self.form_error)
        fb.addLayout(save_row)

        # key
        self.key_box = QGroupBox("API key", self)
        self.key_edit = QLineEdit(self)
        self.key_edit.setObjectName("apiKeyEdit")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setClearButtonEnabled(True)
        self.key_edit.setAttribute(Qt.WidgetAttribute.WA_InputMethodEnabled, False)
        self.key_edit.returnPressed.connect(self.save_key)
        self.save_key_button = QPushButton("Save key", self)
        self.forget_key_button = QPushButton("Forget key", self)
        self.save_key_button.clicked.connect(self.save_key)
        self.forget_key_button.clicked.connect(self.forget_key)
        self.key_source_label = QLabel("", self)
        self.key_source_label.setObjectName("keySource")
        self.key_source_label.setStyleSheet(f"color: {MUTED};")
        self.key_message = QLabel("", self)
        self.key_message.setObjectName("keyMessage")
        self.key_message.setWordWrap(True)
        self.key_message.setVisible(False)
        self.session_button = QPushButton("Use for this session only", self)
        self.session_button.setVisible(False)
        self.session_button.clicked.connect(self.use_key_for_session)
        self.key_edit.textChanged.connect(
            lambda t: self.save_key_button.setEnabled(bool(t) and not self._draft)
        )
        kb = QGridLayout(self.key_box)
        kb.addWidget(self.key_edit, 0, 0)
        kb.addWidget(self.save_key_button, 0, 1)
        kb.addWidget(self.forget_key_button, 0, 2)
        kb.addWidget(self.key_source_label, 1, 0, 1, 3)
        kb.addWidget(self.key_message, 2, 0, 1, 3)
        kb.addWidget(self.session_button, 3, 0, 1, 3, Qt.AlignmentFlag.AlignLeft)
        kb.setColumnStretch(0, 1)

        # test
        self.test_button = QPushButton("Test connection", self)
        self.test_button.setObjectName("testConnection")
        self.test_button.clicked.connect(self.test_connection)
        self.verdict_label = QLabel("", self)
        self.verdict_label.setObjectName("verdict")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        test_row = QVBoxLayout()
        test_row.addWidget(self.test_button, 0, Qt.AlignmentFlag.AlignLeft)
        test_row.addWidget(self.verdict_label)

        layout = QVBoxLayout(self)
        layout.addWidget(self.list)
        layout.addLayout(list_buttons)
        layout.addWidget(self.form_box)
        layout.addWidget(self.key_box)
        line = QFrame(self)
        line.setFrameShape(QFrame.Shape.HLine)
        line.setFrameShadow(QFrame.Shadow.Sunken)
        layout.addWidget(line)
        layout.addLayout(test_row)
        layout.addStretch(1)

        for w in (self.name_edit, self.url_edit, self.model_edit, self.env_edit):
            w.textChanged.connect(self._mark_dirty)
        for w in (self.params_edit, self.extra_edit):
            w.textChanged.connect(self._mark_dirty)
        for s in (self.connect_spin, self.total_spin, self.attempts_spin):
            s.valueChanged.connect(self._mark_dirty)
        self.kind_combo.currentIndexChanged.connect(self._mark_dirty)
        self.name_edit.textChanged.connect(lambda _t: self.name_error.setVisible(False))
        self.url_edit.textChanged.connect(lambda _t: self.url_error.setVisible(False))
        self.params_edit.textChanged.connect(lambda: self.params_error.setVisible(False))
        self.extra_edit.textChanged.connect(lambda: self.extra_error.setVisible(False))

    def _seconds(self, low: float, high: float, prefix: str, tip: str) -> QDoubleSpinBox:
        spin = QDoubleSpinBox(self)
        spin.setRange(low, high)
        spin.setDecimals(1)
        spin.setPrefix(prefix)
        spin.setSuffix(" s")
        spin.setToolTip(tip)
        return spin

    def _stack(self, field: QWidget, error: QLabel) -> QWidget:
        return stacked(self, field, error)

    # ---- list ----------------------------------------------------------------------------------
    def refresh(self, select: str | None = None) -> None:
        """Reload the list from the store; keep (or move to) ``select``; reload the form unless it
        has unsaved edits of the same profile."""
        want = select or self._current or self.store.active
        active = self.store.active
        self.list.blockSignals(True)
        self.list.clear()
        chosen: QListWidgetItem | None = None
        for p in self.store.profiles():
            tag = "  ·  active" if p.name == active else ""
            item = QListWidgetItem(f"{p.name}{tag}")
            item.setData(Qt.ItemDataRole.UserRole, p.name)
            where = p.base_url or ("not started" if p.kind == "local-vllm" else "no URL")
            item.setToolTip(f"{KIND_LABELS[p.kind]} — {where}" + (" — built in" if p.builtin else ""))
            if p.name == active:
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            self.list.addItem(item)
            if p.name == want:
                chosen = item
        self.list.blockSignals(False)
        rows = max(3, min(self.list.count(), 6))  # as tall as the list, within reason
        self.list.setFixedHeight(max(self.list.sizeHintForRow(0), 1) * rows + 2 * self.list.frameWidth() + 4)
        if self._draft:
            self._update_buttons()
            return
        if chosen is None and self.list.count():
            chosen = self.list.item(0)
        if chosen is not None:
            name = chosen.data(Qt.ItemDataRole.UserRole)
            same = name == self._current
            self.list.blockSignals(True)
            self.list.setCurrentItem(chosen)
            self.list.blockSignals(False)
            if not (same and self._dirty):
                self._load(name)
        self._update_buttons()

    def _on_current_item(self, item: QListWidgetItem | None, _prev: QListWidgetItem | None) -> None:
        if item is None:
            return
        self._draft = False
        self._load(item.data(Qt.ItemDataRole.UserRole))

    def select(self, name: str) -> None:
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == name:
                self.list.setCurrentRow(i)
                return

    @property
    def current_name(self) -> str | None:
        return self._current

    # ---- form ----------------------------------------------------------------------------------
    def _load(self, name: str) -> None:
        try:
            p = self.store.get(name)
        except ProfileError:
            return
        self._current = name
        self._fill(p)
        self._clear_key_message()
        self._set_verdict(None, "", "")
        self._refresh_key_source()

    def _fill(self, p: EndpointProfile) -> None:
        self._loading = True
        try:
            self.name_edit.setText(p.name)
            self.name_edit.setReadOnly(not self._draft)
            self.kind_combo.setCurrentIndex(max(0, self.kind_combo.findData(p.kind)))
            self.kind_combo.setEnabled(not p.builtin or self._draft)
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
        self._set_dirty(self._draft)
        self.form_box.setTitle("New profile" if self._draft else f"Profile — {p.name}")

    def _mark_dirty(self, *_args: object) -> None:
        if not self._loading:
            self._set_dirty(True)

    def _set_dirty(self, dirty: bool) -> None:
        self._dirty = dirty
        self.save_button.setEnabled(dirty)
        self.revert_button.setEnabled(dirty)
        self.dirty_label.setText("Unsaved changes" if dirty else "")
        self._update_buttons()

    @property
    def dirty(self) -> bool:
        return self._dirty

    def _update_buttons(self) -> None:
        p = None if self._current is None or self._draft else self._safe_get(self._current)
        builtin = bool(p and p.builtin)
        self.delete_button.setEnabled(p is not None and not builtin)
        self.reset_button.setEnabled(builtin)
        self.active_button.setEnabled(p is not None and p.name != self.store.active)
        self.key_box.setEnabled(p is not None)
        self.save_key_button.setEnabled(p is not None and bool(self.key_edit.text()))

    def _safe_get(self, name: str) -> EndpointProfile | None:
        try:
            return self.store.get(name)
        except ProfileError:
            return None

    def _json_field(self, edit: QPlainTextEdit, error: QLabel, example: str) -> tuple[dict[str, Any], bool]:
        text = edit.toPlainText().strip()
        if not text:
            return {}, True
        try:
            value = json.loads(text)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            where = f" (line {exc.lineno}, column {exc.colno})" if hasattr(exc, "lineno") else ""
            error.setText(f"Not valid JSON: {msg}{where}. Example: {example}")
            error.setVisible(True)
            return {}, False
        if not isinstance(value, dict):
            error.setText(f"Must be a JSON object, e.g. {example}")
            error.setVisible(True)
            return {}, False
        return value, True

    def form_profile(self) -> EndpointProfile | None:
        """The form as a profile, or None after showing what is wrong next to each field."""
        ok = True
        name = self.name_edit.text().strip()
        if not name or len(name) > 80:
            self.name_error.setText("Give the profile a name (at most 80 characters).")
            self.name_error.setVisible(True)
            ok = False
        elif self._draft and name in self.store.names():
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
        params, good = self._json_field(self.params_edit, self.params_error, '{"temperature": 0.7}')
        ok = ok and good
        extra, good = self._json_field(self.extra_edit, self.extra_error, '{"top_k": 20}')
        ok = ok and good
        if not ok:
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
            return None
        self.form_error.setVisible(False)
        return profile

    def save(self) -> bool:
        """Validate and store the form. Returns whether it was saved."""
        profile = self.form_profile()
        if profile is None:
            return False
        try:
            self.store.save(profile)
        except (ProfileError, OSError) as exc:
            self.form_error.setText(f"Not saved: {describe(exc)}")
            self.form_error.setVisible(True)
            return False
        self._draft = False
        self._current = profile.name
        self._set_dirty(False)
        self.refresh(select=profile.name)
        self.profilesChanged.emit()
        return True

    def revert(self) -> None:
        if self._draft:
            self._draft = False
            self._current = None
            self.refresh(select=self.store.active)
        elif self._current:
            self._load(self._current)

    def new_profile(self) -> None:
        names = set(self.store.names())
        name = next(
            n
            for n in (f"Endpoint {i}" if i > 1 else "New endpoint" for i in range(1, 1000))
            if n not in names
        )
        self._draft = True
        self._current = name
        self.list.blockSignals(True)
        self.list.clearSelection()
        self.list.setCurrentItem(None)
        self.list.blockSignals(False)
        self._fill(EndpointProfile(name, "custom"))
        self._clear_key_message()
        self._set_verdict(None, "", "")
        self.key_edit.clear()
        self.key_edit.setPlaceholderText("Save the profile first, then its key")
        self.key_source_label.setText("")
        self._update_buttons()
        self.name_edit.setFocus()
        self.name_edit.selectAll()

    def _on_delete_clicked(self) -> None:
        if not self._delete_armed:  # a second click confirms: no modal dialog
            self._delete_armed = True
            self.delete_button.setText("Click again to delete")
            self.delete_button.setStyleSheet(f"color: {BAD_COLOR}; font-weight: bold;")
            self._disarm.start()
            return
        self._disarm_delete()
        self.delete_current()

    def _disarm_delete(self) -> None:
        self._delete_armed = False
        self._disarm.stop()
        self.delete_button.setText("Delete")
        self.delete_button.setStyleSheet("")

    def delete_current(self) -> bool:
        """Delete the selected user profile and forget its key (off-thread: the keyring may block).
        Returns whether a deletion was started; ``profilesChanged`` follows."""
        name = self._current
        if name is None or self._draft or not self.delete_button.isEnabled():
            return False
        was_active = name == self.store.active
        self.delete_button.setEnabled(False)

        def done(_r: object) -> None:
            if self._current == name:
                self._current = None
            self.refresh(select=self.store.active)
            self.profilesChanged.emit()
            if was_active:
                self.activeProfileChanged.emit(self.store.active)

        def failed(exc: BaseException) -> None:
            error_sink().report("Could not delete the profile", exc)
            self._update_buttons()

        run_in_thread(self.store.delete, name, on_done=if_alive(self, done), on_error=if_alive(self, failed))
        return True

    def reset_current(self) -> None:
        if self._current is None:
            return
        try:
            self.store.reset(self._current)
        except (ProfileError, OSError) as exc:
            error_sink().report("Could not reset the profile", exc)
            return
        self._load(self._current)
        self.refresh(select=self._current)
        self.profilesChanged.emit()

    def make_active(self) -> None:
        if self._current is None or self._draft:
            return
        try:
            self.store.set_active(self._current)
        except (ProfileError, OSError) as exc:
            error_sink().report("Could not change the active endpoint", exc)
            return
        self.refresh(select=self._current)
        self.activeProfileChanged.emit(self._current)

    # ---- keys ----------------------------------------------------------------------------------
    def _refresh_key_source(self) -> None:
        """Ask (off-thread: the keyring may block) where the current profile's key comes from."""
        name = self._current
        if name is None or self._draft:
            return
        self._source_gen += 1
        gen = self._source_gen
        profile = self._safe_get(name)
        needs = bool(profile and profile.needs_key)

        def show(source: str | None) -> None:
            if gen != self._source_gen:
                return
            text = key_source_text(source, needs, profile.env_vars() if profile else None)
            self.key_source_label.setText(text)
            self.key_edit.setPlaceholderText(key_placeholder(source))
            self.forget_key_button.setEnabled(source in ("keyring", "session"))
            envs = ", ".join(f"${v}" for v in profile.env_vars()) if profile else ""
            self.key_source_label.setToolTip(
                f"Looked up in order: this session, the system keyring, {envs}" if envs else ""
            )

        run_in_thread(
            self.store.api_key_source,
            name,
            on_done=if_alive(self, show),
            error_title="Could not read the key store",
        )

    def key_source(self) -> str:
        return self.key_source_label.text()

    def save_key(self) -> None:
        """Store the typed key in the keyring and empty the field."""
        key = self.key_edit.text()
        name = self._current
        if not key or name is None or self._draft:
            return
        self.key_edit.clear()
        self._clear_key_message()
        self._key_op(name, key, session_only=False)

    def use_key_for_session(self) -> None:
        key, self._pending_key = self._pending_key, None
        name = self._current
        if key and name:
            self._key_op(name, key, session_only=True)

    def _key_op(self, name: str, key: str, *, session_only: bool) -> None:
        def done(where: str) -> None:
            self._pending_key = None
            self.session_button.setVisible(False)
            self._show_key_message(
                "Saved in the system keyring." if where == "keyring" else "Kept for this session only.",
                OK_COLOR,
            )
            self._refresh_key_source()

        def failed(exc: BaseException) -> None:
            if isinstance(exc, ApiKeyStoreError):  # NoSecureStoreError included
                self._pending_key = key
                color = WARN_COLOR if isinstance(exc, NoSecureStoreError) else BAD_COLOR
                self._show_key_message(str(exc), color)
                self.session_button.setVisible(True)
            else:
                self._show_key_message(f"The key was not saved: {describe(exc)}", BAD_COLOR)
            self._refresh_key_source()

        run_in_thread(
            functools.partial(self.store.set_api_key, name, key, session_only=session_only),
            on_done=if_alive(self, done),
            on_error=if_alive(self, failed),
        )

    def forget_key(self) -> None:
        name = self._current
        if name is None or self._draft:
            return
        self._clear_key_message()

        def done(_r: object) -> None:
            self._show_key_message("Key forgotten.", MUTED)
            self._refresh_key_source()

        run_in_thread(
            self.store.forget_api_key,
            name,
            on_done=if_alive(self, done),
            error_title="Could not forget the key",
        )

    def _show_key_message(self, text: str, color: str) -> None:
        self.key_message.setText(text)
        self.key_message.setStyleSheet(f"color: {color};")
        self.key_message.setVisible(True)

    def _clear_key_message(self) -> None:
        self._pending_key = None
        self.key_message.setVisible(False)
        self.key_message.setText("")
        self.session_button.setVisible(False)

    # ---- connection test -----------------------------------------------------------------------
    @property
    def testing(self) -> bool:
        return self._test is not None and not self._test.done()

    def test_connection(self) -> None:
        """Probe the endpoint the form describes (saved or not) off the GUI thread; a click while
        a test runs cancels it."""
        if self.testing:
            self.cancel_test()
            self._set_verdict(None, "Test cancelled", "")
            return
        profile = self.form_profile()
        if profile is None:
            self._set_verdict(False, "Fix the highlighted fields first", "")
            return
        if not profile.base_url:
            hint = (
                "Start the server in the Local vLLM tab; its address is filled in here."
                if profile.kind == "local-vllm"
                else "Enter the server's base URL."
            )
            self._set_verdict(False, "No base URL", hint)
            return
        typed = self.key_edit.text()
        known = not self._draft and profile.name in self.store.names()
        store = self.store
        timeout = min(15.0, profile.total_timeout)

        async def probe() -> ConnectionCheck:
            from vrag_desktop.core.endpoints.client import OpenAIChatModel

            key = typed or (await asyncio.to_thread(store.api_key, profile.name) if known else None)
            model = OpenAIChatModel(
                profile.base_url,
                profile.model,
                key,
                connect_timeout=min(profile.connect_timeout, timeout),
                total_timeout=timeout,
                max_attempts=1,
                extra_body=profile.extra_body,
                default_params=profile.params,
            )
            try:
                return await model.check(timeout=timeout)
            finally:
                await model.aclose()

        self._test_gen += 1
        gen = self._test_gen
        self.test_button.setText("Cancel test")
        self._set_verdict(None, "Testing…", profile.base_url)

        def done(check: ConnectionCheck) -> None:
            if gen == self._test_gen:
                self._test_finished()
                ok = bool(check.ok)
                head, detail = verdict_text(check, profile.model)
                self._set_verdict(ok, head, detail)

        def failed(exc: BaseException) -> None:
            if gen == self._test_gen:
                self._test_finished()
                self._set_verdict(False, "Test failed", describe(exc))

        self._test = async_runner().call(
            probe(), on_done=if_alive(self, done), on_error=if_alive(self, failed)
        )

    def cancel_test(self) -> None:
        if self._test is not None:
            self._test.cancel()
        self._test_gen += 1
        self._test_finished()

    def _test_finished(self) -> None:
        self._test = None
        self.test_button.setText("Test connection")

    def _set_verdict(self, ok: bool | None, head: str, detail: str) -> None:
        if not head:
            self.verdict_label.setText("")
            self.verdict_label.setToolTip("")
            return
        mark, color = {True: ("✓", OK_COLOR), False: ("✗", BAD_COLOR), None: ("", MUTED)}[ok]
        text = f"<b style='color:{color}'>{html.escape(f'{mark} {head}'.strip())}</b>"
        if detail:
            text += f"<br><span>{html.escape(detail)}</span>"
        self.verdict_label.setText(text)
        self.verdict_label.setToolTip(detail)
        if ok is not None:
            self.verdictChanged.emit(ok, head)

    def verdict(self) -> str:
        """The verdict as plain text (headline and detail)."""
        return html.unescape(re.sub(r"<[^>]+>", " ", self.verdict_label.text())).strip()

    def local_profile_updated(self) -> None:
        """The app filled in the Local vLLM address: show it (unsaved edits of it are kept)."""
        self.refresh(select=self._current if not self._draft else None)

    def shutdown(self) -> None:
        self.cancel_test()
        self._disarm.stop()

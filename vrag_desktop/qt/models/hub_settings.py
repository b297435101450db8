"""Where models come from: the hub endpoint (a mirror), the Hugging Face token, offline mode.

Why these three together: they decide whether and where a download goes, and ``vrag-desktop models
settings`` changes the same file (``<data>/config/models.json``). The token goes to the system keyring
through the core's :func:`set_token` and is never shown back: the box says only where one is kept.
Every write and keyring call runs off the GUI thread (a keyring may block).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QFormLayout, QGroupBox, QLabel, QLineEdit, QWidget

from vrag_desktop.core.models import (
    ModelError,
    ModelSettings,
    forget_token,
    set_token,
    stored_token,
    update_settings,
)
from vrag_desktop.core.models.settings import DEFAULT_ENDPOINT, check_endpoint
from vrag_desktop.qt.infra.errors import describe
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.infra.widgets import button, row

if TYPE_CHECKING:
    from vrag_desktop.core.paths import DataLayout

_SOURCES = {
    "keyring": "A token is saved in the system keyring.",
    "session": "A token is kept for this session only.",
    "env:HF_TOKEN": "The token comes from HF_TOKEN in the environment.",
}


class HubSettingsBox(QGroupBox):
    """See the module docstring. ``changed(ModelSettings)`` after a setting was saved."""

    changed = Signal(object)

    def __init__(self, layout: DataLayout, parent: QWidget | None = None) -> None:
        super().__init__("Where models come from", parent)
        self.setObjectName("hubSettings")
        self.layout_ = layout
        self.endpoint_edit = QLineEdit(self)
        self.endpoint_edit.setObjectName("hubEndpoint")
        self.endpoint_edit.setPlaceholderText(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
        self.endpoint_edit.setToolTip(
            "A Hugging Face mirror (e.g. https://hf-mirror.com); empty: $HF_ENDPOINT or huggingface.co"
        )
        self.endpoint_edit.returnPressed.connect(self.save_endpoint)
        self.endpoint_button = button(self, "Save", self.save_endpoint, name="saveEndpoint")
        self.token_edit = QLineEdit(self)
        self.token_edit.setObjectName("hubToken")
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText("hf_… for gated or private models (kept in the system keyring)")
        self.token_edit.returnPressed.connect(self.save_token)
        self.token_button = button(self, "Save token", self.save_token, name="saveToken")
        self.forget_button = button(
            self, "Forget", self.forget, name="forgetToken", tip="Remove the saved token"
        )
        self.token_state = QLabel(self)
        self.token_state.setObjectName("tokenState")
        set_role(self.token_state, "role", "hint")
        self.offline_check = QCheckBox("Offline: never touch the network (downloads are refused)", self)
        self.offline_check.setObjectName("offlineMode")
        self.offline_check.toggled.connect(self.set_offline)
        self.message = QLabel(self)
        self.message.setObjectName("hubMessage")
        self.message.setWordWrap(True)
        self.message.hide()
        form = QFormLayout(self)
        form.addRow("Hub endpoint", row(self.endpoint_edit, self.endpoint_button, grow=self.endpoint_edit))
        form.addRow(
            "Token", row(self.token_edit, self.token_button, self.forget_button, grow=self.token_edit)
        )
        form.addRow("", self.token_state)
        form.addRow("", self.offline_check)
        form.addRow("", self.message)
        self._loading = False

    def show_settings(self, settings: ModelSettings) -> None:
        """The saved settings in the fields (the token's source is looked up off the GUI thread)."""
        self._loading = True
        try:
            if not self.endpoint_edit.hasFocus():
                self.endpoint_edit.setText(settings.endpoint or "")
            self.offline_check.setChecked(settings.offline)
        finally:
            self._loading = False
        self.refresh_token()

    def refresh_token(self) -> None:
        layout = self.layout_

        def source() -> str | None:
            return stored_token(layout)[1]  # only where it is kept reaches the GUI thread

        run_call(source, name="look up the hub token", on_done=self._token_source, report=False)

    def _token_source(self, where: str | None) -> None:
        self.token_state.setText(
            _SOURCES.get(
                where or "",
                "No token saved: public models only (a `hf auth login` token is used if present).",
            )
        )
        self.forget_button.setEnabled(where in ("keyring", "session"))

    # ---- saving
    def save_endpoint(self) -> None:
        text = self.endpoint_edit.text().strip()
        try:
            value = check_endpoint(text) if text else None
        except ModelError as exc:
            self._say(str(exc), "error")
            return
        self._save(
            {"endpoint": value},
            f"Models come from {value}." if value else "Models come from the default hub.",
        )

    def set_offline(self, on: bool) -> None:
        if self._loading:
            return
        self._save(
            {"offline": on},
            "Offline: nothing goes to the network." if on else "Online: downloads are allowed.",
        )

    def _save(self, changes: dict[str, object], done_text: str) -> None:
        layout = self.layout_

        def saved(settings: ModelSettings) -> None:
            self._say(done_text, "ok")
            self.changed.emit(settings)

        run_call(
            lambda: update_settings(layout, **changes),
            name="save the hub settings",
            on_done=saved,
            on_error=lambda exc: self._say(f"Not saved: {describe(exc)}", "error"),
        )

    def save_token(self) -> None:
        token = self.token_edit.text().strip()
        if not token:
            self._say("Paste a token first.", "warn")
            return
        self.token_edit.clear()  # never kept in a widget longer than it takes to hand it over
        layout = self.layout_

        def stored(where: str) -> None:
            self._say(
                "Token saved in the system keyring."
                if where == "keyring"
                else "Token kept for this session.",
                "ok",
            )
            self.refresh_token()

        run_call(
            set_token,
            layout,
            token,
            name="save the hub token",
            on_done=stored,
            on_error=lambda exc: self._say(
                str(exc) if isinstance(exc, ModelError) else describe(exc), "error"
            ),
        )

    def forget(self) -> None:
        def done(_: object) -> None:
            self._say("Token forgotten.", "ok")
            self.refresh_token()

        run_call(forget_token, self.layout_, name="forget the hub token", on_done=done)

    def _say(self, text: str, level: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
        set_role(self.message, "role", {"ok": "ok", "warn": "warn", "error": "error"}.get(level, "muted"))


__all__ = ["HubSettingsBox"]

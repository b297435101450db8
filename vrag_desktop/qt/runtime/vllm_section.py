"""The Local vLLM tab: start, stop and watch the app's own vLLM server.

Why it is built this way: vLLM takes minutes to load and fails in many ways, so the server runs
under the core's supervisor on the app's async runner (never the GUI thread); its status arrives
through a queued signal and its output through a thread-safe buffer (:class:`LogView`). A failed
start is shown as the core's one-sentence diagnosis, not an exit code. The settings form
(:class:`VLLMForm`), the GPU box, the pre-flight and the environment's setup (:mod:`.vllm_setup`)
are parts of their own; this module owns the server's life. The section stops only the server it
started, on :meth:`VLLMSection.shutdown`. The server's API key is the Local vLLM profile's
(keyring; the key box here edits it): read off the GUI thread at start and handed to vLLM in its
environment, so the profile's clients send it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileError
from vrag_desktop.core.runtime.logfile import rotate_log
from vrag_desktop.core.runtime.settings import app_log_path, app_state_path, load_vllm_settings
from vrag_desktop.core.runtime.supervisor import ProcessError, ProcessStatus
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import Task, run_coroutine
from vrag_desktop.qt.runtime.gpu_box import GpuBox, Preflight
from vrag_desktop.qt.runtime.key_box import server_key_box
from vrag_desktop.qt.runtime.log_view import LogView
from vrag_desktop.qt.runtime.server_card import ServerCard
from vrag_desktop.qt.runtime.server_text import NOT_SERVING_TITLES, server_state_text
from vrag_desktop.qt.runtime.vllm_form import VLLMForm
from vrag_desktop.qt.runtime.vllm_setup import VLLMEnvSetup

if TYPE_CHECKING:
    from collections.abc import Callable

    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.runtime.settings import VLLMSettings
    from vrag_desktop.core.runtime.vllm import VLLMServer
    from vrag_desktop.qt.context import AppContext

S = ProcessStatus


class _Bridge(QObject):
    """Carries supervisor callbacks (runner thread) to the GUI thread."""

    status = Signal(str)


async def _launch(server: VLLMServer, ctx: AppContext) -> None:
    """Start ``server`` with the Local vLLM profile's key (the keyring may block: off the GUI thread)."""
    import asyncio

    server.set_api_key(await asyncio.to_thread(ctx.profiles.api_key, LOCAL_VLLM))
    await server.start()


class VLLMSection(QWidget):
    """Status card, start/stop, settings form, GPU and pre-flight of the app's own vLLM server."""

    stateChanged = Signal()  # the server's status changed
    localServerReady = Signal(str, str)  # base URL, served model name
    gpuChanged = Signal(str)  # gpu_badge text

    def __init__(self, ctx: AppContext, log_view: LogView, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.log_view = log_view
        self._server: VLLMServer | None = None
        self._unsubs: list[Callable[[], None]] = []
        self._start_future: Task | None = None
        self._start_pending = False  # until its result reaches the GUI thread (or a stop ends it)
        self._stopping = False
        self._launch_error: tuple[str, str] | None = None
        self._crash_reported = False
        self._started_at = 0.0
        self._bridge = _Bridge(self)
        self._bridge.status.connect(self._on_status)
        self._build()
        settings, message = load_vllm_settings(ctx.data_dir)
        if message:
            error_sink().report("vLLM settings", message, "warning")
        self.form.set_settings(settings)
        self.form.saved = self.form.settings()
        self._render()
        self.detect_gpus()

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        card = ServerCard(self, start=self.start, stop=self.stop, use=self._use_local)
        self.card = card  # its parts, under the names the section has always had
        self.status_dot, self.status_head, self.status_detail = card.dot, card.head, card.detail
        self.start_button, self.stop_button, self.use_button = (
            card.start_button,
            card.stop_button,
            card.use_button,
        )

        self.preflight = Preflight(self)
        self.gpu = GpuBox(self)
        self.gpu.badgeChanged.connect(self.gpuChanged)
        self.gpu.reportChanged.connect(lambda _r: self.run_preflight())
        self.form = VLLMForm(self.ctx.data_dir, self)
        self.form.edited.connect(self._on_edit)
        self.form.setup_button.clicked.connect(self.setup_environment)
        self.form.preview_button.clicked.connect(self.preview_command)
        self.env_setup = VLLMEnvSetup(self.ctx.data_dir, self.form, self.log_view, self)
        self.env_setup.envReady.connect(self.run_preflight)
        self.env_setup.changed.connect(self._render)

        # the parts' widgets, under the names the panel has always had
        self.preflight_box, self.preflight_label = self.preflight.box, self.preflight.label
        self.estimate_note = self.preflight.note
        self.gpu_box, self.gpu_label, self.gpu_refresh = self.gpu, self.gpu.label, self.gpu.refresh_button
        form = self.form
        self.settings_box, self.model_edit, self.model_error = form, form.model_edit, form.model_error
        self.served_edit, self.python_edit, self.env_label = (
            form.served_edit,
            form.python_edit,
            form.env_label,
        )
        self.setup_button, self.host_edit, self.port_spin = form.setup_button, form.host_edit, form.port_spin
        self.maxlen_spin, self.util_spin, self.tp_spin = form.maxlen_spin, form.util_spin, form.tp_spin
        self.dtype_combo, self.images_spin, self.extra_edit = (
            form.dtype_combo,
            form.images_spin,
            form.extra_edit,
        )
        self.extra_error, self.settings_error = form.extra_error, form.settings_error
        self.preview_box = form.preview_box

        self.key_box = server_key_box(self.ctx.profiles, self)

        layout = QVBoxLayout(self)
        layout.addWidget(card)
        layout.addWidget(self.preflight.box)
        layout.addWidget(self.preflight.note)
        layout.addWidget(self.gpu)
        layout.addWidget(self.form)
        layout.addWidget(self.key_box)
        layout.addStretch(1)

        self._preflight_timer = QTimer(self, singleShot=True, interval=400)
        self._preflight_timer.timeout.connect(self._settings_settled)
        self._elapsed = QTimer(self, interval=1000)
        self._elapsed.timeout.connect(self._render)

    # ---- settings ------------------------------------------------------------------------------
    def settings(self) -> VLLMSettings:
        """The form as settings (not validated)."""
        return self.form.settings()

    def set_settings(self, s: VLLMSettings) -> None:
        self.form.set_settings(s)

    def save_settings(self, s: VLLMSettings | None = None) -> bool:
        return self.form.save_settings(s)

    def _on_edit(self) -> None:
        self._render()
        self._preflight_timer.start()

    def _settings_settled(self) -> None:
        """Debounced after edits: remember the settings, re-run the pre-flight."""
        s = self.settings()
        if not s.problems().keys() - {"model"}:
            self.save_settings(s)
        self.run_preflight()

    def preview_command(self) -> str:
        """Show the command Start would run (the port too, when it is chosen automatically)."""
        s = self.settings()
        problems = s.problems()
        if problems:
            self.form.show_problems(problems)
            return ""
        try:
            cfg = s.to_config(self.ctx.data_dir)
            port = self._server.port if self._server is not None and self._server.status.running else None
            text = cfg.shell_command(port)
        except (ValueError, ProcessError) as exc:
            self.form.show_error(describe(exc))
            return ""
        if cfg.port is None and port is None:
            text += "\n# the port shown is an example: a free one is chosen at start"
        self.form.show_preview(text)
        return text

    # ---- GPU and pre-flight --------------------------------------------------------------------
    def detect_gpus(self) -> None:
        self.gpu.detect()

    @property
    def gpu_report(self) -> GPUReport | None:
        return self.gpu.report

    def gpu_summary(self) -> str:
        return self.gpu.summary()

    def run_preflight(self) -> None:
        """Estimate (off-thread) whether the model fits; show the warnings in the warning box."""
        s = self.settings()
        cfg = None
        if self.gpu.report is not None and not s.problems():
            try:
                cfg = s.to_config(self.ctx.data_dir)
            except ValueError:
                cfg = None
        self.preflight.run(cfg, self.gpu.report)

    def preflight_warnings(self) -> list[str]:
        return self.preflight.warnings()

    # ---- environment setup ---------------------------------------------------------------------
    def setup_environment(self) -> None:
        """Create the vLLM virtualenv (:class:`~.vllm_setup.VLLMEnvSetup`); a second click cancels."""
        self.env_setup.toggle(self.gpu.report)

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

    @property
    def stopping(self) -> bool:
        """Asked to stop, not stopped yet."""
        return self._stopping

    @property
    def starting(self) -> bool:
        """Asked to start and not ready yet (checking the port and interpreter counts)."""
        status = self.status
        return not self._stopping and (status is S.STARTING or (self._start_pending and not status.running))

    def start(self) -> bool:
        """Start the server with the form's settings. Returns False when refused (shown inline)."""
        return self.start_with(None)

    def start_with(self, settings: VLLMSettings | None) -> bool:
        """:meth:`start` with ``settings`` (shown in the form) instead of the form's: the New-run
        dialog's rollout server."""
        from vrag_desktop.core.runtime.vllm import VLLMServer

        if self.busy:
            return False
        self.form.clear_errors()
        if settings is not None:
            self.set_settings(settings)
        s = settings or self.settings()
        problems = s.problems()
        if problems:
            self.form.show_problems(problems)
            return False
        self.save_settings(s)
        log_path = app_log_path(self.ctx.data_dir)
        try:
            cfg = s.to_config(self.ctx.data_dir)
            rotate_log(log_path)
            server = VLLMServer(
                cfg,
                log_path=log_path,
                ready_timeout=s.ready_timeout,
                probe_interval=0.5,
                state_path=app_state_path(self.ctx.data_dir),
            )
            shown = cfg.shell_command(server.port)
        except (ValueError, ProcessError) as exc:
            self._launch_error = (getattr(exc, "kind", "other"), describe(exc))
            self._render()
            return False
        self._detach()
        self._server = server
        self._launch_error, self._crash_reported, self._stopping = None, False, False
        self._started_at = time.monotonic()
        error_sink().withdraw(*NOT_SERVING_TITLES)  # a new try: the last one's failure is history
        bridge = self._bridge
        sup = server.supervisor
        self._unsubs = [
            sup.on_status(lambda st: bridge.status.emit(st.value)),
            sup.on_line(self.log_view.append_line),
        ]
        self.log_view.set_log_file(log_path)
        self.log_view.append_line(f"── Starting vLLM: {shown}")
        self._start_pending = True
        self._start_future = run_coroutine(
            _launch(server, self.ctx),
            name="vLLM start",
            on_done=if_alive(self, self._on_started),
            on_error=if_alive(self, self._on_start_failed),
        )
        self._elapsed.start()
        self._render()
        return True

    def serve_model(self, model: str, served_name: str) -> bool:
        """Put ``model`` (a folder or Hugging Face id) and ``served_name`` in the form and :meth:`start`
        (the other settings stay as the person chose). False when busy or refused (shown inline)."""
        if self.busy:
            return False
        self.model_edit.setText(model)
        self.served_edit.setText(served_name)
        return self.start()

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
            error_sink().withdraw(*NOT_SERVING_TITLES)
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
        run_coroutine(
            server.stop(grace=10.0),
            name="vLLM stop",
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
        if not self.ctx.current_model.choose(LOCAL_VLLM):
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
        full = detail
        if server is not None and server.exit_info is not None and status in (S.CRASHED, S.EXITED):
            info = server.exit_info
            full = info.message
            if info.tail and "Last output:" not in full:
                full += "\n\nLast output:\n" + "\n".join(info.tail[-12:])
        self.card.show_state(head, detail, color, full)
        busy = self.busy
        setup = self.env_setup.running()
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
        self.env_setup.stop(min(5.0, timeout_s))
        server = self._server
        ok = True
        if server is not None and (server.status.running or self.busy):
            self._stopping = True
            if self._start_future is not None and not self._start_future.done():
                self._start_future.cancel()
            stopping = run_coroutine(
                server.stop(grace=max(0.5, min(5.0, timeout_s / 2))), name="vLLM stop", report=False
            )
            if not stopping.wait(timeout_s) or stopping.error is not None:  # quitting: say so, never hang
                problem = stopping.error or TimeoutError(f"still stopping after {timeout_s:.0f} s")
                error_sink().report("vLLM did not stop cleanly", problem, "warning")
                ok = False
            ok = ok and not server.status.running
            self._stopping = self._start_pending = False
        self._detach()
        return ok

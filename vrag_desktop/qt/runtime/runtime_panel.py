"""The runtime panel: the Endpoints, Local vLLM and Log tabs in one dock, and the short status the
window's status bar shows.

Why only assembly here: each tab is a widget of its own (:class:`ProfileEditor`,
:class:`VLLMSection`, :class:`LogView`); this panel wires their signals to the window, shows the
notice about servers an earlier session left running (:class:`LeftoverNotice`, checked once at
start), and stops the server it started on :meth:`RuntimePanel.shutdown`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QScrollArea, QTabWidget, QVBoxLayout, QWidget

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileError
from vrag_desktop.core.endpoints.readiness import AppServer
from vrag_desktop.core.runtime.settings import app_log_path
from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.runtime.leftovers import LeftoverNotice
from vrag_desktop.qt.runtime.log_view import LogView
from vrag_desktop.qt.runtime.profile_editor import ProfileEditor
from vrag_desktop.qt.runtime.server_text import gpu_badge, model_status
from vrag_desktop.qt.runtime.vllm_section import VLLMSection

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

__all__ = ["RuntimePanel", "VLLMSection"]

S = ProcessStatus


def _scroll(widget: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    # No sideways scrolling at all: a field taking focus would otherwise slide the whole form left
    # (labels cut at their start) whenever a long line makes it wider than a narrow dock.
    bar = area.horizontalScrollBar()

    def back(value: int) -> None:
        if value:
            bar.setValue(0)

    bar.valueChanged.connect(back)
    return area


class RuntimePanel(QWidget):
    """Endpoints, Local vLLM and Log tabs. Fits a dock; see the module docstring."""

    statusChanged = Signal(str)  # short status-bar text: "Local vLLM · ready", "DashScope", …
    gpuChanged = Signal(str)  # "CPU only" or "GPU: H100 80GB HBM3 (80 GiB)"
    profilesChanged = Signal()
    activeProfileChanged = Signal(str)
    leftoversFound = Signal(int)  # servers of an earlier session still run: the window shows this panel

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
        self.leftovers = LeftoverNotice(ctx.data_dir, self)
        layout.addWidget(self.leftovers)
        layout.addWidget(self.tabs)

        self.editor.profilesChanged.connect(self._on_profiles_changed)
        self.editor.activeProfileChanged.connect(self._on_active_changed)
        self.editor.key_box.keyChanged.connect(ctx.current_model.refresh)
        self.vllm.key_box.keyChanged.connect(ctx.current_model.refresh)
        ctx.current_model.changed.connect(self._on_current_changed)
        self.vllm.stateChanged.connect(self._on_server_state)
        self.vllm.localServerReady.connect(self._on_local_ready)
        self.vllm.gpuChanged.connect(self._on_gpu)
        self.leftovers.found.connect(self.leftoversFound)
        self.leftovers.kept.connect(self._keep_leftover)
        self.tabs.currentChanged.connect(self._on_tab)
        self._update_status()
        self.leftovers.scan()

    # ---- signals -------------------------------------------------------------------------------
    def _on_profiles_changed(self) -> None:
        self.profilesChanged.emit()
        self.ctx.current_model.sync()  # the active profile may be gone, or its fields changed
        self._update_status()

    def _on_active_changed(self, _name: str) -> None:
        """*Make active* (or a deletion) changed the store: every panel hears it from the one model."""
        self.ctx.current_model.sync()

    def _on_current_changed(self, name: str) -> None:
        self.editor.refresh()
        self.vllm._render()
        self._update_status()
        self.activeProfileChanged.emit(name)

    def _on_local_ready(self, _url: str, _model: str) -> None:
        self.editor.local_profile_updated()
        self.profilesChanged.emit()
        model = self.ctx.current_model
        if model.name is None:  # the person started a local model before choosing any: it is the one
            model.choose(LOCAL_VLLM)
        model.sync()
        self._update_status()

    def _on_server_state(self) -> None:
        """The app's own server changed state: the current model may now answer, or no longer."""
        server = self.vllm.server
        status = self.vllm.status
        state: AppServer = "stopped"
        if status is S.STOPPING or (status.running and self.vllm.stopping):
            state = "stopping"
        elif status is S.READY:
            state = "ready"
        elif self.vllm.starting:
            state = "starting"
        elif status is S.CRASHED:
            state = "crashed"
        self.ctx.current_model.set_app_server(state, server.base_url if server is not None else "")
        self._update_status()

    def _on_tab(self, index: int) -> None:
        if self.tabs.tabText(index) == "Local vLLM":  # its key may have changed on the Endpoints tab
            self.vllm.key_box.refresh_source()

    def _keep_leftover(self, base_url: str, model: str) -> None:
        """A server of an earlier session stays: the Local vLLM profile points at it."""
        try:
            self.ctx.profiles.set_local_server(base_url, model)
        except (ProfileError, OSError) as exc:
            error_sink().report("Could not update the Local vLLM profile", exc)
            return
        self._on_local_ready(base_url, model)

    def _on_gpu(self, text: str) -> None:
        self._gpu_text = text
        self.gpuChanged.emit(text)

    def status_text(self) -> str:
        """The status bar's model words (:func:`model_status`) with the local server's state."""
        shown = self.vllm.status.running or self.vllm.status is S.CRASHED
        return model_status(self.ctx.current_model.name, self.vllm.short_state(), shown)

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
        self.ctx.current_model.sync()
        self.editor.refresh()
        self.vllm._render()
        self._update_status()

    def show_tab(self, name: str) -> None:
        for i in range(self.tabs.count()):
            if self.tabs.tabText(i) == name:
                self.tabs.setCurrentIndex(i)

    def show_key(self, profile: str) -> None:
        """The Endpoints tab with ``profile`` selected and its key field focused (where a missing key
        is fixed)."""
        self.show_endpoint(profile)
        self.editor.key_edit.setFocus()
        self._reveal(self.editor.key_box)

    def _reveal(self, widget: QWidget) -> None:
        """Scroll the current tab to ``widget`` once it is laid out (focus alone does not scroll)."""
        area = self.tabs.currentWidget()
        if isinstance(area, QScrollArea):
            QTimer.singleShot(0, lambda: area.ensureWidgetVisible(widget, 0, 12))

    def show_endpoint(self, profile: str | None) -> None:
        """The Endpoints tab with ``profile`` selected (its address and model)."""
        self.show_tab("Endpoints")
        if profile:
            self.editor.select(profile)
        self.editor.url_edit.setFocus()

    def show_server(self) -> None:
        """The Local vLLM tab, scrolled to its top: the server card with Start."""
        self.show_tab("Local vLLM")
        self.vllm.start_button.setFocus()

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """On window close: cancel tests, stop the server this panel started (bounded wait), save
        the vLLM settings if they changed. True when no process of ours is left."""
        self.editor.shutdown()
        s = self.vllm.settings()
        if s != self.vllm.form.saved and not s.problems().keys() - {"model"}:
            self.vllm.save_settings(s)
        return self.vllm.shutdown(timeout_s)

"""Serving a training run's model from its run view: "Serve…" and what follows it.

Why its own module: serving is a conversation with another dock (the Runtime dock's one vLLM
supervisor, :meth:`VLLMSection.serve_model`) and with the endpoint profiles, not part of reading a
run: the run view (:mod:`.run_view`) mixes this in and keeps the polling, plots, log and samples.
Once the server is ready a ``local-vllm`` endpoint profile named after the run points at it
(:mod:`vrag_desktop.core.training.serve`); a start that fails leaves no profile behind and its
classified reason is shown. A run with only a checkpoint is exported first (the Export button's
path), then served.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtWidgets import QApplication, QDockWidget, QMessageBox, QWidget

from vrag_desktop.core.endpoints.profiles import ProfileError
from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.serve import (
    NeedsExport,
    ServeError,
    ServePlan,
    model_dir_problem,
    plan_serve,
    save_run_profile,
)
from vrag_desktop.qt.infra.errors import describe, error_sink

if TYPE_CHECKING:
    from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel
    from vrag_desktop.qt.training.screen_timer import ScreenTimer

__all__ = ["SERVE_TIP", "RunServing", "ask_export"]

SERVE_TIP = (
    "Serve the exported model with the local vLLM (Runtime dock) and add an endpoint profile named "
    "after the run for Ask and Evaluation (a run with only a checkpoint is exported first)"
)


def ask_export(parent: QWidget, run: str, step: int) -> bool:
    """Export before serving? (tests replace this)."""
    answer = QMessageBox.question(
        parent,
        "Export before serving",
        f"{run} has no exported model yet. Export checkpoint {step} now and serve it once it is written?",
    )
    return answer == QMessageBox.StandardButton.Yes


class RunServing:
    """Serve… for :class:`~vrag_desktop.qt.training.run_view.RunView` (a mixin: it reads the view's
    run, buttons' state and message line; :meth:`_init_serving` makes its own state)."""

    root: Path | None
    poll_timer: ScreenTimer
    exportRequested: Any  # the view's Signal(object)
    _busy: bool

    if TYPE_CHECKING:

        @property
        def running(self) -> bool: ...

        def show_message(self, text: str, level: str = "info") -> None: ...

    def _init_serving(self) -> None:
        self.runtime_panel: RuntimePanel | None = None  # where Serve starts vLLM (None: found in the app)
        self._serve_after_export: Path | None = None
        self._export_seen_live = False
        self._serving: ServePlan | None = None  # its profile follows the server once it is ready
        self._pending: tuple[ServePlan, Any] | None = None  # (plan, server) until ready or failed
        self._ready_hooked: set[int] = set()

    def serve(self) -> bool:
        """Serve the run's export through the Runtime dock's vLLM and point the run's endpoint profile
        at it. Only a checkpoint: offer to export first (served once written). False: refused (said)."""
        root = self.root
        if root is None:
            return False
        try:
            plan = plan_serve(root)
        except NeedsExport as exc:
            if not ask_export(cast(QWidget, self), root.name, exc.step):  # the run view
                self.show_message(str(exc), "warning")
                return False
            self._serve_after_export, self._export_seen_live = root, False
            self.poll_timer.follow()  # polled until the export is there, shown or not
            self.exportRequested.emit(root)
            if self.running or self._busy:
                self.show_message(
                    f"Exporting checkpoint {exc.step}; it is served once the export is written."
                )
            else:
                self._serve_after_export = None  # the export was refused (said where it was)
            return False
        except ServeError as exc:
            self.show_message(str(exc), "warning")
            return False
        panel = self.find_runtime()
        if panel is None:
            self.show_message("The Runtime dock is not available to start vLLM.", "warning")
            return False
        section = panel.vllm
        server = section.server
        if section.busy:
            same = server is not None and Path(server.config.model).expanduser() == plan.model_dir
            if not same:
                what = server.config.model_name if server is not None else "another model"
                self._reveal(panel)
                self.show_message(
                    f"The local vLLM server is busy with {what}; stop it in the Runtime dock, then Serve again.",
                    "warning",
                )
                return False
        elif not section.serve_model(str(plan.model_dir), plan.served_name):
            self._reveal(panel)
            self.show_message(f"vLLM could not start: {self._reason(panel)}", "error")
            return False
        server = section.server
        self._reveal(panel)
        if id(section) not in self._ready_hooked:
            self._ready_hooked.add(id(section))
            section.localServerReady.connect(lambda url, model: self._server_ready(panel, url, model))
            section.stateChanged.connect(lambda: self._watch_start(panel))
        self._serving = plan
        if server is not None and section.status is ProcessStatus.READY:  # already served: re-point
            self._pending = None
            return self._serving_now(panel, plan, server.base_url, server.config.model_name)
        # the profile is made once the server is ready (none is left behind by a failed start)
        self._pending = (plan, server)
        self.show_message(
            f"Starting the local vLLM on {plan.model_dir} as {plan.served_name!r} (Runtime dock); the "
            f"endpoint profile {plan.profile_name!r} is added once it is ready."
        )
        return True

    def _serving_now(self, panel: RuntimePanel, plan: ServePlan, base_url: str, model: str) -> bool:
        if not self._save_profile(panel, plan, base_url, model):
            return False
        self.show_message(
            f"Serving {plan.model_dir} as {plan.served_name!r} with the local vLLM (Runtime dock); "
            f"the endpoint profile {plan.profile_name!r} points at {base_url}."
        )
        return True

    @staticmethod
    def _reason(panel: RuntimePanel) -> str:
        """The Runtime dock's classified verdict on its server (headline and detail)."""
        head, detail = panel.vllm.status_head.text().strip(), panel.vllm.status_detail.text().strip()
        return f"{head} — {detail}" if head and detail else head or detail or "see the Runtime dock"

    def _watch_start(self, panel: RuntimePanel) -> None:
        """A Serve start that ended without the server becoming ready: say why (no profile was made)."""
        if self._pending is None:
            return
        plan, server = self._pending
        section = panel.vllm
        if section.server is not server:
            self._pending = None  # the Runtime dock started something else meanwhile
            return
        if section.busy or section.status is ProcessStatus.READY:
            return
        self._pending = None
        self._serving = None
        text = f"vLLM could not serve {plan.run_name}: {self._reason(panel)}. No endpoint profile was added."
        if self.root == plan.model_dir.parent or self.root is None:
            self.show_message(text, "error")
        else:
            error_sink().report(f"Serving {plan.run_name} failed", text)

    def find_runtime(self) -> RuntimePanel | None:
        """The Runtime dock's panel: the one set on :attr:`runtime_panel`, else the app's."""
        from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel

        if self.runtime_panel is not None:
            return self.runtime_panel
        for w in QApplication.topLevelWidgets():
            found = w if isinstance(w, RuntimePanel) else w.findChild(RuntimePanel)
            if found is not None:
                return found
        return None

    def _save_profile(self, panel: RuntimePanel, plan: ServePlan, base_url: str, model: str) -> bool:
        try:
            save_run_profile(panel.ctx.profiles, plan, base_url, model)
        except (ServeError, ProfileError, OSError) as exc:
            self.show_message(
                f"Could not save the endpoint profile {plan.profile_name!r}: {describe(exc)}", "warning"
            )
            return False
        panel.refresh()
        panel.profilesChanged.emit()  # Ask and Evaluation list it
        return True

    def _server_ready(self, panel: RuntimePanel, base_url: str, model: str) -> None:
        plan = self._serving
        if plan is None or not base_url or model != plan.served_name:
            return
        if self._pending is not None and self._pending[0] == plan:
            self._pending = None
            if self.root == plan.model_dir.parent:
                self._serving_now(panel, plan, base_url, model)
                return
        self._save_profile(panel, plan, base_url, model)

    def _serve_when_exported(self, root: Path) -> None:
        if self._serve_after_export != root:
            return
        if self.running or self._busy:
            self._export_seen_live = True
        elif model_dir_problem(TrainRun(root).export_dir) is None:
            self._serve_after_export = None
            self.serve()
        elif self._export_seen_live:
            self._serve_after_export = None  # the export ended without a model (its message says why)

    @staticmethod
    def _reveal(panel: RuntimePanel) -> None:
        panel.show_tab("Local vLLM")
        w = panel.parentWidget()
        while w is not None and not isinstance(w, QDockWidget):
            w = w.parentWidget()
        if w is not None:
            w.show()
            w.raise_()

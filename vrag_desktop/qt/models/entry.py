"""How the main window reaches the Models view: one download controller for the whole session, the
Models window made on first use, a status-bar button while a download runs, and *Serve…* — the step
from a downloaded answer model to the Runtime panel's Local vLLM server.

Why here and not in the main window: the window only holds one of these (``win.models``) and calls
:meth:`ModelsEntry.open` from its menu, the guide and the first-run chooser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QToolButton

from vrag_desktop.core.models import DownloadProgress
from vrag_desktop.qt.infra.widgets import icon_only
from vrag_desktop.qt.models.downloads import Downloads

if TYPE_CHECKING:
    from vrag_desktop.qt.main_window import MainWindow
    from vrag_desktop.qt.models.models_view import ModelsView

WIDTH, HEIGHT = 1000, 780


class ModelsEntry(QObject):
    """See the module docstring. ``view`` is the Models window once opened (kept when closed)."""

    def __init__(self, win: MainWindow) -> None:
        super().__init__(win)
        self.win = win
        self.downloads = Downloads(win.ctx, self)
        self.view: ModelsView | None = None
        self.badge = QToolButton()
        self.badge.setObjectName("downloadBadge")
        self.badge.setAutoRaise(True)
        icon_only(self.badge, "Model downloads", "A model is downloading: open the Models view")
        self.badge.clicked.connect(lambda: self.open())
        self.badge.hide()
        win.statusBar().addPermanentWidget(self.badge)
        self.downloads.progress.connect(self._progress)
        self.downloads.changed.connect(self._changed)

    def open(self, focus: str | None = None) -> ModelsView:
        """Show the Models window (made on first use), on ``focus``'s card when given."""
        view = self.view
        if view is None:
            from vrag_desktop.qt.models.models_view import ModelsView  # made on first use

            view = self.view = ModelsView(self.win.ctx, self.downloads, self.win)
            view.setWindowFlag(Qt.WindowType.Window, True)
            view.served_model = lambda: self.win.runtime.vllm.model_edit.text()
            view.serveRequested.connect(self.serve)
            screen = self.win.screen() or QGuiApplication.primaryScreen()
            room = screen.availableGeometry() if screen is not None else None
            w, h = (
                (min(WIDTH, int(room.width() * 0.9)), min(HEIGHT, int(room.height() * 0.9)))
                if room
                else (WIDTH, HEIGHT)
            )
            view.resize(w, h)
        if focus:
            self._focus_when_listed(view, focus)
        view.show()
        view.raise_()
        view.activateWindow()
        return view

    def _focus_when_listed(self, view: ModelsView, spec: str) -> None:
        if view.card(spec) is not None:
            view.focus(spec)
            return

        def once() -> None:
            view.listed.disconnect(once)
            view.focus(spec)

        view.listed.connect(once)

    def serve(self, model: str) -> None:
        """Put ``model`` in the Local vLLM settings and take the person there to start it (a pulled
        hub id is served from the models folder, under its id)."""
        vllm = self.win.runtime.vllm
        view = self.view
        running = vllm.busy
        vllm.model_edit.setText(model)
        vllm.served_edit.setText("")  # served under its id (or its folder), not an older model's name
        settings = vllm.settings()
        if not settings.problems():
            vllm.save_settings(settings)
        self.win.ctx.current_model.refresh()  # "not downloaded" no longer holds
        self.win.open_runtime()
        self.win.runtime.show_server()
        self.win.raise_()
        self.win.activateWindow()
        if view is not None:
            text = (
                f"The local server is running another model: stop it, then Start serves {model}."
                if running
                else f"{model} is set in Runtime → Local vLLM: press Start there to serve it."
            )
            view._notice(text, "warn" if running else "ok")
            view.redraw()

    def _progress(self, _key: str, p: Any) -> None:
        if isinstance(p, DownloadProgress) and p.total > 0:
            name = (p.repo_id or "").rsplit("/", 1)[-1]
            self.badge.setText(f"⬇ {name} {p.fraction * 100:.0f}%")
            self.badge.show()

    def _changed(self, _key: str) -> None:
        active = self.downloads.active
        if active is None:
            self.badge.hide()
        elif not self.badge.isVisible():
            self.badge.setText(f"⬇ {active.spec.rsplit('/', 1)[-1]}…")
            self.badge.show()

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """The app quits: a download pauses (resumed from the list next time)."""
        if self.view is not None:
            self.view.shutdown()
        return self.downloads.shutdown(timeout_s)


__all__ = ["ModelsEntry"]

"""The one current model, as the window's panels share it.

Why one object: the model that answers is the endpoint profile store's *active* profile (in
``<data>/config/endpoints.json``, which ``vrag-desktop ask`` reads too). The Ask box shows and
changes it, the Runtime panel's *Make active* changes it, the status bar names it, evaluations and
training judges start from it. Each of them changes it through :meth:`CurrentModel.choose` (or, after
changing the store itself, calls :meth:`CurrentModel.sync`), and all of them follow ``changed``, so
they cannot disagree.

It also says whether that model can answer now (:mod:`vrag_desktop.core.endpoints.readiness`):
a key lookup may block on the keyring and servers are found through their state files, so the facts
are gathered off the GUI thread; the app's own vLLM server is told by the Runtime panel
(:meth:`set_app_server`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.endpoints.profiles import ProfileError
from vrag_desktop.core.endpoints.readiness import (
    AppServer,
    Known,
    LocalServer,
    Readiness,
    known_for,
    readiness,
)
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.runtime.server_text import NOT_SERVING_TITLES

if TYPE_CHECKING:
    from vrag_desktop.core.endpoints.profiles import EndpointProfile
    from vrag_desktop.qt.context import AppContext

#: Shown (without a button) for the moment the facts are being gathered.
CHECKING = "Checking the model…"


class CurrentModel(QObject):
    """See the module docstring. ``changed(name)`` ("" when none is chosen) follows every change of
    the active profile; ``readinessChanged(Readiness)`` every change of whether it can answer."""

    changed = Signal(str)
    readinessChanged = Signal(object)

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._lookup = TaskSlot()
        self._app_server: AppServer = "stopped"
        self._app_url = ""
        self._name = self._read_active()
        self._readiness = Readiness(False, CHECKING, profile=self._name)
        self._adopt_legacy_choice()
        self.refresh()

    # ---- the current model
    @property
    def name(self) -> str | None:
        """The active profile's name; None: no model chosen yet."""
        return self._name

    def profile(self) -> EndpointProfile | None:
        try:
            return self.ctx.profiles.get(self._name) if self._name else None
        except ProfileError:
            return None

    def choose(self, name: str | None) -> bool:
        """Make ``name`` the current model everywhere (the profile store, so the CLI too). False
        (reported) when the store refuses."""
        try:
            if name != self.ctx.profiles.active:
                self.ctx.profiles.set_active(name)
        except (ProfileError, OSError) as exc:
            error_sink().report("Cannot switch the model", exc, "warning")
            return False
        self.sync()
        return True

    def sync(self) -> None:
        """Re-read the store (another part changed it, its profiles were edited, or the data
        directory changed): say ``changed`` when the active profile is another one, and re-check."""
        name = self._read_active()
        if name != self._name:
            self._name = name
            # another model: the app's own server not serving is no longer what stands in the way
            error_sink().withdraw(*NOT_SERVING_TITLES)
            self.changed.emit(name or "")
        self.refresh()

    def _read_active(self) -> str | None:
        try:
            return self.ctx.profiles.active
        except Exception as exc:  # an unusable data directory: reported, and no model
            error_sink().report("Cannot read endpoint profiles", exc)
            return None

    def _adopt_legacy_choice(self) -> None:
        """Earlier versions kept the Ask panel's own choice in the app settings (``profile``); it
        becomes the active profile once, if that profile still exists, and is then forgotten."""
        legacy = self.ctx.settings.profile
        if not legacy:
            return
        self.ctx.settings.profile = None
        try:
            if legacy in self.ctx.profiles.names() and legacy != self.ctx.profiles.active:
                self.ctx.profiles.set_active(legacy)
            self.ctx.save()
        except Exception as exc:
            error_sink().report("Could not carry over the model chosen earlier", exc, "warning")
        self._name = self._read_active()

    # ---- whether it can answer
    @property
    def readiness(self) -> Readiness:
        return self._readiness

    def set_app_server(self, status: AppServer, base_url: str = "") -> None:
        """The Runtime panel's own vLLM server changed state."""
        if (status, base_url) == (self._app_server, self._app_url):
            return
        self._app_server, self._app_url = status, base_url
        self.refresh()

    def refresh(self) -> None:
        """Re-check the current model (a key saved or forgotten, a server started or stopped)."""
        profile = self.profile()
        if self._name and profile is None:  # the active name no longer reads: the store says why
            self._set(
                Readiness(False, "The chosen model's profile cannot be read.", "choose", "Choose a model…")
            )
            return
        own = self._own_server()
        if profile is None or profile.kind == "custom":  # nothing to look up
            self._lookup.drop()
            self._set(readiness(profile, Known(servers=own, app_server=self._app_server)))
            return
        quick = readiness(profile, Known(servers=own, app_server=self._app_server))
        if quick.ready and profile.kind == "local-vllm":  # the app's own server serves it
            self._lookup.drop()
            self._set(quick)
            return
        if self._readiness.profile != profile.name or self._readiness.reason == CHECKING:
            self._set(Readiness(False, CHECKING, profile=profile.name))
        store, data_dir, app_server, app_url = (
            self.ctx.profiles,
            self.ctx.data_dir,
            self._app_server,
            self._app_url,
        )

        def gather() -> Readiness:
            known = known_for(store, profile, data_dir, app_server)
            # the app's own server is as this app knows it, not as its state file (written until it is gone) says
            others = tuple(
                s for s in known.servers if not (app_url and s.base_url.rstrip("/") == app_url.rstrip("/"))
            )
            return readiness(profile, Known(known.has_key, others + own, app_server, known.missing_model))

        self._lookup.start(run_call, gather, on_done=self._set, error_title="Cannot check the model")

    def _own_server(self) -> tuple[LocalServer, ...]:
        if self._app_server == "ready" and self._app_url:
            return (LocalServer(self._app_url, True),)
        return ()

    def _set(self, value: Readiness) -> None:
        if value != self._readiness:
            self._readiness = value
            self.readinessChanged.emit(value)

    def close(self) -> None:
        self._lookup.drop()


__all__ = ["CHECKING", "CurrentModel"]

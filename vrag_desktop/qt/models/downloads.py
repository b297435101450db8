"""The app's one model download at a time: look it up, check that it fits, fetch it, pause, cancel.

Why a controller of its own (and not the view): a download outlives the Models window (closing it
keeps downloading; the status bar shows how far) and is paused when the app quits. Every step is
the core's (:mod:`vrag_desktop.core.models`), off the GUI thread through one :class:`TaskSlot`:

1. *checking* — :func:`inspect_remote` lists the files on the hub (the real size), then
   :func:`fits` and :func:`disk_fit` say whether it fits this machine; a full disk refuses before
   anything is fetched, a model that cannot run here asks first (``confirm``);
2. *downloading* — :func:`pull` as a generator task: its progress (bytes, speed, ETA, file) goes to
   the row; **pause** cancels it (the core keeps every byte: the next pull continues), **resume**
   is a pull again (after a restart too: the list shows the partial download);
3. **cancel** — a pause, then the partial download deleted (:meth:`ModelStore.discard_partial`).

What happened last to each model (downloaded, paused, the core's sentence for a failure) stays in
:attr:`Downloads.messages` until the next try, so its row can show it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.models import (
    DownloadProgress,
    Fit,
    Machine,
    ModelError,
    ModelStore,
    PullResult,
    Verdict,
    disk_fit,
    find_entry,
    fits,
    human_bytes,
    inspect_remote,
    probe_machine,
    pull,
)
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call, run_generator

if TYPE_CHECKING:
    from vrag_desktop.core.models import CatalogueEntry
    from vrag_desktop.core.models.hub import RemoteModel
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.qt.context import AppContext

CHECKING, DOWNLOADING, STOPPING = "checking", "downloading", "stopping"


def model_key(spec: str) -> str:
    """The id a spec names (a catalogue alias becomes its id), lower-case: rows and downloads meet here."""
    entry = find_entry(spec)
    return (entry.id if entry is not None else spec.strip()).lower()


@dataclass(frozen=True)
class Inspection:
    """What the hub says the model is, and whether it fits (found before any file is fetched)."""

    remote: RemoteModel
    entry: CatalogueEntry
    fit: Fit
    disk: tuple[Verdict, str]
    have_bytes: int


@dataclass
class Active:
    """The download under way: ``phase`` checking → downloading (→ stopping after pause/cancel)."""

    spec: str
    key: str
    phase: str = CHECKING
    repo_id: str = ""
    inspection: Inspection | None = None
    progress: DownloadProgress | None = None
    discard: bool = False  # cancel: delete the partial files once stopped
    pulling: bool = False  # the pull task started (it ends in its on_end)


def inspect(layout: DataLayout, spec: str, probe: Callable[[Path], Machine]) -> Inspection:
    """On a worker: the hub's file list, and the fit with what is already here counted."""
    remote, entry = inspect_remote(layout, spec)
    store = ModelStore(layout)
    have = next((p.have_bytes for p in store.partials() if p.id.lower() == remote.repo_id.lower()), 0)
    machine = probe(store.root)
    return Inspection(
        remote, entry, fits(entry, machine, have_bytes=have), disk_fit(entry, machine, have), have
    )


class Downloads(QObject):
    """See the module docstring. ``changed(key)``: a model's download state or message changed;
    ``progress(key, DownloadProgress)``; ``listChanged()``: the models folder changed (reload)."""

    changed = Signal(str)
    progress = Signal(str, object)
    listChanged = Signal()

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.active: Active | None = None
        self.messages: dict[str, tuple[str, str]] = {}  # key -> (level ok|info|warn|error, sentence)
        self.discarding: set[str] = set()
        self.probe: Callable[[Path], Machine] = probe_machine
        #: Asked before downloading a model that cannot run here: (title, text) -> go on?
        self.confirm: Callable[[str, str], bool] = lambda _title, _text: True
        self._slot = TaskSlot()

    # ---- what the rows ask
    def state(self, key: str) -> Active | None:
        return self.active if self.active is not None and self.active.key == key.lower() else None

    def message(self, key: str) -> tuple[str, str] | None:
        return self.messages.get(key.lower())

    @property
    def busy(self) -> bool:
        return self.active is not None

    # ---- actions
    def start(self, spec: str) -> bool:
        """Download (or resume) ``spec``; False when another download runs (said in its row)."""
        spec = spec.strip()
        key = model_key(spec)
        if not spec:
            return False
        if self.active is not None:
            if self.active.key != key:
                self._say(key, "warn", f"One download at a time: {self.active.spec} is downloading.")
            return False
        self.active = Active(spec, key)
        self.messages.pop(key, None)
        self.changed.emit(key)
        self._slot.start(
            run_call,
            inspect,
            self.ctx.layout,
            spec,
            self.probe,
            name=f"look up {spec}",
            on_done=self._inspected,
            on_error=self._failed,
            on_cancelled=self._stopped,
        )
        return True

    def pause(self) -> None:
        """Stop the download; what was fetched stays for the next pull (Resume)."""
        active = self.active
        if active is None or active.phase == STOPPING:
            return
        active.phase = STOPPING
        self._slot.cancel()
        self.changed.emit(active.key)

    def cancel(self, key: str, repo_id: str | None = None) -> None:
        """Stop the download of ``key`` (if it runs) and delete its partial files; a paused one's
        partial files are deleted at once (``repo_id``: its id as the models folder knows it)."""
        key = key.lower()
        active = self.active
        if active is not None and active.key == key:
            active.discard = True
            self.pause()
            return
        self._discard(key, repo_id or key)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """The app quits: pause (the partial download is resumed next time). True once stopped."""
        self._slot.cancel()
        return self._slot.wait(timeout_s)

    # ---- steps
    def _inspected(self, found: Inspection) -> None:
        active = self.active
        if active is None:
            return
        active.inspection, active.repo_id = found, found.remote.repo_id
        verdict, reason = found.disk
        if verdict is Verdict.NO:
            self.messages[active.key] = ("error", f"Not downloaded: {reason}. Free some space first.")
            self._finish(active)
            return
        if found.fit.verdict is Verdict.NO:
            run_reasons = [r for r in found.fit.reasons if r != reason]
            text = (
                f"{found.remote.repo_id} ({human_bytes(found.remote.total_bytes)}) does not fit this machine: "
                + "; ".join(run_reasons)
                + ".\n\nDownload it anyway (to use elsewhere, or with other settings)?"
            )
            if not self.confirm("Model does not fit", text):
                self.messages[active.key] = ("info", "Not downloaded: it does not fit this machine.")
                self._finish(active)
                return
        self._pull(active, found)

    def _pull(self, active: Active, found: Inspection) -> None:
        active.phase, active.pulling = DOWNLOADING, True
        layout, repo_id, remote = self.ctx.layout, found.remote.repo_id, found.remote

        def make(token: Any) -> Any:
            return pull(layout, repo_id, remote.revision, cancel=token, remote=remote)

        self._slot.start(
            run_generator,
            make,
            f"pull {repo_id}",
            nice=10,
            on_progress=self._progress,
            on_done=self._pulled,
            on_error=self._failed,
            on_cancelled=self._stopped,
            on_end=self._pull_ended,
        )
        self.changed.emit(active.key)

    def _progress(self, value: object) -> None:
        if self.active is not None and isinstance(value, DownloadProgress):
            self.active.progress = value
            self.progress.emit(self.active.key, value)

    def _pulled(self, result: PullResult) -> None:
        active = self.active
        if active is None:
            return
        if result.up_to_date:
            text = "Already downloaded and up to date."
        else:
            size = human_bytes(result.model.size_bytes) if result.model is not None else ""
            text = f"Downloaded {size} — every file checked against the hub's checksums."
        self.messages[active.key] = ("ok", text)

    def _failed(self, exc: BaseException) -> None:
        active = self.active
        if active is None:
            return
        if isinstance(exc, ModelError):
            text = str(exc)
            text = text[:1].upper() + text[1:]
        else:  # not one of the core's worded failures: the messages keep the details too
            text = f"The download failed: {describe(exc)}"
            error_sink().report(f"Could not download {active.spec}", exc)
        self.messages[active.key] = ("error", text)
        if not active.pulling:  # a pull ends in _pull_ended
            self._finish(active)

    def _stopped(self) -> None:
        active = self.active
        if active is None:
            return
        task = self._slot.task
        error = task.error if task is not None else None
        if error is not None and not active.discard:  # it failed while stopping: that is what counts
            self._failed(error)
            return
        if active.discard:
            self.messages.pop(active.key, None)
        elif not active.pulling:
            self.messages[active.key] = ("info", "Stopped before anything was downloaded.")
        else:
            p = active.progress
            kept = (
                f"{human_bytes(p.done)} of {human_bytes(p.total)} kept"
                if p and p.total
                else "what came is kept"
            )
            self.messages[active.key] = ("info", f"Paused: {kept}. Resume continues from there.")
        if not active.pulling:
            self._finish(active)

    def _pull_ended(self) -> None:
        if self.active is not None:
            self._finish(self.active)

    def _finish(self, active: Active) -> None:
        """The try is over (done, paused, failed or refused): the rows and the list follow."""
        if self.active is not active:
            return
        self.active = None
        if active.discard:
            self._discard(active.key, active.repo_id or active.spec)
        self.changed.emit(active.key)
        self.listChanged.emit()
        self.ctx.current_model.refresh()  # "not downloaded" may no longer hold

    def _discard(self, key: str, repo_id: str) -> None:
        if key in self.discarding:
            return
        self.discarding.add(key)
        self.changed.emit(key)
        store = ModelStore(self.ctx.layout)

        def done(freed: int) -> None:
            text = "Download cancelled" + (
                f": {human_bytes(freed)} of partial files deleted." if freed else "."
            )
            self.messages[key] = ("info", text)

        def failed(exc: BaseException) -> None:
            self.messages[key] = ("error", str(exc) if isinstance(exc, ModelError) else describe(exc))

        def end() -> None:
            self.discarding.discard(key)
            self.changed.emit(key)
            self.listChanged.emit()

        run_call(store.discard_partial, repo_id, name="discard a partial download", on_done=done,
                 on_error=failed, on_end=end)  # fmt: skip

    def _say(self, key: str, level: str, text: str) -> None:
        self.messages[key] = (level, text)
        self.changed.emit(key)


__all__ = ["CHECKING", "DOWNLOADING", "STOPPING", "Active", "Downloads", "Inspection", "inspect", "model_key"]

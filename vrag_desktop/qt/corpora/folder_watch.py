"""Folder watching in the app: a corpus whose folders change while the app runs is rescanned.

What is watched, which changes count and when a corpus is due are
:mod:`vrag_desktop.core.corpus.watch`'s (watchdog, 2 s of quiet, at most 20 s). This side keeps the
watches in step with the corpora the panel lists (after each read of them, on the worker pool:
adding a watch walks the folder tree), brings "a corpus changed" from the watcher's thread to the GUI
thread, and at the due time starts the rescan through the panel's :class:`Indexer` — never while
that corpus is being indexed (one rescan is queued for after the job), never for a corpus whose
watching is off or that cannot be read. A folder that went missing (an unplugged drive) only
refreshes the view: the scan would keep it anyway, and it is rescanned when it comes back.

Nothing wakes the GUI thread while the folders are quiet: the timer is armed only when a change
arrives, and a burst of changes crosses threads once.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from vrag_desktop.core.corpus.watch import FolderWatcher, Watched, set_watching
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.controllers import Controller
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.tasks import run_call

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.status import CorpusSummary
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.corpora.indexer import Indexer

Write = Callable[[Callable[[], object], Callable[[Any], None], str], None]


class _Relay(QObject):
    """Lives on the GUI thread for the whole process and calls what the watcher's thread hands it
    there (a plain callable rides the queued signal, so no QObject is touched off the GUI thread)."""

    poke = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.poke.connect(lambda fn: fn(), Qt.ConnectionType.QueuedConnection)


@functools.cache
def _relay() -> _Relay:
    return _Relay()  # first made by a FolderWatch, on the GUI thread


def _close_all(watchers: list[FolderWatcher], *_: object) -> None:
    for w in watchers:
        w.close()


def _any_present(roots: list[str]) -> bool:
    """(Worker pool: a stat may wait on a drive.) Whether a folder the changes were under is there."""
    return not roots or any(os.path.lexists(r) for r in roots)


class FolderWatch(Controller):
    """Keeps the corpora's folders watched and rescans a corpus once its changes settle."""

    QUIET_S = 2.0
    MAX_WAIT_S = 20.0

    def __init__(
        self,
        ctx: AppContext,
        indexer: Indexer,
        refresh: Callable[[], None],
        write: Write,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(ctx, parent)
        self.indexer = indexer
        self.refresh = refresh
        self.write = write
        self.quiet_s, self.max_wait_s = self.QUIET_S, self.MAX_WAIT_S
        self.summaries: dict[str, CorpusSummary] = {}
        self.closed = False
        self.rescans: list[str] = []  # corpora rescanned because their folders changed (newest last)
        self._watcher: list[FolderWatcher] = []  # made when there is first something to watch
        self._after: set[str] = set()  # changed while being indexed: rescan when that job ends
        self._wanted: tuple[tuple[Watched, ...], str] | None = None
        self._sent: tuple[tuple[Watched, ...], str] | None = None
        self._syncing = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer)
        indexer.jobEnded.connect(self._on_job_ended)
        self.destroyed.connect(functools.partial(_close_all, self._watcher))
        _relay()

    # ---------------------------------------------------------------- the person's switch
    def set_enabled(self, name: str, on: bool) -> None:
        """Turn watching of ``name``'s folders on or off (kept in its manifest; the view follows).
        Turned on, the corpus is rescanned once: what changed while nobody watched is picked up."""
        lib = self.ctx.library

        def done(_r: object) -> None:
            self.refresh()
            if (
                on
                and not self.closed
                and name != self.indexer.current()
                and name not in self.indexer.queued()
            ):
                self._rescan(name)

        self.write(lambda: set_watching(lib, name, on), done, "Cannot change folder watching")

    def is_enabled(self, name: str) -> bool:
        s = self.summaries.get(name)
        return s is not None and s.watch and not s.problem

    # ---------------------------------------------------------------- keeping the watches in step
    def sync(self, summaries: dict[str, CorpusSummary]) -> None:
        """Watch what ``summaries`` (the panel's latest read) ask for; a no-op when nothing changed."""
        if self.closed:
            return
        self.summaries = dict(summaries)
        corpora = tuple(
            Watched(s.name, s.roots, s.missing_roots)
            for s in sorted(summaries.values(), key=lambda s: s.name)
            if s.watch and not s.problem and s.roots
        )
        self._wanted = (corpora, str(self.ctx.data_dir))
        if self._wanted != self._sent and not self._syncing and (corpora or self._watcher):
            self._send()

    def _send(self) -> None:
        if self._wanted is None:
            return
        corpora, data_dir = self._sent = self._wanted
        if not self._watcher:
            self._watcher.append(FolderWatcher(self._pending, self.quiet_s, self.max_wait_s))
        self._syncing = True
        run_call(self._watcher[0].sync, corpora, data_dir, on_done=self._synced, on_end=self._sync_ended)

    def _synced(self, problems: list[str]) -> None:
        for p in problems:
            error_sink().report(
                "Folder watching",
                f"Cannot watch {p}. Changes there are picked up when you press Re-scan.",
                "warning",
            )

    def _sync_ended(self) -> None:
        self._syncing = False
        if not self.closed and self._wanted != self._sent:
            self._send()

    def places(self) -> set[Any]:
        """What the system watches now (tests and diagnostics)."""
        return self._watcher[0].places() if self._watcher else set()

    # ---------------------------------------------------------------- changes
    def _pending(self) -> None:
        """(The watcher's thread, under its lock.) A corpus has its first change: wake the GUI."""
        _relay().poke.emit(self._wake)

    def _wake(self) -> None:
        if alive(self) and not self.closed:
            self._arm()

    def _arm(self) -> None:
        due = self._watcher[0].next_due() if self._watcher else None
        if due is not None:
            self._timer.start(max(0, int((due - time.monotonic()) * 1000)) + 1)

    def _on_timer(self) -> None:
        if self.closed or not self._watcher:
            return
        for name, roots in self._watcher[0].take_due().items():
            if self.is_enabled(name):
                run_call(_any_present, sorted(roots), on_done=functools.partial(self._settled, name))
        self._arm()

    def _settled(self, name: str, present: bool) -> None:
        """``name``'s changes settled; ``present``: a folder they were under is there (else it went
        away, and the view only shows it missing)."""
        if self.closed or not self.is_enabled(name):
            return
        if not present:
            self.refresh()
            return
        ix = self.indexer
        if ix.current() == name:
            self._after.add(name)
        elif name not in ix.queued():  # a queued job scans anyway
            self._rescan(name)

    def _rescan(self, name: str) -> None:
        self.rescans.append(name)
        self.indexer.enqueue(name)

    def _on_job_ended(self, name: str, outcome: str) -> None:
        if name in self._after:
            self._after.discard(name)
            # after a stop or a failure, not again by itself: the person stopped it, or it would fail
            # the same way (a damaged corpus, a full disk) over and over
            if outcome == "done" and not self.closed and self.is_enabled(name):
                self._rescan(name)

    # ---------------------------------------------------------------- the end
    def close(self) -> None:
        """Stop watching (the window closes)."""
        self.closed = True
        self._timer.stop()
        for w in self._watcher:
            w.close()

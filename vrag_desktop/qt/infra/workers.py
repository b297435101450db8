"""Run core work off the GUI thread and hear about it through Qt signals.

Core long work is a generator yielding progress (see :mod:`vrag_desktop.core.progress`);
:class:`GeneratorWorker` drives one in a Python thread. Signals emitted from that thread reach
receivers on the GUI thread through queued connections, so slots never run on the worker.
Cancelling sets the :class:`CancelToken` the generator watches and closes it at its next yield:
what was done is kept, as core promises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable, Generator
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Signal

from vrag_desktop.core.progress import CancelToken
from vrag_desktop.qt.infra.errors import error_sink

_POOL: concurrent.futures.ThreadPoolExecutor | None = None
# Strong refs until the GUI thread has received everything: a QObject collected (on whatever thread
# drops the last reference) while its queued signals are pending crashes Qt.
_LIVE: set[GeneratorWorker] = set()
_PENDING: set[QObject] = set()


def pool() -> concurrent.futures.ThreadPoolExecutor:
    """Shared pool for short blocking calls (thumbnails, searches, file stats)."""
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="vrag-io")
    return _POOL


class GeneratorWorker(QObject):
    """Drive ``make(cancel_token)`` (a generator) in a thread; see the module docstring."""

    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    done = Signal()

    def __init__(
        self,
        make: Callable[[CancelToken], Generator[Any, None, Any]],
        name: str,
        parent: QObject | None = None,
        *,
        report_errors: bool = True,
        error_title: str | None = None,
        nice: int = 0,
    ) -> None:
        super().__init__(parent)
        self._make = make
        self.name = name
        self.token = CancelToken()
        self._thread: threading.Thread | None = None
        self._report = report_errors
        self._nice = nice  # >0: run below the GUI thread's priority (threads it starts inherit it)
        self._error_title = error_title or f"{name} failed"
        self.result: Any = None
        self.error: BaseException | None = None
        self.done.connect(self._release)  # queued: runs on the GUI thread after every earlier signal

    def _release(self) -> None:
        _LIVE.discard(self)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"worker {self.name!r} already started")
        _LIVE.add(self)
        self._thread = threading.Thread(target=self._run, name=f"vrag-{self.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        gen: Generator[Any, None, Any] | None = None
        if self._nice > 0 and hasattr(os, "setpriority"):
            # Linux: a thread's nice value is its own; a CPU-bound build at the GUI's priority
            # starves the window on a 2-core machine.
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self._nice)
        try:
            gen = self._make(self.token)
            while True:
                if self.token.cancelled:
                    gen.close()
                    self.cancelled.emit()
                    break
                try:
                    value = next(gen)
                except StopIteration as stop:
                    self.result = stop.value
                    if self.token.cancelled:
                        self.cancelled.emit()
                    else:
                        self.finished.emit(stop.value)
                    break
                self.progress.emit(value)
        except BaseException as exc:
            self.error = exc
            if gen is not None:
                with contextlib.suppress(BaseException):  # the original error is the one to report
                    gen.close()
            if self._report:
                error_sink().report(self._error_title, exc)
            self.failed.emit(exc)
        finally:
            self.done.emit()

    def cancel(self) -> None:
        """Stop at the next yield (or sooner, where core polls the token)."""
        self.token.cancel()

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the thread ends (only for shutdown and tests). True when it ended."""
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()


class _Callback(QObject):
    """Carries a result from the pool back to the GUI thread."""

    ready = Signal(object, object)  # result, exception


def gui_callback(
    on_done: Callable[[Any], None] | None,
    on_error: Callable[[BaseException], None] | None,
    error_title: str | None,
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> _Callback:
    """A one-shot carrier: ``cb.ready.emit(result, exc)`` from any thread runs ``on_done`` / ``on_error``
    (or reports to the error sink) on the GUI thread; exceptions of the ``ignore`` types call neither.
    Kept alive until delivered (see ``_PENDING``)."""
    cb = _Callback()
    app = QCoreApplication.instance()
    if app is not None and cb.thread() is not app.thread():
        cb.moveToThread(app.thread())  # created off the GUI thread: deliver on the GUI thread anyway
    _PENDING.add(cb)

    def deliver(result: Any, exc: BaseException | None) -> None:
        _PENDING.discard(cb)
        try:
            if isinstance(exc, ignore):
                return
            if exc is not None:
                if on_error is not None:
                    on_error(exc)
                else:
                    error_sink().report(error_title or "Background task failed", exc)
            elif on_done is not None:
                on_done(result)
        finally:
            cb.deleteLater()

    cb.ready.connect(deliver)
    return cb


def run_in_thread(
    fn: Callable[..., Any],
    *args: Any,
    on_done: Callable[[Any], None] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    error_title: str | None = None,
) -> concurrent.futures.Future[Any]:
    """Call ``fn(*args)`` on the pool; ``on_done(result)`` / ``on_error(exc)`` run on the GUI thread.

    Without ``on_error`` a failure goes to the error sink under ``error_title``.
    """
    cb = gui_callback(on_done, on_error, error_title)

    def job() -> Any:
        try:
            result = fn(*args)
        except BaseException as exc:
            cb.ready.emit(None, exc)
            raise
        cb.ready.emit(result, None)
        return result

    return pool().submit(job)


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Await ``fn(*args)`` run on the pool (for coroutines on the qasync loop)."""
    return await asyncio.get_running_loop().run_in_executor(pool(), lambda: fn(*args))


def live_workers() -> list[GeneratorWorker]:
    return [w for w in _LIVE if w.is_running()]


def shutdown(timeout_s: float = 5.0) -> list[str]:
    """Cancel every running worker and wait for them; return the names of those still running."""
    workers = live_workers()
    for w in workers:
        w.cancel()
    stuck = [w.name for w in workers if not w.wait(timeout_s)]
    return stuck

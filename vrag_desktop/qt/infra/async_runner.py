"""A private asyncio loop in its own thread for the core's coroutines (agents, vLLM supervision, HTTP).

Why not run them on the GUI thread's qasync loop: the agents do real CPU work between awaits
(decoding pages, cropping, rebuilding VimRAG's context: 20–120 ms a step), which would stall the
window. Here they run beside it; results come back through Qt signals (queued to the GUI thread),
and cancelling a call cancels its task, which the core treats as "stop now".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from vrag_desktop.qt.infra.workers import gui_callback


class AsyncRunner:
    """Owns one event loop thread. ``call`` runs a coroutine there; callbacks run on the GUI thread."""

    def __init__(self, name: str = "vrag-async") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=main, name=self._name, daemon=True)
                self._thread.start()
                ready.wait(5)
                self._loop = loop
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Schedule ``coro``; cancelling the returned future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(
        self,
        coro: Coroutine[Any, Any, Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        *,
        error_title: str | None = None,
    ) -> concurrent.futures.Future[Any]:
        """Run ``coro``; then ``on_done(result)`` or ``on_error(exc)`` on the GUI thread. A failure
        without ``on_error`` goes to the error sink. A cancelled call calls neither."""
        delivery = gui_callback(
            on_done, on_error, error_title, ignore=(concurrent.futures.CancelledError, asyncio.CancelledError)
        )
        fut = self.submit(coro)

        def finished(f: concurrent.futures.Future[Any]) -> None:
            if f.cancelled():
                delivery.ready.emit(None, concurrent.futures.CancelledError())
                return
            exc = f.exception()
            delivery.ready.emit(None if exc else f.result(), exc)

        fut.add_done_callback(finished)
        return fut

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel every task, let them wind down (closing HTTP clients, stopping processes), end the loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or loop.is_closed():
            return

        async def wind_down() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)
            await loop.shutdown_asyncgens()

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(wind_down(), loop).result(timeout + 1)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


_RUNNER: AsyncRunner | None = None


def async_runner() -> AsyncRunner:
    """The app-wide runner (its thread starts on first use)."""
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = AsyncRunner()
    return _RUNNER

"""Where a task's work runs (``tasks.py`` is how it is asked for and heard back): the shared pool
for short blocking calls, the lane for image decodes, and the private asyncio loop thread.

No Qt here, and nothing of a task's bookkeeping: plain threads that run what they are given.

Why a lane for image decodes: they were submitted to the shared pool of four threads, so a burst
of them took both cores of a 2-core machine at the GUI thread's priority; in a stall of the stall
bench the pool used 97 ms of CPU in 55 ms while the GUI thread waited for a core
(docs/benchmarks.md §5.18). Qt's decoders release the GIL, so a decoding thread competes with the
window only for a core: one thread leaves the other core free, and the page the person is looking
at goes ahead of the thumbnails queued before it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from vrag_desktop.core.priority import async_nice, lower_thread_priority

if TYPE_CHECKING:
    import asyncio

__all__ = ["Lane", "LoopThread", "decode_lane", "loop_thread", "pool"]

log = logging.getLogger(__name__)


class Lane:
    """``submit(job, urgent)``: run ``job()`` on one of ``workers`` threads (started on first use).
    Urgent jobs run before the others; each kind runs in the order submitted. A job's exceptions
    are its own business (wrap it): one that escapes is logged, and the lane keeps going."""

    def __init__(self, name: str, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError("a lane needs at least one worker")
        self.name = name
        self.workers = workers
        self._queue: queue.PriorityQueue[tuple[int, int, Callable[[], object]]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def submit(self, job: Callable[[], object], *, urgent: bool = False) -> None:
        self._queue.put((0 if urgent else 1, next(self._order), job))
        with self._lock:
            if len(self._threads) < self.workers:
                n = len(self._threads)
                thread = threading.Thread(target=self._work, name=f"{self.name}-{n}", daemon=True)
                self._threads.append(thread)
                thread.start()

    def pending(self) -> int:
        """Jobs waiting for a thread (not those running)."""
        return self._queue.qsize()

    def _work(self) -> None:
        while True:
            _, _, job = self._queue.get()
            try:
                job()
            except Exception:
                log.exception("a job on lane %s raised", self.name)


class LoopThread:
    """Owns one asyncio event loop running in its own thread; restarts on use after :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        import asyncio  # on first use, not before the window shows (cold start)

        with self._lock:
            if self._loop is None or self._loop.is_closed():
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def main() -> None:
                    lower_thread_priority(async_nice())
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=main, name=self._name, daemon=True)
                self._thread.start()
                ready.wait(5)
                self._loop = loop
            return self._loop

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop thread if the loop runs (never starts it)."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nothing left to reach
                loop.call_soon_threadsafe(fn)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel every task, let them wind down (closing HTTP clients, stopping processes), end the loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or loop.is_closed():
            return
        import asyncio

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


@functools.cache
def pool() -> concurrent.futures.ThreadPoolExecutor:
    """The shared pool for short blocking calls."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="vrag-io")


@functools.cache
def decode_lane() -> Lane:
    """The lane for image decodes: one thread, so a burst of thumbnails never takes both cores of
    a small machine from the GUI thread (docs/benchmarks.md §5.18)."""
    return Lane("vrag-img", workers=1)


@functools.cache
def loop_thread() -> LoopThread:
    """The private asyncio loop for core coroutines (its thread starts on first use)."""
    return LoopThread("vrag-async")

"""A lane: jobs run by a fixed few threads, the most wanted first.

Why: image decodes (evidence pages, thumbnails) were submitted to the shared pool of four threads,
so a burst of them took both cores of a 2-core machine at the GUI thread's priority; in a stall of
the stall bench the pool used 97 ms of CPU in 55 ms while the GUI thread waited for a core
(docs/benchmarks.md §5.18). Decoding on one thread leaves the other core free, and the page the
user is looking at jumps ahead of the thumbnails queued before it. No Qt here: the decoders release
the GIL, so the lane's thread competes only for a core.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["Lane"]

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

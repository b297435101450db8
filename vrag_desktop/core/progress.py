"""Progress reports and cancellation shared by all long-running core work.

Long operations are generators that yield :class:`Progress`. A caller cancels either by closing the
generator (``gen.close()``: cleanup runs at the current yield) or by setting a :class:`CancelToken`
that worker threads inside the operation also watch.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


class Cancelled(Exception):
    """Raised inside an operation when its :class:`CancelToken` is set."""


class CancelToken:
    """A thread-safe cancel flag; cheap to poll from hot loops."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; return True early if cancelled."""
        return self._event.wait(timeout)


@dataclass(frozen=True)
class Progress:
    """One progress report: ``done`` of ``total`` units in ``phase``, with rate (units/s) and ETA (s)."""

    phase: str
    done: int
    total: int
    rate: float = 0.0
    eta: float | None = None
    message: str = ""
    failed: int = 0

    @property
    def fraction(self) -> float:
        return 1.0 if self.total <= 0 else min(1.0, self.done / self.total)


class RateMeter:
    """Exponentially smoothed rate for stable ETAs (raw per-batch rates jump around)."""

    def __init__(self, smoothing: float = 0.3) -> None:
        self._alpha = smoothing
        self._rate: float | None = None
        self._last_t = time.perf_counter()
        self._started = self._last_t
        self._count = 0

    def update(self, n: int) -> float:
        now = time.perf_counter()
        dt = max(now - self._last_t, 1e-6)
        self._last_t = now
        self._count += n
        inst = n / dt
        # The first few samples are dominated by warm-up; fall back to the overall mean then.
        overall = self._count / max(now - self._started, 1e-6)
        self._rate = overall if self._rate is None else self._alpha * inst + (1 - self._alpha) * self._rate
        return self._rate

    @property
    def rate(self) -> float:
        return self._rate or 0.0

    def eta(self, remaining: int) -> float | None:
        return None if not self._rate else remaining / self._rate

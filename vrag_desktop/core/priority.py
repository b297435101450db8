"""CPU priority of the app's own threads and children: what shares no GIL with the window runs lower.

Why: on a 2-core workstation CPU-bound work at the GUI thread's priority takes the core the window
needs to repaint. But a *thread* of the app also holds the GIL whenever it runs Python, and a thread
waiting for the GIL (the GUI thread, for every Python slot) waits until the holder gets a core back
to let go. A low-priority holder gets one late while work at normal priority takes the cores (a
model server streaming, say): a priority inversion that stalled the window longer than the CPU it
saved (``bench/gil_inversion.py``; docs/benchmarks.md §5.16). So the indexing worker and the
start-up warm-up keep the window's priority, and lower priority goes to child processes, which
share no GIL: the derive child (decoding, OCR), the trainer, pip. On Linux a thread's nice value is
its own (threads are tasks) and what it starts inherits it, threads and child processes alike;
:func:`lower_thread_priority` is for threads that mostly wait on such children. Elsewhere
``setpriority`` with a thread id would name a process, so nothing is done there.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

__all__ = ["ASYNC_NICE_ENV", "async_nice", "lower_thread_priority"]

#: The async loop thread's niceness (model streams, HTTP); ``0`` gives it the GUI's priority.
ASYNC_NICE_ENV = "VRAG_ASYNC_NICE"
_ASYNC_NICE = 0


def lower_thread_priority(nice: int) -> None:
    """Run the calling thread (and the threads it will start) ``nice`` steps below normal (Linux)."""
    if nice > 0 and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def async_nice() -> int:
    """The loop thread's niceness: ``$VRAG_ASYNC_NICE`` (0–19), else the default."""
    try:
        return max(0, min(19, int(os.environ.get(ASYNC_NICE_ENV, _ASYNC_NICE))))
    except ValueError:
        return _ASYNC_NICE

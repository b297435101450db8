"""CPU priority of the app's own threads: every worker runs below the GUI thread.

Why: on a 2-core workstation an embedder, a warm-up import or a model reply streamed at hundreds of
chunks a second, at the GUI thread's priority, takes the core the window needs to repaint. On Linux
a thread's nice value is its own (threads are tasks), and threads it starts inherit it (torch's and
onnxruntime's pools), so lowering a worker thread never slows the GUI thread. Elsewhere ``setpriority``
with a thread id would name a process, so nothing is done there.
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

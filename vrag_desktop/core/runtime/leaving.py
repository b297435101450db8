"""Ending the process when background threads may still be inside native code.

Why: at exit, CPython (3.11–3.13) stops a daemon thread that wants the GIL back by unwinding its
stack with ``pthread_exit``. When that stack holds C++ frames — torch computing an embedding, a
library's import — the unwind reaches a ``noexcept`` frame and the C++ runtime aborts the whole
process ("terminate called without an active exception", exit status -6): a window closed during
the first indexing, or before the start-up warm-up finished, ended in a crash report. So the app
gives such threads a moment to finish, and when one is still busy it runs what an ordinary exit
runs (joining the other threads, the ``atexit`` hooks that stop child processes, flushing the logs)
and then leaves with ``os._exit``, which does not unwind any thread. A daemon thread's unfinished
work is lost either way: an ordinary exit kills it too; the stores are safe against that (kill -9).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time

__all__ = ["busy_daemon_threads", "leave"]

log = logging.getLogger(__name__)


def busy_daemon_threads() -> list[threading.Thread]:
    """The daemon threads still running (the ones an ordinary exit would unwind)."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and t.daemon and t.is_alive()]


def leave(code: int, wait_s: float = 2.0) -> int:
    """``code`` when the process can end the ordinary way; otherwise end it now, cleanly, with it.

    Waits up to ``wait_s`` in all for the daemon threads to finish. Called from the main thread
    once everything that will be stopped has been stopped (the window closed, its jobs cancelled)."""
    deadline = time.monotonic() + wait_s
    for t in busy_daemon_threads():
        t.join(max(0.0, deadline - time.monotonic()))
    busy = busy_daemon_threads()
    if not busy:
        return code
    log.info(
        "leaving with %d background thread(s) still busy: %s", len(busy), ", ".join(t.name for t in busy)
    )
    # what an ordinary exit runs, in its order: the threading exit hooks (executors' workers told to
    # stop) and the non-daemon threads joined, then the atexit hooks (child processes stopped, the
    # logs flushed); only the unwinding of the daemon threads is left out
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

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

__all__ = [
    "ASYNC_NICE_ENV",
    "THREAD_NICE_MAX_ENV",
    "async_nice",
    "background_deriving",
    "child_env",
    "derive_in_background",
    "lower_thread_priority",
    "passive_omp_workers",
    "run_when_idle",
    "thread_nice_max",
]

#: The async loop thread's niceness (model streams, HTTP); ``0`` gives it the GUI's priority.
ASYNC_NICE_ENV = "VRAG_ASYNC_NICE"
_ASYNC_NICE = 0
#: The most a worker thread is lowered (0–19): ``0`` keeps every worker at the GUI's priority.
THREAD_NICE_MAX_ENV = "VRAG_THREAD_NICE_MAX"


#: Whether indexing's worker processes yield every core to this process (see :func:`run_when_idle`).
_DERIVE_IN_BACKGROUND = False


def derive_in_background(on: bool = True) -> None:
    """Make indexing's worker processes (rendering, OCR) run only on CPU time nothing else wants.

    Why only for the app: its window must never wait for a core, so the app (``qt/app.py``) sets
    this at start. The command line leaves it off: there the indexing is the job the person waits
    for, and an idle-class worker on a machine busy with anything else (a training run, a build, a
    second indexing) could wait indefinitely: `vrag-desktop index` sat at 21 s of CPU in 9 minutes
    beside two other busy processes on 2 cores."""
    global _DERIVE_IN_BACKGROUND
    _DERIVE_IN_BACKGROUND = on


def background_deriving() -> bool:
    """True when :func:`derive_in_background` is on in this process."""
    return _DERIVE_IN_BACKGROUND


#: OpenMP's wait policy (libgomp reads it once, when torch loads it).
OMP_WAIT_ENV = "OMP_WAIT_POLICY"
#: Marks an ``OMP_WAIT_POLICY`` the app set for itself, so children get the user's environment back.
_OMP_SET_BY_APP = "_VRAG_OMP_WAIT_SET"


def passive_omp_workers() -> None:
    """Make torch's OpenMP workers sleep as soon as a parallel region ends, for this process.

    Why: by default they spin for a while after each region (each embedder batch, each query), on
    cores the window shares with them; measured in the stall bench, ~7 % of the app's CPU went to
    spinning (§5.17 of docs/benchmarks.md). Call before torch is imported; a user's own
    ``OMP_WAIT_POLICY`` wins, and :func:`child_env` keeps the app's choice out of child processes
    (a vLLM or training process keeps OpenMP's default)."""
    if OMP_WAIT_ENV not in os.environ:
        os.environ[OMP_WAIT_ENV] = "PASSIVE"
        os.environ[_OMP_SET_BY_APP] = "1"


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` (a copy of this process's environment) without what the app set for itself only."""
    if env.pop(_OMP_SET_BY_APP, None) is not None:
        env.pop(OMP_WAIT_ENV, None)
    return env


def thread_nice_max() -> int:
    """``$VRAG_THREAD_NICE_MAX`` (0–19), else 19: how far :func:`lower_thread_priority` may go
    (0 also keeps the app's derive child out of the idle class: ``corpus/derive_process.acquire``).

    Why a ceiling: on a machine kept busy by other work at normal priority (a CI runner with three
    test processes and a build, a training run on the CPU), a worker at nice 10 gets about a tenth
    of a core's share and an indexing job of seconds takes minutes. Whoever runs such a machine can
    keep the workers at normal priority; the app's default stays the GUI-first one."""
    try:
        return max(0, min(19, int(os.environ.get(THREAD_NICE_MAX_ENV, "19"))))
    except ValueError:
        return 19


def lower_thread_priority(nice: int) -> None:
    """Run the calling thread (and the threads it will start) ``nice`` steps below normal (Linux),
    at most :func:`thread_nice_max` steps."""
    nice = min(nice, thread_nice_max())
    if nice > 0 and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def run_when_idle(pid: int = 0) -> bool:
    """Run the calling thread (or the process ``pid``'s main thread), and the threads it starts, only
    on CPU time nothing else wants (Linux ``SCHED_IDLE``); True when that took effect.

    Why, for a worker *process* (it shares no GIL, so it can never hold up the window): at nice 19
    it still kept a core that the GUI thread, queued behind other work on the other core, waited
    for (27 ms in one stall, docs/benchmarks.md §5.17). The scheduler treats a core running only
    ``SCHED_IDLE`` work as free: a thread that wakes takes it at once. When nothing else runs, the
    worker gets every idle cycle, so an idle machine indexes as fast. Not for threads of the app's
    own process: one holding the GIL must not wait for idle time.

    A parent sets it on a child it has just started (``pid``), so the child's interpreter start and
    imports (~70 ms of CPU) already run idle: at the starting thread's priority they took a core
    the GUI thread waited 18 ms for, as a second indexing began (docs/benchmarks.md §5.18)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        return False
    return True


def async_nice() -> int:
    """The loop thread's niceness: ``$VRAG_ASYNC_NICE`` (0–19), else the default."""
    try:
        return max(0, min(19, int(os.environ.get(ASYNC_NICE_ENV, _ASYNC_NICE))))
    except ValueError:
        return _ASYNC_NICE

"""Process trees: the environment a child gets, who is still alive in its tree, and the one
stop-then-kill every supervised process goes through (:func:`stop_tree`).

Why separate from the supervisor: this part is synchronous and loop-free, so the ``atexit`` hook,
a CLI command, a thread or a signal handler can use it after any event loop is gone. Children run
in their own session (POSIX) or process group (Windows), so a stop reaches the workers they spawn.
Zombies do not count as alive: in containers PID 1 may never reap orphans, and a zombie holds no
resources. Signals go through ``psutil.Process``, which refuses a pid that now names another
process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import psutil

from vrag_desktop.core.priority import child_env

__all__ = [
    "KILL",
    "Terminated",
    "cleanup",
    "descendants",
    "group_members",
    "pid_alive",
    "register",
    "sanitized_env",
    "signals_interrupt",
    "spawn_options",
    "stop_tree",
]

_POSIX = os.name == "posix"
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def sanitized_env(
    overrides: Mapping[str, str | None] | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for a child: undo PyInstaller's library-path changes (they break other
    Pythons), drop its private variables, keep output unbuffered. ``None`` in overrides unsets."""
    env = child_env(dict(os.environ if base is None else base))
    if "LD_LIBRARY_PATH_ORIG" in env:
        env["LD_LIBRARY_PATH"] = env.pop("LD_LIBRARY_PATH_ORIG")
    elif getattr(sys, "frozen", False):
        env.pop("LD_LIBRARY_PATH", None)  # it only held the bundle's directory
    for key in [k for k in env if k.startswith("_PYI_") or k == "_MEIPASS2"]:
        del env[key]
    env.setdefault("PYTHONUNBUFFERED", "1")
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises ``KeyboardInterrupt``, so the same clean-up runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread. Why: their
    default action ends Python at once, with no ``finally``; the children we start live in their
    own session (so a stop reaches their workers), so they would run on with parent 1 — pip after
    ``kill`` of an environment build, or after its terminal closed. Raised instead, the code that
    started them stops them with :func:`stop_tree` on its way out. A no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    saved = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            saved[sig] = signal.signal(sig, raise_terminated)
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)


def spawn_options(*, detached: bool = False) -> dict[str, Any]:
    """``Popen`` keywords that put a child in its own session / process group (``detached``: it
    also outlives this console on Windows)."""
    if _POSIX:
        return {"start_new_session": True}
    flags = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    if detached:
        flags |= getattr(subprocess, "DETACHED_PROCESS", 0)
    return {"creationflags": flags}


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def pid_alive(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def descendants(pid: int) -> list[int]:
    """Children of ``pid`` at any depth (snapshot; catches any that left the process group)."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid`` (where there are no process groups:
    the process ``pgid`` and its descendants)."""
    if not _POSIX:
        return [p for p in [pgid, *descendants(pgid)] if pid_alive(p)]
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if (
                proc.info["status"] not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD, None)
                and os.getpgid(proc.pid) == pgid
            ):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def _tree(pid: int, extra: Sequence[int] = ()) -> list[psutil.Process]:
    procs: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        leader = psutil.Process(pid)
        procs[pid] = leader
        procs.update({c.pid: c for c in leader.children(recursive=True)})
    for other in extra:
        with contextlib.suppress(psutil.Error):
            procs.setdefault(other, psutil.Process(other))
    return list(procs.values())


def _signal(tree: Sequence[psutil.Process], pgid: int | None, sig: int) -> None:
    grouped = _POSIX and pgid is not None
    if _POSIX and pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)  # also reaches members spawned after the snapshot
    for proc in tree:
        with contextlib.suppress(psutil.Error, OSError):
            if grouped and os.getpgid(proc.pid) == pgid:
                continue  # signalled once, with its group
            if sig == signal.SIGTERM:
                proc.terminate()
            elif sig == KILL:
                proc.kill()
            else:
                proc.send_signal(sig)


def stop_tree(
    pid: int,
    *,
    pgid: int | None = None,
    grace: float = 10.0,
    kill_timeout: float = 5.0,
    strays: Sequence[int] = (),
    reap: Callable[[], object] | None = None,
    on_kill: Callable[[float], None] | None = None,
) -> list[int]:
    """Stop ``pid``, its descendants, the process group ``pgid`` (POSIX) and ``strays``: SIGTERM,
    wait up to ``grace`` s, SIGKILL what is left (``on_kill(grace)`` is told), wait up to
    ``kill_timeout`` s. ``reap`` polls our own child so it does not linger as our zombie. Returns
    the pids still alive (empty: all gone).

    Pass ``pgid`` only for a group known to be ours (our child, or a recorded process whose
    identity was checked): a process-group id can be reused once the whole group is gone."""
    return _stop([(pid, pgid)], grace, kill_timeout, strays, reap, on_kill)


def _stop(
    roots: Sequence[tuple[int, int | None]],
    grace: float,
    kill_timeout: float,
    strays: Sequence[int] = (),
    reap: Callable[[], object] | None = None,
    on_kill: Callable[[float], None] | None = None,
) -> list[int]:
    trees = [_tree(pid, strays) for pid, _ in roots]
    groups = [g for _, g in roots if g is not None]

    def left() -> list[int]:
        if reap is not None:
            reap()
        pids = {p.pid for tree in trees for p in tree if _alive(p)}
        for g in groups:
            pids.update(group_members(g))
        return sorted(pids)

    def wait(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while left():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    for tree, (_pid, pgid) in zip(trees, roots, strict=True):
        _signal(tree, pgid, signal.SIGTERM)
    if wait(grace):
        return []
    if on_kill is not None:
        on_kill(grace)
    for tree, (pid, pgid) in zip(trees, roots, strict=True):
        known = {p.pid for p in tree}
        tree += [p for p in _tree(pid) if p.pid not in known]  # spawned while it was stopping
        _signal(tree, pgid, KILL)
    wait(kill_timeout)
    return left()


# ---------------------------------------------------------------- the exit hook

_LIVE: dict[int, str] = {}  # pgid -> name, for the exit hook
_LIVE_LOCK = threading.Lock()


def register(pgid: int, name: str) -> None:
    """Remember a started group so :func:`cleanup` can kill it."""
    with _LIVE_LOCK:
        _LIVE[pgid] = name


def forget(pgid: int) -> None:
    """A group that must outlive this process (a detached server) or that is gone."""
    with _LIVE_LOCK:
        _LIVE.pop(pgid, None)


def forget_if_gone(pgid: int) -> None:
    if not group_members(pgid):
        forget(pgid)


def cleanup(grace: float = 2.0) -> list[int]:
    """Kill every supervised process group still alive (SIGTERM, then SIGKILL after ``grace``),
    all at once. Synchronous and thread-free, so safe from ``atexit``, a signal handler or any
    thread. Returns the process-group ids that were signalled."""
    with _LIVE_LOCK:
        groups = [g for g in _LIVE if group_members(g)]
    if groups:
        _stop([(g, g) for g in groups], grace, 2.0)
    with _LIVE_LOCK:
        for g in list(_LIVE):
            if not group_members(g):
                _LIVE.pop(g, None)
    return groups


atexit.register(cleanup)

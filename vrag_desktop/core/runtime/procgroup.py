"""Process groups: the environment a child gets, who is still alive in a group, and the
last-resort kill of every group we started.

Why separate from the supervisor: this part is synchronous and loop-free, so the ``atexit`` hook
(and a signal handler, or any thread) can use it after the event loop is gone. Zombies do not
count as alive: in containers PID 1 may never reap orphans, and a zombie holds no resources.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence

_POSIX = os.name == "posix"


def sanitized_env(overrides: Mapping[str, str | None] | None = None,
                  base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: undo PyInstaller's library-path changes (they break other
    Pythons), drop its private variables, keep output unbuffered. ``None`` in overrides unsets."""
    env = dict(os.environ if base is None else base)
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


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid`` (Linux reads ``/proc``; elsewhere
    a best effort)."""
    if sys.platform.startswith("linux"):
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                found.append(int(entry.name))
        return found
    if _POSIX:
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except (ProcessLookupError, PermissionError):
            return []
    return [pid for pid in [pgid, *descendants(pgid)] if pid_alive(pid)]


def pid_alive(pid: int) -> bool:
    try:
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:
        return False


def descendants(pid: int) -> list[int]:
    """Children of ``pid`` at any depth (snapshot; catches any that left the process group)."""
    try:
        import psutil

        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:
        return []


def signal_group(pgid: int, sig: int, extra: Sequence[int] = ()) -> None:
    """Send ``sig`` to a process group (POSIX) or process tree (Windows); the gone are ignored."""
    if _POSIX:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        targets: Sequence[int] = extra
    else:
        targets = [*descendants(pgid), pgid, *extra]
    for pid in targets:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


KILL = getattr(signal, "SIGKILL", signal.SIGTERM)
_LIVE: dict[int, str] = {}  # pgid -> name, for the exit hook
_LIVE_LOCK = threading.Lock()


def register(pgid: int, name: str) -> None:
    """Remember a started group so :func:`cleanup` can kill it."""
    with _LIVE_LOCK:
        _LIVE[pgid] = name


def forget_if_gone(pgid: int) -> None:
    if not group_members(pgid):
        with _LIVE_LOCK:
            _LIVE.pop(pgid, None)


def cleanup(grace: float = 2.0) -> list[int]:
    """Kill every supervised process group still alive (SIGTERM, then SIGKILL after ``grace``).
    Synchronous and loop-free, so it is safe from ``atexit``, a signal handler or any thread.
    Returns the process-group ids that were signalled."""
    with _LIVE_LOCK:
        groups = list(_LIVE)
    groups = [g for g in groups if group_members(g)]
    for g in groups:
        signal_group(g, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(group_members(g) for g in groups):
        time.sleep(0.05)
    for g in groups:
        if group_members(g):
            signal_group(g, KILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(group_members(g) for g in groups):
        time.sleep(0.05)
    with _LIVE_LOCK:
        for g in list(_LIVE):
            if not group_members(g):
                _LIVE.pop(g, None)
    return groups


atexit.register(cleanup)

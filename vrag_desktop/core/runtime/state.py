"""State files: what a supervised process leaves on disk so that a later command, or the app's
next launch, can find it again, check that it is still *that* process, and stop it.

Why the checks: a state file outlives reboots, crashes and ``kill -9``, and the pid it names may
by then belong to another program. A process counts as the recorded one only if its start time
matches (or, in a file without one, its command line); anything else is never signalled, and the
file is removed as stale. Files are written atomically (``core.fsutil``); concurrent starts are
serialised by a cross-platform lock (``filelock``) that a crashed holder cannot leave taken.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from vrag_desktop.core.fsutil import atomic_write_json
from vrag_desktop.core.runtime.exits import Classifier
from vrag_desktop.core.runtime.logfile import run_lines, write_footer
from vrag_desktop.core.runtime.proctree import group_members, pid_alive, stop_tree

__all__ = [
    "STATE_SUFFIX",
    "RecordedProcess",
    "StateFile",
    "check_state",
    "identity",
    "live_processes",
    "recorded_process",
]

STATE_SUFFIX = "state.json"  # ``state.json`` (the CLI's vLLM) or ``<name>.state.json``
_POSIX = os.name == "posix"
_CREATE_TIME_SLACK = 1.0  # seconds; psutil's start times are exact to the clock tick


def identity(pid: int) -> dict[str, Any]:
    """What tells this process apart from a later one with the same pid."""
    out: dict[str, Any] = {"pid": pid, "pgid": pid, "create_time": None}
    with contextlib.suppress(psutil.Error, OSError):
        out["pgid"] = os.getpgid(pid) if _POSIX else pid
        out["create_time"] = psutil.Process(pid).create_time()
    return out


def _same_command(proc: psutil.Process, command: Sequence[str]) -> bool:
    """The arguments match (the interpreter may differ: a venv's ``python`` shim execs another)."""
    try:
        live = proc.cmdline()
    except psutil.Error:
        return False
    args = [str(a) for a in command[1:]]
    return bool(live) and (
        live[-len(args) :] == args if args else Path(live[0]).name == Path(command[0]).name
    )


def recorded_process(state: Mapping[str, Any]) -> psutil.Process | None:
    """The process ``state`` records if it is still that process and alive, else None (gone, a
    zombie, or its pid now used by another program)."""
    try:
        proc = psutil.Process(int(state["pid"]))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        created, command = state.get("create_time"), state.get("command")
        if created is not None:
            if abs(proc.create_time() - float(created)) > _CREATE_TIME_SLACK:
                return None
        elif not (isinstance(command, list) and command and _same_command(proc, command)):
            return None  # nothing to tell it from another program: never ours
        if _POSIX and state.get("pgid") is not None and os.getpgid(proc.pid) != int(state["pgid"]):
            return None
        return proc
    except (psutil.Error, OSError, ValueError, TypeError, KeyError):
        return None


class StateFile:
    """One JSON state file. A missing file is "not running"; an unreadable one is removed."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> tuple[dict[str, Any] | None, list[str]]:
        """The state, or None with notes (an unreadable or invalid file is removed)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, []
        except (OSError, ValueError) as exc:
            self._unlink()
            return None, [f"note: ignoring an unreadable state file {self.path} ({exc}); removed it"]
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
            self._unlink()
            return None, [f"note: ignoring an invalid state file {self.path}; removed it"]
        return data, []

    def peek(self) -> dict[str, Any] | None:
        """The state as it is now, without cleaning anything up."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write(self, state: Mapping[str, Any]) -> None:
        """Atomic: a crash leaves the old or the new file, never half of one."""
        atomic_write_json(self.path, dict(state), mkdir=True)

    def remove(self, pid: int | None = None) -> None:
        """Remove the file (only if it still describes ``pid``, when given)."""
        if pid is not None:
            current = self.peek()
            if current is not None and current.get("pid") != pid:
                return
        self._unlink()

    def _unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def stopped_by_command(self, pid: int | None) -> bool:
        """True if another command stopped ``pid``: it marks the file before signalling and
        removes it afterwards."""
        current = self.peek()
        return current is None or current.get("pid") != pid or bool(current.get("stopping_at"))

    def lock(self, timeout: float = -1) -> Any:
        """A lock for "check the state, then start and record": held by one command at a time,
        released by the operating system if its holder dies (a leftover lock file is harmless)."""
        import filelock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        return filelock.FileLock(str(self.path.with_name(f".{self.path.name}.lock")), timeout=timeout)


@dataclass
class RecordedProcess:
    """A live process found through its state file (see :func:`check_state`)."""

    state_file: StateFile
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return int(self.state["pid"])

    @property
    def pgid(self) -> int:
        return int(self.state.get("pgid") or self.state["pid"])

    @property
    def name(self) -> str:
        return str(self.state.get("name") or "process")

    @property
    def alive(self) -> bool:
        return recorded_process(self.state) is not None

    def describe(self) -> str:
        """One line for a person: what, where, since when."""
        head = self.name
        if self.state.get("served_model_name"):
            head += f" ({self.state['served_model_name']})"
        if self.state.get("base_url"):
            head += f" at {self.state['base_url']}"
        bits = [head]
        bits.append(f"pid {self.pid}")
        if self.state.get("started_at"):
            bits.append(
                "started " + time.strftime("%Y-%m-%d %H:%M", time.localtime(float(self.state["started_at"])))
            )
        if self.state.get("mode"):
            bits.append(f"by the {'app' if self.state['mode'] == 'app' else 'command line'}")
        return ", ".join(bits)

    def stop(
        self, grace: float = 10.0, kill_timeout: float = 5.0, *, reason: str = "", on_kill: Any = None
    ) -> list[int]:
        """Stop it and its whole tree, if it is still the recorded process; remove the state file
        once nothing is left. Returns the pids still alive."""
        if recorded_process(self.state) is None:
            self.state_file.remove(self.pid)
            return []
        self.state["stopping_at"] = time.time()  # a command still waiting on it then knows it was asked
        with contextlib.suppress(OSError):
            self.state_file.write(self.state)
        left = stop_tree(self.pid, pgid=self.pgid, grace=grace, kill_timeout=kill_timeout, on_kill=on_kill)
        if not left:
            if reason and self.state.get("log_path"):
                write_footer(self.state["log_path"], f"stopped: {reason}")
            self.state_file.remove(self.pid)
        return left


def check_state(
    state_file: StateFile,
    *,
    name: str = "the process",
    classifier: Classifier | None = None,
    logs_hint: str = "",
) -> tuple[RecordedProcess | None, list[str]]:
    """The live process a state file records, or ``(None, notes)`` after removing a stale file.

    Workers a dead leader left behind (they may hold GPU memory) are stopped only when its pid is
    not in use at all: no pid is reused while a process group of that id lives, so such members
    are ours. A pid now used by another program is never signalled."""
    state, notes = state_file.read()
    if state is None:
        return None, notes
    if recorded_process(state) is not None:
        return RecordedProcess(state_file, state), notes
    pid = int(state["pid"])
    who = state.get("name") or name
    notes.append(f"note: {who} (pid {pid}) is no longer running; removed its stale state file")
    pgid = int(state.get("pgid") or pid)
    if _POSIX and not pid_alive(pid) and group_members(pgid):
        left = stop_tree(pgid, pgid=pgid, grace=5.0)
        notes.append("note: stopped processes it left behind" + (f" (still alive: {left})" if left else ""))
    if classifier is not None and state.get("log_path"):
        kind, message = classifier(run_lines(state["log_path"]), None)
        if kind not in ("other", "killed", "exit"):
            notes.append(f"note: its log says: {message.splitlines()[0]}")
        else:
            notes.append(f"note: see how it ended with: {logs_hint or state['log_path']}")
    state_file.remove(pid)
    return None, notes


def live_processes(
    runtime_dir: str | os.PathLike[str], *, others_only: bool = False
) -> list[RecordedProcess]:
    """Every supervised process still running that a state file in ``runtime_dir`` records (the
    app's and the CLI's servers, training runs); stale files are removed on the way.
    ``others_only`` leaves out this process's own children (what it runs now is no leftover)."""
    found = []
    me = os.getpid()
    folder = Path(runtime_dir)
    if not folder.is_dir():
        return []
    for path in sorted(folder.glob(f"*{STATE_SUFFIX}")):
        rec, _notes = check_state(StateFile(path))
        if rec is not None and not (others_only and _parent(rec.pid) == me):
            found.append(rec)
    return found


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None

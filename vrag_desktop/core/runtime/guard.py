"""A foreground child dies with its parent: a small watchdog process per supervised child.

Why a watchdog and not only a parent-death signal: a ``kill -9`` of ``vrag-desktop runtime start
--foreground`` (or ``train grpo``) leaves nobody to stop its child, and ``PR_SET_PDEATHSIG`` would
reach the child alone (vLLM's API server, not the engine-core process it starts), needs code run
between fork and exec (unsafe in a threaded process) and fires when the forking *thread* ends. The
watchdog instead sits in its own session, blocked on a pipe whose only writer is the parent: when
the parent process ends for any reason the kernel closes that pipe, and the watchdog stops the
child's whole tree — its process group, plus every process that still carries the child's tree
token in its environment (found in ``/proc``; this also covers a child spawned in the instant
before the parent could name it, and descendants that left the group). A parent that ends its child
itself says ``done`` first, and the watchdog leaves quietly. It also notices being re-parented
(``getppid`` changes), in case a forked process of the parent keeps the pipe open.

Only the foreground modes use it (:class:`~.supervisor.ProcessSupervisor` with ``mode=
"foreground"``); servers the app starts on purpose to outlive it are recorded in state files instead.
The watchdog module itself imports only the standard library (it starts in milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["GUARD_FLAG", "TREE_ENV", "Guard", "guard_main"]

#: Every process of a guarded tree carries this variable (the tree's random token).
TREE_ENV = "VRAG_DESKTOP_TREE"
#: The frozen app's entry point runs :func:`guard_main` when its first argument is this.
GUARD_FLAG = "--vrag-guard"
GRACE_S = 5.0  # SIGTERM first (vLLM frees the GPU in an orderly way), then SIGKILL
POLL_S = 0.5


class Guard:
    """The parent's side: start the watchdog, name the child, and release it at a normal end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.token = secrets.token_hex(12)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the watchdog (before the child, so no instant exists where a child has none). A
        failure to start it is not fatal: the child runs, unguarded, as it always did."""
        argv = (
            [sys.executable, GUARD_FLAG]
            if getattr(sys, "frozen", False)
            else [sys.executable, "-m", __name__]
        )
        argv += [self.token, str(os.getpid()), self.name]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[3])  # importable however this process found it
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # never hold the parent's terminal or pipes open
                env=env,
                close_fds=True,
                start_new_session=True,  # a Ctrl-C or a kill of the parent's group spares it
            )
        except OSError:
            self._proc = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def child_env(self) -> dict[str, str]:
        """What the child's environment must carry so the watchdog finds the whole tree."""
        return {TREE_ENV: self.token}

    def watch(self, pid: int, pgid: int | None) -> None:
        """Name the child (and its process group) once it is spawned."""
        self._send(f"watch {pid} {pgid if pgid is not None else 0}\n")

    def release(self) -> None:
        """The child's tree is gone (or stopped by us): the watchdog exits without a stop."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.write(b"done\n")
            proc.stdin.close()
        threading.Thread(target=_reap, args=(proc,), name="guard-reaper", daemon=True).start()

    def _send(self, line: str) -> None:
        if self._proc is None or self._proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(10.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- the watchdog process


def _scan(token: str, pgid: int) -> tuple[set[int], set[int]] | None:
    """``(processes carrying token, live members of group pgid)`` from ``/proc``; None where
    there is no ``/proc`` (then the group is signalled as it is)."""
    carriers: set[int] = set()
    members: set[int] = set()
    needle = f"{TREE_ENV}={token}".encode()
    me = os.getpid()
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    for name in entries:
        pid = int(name)
        if pid == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            if fields[:1] == [b"Z"]:
                continue
            if pgid > 0 and int(fields[2]) == pgid:
                members.add(pid)
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    carriers.add(pid)
        except (OSError, IndexError, ValueError):  # gone, or another user's
            continue
    return carriers, members


class _Tree:
    """What is left of the guarded tree: the token's carriers and, once one of its members was
    seen carrying the token, the process group (a group id is reused only once the whole group
    is gone, so a confirmed group that still has members is still ours)."""

    def __init__(self, token: str, pgid: int) -> None:
        self.token, self.pgid = token, pgid
        self.group_ours = False

    def signal(self, sig: int) -> bool:
        """Send ``sig`` (0: only look) to what is left; True if anything of it is still there."""
        found = _scan(self.token, self.pgid)
        targets: set[int]
        if found is None:  # no /proc: the group the parent named is all we know
            targets, group = set(), self.pgid > 0
        else:
            targets, members = found
            self.group_ours = self.group_ours or bool(members & targets)
            group = self.group_ours and bool(members)
        hit = False
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
                hit = True
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                hit = True
        return hit


def stop_tree(token: str, pgid: int, grace: float = GRACE_S) -> None:
    """SIGTERM the tree, SIGKILL what is left after ``grace`` s (rescanning: a process that was
    between fork and exec when the parent died carries the token only once it has exec'd)."""
    tree = _Tree(token, pgid)
    if not tree.signal(signal.SIGTERM):
        time.sleep(0.2)  # a child caught between fork and exec shows its token a moment later
        if not tree.signal(signal.SIGTERM):
            return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if not tree.signal(0):
            return
    kill = getattr(signal, "SIGKILL", signal.SIGTERM)
    for _ in range(20):
        if not tree.signal(kill):
            return
        time.sleep(0.1)


def guard_main(argv: list[str]) -> int:
    """The watchdog: ``argv`` is ``[token, parent pid, name]``; stdin is the parent's pipe."""
    token, parent = argv[0], int(argv[1])
    with contextlib.suppress(AttributeError, ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal closing is the parent's business
    pgid, buf = 0, b""
    fd = sys.stdin.fileno()
    while True:
        if os.getppid() != parent:  # re-parented: the parent is gone even if the pipe is not closed
            break
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:  # the parent process ended: nobody said done
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            words = line.decode("ascii", "replace").split()
            if words[:1] == ["done"]:
                return 0
            if words[:1] == ["watch"] and len(words) >= 3:
                pgid = int(words[2])
    stop_tree(token, pgid)
    return 0


if __name__ == "__main__":
    sys.exit(guard_main(sys.argv[1:]))

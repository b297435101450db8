"""Supervise one child process (a vLLM server, a training run) from an asyncio loop.

Why this shape: model servers take minutes to load, spawn worker processes of their own and die in
many ways. So the child runs in its own process group (a stop reaches its workers, no orphans), its
merged output is streamed line by line to subscribers, a bounded ring buffer and a log file, its
state is an explicit :class:`ProcessStatus`, it is recorded in a state file while it lives (so a
later launch finds it if this process is killed), and every exit that was not asked for becomes a
*classified* message instead of a bare exit code. Every wait is bounded; stopping goes through
``proctree.stop_tree``, as for every process we start. An ``atexit`` hook (and :func:`cleanup`, for
the app's quit path) kills any group still alive. Works under any asyncio loop, qasync's included.
In the foreground modes (``mode="foreground"``: a terminal command supervising its child) a
:class:`~.guard.Guard` watchdog stops the child's whole tree if this process is killed outright
(``kill -9``): such a child must not outlive its command. The app's own servers are meant to
survive a crash of the app (a later launch finds them through their state files) and are not guarded.

What to run is a :class:`ProcessSpec`: a training command is just another spec (argv, env, cwd,
log, an optional readiness check). :mod:`.detached` runs the same spec in the background instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from vrag_desktop.core.runtime.exits import (
    ExitInfo,
    ProcessCrashed,
    ProcessError,
    ProcessStatus,
    ReadyTimeout,
    default_classifier,
    tail_text,
)
from vrag_desktop.core.runtime.guard import Guard
from vrag_desktop.core.runtime.output import LineCallback, OutputLines
from vrag_desktop.core.runtime.proctree import (
    cleanup,
    descendants,
    forget_if_gone,
    group_members,
    register,
    sanitized_env,
    spawn_options,
    stop_tree,
)
from vrag_desktop.core.runtime.spec import Probe, ProcessSpec
from vrag_desktop.core.runtime.state import StateFile

__all__ = [
    "ExitInfo",
    "ProcessCrashed",
    "ProcessError",
    "ProcessSpec",
    "ProcessStatus",
    "ProcessSupervisor",
    "ReadyTimeout",
    "cleanup",
    "default_classifier",
    "sanitized_env",
    "stop_all",
    "tail_text",
]

log = logging.getLogger(__name__)

_POSIX = os.name == "posix"
StatusCallback = Callable[[ProcessStatus], None]

_SUPERVISORS: weakref.WeakSet[ProcessSupervisor] = weakref.WeakSet()


async def stop_all(grace: float = 5.0) -> None:
    """Orderly shutdown of every supervisor in this process (the app's quit path, in the loop)."""
    running = [s for s in list(_SUPERVISORS) if s.status.running]
    await asyncio.gather(*(s.stop(grace=grace) for s in running), return_exceptions=True)
    cleanup(grace=1.0)


# ---------------------------------------------------------------- the supervisor


class ProcessSupervisor:
    """One supervised child process; see the module docstring. Bound to the loop that starts it."""

    def __init__(
        self,
        spec: ProcessSpec,
        *,
        ring_size: int = 2000,
        mode: str = "app",
        die_with_parent: bool | None = None,
    ) -> None:
        """Supervise ``spec`` as it is (readiness check included); ``ring_size`` output lines are
        kept, and ``mode`` is recorded in the state file (who started it: ``app``, ``foreground``).
        ``die_with_parent`` (default: in the ``foreground`` mode, on POSIX) guards the child's tree
        with a watchdog that stops it if this process dies without stopping it."""
        self.spec = spec
        self.name = spec.display_name
        self.cwd = spec.cwd
        self.log_path = Path(spec.log_path) if spec.log_path else None
        self.classifier = spec.classifier or default_classifier
        self.long_running = spec.long_running
        self.mode = mode
        self.die_with_parent = (mode == "foreground") if die_with_parent is None else die_with_parent
        self.die_with_parent = self.die_with_parent and _POSIX
        self._guard: Guard | None = None
        self.state_file = StateFile(spec.state_path) if spec.state_path else None
        self.state: dict[str, Any] | None = None
        self.stopped_elsewhere = False  # another command marked or removed the state file, then stopped it
        self.env = self.spec.child_env()
        self.exit_info: ExitInfo | None = None
        self.returncode: int | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.output = OutputLines(self.name, ring_size, spec.mask)
        self._status = ProcessStatus.STOPPED
        self._status_cbs: list[StatusCallback] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._exited: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_task: asyncio.Task[ExitInfo | None] | None = None
        self._stop_requested = False
        self._override: ExitInfo | None = None
        self._drain_timeout = 3.0
        _SUPERVISORS.add(self)

    @property
    def argv(self) -> list[str]:
        return [str(a) for a in self.spec.argv]

    @argv.setter
    def argv(self, value: Sequence[str]) -> None:
        self.spec.argv = [str(a) for a in value]

    # -- observation
    @property
    def status(self) -> ProcessStatus:
        return self._status

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def dropped_lines(self) -> int:
        """Output lines a :meth:`stream` consumer that fell behind never saw."""
        return self.output.dropped

    def lines(self, n: int | None = None) -> list[str]:
        """The last ``n`` (default all buffered) output lines."""
        return self.output.lines(n)

    def on_status(self, cb: StatusCallback) -> Callable[[], None]:
        """Call ``cb(status)`` on every change; returns an unsubscribe function."""
        self._status_cbs.append(cb)
        return lambda: self._status_cbs.remove(cb) if cb in self._status_cbs else None

    def on_line(self, cb: LineCallback) -> Callable[[], None]:
        """Call ``cb(line)`` for every output line; returns an unsubscribe function."""
        return self.output.on_line(cb)

    def stream(self, replay: bool = False, maxsize: int = 10000) -> AsyncIterator[str]:
        """Output lines as they arrive, ending when the process has exited. ``replay`` first
        yields the buffered lines. A consumer that falls ``maxsize`` lines behind loses lines."""
        return self.output.stream(replay, maxsize, lambda: self._exited is not None and self._exited.is_set())

    # -- lifecycle
    async def start(self) -> None:
        """Spawn the process in its own session/process group. Raises :class:`ProcessCrashed` if
        it cannot be spawned (missing interpreter, bad cwd)."""
        if self._status.running:
            raise ProcessError(f"{self.name} is already {self._status.value}", kind="already_running")
        self.output.clear()
        self.exit_info, self.returncode, self.ended_at = None, None, None
        self._stop_requested, self._override, self._stop_task = False, None, None
        self.stopped_elsewhere, self.state = False, None
        self._drain_timeout = 3.0
        self._exited = asyncio.Event()
        self._open_log()
        self.started_at = time.time()
        self._set_status(ProcessStatus.STARTING)
        kwargs = spawn_options()
        self.env = self.spec.child_env()
        if self.die_with_parent:
            self._guard = Guard(self.name)
            self._guard.start()  # before the child: no instant where the child is unguarded
            self.env.update(self._guard.child_env())
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                **kwargs,
            )  # type: ignore[arg-type]
        except OSError as exc:
            self._proc = None
            info = ExitInfo(None, "spawn_failed", f"Could not start {self.name}: {exc}")
            self._finish(info, ProcessStatus.CRASHED)
            raise ProcessCrashed(info.message, kind=info.kind) from exc
        register(self._proc.pid, self.name)
        if self._guard is not None:
            self._guard.watch(self._proc.pid, self._proc.pid if _POSIX else None)
        self._record(self.spec.base_state(self._proc.pid, self.mode))
        assert self._proc.stdout is not None
        self._tasks = [
            asyncio.ensure_future(self.output.pump(self._proc.stdout)),
            asyncio.ensure_future(self._watch(self._proc)),
        ]

    async def wait_ready(
        self,
        probe: Probe | None = None,
        timeout: float = 60.0,
        *,
        interval: float = 0.5,
        probe_timeout: float = 10.0,
        grace: float = 5.0,
    ) -> None:
        """Return once the process is alive AND ``probe()`` returned True (no probe: alive is
        enough). Raises :class:`ProcessCrashed` on an exit and :class:`ReadyTimeout` after
        ``timeout`` seconds, having stopped the process (``grace`` s before SIGKILL)."""
        if self._status is ProcessStatus.READY:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last_error = ""
        while True:
            if self._status is not ProcessStatus.STARTING:
                raise self._not_ready_error()
            ok = probe is None
            if probe is not None:
                budget = max(0.05, min(probe_timeout, deadline - loop.time()))
                try:
                    ok = bool(await asyncio.wait_for(probe(), timeout=budget))
                except asyncio.TimeoutError:
                    last_error = f"the readiness check did not answer within {budget:.1f} s"
                except Exception as exc:  # a probe failing is "not ready yet"
                    last_error = f"{type(exc).__name__}: {exc}"
            if ok and self.alive and self._status is ProcessStatus.STARTING:
                self._set_status(ProcessStatus.READY)
                if self.state is not None:
                    self.state["ready_at"] = time.time()
                    self._record(self.state)
                return
            remaining = deadline - loop.time()
            if remaining <= 0 and self._status is ProcessStatus.STARTING:
                message = f"{self.name} did not become ready within {timeout:g} s and was stopped."
                if last_error:
                    message += f" Last readiness check: {last_error}."
                message += tail_text(self.lines())
                await self._terminate(grace, 5.0, ExitInfo(None, "timeout", message))
                raise ReadyTimeout(message, kind="timeout", details="\n".join(self.lines(200)))
            assert self._exited is not None
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._exited.wait(), timeout=max(0.0, min(interval, remaining)))

    async def stop(self, grace: float = 10.0, kill_timeout: float = 5.0) -> ExitInfo | None:
        """SIGTERM the process group, SIGKILL it after ``grace`` s, wait (bounded) until the whole
        group is gone. Safe to call in any state and concurrently."""
        if self._proc is None:
            return self.exit_info
        if self._exited is not None and self._exited.is_set():
            if group_members(self._proc.pid):  # stragglers of an already-finished run
                await asyncio.to_thread(
                    stop_tree, self._proc.pid, pgid=self._proc.pid, grace=0.0, kill_timeout=kill_timeout
                )
            return self.exit_info
        return await self._terminate(grace, kill_timeout)

    async def wait(self, timeout: float | None = None) -> ExitInfo | None:
        """Wait for the process to end on its own (a job); raises ``asyncio.TimeoutError``."""
        if self._exited is None:
            return self.exit_info
        await asyncio.wait_for(self._exited.wait(), timeout)
        return self.exit_info

    # -- internals
    async def _terminate(
        self, grace: float, kill_timeout: float, override: ExitInfo | None = None
    ) -> ExitInfo | None:
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._do_terminate(grace, kill_timeout, override))
        return await asyncio.shield(self._stop_task)

    async def _do_terminate(
        self, grace: float, kill_timeout: float, override: ExitInfo | None
    ) -> ExitInfo | None:
        proc, exited = self._proc, self._exited
        assert proc is not None and exited is not None
        self._stop_requested, self._override = True, override
        self._drain_timeout = grace + kill_timeout + 2.0
        if not exited.is_set():
            self._set_status(ProcessStatus.STOPPING)
        loop = asyncio.get_running_loop()

        def escalating(after: float) -> None:
            loop.call_soon_threadsafe(
                self.output.emit, f"[supervisor] {self.name} still running {after:g} s after SIGTERM: SIGKILL"
            )

        left = await asyncio.to_thread(
            stop_tree,
            proc.pid,
            pgid=proc.pid,
            grace=grace,
            kill_timeout=kill_timeout,
            strays=descendants(proc.pid),
            on_kill=escalating,
        )
        if left:
            log.error("%s: processes %s survived SIGKILL", self.name, left)
        try:
            await asyncio.wait_for(exited.wait(), timeout=self._drain_timeout + 1.0)
        except asyncio.TimeoutError:  # the watcher is stuck: finish here
            for task in self._tasks:
                task.cancel()
            self._finalize(proc.returncode)
        return self.exit_info

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        # Not proc.wait(): before Python 3.12 it returns only once the output pipe closes, which a
        # surviving grandchild holds open; returncode is set as soon as the child is reaped.
        while proc.returncode is None:
            await asyncio.sleep(0.05)
        rc = proc.returncode
        if not self._stop_requested and group_members(proc.pid):
            # The leader ended on its own; its children must not outlive it (they hold GPU memory).
            await asyncio.to_thread(stop_tree, proc.pid, pgid=proc.pid, grace=2.0, kill_timeout=2.0)
        pump = self._tasks[0] if self._tasks else None
        if pump is not None:
            try:
                await asyncio.wait_for(asyncio.shield(pump), timeout=self._drain_timeout)
            except asyncio.TimeoutError:  # a straggler still holds the pipe open
                pump.cancel()
            except Exception:
                log.exception("%s: output reader failed", self.name)
        self._finalize(rc)

    def _finalize(self, rc: int | None) -> None:
        if self._exited is None or self._exited.is_set():
            return
        self.returncode = rc
        tail = tuple(self.lines(50))
        if self._override is not None:
            info = ExitInfo(rc, self._override.kind, self._override.message, tail)
            status = ProcessStatus.CRASHED
        elif self._stop_requested:
            info = ExitInfo(rc, "stopped", f"{self.name} stopped (exit code {rc}).", tail)
            status = ProcessStatus.EXITED
        elif self.long_running or rc != 0:
            kind, text = self.classifier(tail, rc)
            if not self.long_running and kind == "stopped":  # a job that answered a stop request of its own
                info = ExitInfo(rc, kind, f"{self.name} {text} (exit code {rc}).", tail)
                self._finish(info, ProcessStatus.EXITED)
                return
            if not self.long_running:
                when = "failed"  # a job never becomes "ready": it failed, it did not fail to start
            elif self._status is ProcessStatus.STARTING:
                when = "failed to start"
            else:
                when = "crashed"
            info = ExitInfo(rc, kind, f"{self.name} {when} (exit code {rc}): {text}", tail)
            status = ProcessStatus.CRASHED
        else:
            info = ExitInfo(rc, "exited", f"{self.name} finished (exit code 0).", tail)
            status = ProcessStatus.EXITED
        self._finish(info, status)

    def _finish(self, info: ExitInfo, status: ProcessStatus) -> None:
        self.exit_info, self.ended_at = info, time.time()
        if self._guard is not None and (self._proc is None or not group_members(self._proc.pid)):
            self._guard.release()  # the tree is gone: nothing left to guard
            self._guard = None
        if self._proc is not None:
            forget_if_gone(self._proc.pid)
            if self.state_file is not None:
                self.stopped_elsewhere = not self._stop_requested and self.state_file.stopped_by_command(
                    self._proc.pid
                )
                self.state_file.remove(self._proc.pid)
        # a stop, asked here or answered by the process itself (the trainer's exit 3), reads as one
        word = "stopped" if info.kind == "stopped" else status.value
        self.output.end(f"{word}: {(info.message.splitlines() or [''])[0]}")
        self._set_status(status)
        assert self._exited is not None
        self._exited.set()

    def _not_ready_error(self) -> ProcessError:
        info = self.exit_info
        if info is not None and self._status is ProcessStatus.CRASHED:
            return ProcessCrashed(
                info.message, kind=info.kind, details="\n".join(info.tail), returncode=info.returncode
            )
        return ProcessError(
            f"{self.name} is {self._status.value}, not starting",
            kind="not_running",
            returncode=self.returncode,
        )

    def _open_log(self) -> None:
        if self.log_path is not None:
            self.output.open_log(self.log_path, " ".join(self.argv))

    def _record(self, state: dict[str, Any]) -> None:
        """Write the state file (a failure is logged: the process runs on, only unrecorded)."""
        self.state = state
        if self.state_file is None:
            return
        try:
            self.state_file.write(state)
        except OSError as exc:
            log.warning("%s: cannot write its state file %s: %s", self.name, self.state_file.path, exc)

    def _set_status(self, status: ProcessStatus) -> None:
        if status is self._status:
            return
        self._status = status
        for cb in list(self._status_cbs):
            try:
                cb(status)
            except Exception:
                log.exception("%s: status subscriber failed", self.name)

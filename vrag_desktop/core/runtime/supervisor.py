"""Supervise one long-lived child process (a vLLM server, a training run) from an asyncio loop.

Why this shape: model servers take minutes to load, spawn worker processes of their own and die in
many ways. So the child runs in its own process group (stop = SIGTERM to the group, SIGKILL after a
grace period, no orphans), its merged output is streamed line by line to subscribers, a bounded
ring buffer and a log file, its state is an explicit :class:`ProcessStatus`, and every exit that
was not asked for becomes a *classified* message instead of a bare exit code. Every wait is
bounded. An ``atexit`` hook (and :func:`cleanup`, for the app's quit path) kills any group still
alive. Works under any asyncio loop, qasync's included.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import os
import signal
import subprocess
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from vrag_desktop.core.runtime.procgroup import (
    KILL,
    cleanup,
    descendants,
    forget_if_gone,
    group_members,
    pid_alive,
    register,
    sanitized_env,
    signal_group,
)

__all__ = ["ExitInfo", "ProcessCrashed", "ProcessError", "ProcessStatus", "ProcessSupervisor",
           "ReadyTimeout", "cleanup", "default_classifier", "sanitized_env", "stop_all", "tail_text"]

log = logging.getLogger(__name__)

Probe = Callable[[], Awaitable[bool]]
Classifier = Callable[[Sequence[str], int | None], tuple[str, str]]
StatusCallback = Callable[["ProcessStatus"], None]
LineCallback = Callable[[str], None]

_POSIX = os.name == "posix"
_CHUNK = 65536


class ProcessStatus(str, enum.Enum):
    STOPPED = "stopped"    # never started
    STARTING = "starting"  # spawned, not yet ready
    READY = "ready"        # alive and the readiness probe passed
    STOPPING = "stopping"  # stop requested, waiting for the group to go
    EXITED = "exited"      # ended as asked (stop) or, for jobs, with code 0
    CRASHED = "crashed"    # ended on its own, failed to spawn, or never became ready

    @property
    def running(self) -> bool:
        return self in (ProcessStatus.STARTING, ProcessStatus.READY, ProcessStatus.STOPPING)


@dataclass(frozen=True)
class ExitInfo:
    """How a run ended: ``kind`` is ``stopped``/``exited``/``timeout``/``spawn_failed`` or a
    classifier kind (``oom``, ``port_in_use``…); ``tail`` holds the last output lines."""

    returncode: int | None
    kind: str
    message: str
    tail: tuple[str, ...] = ()


class ProcessError(RuntimeError):
    """A supervised process failed: ``kind`` for code, message for people, ``details`` the
    raw output tail."""

    def __init__(self, message: str, kind: str = "other", details: str = "",
                 returncode: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.details = details
        self.returncode = returncode


class ProcessCrashed(ProcessError):
    """The process exited on its own (before ready, or later), or could not be spawned."""


class ReadyTimeout(ProcessError):
    """The process did not become ready in time; it has been killed."""


_SUPERVISORS: weakref.WeakSet[ProcessSupervisor] = weakref.WeakSet()


async def stop_all(grace: float = 5.0) -> None:
    """Orderly shutdown of every supervisor in this process (the app's quit path, in the loop)."""
    running = [s for s in list(_SUPERVISORS) if s.status.running]
    await asyncio.gather(*(s.stop(grace=grace) for s in running), return_exceptions=True)
    cleanup(grace=1.0)


def default_classifier(lines: Sequence[str], returncode: int | None) -> tuple[str, str]:
    """Generic diagnosis: the signal or exit code, plus the last output lines."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (often the system's out-of-memory killer)" if name == "SIGKILL" else ""
        kind, text = "killed", f"killed by {name}{hint}"
    else:
        kind, text = "exit", f"exited with code {returncode}"
    return kind, text + tail_text(lines)


def tail_text(lines: Sequence[str], n: int = 10) -> str:
    last = [ln for ln in lines if ln.strip()][-n:]
    return ("\nLast output:\n  " + "\n  ".join(last)) if last else ""


# ---------------------------------------------------------------- the supervisor

class ProcessSupervisor:
    """One supervised child process; see the module docstring. Bound to the loop that starts it."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str | None] | None = None,
                 cwd: str | os.PathLike[str] | None = None,
                 log_path: str | os.PathLike[str] | None = None, name: str | None = None,
                 ring_size: int = 2000, classifier: Classifier | None = None,
                 long_running: bool = True, inherit_env: bool = True,
                 redact: Sequence[str] = ()) -> None:
        """``long_running``: a server, so any exit not asked for is a crash; ``False`` for jobs
        (training), whose exit code 0 is a normal end. ``env`` overrides the sanitised parent
        environment (or replaces it if ``inherit_env`` is False). Strings in ``redact`` (API
        keys) are masked in the log file and in every output line."""
        self.argv = [str(a) for a in argv]
        self.name = name or (Path(self.argv[0]).name if self.argv else "process")
        self.cwd = cwd
        self.log_path = Path(log_path) if log_path else None
        self.classifier = classifier or default_classifier
        self.long_running = long_running
        self._secrets = [x for x in redact if x]
        self.env = sanitized_env(env, None if inherit_env else {})
        self.exit_info: ExitInfo | None = None
        self.returncode: int | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.dropped_lines = 0
        self._ring: collections.deque[str] = collections.deque(maxlen=ring_size)
        self._status = ProcessStatus.STOPPED
        self._status_cbs: list[StatusCallback] = []
        self._line_cbs: list[LineCallback] = []
        self._queues: set[asyncio.Queue[str | None]] = set()
        self._proc: asyncio.subprocess.Process | None = None
        self._exited: asyncio.Event | None = None
        self._log: IO[str] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_task: asyncio.Task[ExitInfo | None] | None = None
        self._stop_requested = False
        self._override: ExitInfo | None = None
        self._drain_timeout = 3.0
        _SUPERVISORS.add(self)

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

    def lines(self, n: int | None = None) -> list[str]:
        """The last ``n`` (default all buffered) output lines."""
        buf = list(self._ring)
        return buf if n is None else buf[-n:]

    def on_status(self, cb: StatusCallback) -> Callable[[], None]:
        """Call ``cb(status)`` on every change; returns an unsubscribe function."""
        self._status_cbs.append(cb)
        return lambda: self._status_cbs.remove(cb) if cb in self._status_cbs else None

    def on_line(self, cb: LineCallback) -> Callable[[], None]:
        """Call ``cb(line)`` for every output line; returns an unsubscribe function."""
        self._line_cbs.append(cb)
        return lambda: self._line_cbs.remove(cb) if cb in self._line_cbs else None

    async def stream(self, replay: bool = False, maxsize: int = 10000) -> AsyncIterator[str]:
        """Output lines as they arrive, ending when the process has exited. ``replay`` first
        yields the buffered lines. A consumer that falls ``maxsize`` lines behind loses lines."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=maxsize)
        backlog = list(self._ring) if replay else []
        finished = self._exited is not None and self._exited.is_set()
        if not finished:
            self._queues.add(queue)
        try:
            for line in backlog:
                yield line
            while not finished:
                item = await queue.get()
                if item is None:
                    return
                yield item
        finally:
            self._queues.discard(queue)

    # -- lifecycle
    async def start(self) -> None:
        """Spawn the process in its own session/process group. Raises :class:`ProcessCrashed` if
        it cannot be spawned (missing interpreter, bad cwd)."""
        if self._status.running:
            raise ProcessError(f"{self.name} is already {self._status.value}",
                               kind="already_running")
        self._ring.clear()
        self.exit_info, self.returncode, self.ended_at = None, None, None
        self._stop_requested, self._override, self._stop_task = False, None, None
        self._drain_timeout = 3.0
        self._exited = asyncio.Event()
        self._open_log()
        self.started_at = time.time()
        self._set_status(ProcessStatus.STARTING)
        kwargs: dict[str, object] = {}
        if _POSIX:
            kwargs["start_new_session"] = True
        else:
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=self.env, cwd=self.cwd, **kwargs)  # type: ignore[arg-type]
        except OSError as exc:
            self._proc = None
            info = ExitInfo(None, "spawn_failed", f"Could not start {self.name}: {exc}")
            self._finish(info, ProcessStatus.CRASHED)
            raise ProcessCrashed(info.message, kind=info.kind) from exc
        register(self._proc.pid, self.name)
        assert self._proc.stdout is not None
        self._tasks = [asyncio.ensure_future(self._pump(self._proc.stdout)),
                       asyncio.ensure_future(self._watch(self._proc))]

    async def wait_ready(self, probe: Probe | None = None, timeout: float = 60.0, *,
                         interval: float = 0.5, probe_timeout: float = 10.0,
                         grace: float = 5.0) -> None:
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
                await asyncio.wait_for(self._exited.wait(),
                                       timeout=max(0.0, min(interval, remaining)))

    async def stop(self, grace: float = 10.0, kill_timeout: float = 5.0) -> ExitInfo | None:
        """SIGTERM the process group, SIGKILL it after ``grace`` s, wait (bounded) until the whole
        group is gone. Safe to call in any state and concurrently."""
        if self._proc is None:
            return self.exit_info
        if self._exited is not None and self._exited.is_set():
            if group_members(self._proc.pid):  # stragglers of an already-finished run
                signal_group(self._proc.pid, KILL)
                await self._wait_gone(self._proc.pid, (), kill_timeout)
            return self.exit_info
        return await self._terminate(grace, kill_timeout)

    async def wait(self, timeout: float | None = None) -> ExitInfo | None:
        """Wait for the process to end on its own (a job); raises ``asyncio.TimeoutError``."""
        if self._exited is None:
            return self.exit_info
        await asyncio.wait_for(self._exited.wait(), timeout)
        return self.exit_info

    # -- internals
    async def _terminate(self, grace: float, kill_timeout: float,
                         override: ExitInfo | None = None) -> ExitInfo | None:
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(
                self._do_terminate(grace, kill_timeout, override))
        return await asyncio.shield(self._stop_task)

    async def _do_terminate(self, grace: float, kill_timeout: float,
                            override: ExitInfo | None) -> ExitInfo | None:
        proc, exited = self._proc, self._exited
        assert proc is not None and exited is not None
        self._stop_requested, self._override = True, override
        self._drain_timeout = grace + kill_timeout + 2.0
        if not exited.is_set():
            self._set_status(ProcessStatus.STOPPING)
        strays = descendants(proc.pid)
        signal_group(proc.pid, signal.SIGTERM)
        if not await self._wait_gone(proc.pid, strays, grace):
            self._emit(f"[supervisor] {self.name} still running {grace:g} s after SIGTERM: SIGKILL")
            signal_group(proc.pid, KILL, strays)
            if not await self._wait_gone(proc.pid, strays, kill_timeout):
                log.error("%s: process group %s survived SIGKILL", self.name, proc.pid)
        try:
            await asyncio.wait_for(exited.wait(), timeout=self._drain_timeout + 1.0)
        except asyncio.TimeoutError:  # the watcher is stuck: finish here
            for task in self._tasks:
                task.cancel()
            self._finalize(proc.returncode)
        return self.exit_info

    async def _wait_gone(self, pgid: int, strays: Sequence[int], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            gone = (self._proc is None or self._proc.returncode is not None) \
                and not group_members(pgid) and not any(pid_alive(p) for p in strays)
            if gone or time.monotonic() >= deadline:
                return gone
            await asyncio.sleep(0.05)

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        pending = b""
        try:
            while chunk := await stream.read(_CHUNK):
                parts = (pending + chunk).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                pending = parts.pop()
                for raw in parts:
                    if raw:
                        self._emit(raw.decode("utf-8", "replace"))
                if len(pending) > _CHUNK * 16:  # a giant line without newline: cut it
                    self._emit(pending.decode("utf-8", "replace"))
                    pending = b""
                if self._log:
                    self._log.flush()
        finally:
            if pending:
                self._emit(pending.decode("utf-8", "replace"))

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        # Not proc.wait(): before Python 3.12 it returns only once the output pipe closes, which a
        # surviving grandchild holds open; returncode is set as soon as the child is reaped.
        while proc.returncode is None:
            await asyncio.sleep(0.05)
        rc = proc.returncode
        if not self._stop_requested and group_members(proc.pid):
            # The leader ended on its own; its children must not outlive it (they hold GPU memory).
            signal_group(proc.pid, signal.SIGTERM)
            if not await self._wait_gone(proc.pid, (), 2.0):
                signal_group(proc.pid, KILL)
                await self._wait_gone(proc.pid, (), 2.0)
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
            when = "failed to start" if self._status is ProcessStatus.STARTING else "crashed"
            info = ExitInfo(rc, kind, f"{self.name} {when} (exit code {rc}): {text}", tail)
            status = ProcessStatus.CRASHED
        else:
            info = ExitInfo(rc, "exited", f"{self.name} finished (exit code 0).", tail)
            status = ProcessStatus.EXITED
        self._finish(info, status)

    def _finish(self, info: ExitInfo, status: ProcessStatus) -> None:
        self.exit_info, self.ended_at = info, time.time()
        if self._proc is not None:
            forget_if_gone(self._proc.pid)
        if self._log:
            with contextlib.suppress(OSError):
                self._log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {status.value}: "
                                f"{info.message.splitlines()[0]}\n")
                self._log.close()
            self._log = None
        self._set_status(status)
        assert self._exited is not None
        self._exited.set()
        for queue in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)

    def _not_ready_error(self) -> ProcessError:
        info = self.exit_info
        if info is not None and self._status is ProcessStatus.CRASHED:
            return ProcessCrashed(info.message, kind=info.kind, details="\n".join(info.tail),
                                  returncode=info.returncode)
        return ProcessError(f"{self.name} is {self._status.value}, not starting",
                            kind="not_running", returncode=self.returncode)

    def _open_log(self) -> None:
        if self.log_path is None:
            return
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
            self._log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} start: "
                            f"{self._mask(' '.join(self.argv))}\n")
        except OSError as exc:
            log.warning("%s: cannot write log %s: %s", self.name, self.log_path, exc)
            self._log = None

    def _mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _emit(self, line: str) -> None:
        line = self._mask(line)
        self._ring.append(line)
        if self._log:
            with contextlib.suppress(OSError):
                self._log.write(line + "\n")
        for cb in list(self._line_cbs):
            try:
                cb(line)
            except Exception:
                log.exception("%s: line subscriber failed", self.name)
        for queue in list(self._queues):
            try:
                queue.put_nowait(line)
            except asyncio.QueueFull:
                self.dropped_lines += 1

    def _set_status(self, status: ProcessStatus) -> None:
        if status is self._status:
            return
        self._status = status
        for cb in list(self._status_cbs):
            try:
                cb(status)
            except Exception:
                log.exception("%s: status subscriber failed", self.name)

"""Run a :class:`~.supervisor.ProcessSpec` in the background: its own session, its output
appended to its log file, recorded in its state file.

Why: a command-line start returns while the server keeps running, so nothing of this process may
be needed later. A later command finds the process through the state file
(:func:`.state.check_state`) and stops it with the same ``stop_tree`` as everything else. While
the starting command still waits, it reads the log and probes readiness here.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from vrag_desktop.core.runtime.exits import ProcessCrashed, ProcessError, default_classifier
from vrag_desktop.core.runtime.logfile import LogReader, header, rotate_log, write_footer
from vrag_desktop.core.runtime.proctree import spawn_options, stop_tree
from vrag_desktop.core.runtime.state import RecordedProcess, StateFile
from vrag_desktop.core.runtime.supervisor import ProcessSpec

__all__ = ["DetachedProcess"]


class DetachedProcess(RecordedProcess):
    """A background child this command started (it also holds the ``Popen`` to reap it)."""

    def __init__(
        self,
        spec: ProcessSpec,
        state_file: StateFile,
        state: dict[str, object],
        popen: subprocess.Popen[bytes],
        offset: int,
    ) -> None:
        super().__init__(state_file, dict(state))
        self.spec = spec
        self.popen = popen
        self.reader = LogReader(Path(str(spec.log_path)), offset)
        self.seen: collections.deque[str] = collections.deque(maxlen=400)

    @classmethod
    def spawn(cls, spec: ProcessSpec, *, mode: str = "background") -> DetachedProcess:
        """Start ``spec`` (which needs ``log_path`` and ``state_path``) and record it. Raises
        :class:`ProcessCrashed` if it cannot be spawned, :class:`ProcessError` if it cannot be
        recorded (it is stopped then: nothing could find it again)."""
        if spec.log_path is None or spec.state_path is None:
            raise ValueError("a detached process needs a log file and a state file")
        log_path = Path(spec.log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        rotate_log(log_path)
        argv = [str(a) for a in spec.argv]
        with open(log_path, "ab") as log:
            log.write(header(spec.mask(shlex.join(argv))).encode())
            log.flush()
            offset = log.tell()
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=spec.child_env(),
                    cwd=spec.cwd,
                    close_fds=True,
                    **spawn_options(detached=True),
                )
            except OSError as exc:
                raise ProcessCrashed(
                    f"could not start {spec.display_name}: {exc}", kind="spawn_failed"
                ) from exc
        state = spec.base_state(popen.pid, mode)
        state["log_offset"] = offset
        state_file = StateFile(spec.state_path)
        proc = cls(spec, state_file, state, popen, offset)
        try:
            state_file.write(state)
        except OSError as exc:
            proc.kill_now(2.0)
            raise ProcessError(
                f"cannot write {state_file.path}: {exc}; {spec.display_name} was stopped", kind="spawn_failed"
            ) from exc
        return proc

    def poll(self) -> int | None:
        """The exit code once it has ended (reaping it), else None."""
        return self.popen.poll()

    def read_output(self, final: bool = False) -> list[str]:
        """Log lines written since the last call, secrets masked (the child writes the file itself);
        the latest 400 are kept in :attr:`seen`."""
        lines = [self.spec.mask(line) for line in self.reader.read(final)]
        self.seen.extend(lines)
        return lines

    async def wait_ready(
        self,
        *,
        timeout: float,
        interval: float = 0.5,
        probe_timeout: float = 5.0,
        on_line: Callable[[str], None] | None = None,
        interrupted: asyncio.Event | None = None,
    ) -> str:
        """Stream the log to ``on_line`` until the spec's readiness check passes. Returns
        ``ready``, ``exited`` (it ended: see :meth:`classify`), ``timeout`` or ``interrupted``."""
        probe_fn = self.spec.ready
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        probe: asyncio.Future[bool] | None = None
        next_probe = loop.time()
        try:
            while True:
                for line in self.read_output():
                    if on_line is not None:
                        on_line(line)
                if interrupted is not None and interrupted.is_set():
                    return "interrupted"
                if self.poll() is not None:
                    return "exited"
                if probe_fn is None:
                    return "ready"
                if probe is not None and probe.done():
                    ok = not probe.cancelled() and probe.exception() is None and probe.result()
                    probe = None
                    if ok and self.poll() is None:
                        return "ready"
                now = loop.time()
                if now >= deadline:
                    return "timeout"
                if probe is None and now >= next_probe:
                    budget = max(0.1, min(probe_timeout, deadline - now))
                    probe = asyncio.ensure_future(asyncio.wait_for(probe_fn(), budget))
                    next_probe = now + interval
                await asyncio.sleep(0.1)
        finally:
            if probe is not None and not probe.done():
                probe.cancel()
                with contextlib.suppress(BaseException):
                    await probe

    def mark_ready(self) -> None:
        self.state["ready_at"] = time.time()
        self.state.pop("log_offset", None)
        self.state_file.write(self.state)

    def classify(self) -> tuple[str, str]:
        """``(kind, message)`` for how it ended, from its latest output."""
        classifier = self.spec.classifier or default_classifier
        return classifier(list(self.seen), self.poll())

    def kill_now(self, grace: float, on_kill: Callable[[float], None] | None = None) -> list[int]:
        """Stop it and its whole tree (our own child: no identity check needed). Returns the
        pids still alive."""
        return stop_tree(self.pid, pgid=self.pgid, grace=grace, reap=self.popen.poll, on_kill=on_kill)

    def finish(self, log_note: str) -> None:
        """Close its run in the log and drop its state file."""
        if self.spec.log_path is not None:
            write_footer(self.spec.log_path, log_note)
        self.state_file.remove(self.pid)

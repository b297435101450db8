"""Where a supervised process's output goes: split into lines from the raw pipe, masked, kept in a
bounded ring, appended to the log file and handed to line callbacks and async streams.

Why apart from :mod:`.supervisor`: the supervisor decides the process's life (start, readiness,
stop, exit); this only moves lines, and no slow or failing reader may hold the process up.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO

from vrag_desktop.core.runtime.logfile import footer, header

__all__ = ["LineCallback", "OutputLines"]

log = logging.getLogger(__name__)

LineCallback = Callable[[str], None]

_CHUNK = 65536


class OutputLines:
    """One process's output lines; ``mask`` hides secrets before a line is kept or passed on."""

    def __init__(self, name: str, ring_size: int, mask: Callable[[str], str]) -> None:
        self.name = name
        self.mask = mask
        self.dropped = 0  # lines a stream consumer that fell behind never saw
        self._ring: collections.deque[str] = collections.deque(maxlen=ring_size)
        self._callbacks: list[LineCallback] = []
        self._queues: set[asyncio.Queue[str | None]] = set()
        self._log: IO[str] | None = None

    def lines(self, n: int | None = None) -> list[str]:
        """The last ``n`` (default all buffered) lines."""
        buf = list(self._ring)
        return buf if n is None else buf[-n:]

    def clear(self) -> None:
        self._ring.clear()

    def on_line(self, cb: LineCallback) -> Callable[[], None]:
        """Call ``cb(line)`` for every line; returns an unsubscribe function."""
        self._callbacks.append(cb)
        return lambda: self._callbacks.remove(cb) if cb in self._callbacks else None

    async def stream(self, replay: bool, maxsize: int, ended: Callable[[], bool]) -> AsyncIterator[str]:
        """Lines as they arrive until :meth:`end` (none when ``ended()`` says the process is gone);
        ``replay`` first yields the buffered lines. A consumer ``maxsize`` lines behind loses lines."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=maxsize)
        backlog = list(self._ring) if replay else []
        finished = ended()
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

    def emit(self, line: str) -> None:
        line = self.mask(line)
        self._ring.append(line)
        if self._log:
            with contextlib.suppress(OSError):
                self._log.write(line + "\n")
        for cb in list(self._callbacks):
            try:
                cb(line)
            except Exception:
                log.exception("%s: line subscriber failed", self.name)
        for queue in list(self._queues):
            try:
                queue.put_nowait(line)
            except asyncio.QueueFull:
                self.dropped += 1

    async def pump(self, stream: asyncio.StreamReader) -> None:
        """Read the pipe to its end, a line at a time (``\\r`` ends a line too, as progress bars use)."""
        pending = b""
        try:
            while chunk := await stream.read(_CHUNK):
                parts = (pending + chunk).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                pending = parts.pop()
                for raw in parts:
                    if raw:
                        self.emit(raw.decode("utf-8", "replace"))
                if len(pending) > _CHUNK * 16:  # a giant line without newline: cut it
                    self.emit(pending.decode("utf-8", "replace"))
                    pending = b""
                if self._log:
                    self._log.flush()
        finally:
            if pending:
                self.emit(pending.decode("utf-8", "replace"))

    def open_log(self, path: Path, command: str) -> None:
        """Append this run to the log file at ``path`` (a failure is logged: the run goes on unlogged)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
            self._log.write(header(self.mask(command)))
        except OSError as exc:
            log.warning("%s: cannot write log %s: %s", self.name, path, exc)
            self._log = None

    def end(self, summary: str) -> None:
        """The process is gone: close the log with ``summary`` and end every stream."""
        if self._log:
            with contextlib.suppress(OSError):
                self._log.write(footer(summary))
                self._log.close()
            self._log = None
        for queue in list(self._queues):
            if queue.full():  # the end must get through: a reader that fell behind loses a line instead
                queue.get_nowait()
                self.dropped += 1
            queue.put_nowait(None)

"""A supervised process's log file: one header line per run, its output, one footer line saying
how it ended; read back by ``runtime logs`` and by a command waiting on a detached server.

Why one format for all: the in-process supervisor and a detached child write the same file, and
``=== <time> start: <command>`` marks where the latest run begins, so a later command can tell
why it ended from that run's lines only.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

__all__ = [
    "LOG_ROTATE_BYTES",
    "LogReader",
    "footer",
    "header",
    "rotate_log",
    "run_lines",
    "tail_lines",
    "write_footer",
]

LOG_ROTATE_BYTES = 50 * 1024 * 1024
_START_MARK = re.compile(r"^=== \d{4}-\d\d-\d\d \d\d:\d\d:\d\d start: ")
_LINES = re.compile(rb"\r\n|\r|\n")  # "\r" (progress bars) ends a line too


def header(command: str) -> str:
    """The line that opens a run in the log."""
    return f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} start: {command}\n"


def footer(text: str) -> str:
    """The line that closes a run (``stopped: …``, ``crashed: …``)."""
    return f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n"


def write_footer(path: str | os.PathLike[str], text: str) -> None:
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as fh:
        fh.write(footer(text))


def rotate_log(path: str | os.PathLike[str], limit: int = LOG_ROTATE_BYTES) -> bool:
    """Move ``path`` to ``path.1`` once it outgrows ``limit`` bytes. True when it did."""
    path = Path(path)
    with contextlib.suppress(OSError):
        if path.stat().st_size > limit:
            os.replace(path, path.with_name(path.name + ".1"))
            return True
    return False


class LogReader:
    """New complete lines of a growing log, from byte ``offset`` on."""

    def __init__(self, path: str | os.PathLike[str], offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self._pending = b""

    def read(self, final: bool = False) -> list[str]:
        """The lines completed since the last call (``final``: the unfinished one too)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            chunk = b""
        self.offset += len(chunk)
        parts = _LINES.split(self._pending + chunk)
        self._pending = parts.pop()
        if final and self._pending:
            parts.append(self._pending)
            self._pending = b""
        return [p.decode("utf-8", "replace") for p in parts if p.strip()]


def tail_lines(path: str | os.PathLike[str], n: int, max_bytes: int | None = None) -> list[str]:
    """The last ``n`` non-empty lines (reading at most ``max_bytes`` from the end)."""
    if n <= 0:
        return []
    try:
        size = Path(path).stat().st_size
        with open(path, "rb") as fh:
            want = max_bytes or max(65536, n * 512)
            fh.seek(max(0, size - want))
            data = fh.read()
    except FileNotFoundError:
        return []
    lines = [p.decode("utf-8", "replace") for p in _LINES.split(data) if p.strip()]
    if size > len(data) and lines:
        lines = lines[1:]  # the first one is probably cut
    return lines[-n:]


def run_lines(path: str | os.PathLike[str], max_bytes: int = 256 * 1024) -> list[str]:
    """The log lines of the latest run (after its ``=== … start:`` header)."""
    lines = tail_lines(path, 400, max_bytes)
    for i in range(len(lines) - 1, -1, -1):
        if _START_MARK.match(lines[i]):
            return lines[i + 1 :]
    return lines

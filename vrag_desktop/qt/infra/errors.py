"""One place where every error a person must see goes: logged, then shown by the main window.

Panels and workers call :meth:`ErrorSink.report` from any thread; the signal is delivered on the GUI
thread. Nothing here opens a modal dialog: a modal blocks the person (and tests) mid-work.

A message about a state ("vLLM could not start") stops being true when the state changes (the
server starts, the person picks another model); :meth:`ErrorSink.withdraw` says so, and the
notification bar takes it down if it still shows it. The history keeps it.
"""

from __future__ import annotations

import functools
import logging
import threading
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType

from PySide6.QtCore import QObject, Signal

log = logging.getLogger("vrag_desktop")

LEVELS = ("error", "warning", "info")


@dataclass(frozen=True)
class Report:
    level: str
    title: str
    message: str
    when: datetime = field(default_factory=datetime.now)


def describe(exc: BaseException) -> str:
    """A one-line message for a person: the exception's own words, or its type when it has none."""
    text = str(exc).strip()
    if isinstance(exc, OSError) and exc.strerror:
        name = f" ({exc.filename})" if exc.filename else ""
        text = f"{exc.strerror}{name}"
    return text or type(exc).__name__


class ErrorSink(QObject):
    """Collects reports (kept, bounded) and emits ``reported(level, title, message)``; ``withdrawn(title)``
    when a message of that title is no longer true."""

    reported = Signal(str, str, str)
    withdrawn = Signal(str)
    MAX_KEPT = 500

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.history: list[Report] = []

    def report(self, title: str, message: str | BaseException, level: str = "error") -> None:
        if level not in LEVELS:
            level = "error"
        if isinstance(message, BaseException):
            exc = message
            text = describe(exc)
            log.log(
                logging.ERROR if level == "error" else logging.WARNING,
                "%s: %s\n%s",
                title,
                text,
                "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            )
        else:
            text = message
            log.log(
                {"error": logging.ERROR, "warning": logging.WARNING}.get(level, logging.INFO),
                "%s: %s",
                title,
                text,
            )
        with self._lock:
            self.history.append(Report(level, title, text))
            del self.history[: -self.MAX_KEPT]
        self.reported.emit(level, title, text)

    def withdraw(self, *titles: str) -> None:
        """Messages with these titles no longer hold (the bar takes them down; history keeps them)."""
        for title in titles:
            self.withdrawn.emit(title)

    def clear(self) -> None:
        with self._lock:
            self.history.clear()


@functools.cache
def error_sink() -> ErrorSink:
    """The app-wide sink (created on first use, on the GUI thread)."""
    return ErrorSink()


def install_excepthooks() -> None:
    """Uncaught exceptions (GUI slots, threads) are reported, not silently printed."""
    import sys

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        error_sink().report("Unexpected error", exc.with_traceback(tb))

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            error_sink().report(
                f"Unexpected error in {args.thread.name if args.thread else 'a thread'}", args.exc_value
            )

    sys.excepthook = hook
    threading.excepthook = thread_hook

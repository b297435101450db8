"""How a supervised process stands and how it ended, in words a person can act on.

Why a module of its own: the in-process supervisor, a detached server found again through its
state file, the CLI and the app all report the same states and the same classified exits; only
the classifier (vLLM's, a training run's) differs.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Classifier",
    "ExitInfo",
    "ProcessCrashed",
    "ProcessError",
    "ProcessStatus",
    "ReadyTimeout",
    "default_classifier",
    "tail_text",
]

Classifier = Callable[[Sequence[str], "int | None"], tuple[str, str]]


class ProcessStatus(str, enum.Enum):
    STOPPED = "stopped"  # never started
    STARTING = "starting"  # spawned, not yet ready
    READY = "ready"  # alive and the readiness probe passed
    STOPPING = "stopping"  # stop requested, waiting for the group to go
    EXITED = "exited"  # ended as asked (stop) or, for jobs, with code 0
    CRASHED = "crashed"  # ended on its own, failed to spawn, or never became ready

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

    def __init__(
        self, message: str, kind: str = "other", details: str = "", returncode: int | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.details = details
        self.returncode = returncode


class ProcessCrashed(ProcessError):
    """The process exited on its own (before ready, or later), or could not be spawned."""


class ReadyTimeout(ProcessError):
    """The process did not become ready in time; it has been killed."""


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

"""What to run under supervision: a vLLM server and a training run are both just a spec.

Why a value apart from the supervisor: the same spec runs in this process
(:class:`~.supervisor.ProcessSupervisor`) or in the background (:class:`~.detached.DetachedProcess`),
and both record it in a state file the same way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.runtime.exits import Classifier
from vrag_desktop.core.runtime.proctree import sanitized_env
from vrag_desktop.core.runtime.state import identity

__all__ = ["Probe", "ProcessSpec"]

Probe = Callable[[], Awaitable[bool]]


@dataclass
class ProcessSpec:
    """What to run and how to watch it: a server or a job (``long_running=False``: exit code 0 is
    a normal end). ``env`` overrides the sanitised parent environment; strings in ``redact`` (API
    keys) are masked in logs, output lines and the state file. ``state_path`` records the process
    while it lives, with ``state_extra`` (port, model…) for whoever finds it; ``ready`` is the
    readiness check (None: alive is ready)."""

    argv: Sequence[str]
    name: str | None = None
    env: Mapping[str, str | None] | None = None
    inherit_env: bool = True
    cwd: str | os.PathLike[str] | None = None
    log_path: str | os.PathLike[str] | None = None
    state_path: str | os.PathLike[str] | None = None
    state_extra: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "process"
    long_running: bool = True
    classifier: Classifier | None = None
    redact: Sequence[str] = ()
    ready: Probe | None = None

    @property
    def display_name(self) -> str:
        return self.name or (Path(str(self.argv[0])).name if self.argv else "process")

    def child_env(self) -> dict[str, str]:
        return sanitized_env(self.env, None if self.inherit_env else {})

    def mask(self, text: str) -> str:
        for secret in self.redact:
            if secret:
                text = text.replace(secret, "***")
        return text

    def base_state(self, pid: int, mode: str) -> dict[str, Any]:
        """The state file's content for a process just started."""
        return {
            **identity(pid),
            "name": self.display_name,
            "kind": self.kind,
            "command": [self.mask(str(a)) for a in self.argv],
            "log_path": str(self.log_path) if self.log_path else None,
            "mode": mode,
            "started_at": time.time(),
            "ready_at": None,
            **self.state_extra,
        }

"""Saved runs: every agent run kept on disk for inspection, replay and export.

Layout of ``<data dir>/runs/<run id>/``::

    run.json       question, agent, settings, status, answer, totals (rewritten atomically)
    events.jsonl   one event per line, appended and flushed as the run goes (a crash keeps all
                   events so far); the format of ``AgentEvent.to_dict``
    images/        every image the model was shown and every crop, referenced by path in events

Replaying a run yields the same event sequence it recorded. URLs are saved without credentials
(:func:`~vrag_desktop.core.endpoints.content.redact_url`): a base URL with ``user:pass@`` or
``?api_key=`` in the settings or in an error message is written redacted. Exports to training
data live in :mod:`vrag_desktop.core.run.export`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop._version import __version__
from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    MaxSteps,
    Timing,
    Usage,
    event_from_dict,
)
from vrag_desktop.core.endpoints.content import redact_urls
from vrag_desktop.core.fsutil import atomic_write_bytes

RUNNING, ANSWERED, MAX_STEPS, FAILED, CANCELLED, INTERRUPTED = (
    "running",
    "answered",
    "max_steps",
    "failed",
    "cancelled",
    "interrupted",
)
_ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")


class RunError(RuntimeError):
    """A run cannot be found, read or exported (message says why)."""


@dataclass
class RunSummary:
    id: str
    agent: str
    question: str
    status: str
    started_at: float
    finished_at: float | None = None
    answer: str = ""
    model: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    steps: int = 0
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    version: str = __version__

    @property
    def dir_name(self) -> str:
        return self.id


def fold_status(status: str, event: AgentEvent) -> str:
    """A run's status after ``event`` (the one rule: saved runs, and runs kept in memory only)."""
    if isinstance(event, Answer):
        if not event.forced:
            return ANSWERED
        return MAX_STEPS if status == RUNNING else status  # a fallback answer: out of steps, or an error
    if isinstance(event, MaxSteps):
        return MAX_STEPS
    if isinstance(event, AgentError) and not event.recoverable:
        return CANCELLED if event.kind == "cancelled" else FAILED
    return status


class RunRecorder:
    """Writes one run as it happens. Use as a context manager or call :meth:`finish`."""

    def __init__(self, root: Path, agent: str, question: str, settings: dict[str, Any] | None = None) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        self.id = f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.dir = Path(root) / self.id
        self.image_dir.mkdir(parents=True, exist_ok=True)
        settings = redact_urls(dict(settings or {}))
        self.summary = RunSummary(
            id=self.id,
            agent=agent,
            question=question,
            status=RUNNING,
            started_at=time.time(),
            model=str(settings.get("model", "")),
            settings=settings,
        )
        self._events = open(self.dir / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._write_meta()

    @property
    def image_dir(self) -> Path:
        """Where the agent should write shown images and crops (kept with the run)."""
        return self.dir / "images"

    def record(self, event: AgentEvent) -> None:
        data = redact_urls(event.to_dict())
        self._events.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
        self._events.flush()
        s = self.summary
        s.steps = max(s.steps, event.step)
        s.status = fold_status(s.status, event)
        if isinstance(event, Answer):
            s.answer = event.content
        elif isinstance(event, AgentError):
            s.errors += 1
        elif isinstance(event, Timing):
            s.model_seconds += event.model_seconds
            s.tool_seconds += event.tool_seconds
        elif isinstance(event, Usage):
            s.prompt_tokens += event.prompt_tokens
            s.completion_tokens += event.completion_tokens

    def finish(self, status: str | None = None) -> RunSummary:
        """Close the run; ``status`` overrides (e.g. ``cancelled`` when the person pressed Stop)."""
        if status is not None:
            self.summary.status = status
        elif self.summary.status == RUNNING:
            self.summary.status = INTERRUPTED
        self.summary.finished_at = time.time()
        self._events.close()
        self._write_meta()
        return self.summary

    def _write_meta(self) -> None:
        atomic_write_bytes(
            self.dir / "run.json",
            json.dumps(self.summary.__dict__, indent=2, ensure_ascii=False, default=str).encode(),
        )

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._events.closed:
            self.finish(CANCELLED if exc_type is not None else None)


class RunStore:
    """All saved runs under one root (``<data dir>/runs``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def recorder(self, agent: str, question: str, settings: dict[str, Any] | None = None) -> RunRecorder:
        return RunRecorder(self.root, agent, question, settings)

    def list(self) -> list[RunSummary]:
        """Every run, newest first; a run whose process died is reported as interrupted."""
        out = []
        for d in self.root.iterdir():
            if _ID_RE.match(d.name) and (d / "run.json").exists():
                try:
                    out.append(self.summary(d.name))
                except RunError:
                    continue
        return sorted(out, key=lambda r: r.started_at, reverse=True)

    def summary(self, run_id: str) -> RunSummary:
        path = self._dir(run_id) / "run.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            s = RunSummary(**{k: v for k, v in data.items() if k in RunSummary.__dataclass_fields__})
        except (OSError, ValueError, TypeError) as exc:
            raise RunError(f"run {run_id} is unreadable: {exc}") from exc
        if (
            s.status == RUNNING
            and s.finished_at is None
            and not _recently_written(path.parent / "events.jsonl")
        ):
            s.status = INTERRUPTED
        return s

    def events(self, run_id: str) -> Iterator[AgentEvent]:
        """Replay: the recorded events in order (a torn last line from a crash is skipped)."""
        path = self._dir(run_id) / "events.jsonl"
        try:
            f = open(path, encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise RunError(f"run {run_id} has no events: {exc}") from exc
        with f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    yield event_from_dict(json.loads(line))
                except ValueError:
                    continue  # a line cut by a crash

    def resolve(self, prefix: str) -> str:
        """A full run id from a unique prefix (or ``last`` for the newest run)."""
        runs = self.list()
        if prefix == "last":
            if not runs:
                raise RunError("no saved runs yet")
            return runs[0].id
        matches = [r.id for r in runs if r.id.startswith(prefix)]
        if not matches:
            raise RunError(f"no run matches '{prefix}'")
        if len(matches) > 1:
            raise RunError(f"'{prefix}' matches {len(matches)} runs; give more of the id")
        return matches[0]

    def delete(self, run_id: str) -> None:
        shutil.rmtree(self._dir(run_id))

    def _dir(self, run_id: str) -> Path:
        if not _ID_RE.match(run_id):
            raise RunError(f"not a run id: {run_id!r}")
        d = self.root / run_id
        if not d.is_dir():
            raise RunError(f"no run {run_id}")
        return d


def _recently_written(path: Path, seconds: float = 120.0) -> bool:
    try:
        return time.time() - os.path.getmtime(path) < seconds
    except OSError:
        return False

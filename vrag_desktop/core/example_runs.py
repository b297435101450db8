"""Recorded example runs shipped with the app, so a newcomer sees a run before any model works.

Each example is a saved run (``run.json``, ``events.jsonl``, ``images/``: the layout of
:mod:`vrag_desktop.core.run.store`) under ``resources/example_runs/<key>/``, made by
``scripts/make_example_runs.py``: the app's own VRAG and VimRAG agents over the bundled sample
corpus, with a scripted model. They are read-only and never listed among the person's runs (they are
not under the data directory), and ``run.json`` carries an ``example`` record that labels them.

Paths inside the recorded events are relative to the example's folder (its ``images/``, and the
sample corpus next to it: ``../../sample_corpus/pdf/…``), never a path of the machine that made
them; :func:`example_events` resolves them where this copy of the app is installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents.events import AgentEvent, event_from_dict
from vrag_desktop.core.paths import resources_dir
from vrag_desktop.core.run.store import RunSummary

FOLDER = "example_runs"
#: The order the app offers them in.
KEYS = ("vrag", "vimrag")
#: The fields of a run's events (and of their hits, evidence and memory items) that hold file paths.
PATH_KEYS = frozenset({"image", "raw", "source", "media"})
LABEL = "Example (recorded)"


class ExampleError(RuntimeError):
    """An example run is missing or unreadable (message says which)."""


@dataclass(frozen=True)
class ExampleRun:
    """One recorded example: its folder, its summary (as a saved run's), and how it is labelled."""

    key: str
    folder: Path
    summary: RunSummary
    title: str
    note: str


def examples_dir() -> Path:
    """Where this install keeps them (``resources/example_runs``, ``vrag_desktop/resources/…`` in a
    wheel or the frozen app)."""
    return resources_dir() / FOLDER


def load_example(key: str, root: Path | None = None) -> ExampleRun:
    """The example ``key`` (``vrag`` or ``vimrag``). Raises :class:`ExampleError`."""
    folder = (root or examples_dir()) / key
    try:
        data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        summary = RunSummary(**{k: v for k, v in data.items() if k in RunSummary.__dataclass_fields__})
    except (OSError, ValueError, TypeError) as exc:
        raise ExampleError(f"the example run {key!r} is missing or unreadable ({exc})") from exc
    about = data.get("example") if isinstance(data.get("example"), dict) else {}
    return ExampleRun(key, folder, summary, str(about.get("title") or key), str(about.get("note") or ""))


def list_examples(root: Path | None = None) -> list[ExampleRun]:
    """The examples this install has, in :data:`KEYS` order (an unreadable one is left out)."""
    found = []
    for key in KEYS:
        try:
            found.append(load_example(key, root))
        except ExampleError:
            continue
    return found


def example_events(example: ExampleRun) -> list[AgentEvent]:
    """The recorded events, their paths resolved against the example's folder."""
    path = example.folder / "events.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ExampleError(f"the example run {example.key!r} has no events ({exc})") from exc
    folder = example.folder.resolve()
    events = []
    for line in lines:
        if line.strip():
            events.append(event_from_dict(resolve_paths(json.loads(line), folder)))
    return events


def map_paths(data: Any, change: Callable[[str], str]) -> Any:
    """``data`` (an event's JSON form) with ``change`` applied to every non-empty path field."""
    if isinstance(data, dict):
        return {
            k: change(v) if k in PATH_KEYS and isinstance(v, str) and v else map_paths(v, change)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [map_paths(v, change) for v in data]
    return data


def resolve_paths(data: Any, folder: Path) -> Any:
    """Relative paths made absolute against ``folder``; anything else (a URL) left as it is."""

    def absolute(value: str) -> str:
        if "://" in value or os.path.isabs(value):
            return value
        return os.path.normpath(folder / value)

    return map_paths(data, absolute)


__all__ = [
    "KEYS",
    "LABEL",
    "PATH_KEYS",
    "ExampleError",
    "ExampleRun",
    "example_events",
    "examples_dir",
    "list_examples",
    "load_example",
    "map_paths",
    "resolve_paths",
]

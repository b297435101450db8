"""Reading training runs while they grow: the run list, new metrics rows and log lines, samples.

Why in the core: the app's Training dock and the command line read runs the same way, and none of
it needs a widget. Everything here touches the disk (a run list, a 10,000-line metrics file, a
growing log, sample runs), so the app calls it off the GUI thread (``tasks.run_call``). A reader
polls :func:`poll` about once a second with the offsets it got last time, so each poll reads only
what was appended.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.launch import find_running
from vrag_desktop.core.training.rundir import TrainRun, sample_step
from vrag_desktop.core.training.validation import BestChoice, best_choice

LOG_START_BYTES = 256 * 1024  # a reopened run shows the end of its log, not megabytes of it


@dataclass
class RunRow:
    """One line of the run list."""

    root: Path
    name: str
    status: str
    step: int
    reward: float | None
    started: float | None
    pid: int | None = None
    algorithm: str = ""
    error: str = ""


@dataclass
class Poll:
    """What one poll of a run found: new metrics rows and log lines, its state, its process."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    metrics_offset: int = 0
    metrics_reset: bool = False  # the file shrank (a resume truncated it): plot from scratch
    lines: list[str] = field(default_factory=list)
    log_offset: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    checkpoint: int | None = None
    exported: bool = False  # <run>/export exists (Serve… checks it is a model)
    val_rows: list[dict[str, Any]] = field(default_factory=list)  # new validation rows
    val_offset: int = 0
    val_reset: bool = False  # the validation file shrank (a resume truncated it)
    best: BestChoice | None = None  # what "Export best" writes (best checkpoint, warm start, nothing)


#: Any of these makes a directory a run (``launch-config.json``: launched, but the trainer died
#: before creating the run; it is listed so its reason and log can be seen).
RUN_FILES = ("config.json", "state.json", "process.json", "launch-config.json")


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / n).exists() for n in RUN_FILES)


def _last_row(path: Path, window: int = 16384) -> dict[str, Any]:
    """The metrics file's last whole row, reading only its end (a long run has megabytes)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(0, size - window))
            data = fh.read()
    except OSError:
        return {}
    for raw in reversed(data.splitlines()):
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if isinstance(row, dict):
            return row
    return {}


def hand_started_pid(state: Mapping[str, Any]) -> int | None:
    """The pid a trainer started by hand (``python -m vrag_trainer``: no process record) wrote into
    the run's state, if that process is alive and still a trainer (a reused pid is not)."""
    import psutil

    pid = state.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        alive = proc.status() != psutil.STATUS_ZOMBIE
        command = " ".join(proc.cmdline())
    except psutil.Error:
        return None
    return pid if alive and "vrag_trainer" in command else None


def effective_status(state: Mapping[str, Any], alive: bool) -> str:
    """The recorded status, corrected by whether a trainer is alive: ``crashed`` when the state says
    running (or stopping) but no trainer is (``kill -9``, a crash, the machine went down);
    ``running`` when one is alive but has not written its state yet (loading)."""
    status = str(state.get("status", "?"))
    if not alive and status in ("running", "stopping"):
        return "crashed"
    if alive and status not in ("running", "stopping"):
        return "running"
    return status


def status_line(run: TrainRun, state: Mapping[str, Any], alive: bool) -> str:
    """The run's status for a person: ``finished at step 6``, ``running at step 3``, or
    ``crashed at step 3 (resumable from step 2)``, its last complete checkpoint."""
    status, step = effective_status(state, alive), state.get("step") or 0
    if status == "crashed":
        ckpt = run.last_checkpoint()
        where = f"step {ckpt.step}" if ckpt else "the start: no complete checkpoint"
        return f"crashed at step {step} (resumable from {where})"
    return f"{status} at step {step}"


def run_row(root: Path) -> RunRow:
    run = TrainRun(root)
    state = run.state()
    rec = find_running(run)
    algorithm = ""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        algorithm = str(json.loads(run.config_path.read_text(encoding="utf-8")).get("algorithm", ""))
    last = _last_row(run.metrics_path)
    reward = last.get("reward")
    status = effective_status({"status": "created", **state}, rec is not None)
    if rec is None and not run.state_path.exists():
        status = "not started"  # the trainer ended before creating the run (see its log)
    started = state.get("created_at")
    if not isinstance(started, (int, float)):
        try:
            started = root.stat().st_mtime
        except OSError:
            started = None
    return RunRow(
        root=root,
        name=root.name,
        status=status,
        step=int(state.get("step") or last.get("step") or 0),
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        started=float(started) if started is not None else None,
        pid=rec.pid if rec is not None else None,
        algorithm=algorithm,
        error=str(state.get("error") or ""),
    )


def scan_runs(training_root: Path, extra: tuple[Path, ...] = ()) -> list[RunRow]:
    """Every run under ``training_root`` (and the ``extra`` ones launched elsewhere), newest first."""
    roots: dict[Path, None] = {}
    if training_root.is_dir():
        for child in training_root.iterdir():
            if is_run_dir(child):
                roots[child] = None
    for p in extra:
        if is_run_dir(p):
            roots[p] = None
    rows = [run_row(r) for r in roots]
    return sorted(rows, key=lambda r: r.started or 0.0, reverse=True)


def read_lines(path: Path, offset: int) -> tuple[list[str], int]:
    """Whole lines written after byte ``offset`` and where the next read starts (a line still being
    written waits for the next poll)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    text = data[:end].decode("utf-8", "replace")
    return [ln for ln in text.replace("\r", "\n").split("\n") if ln.strip()], offset + end


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def poll(root: Path, metrics_offset: int, log_offset: int | None, val_offset: int = 0) -> Poll:
    """Read what a run appended since the offsets (``log_offset`` None: start near the log's end)."""
    run = TrainRun(root)
    out = Poll(metrics_offset=metrics_offset)
    if _size(run.metrics_path) < metrics_offset:
        out.metrics_reset, metrics_offset = True, 0
    out.rows, out.metrics_offset = run.read_metrics(metrics_offset)
    if _size(run.val_metrics_path) < val_offset:
        out.val_reset, val_offset = True, 0
    out.val_rows, out.val_offset = run.read_val_metrics(val_offset)
    out.best = best_choice(run)
    try:
        log_size = run.log_path.stat().st_size
    except OSError:
        log_size = 0
    if log_offset is None:
        log_offset = max(0, log_size - LOG_START_BYTES)
    elif log_size < log_offset:  # rotated or rewritten
        log_offset = 0
    out.lines, out.log_offset = read_lines(run.log_path, log_offset)
    out.state = run.state()
    rec = find_running(run)
    out.pid = rec.pid if rec is not None else None
    ckpt = run.last_checkpoint()
    out.checkpoint = ckpt.step if ckpt is not None else None
    out.exported = run.export_dir.exists()
    return out


@dataclass
class SampleRow:
    """One sample trajectory the trainer saved (an app run under ``<run>/samples``)."""

    run_id: str
    step: int
    reward: float | None
    correct: bool | None
    agent: str
    question: str
    masked: int = 0


def list_samples(samples_root: Path) -> list[SampleRow]:
    """The run's sample trajectories, latest step first. Orphans are left out: a sample whose step
    never finished (a crash, or the step running now) has no reward, no masks and no step to show
    it under (:func:`~vrag_desktop.core.training.rundir.sample_step`)."""
    from vrag_desktop.core.run.store import RunStore

    if not samples_root.is_dir():
        return []
    out: list[SampleRow] = []
    for s in RunStore(samples_root).list():
        step = sample_step(s.settings)
        if step is None:
            continue
        t = s.settings["training"]
        correct = t.get("correct")
        reward = t.get("reward")
        segments: list[Any] = t["segments"] if isinstance(t.get("segments"), list) else []
        out.append(
            SampleRow(
                run_id=s.id,
                step=step,
                reward=float(reward) if isinstance(reward, (int, float)) else None,
                correct=correct if isinstance(correct, bool) else None,
                agent=s.agent,
                question=s.question,
                masked=sum(1 for g in segments if isinstance(g, dict) and g.get("masked")),
            )
        )
    return sorted(out, key=lambda r: (r.step, r.run_id), reverse=True)


def remove_run(root: Path) -> None:
    """Delete a run directory (the caller made sure nothing works on it and the person agreed)."""
    import shutil

    if find_running(TrainRun(root)) is not None:
        raise RuntimeError(f"a trainer is still working on {root}; stop it first")
    shutil.rmtree(root)
    if root.exists():
        raise OSError(f"could not delete {root}")

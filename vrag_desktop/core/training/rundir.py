"""A training run is a directory; this module is the one place that knows its layout.

The trainer process writes it, the CLI and the app's panel read it while it grows, so everything
the reader needs is a file with a stable name::

    <run>/config.json      the validated config (resume compares against it)
    <run>/state.json       status, step, pid, last checkpoint, last error (atomic rewrites)
    <run>/metrics.jsonl    one JSON object per optimiser step (appended, flushed each step)
    <run>/val_metrics.jsonl   one JSON object per validation (``val/...`` metrics at a step)
    <run>/validation.json  which items are validated on (a held-out split or a file), as said
    <run>/best.json        the step and checkpoint of the best validation reward so far
    <run>/train.log        the trainer's log
    <run>/samples/         sample trajectories as the app's run files (a RunStore root)
    <run>/checkpoints/checkpoint-<step>/   Hugging Face Trainer checkpoints; COMPLETE marks a whole one
    <run>/tensorboard/     TensorBoard event files
    <run>/export/          the final model as a Hugging Face directory vLLM can serve
    <run>/STOP             written by whoever wants a clean stop at the next step boundary

A checkpoint counts only once its ``COMPLETE`` marker is written, after every file of it: a disk
that fills up or a kill mid-save leaves the previous checkpoint as the one to resume from. A resume
redoes the steps after that checkpoint, so it first drops what they left: their metrics and
validation rows and their samples (:meth:`TrainRun.remove_samples_after`), and the trainer's TensorBoard writer purges
their events; no step is ever shown twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_json
from vrag_desktop.core.training.config import TrainConfig

__all__ = ["STATUSES", "Best", "Checkpoint", "TrainRun", "TrainRunError", "sample_step"]

#: ``created`` → ``running`` → ``stopping`` → ``stopped`` | ``finished`` | ``failed``.
STATUSES = ("created", "running", "stopping", "stopped", "finished", "failed")
COMPLETE = "COMPLETE"
#: What the app's launcher puts in a run directory before the trainer creates the run in it: the
#: captured log, the process record (and its lock), the effective config (file plus ``--set``).
LAUNCHER_FILES = frozenset({"train.log", "process.json", ".process.json.lock", "launch-config.json"})
_CKPT = re.compile(r"^checkpoint-(\d+)$")
_SAMPLE_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")  # a RunStore run id


def sample_step(settings: Any) -> int | None:
    """The optimiser step a saved sample (its ``run.json`` settings) belongs to: the step the
    trainer recorded once the step's rollouts were scored. None for an orphan: a sample whose step
    was cut short (recorded, never scored; ``training_step`` alone) or that names no step at all."""
    t = settings.get("training") if isinstance(settings, Mapping) else None
    step = t.get("step") if isinstance(t, Mapping) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 1 else None


def _sample_dir_step(path: Path) -> int | None:
    try:
        data = json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return sample_step(data.get("settings")) if isinstance(data, dict) else None


class TrainRunError(RuntimeError):
    """The directory is not a usable training run (the message says why)."""


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path


@dataclass(frozen=True)
class Best:
    """The best validation result so far (``best.json``): its step, ``metric`` and ``value``, and
    its checkpoint, which rotation never deletes (None if it is gone: deleted by hand)."""

    step: int
    metric: str
    value: float
    checkpoint: Checkpoint | None


def _append_jsonl(path: Path, row: Mapping[str, Any]) -> None:
    line = json.dumps(dict(row), ensure_ascii=False, allow_nan=True, default=float) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _read_jsonl(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    rows: list[dict[str, Any]] = []
    for raw in data[:end].splitlines():
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows, offset + end


class TrainRun:
    """One run directory. :meth:`create` starts a new one, :meth:`open` an existing one."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self.config_path = self.root / "config.json"
        self.state_path = self.root / "state.json"
        self.metrics_path = self.root / "metrics.jsonl"
        self.val_metrics_path = self.root / "val_metrics.jsonl"
        self.validation_path = self.root / "validation.json"
        self.best_path = self.root / "best.json"
        self.log_path = self.root / "train.log"
        self.samples = self.root / "samples"
        self.checkpoints = self.root / "checkpoints"
        self.tensorboard = self.root / "tensorboard"
        self.export_dir = self.root / "export"
        self.stop_path = self.root / "STOP"

    def __repr__(self) -> str:
        return f"TrainRun({str(self.root)!r})"

    # ---- life ---------------------------------------------------------------------------------
    @classmethod
    def create(cls, root: str | os.PathLike[str], config: TrainConfig) -> TrainRun:
        """A new run in ``root``, which must not hold a run already (refused: resume it instead)."""
        run = cls(root)
        cls.check_free(root)
        run.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run.config_path, config.to_dict())
        run.write_state(status="created", step=0, created_at=time.time())
        return run

    @classmethod
    def check_free(cls, root: str | os.PathLike[str]) -> None:
        """Raise :class:`TrainRunError` if :meth:`create` would refuse ``root`` (checked before launching)."""
        run = cls(root)
        if run.config_path.exists():
            raise TrainRunError(
                f"{run.root} already holds a training run; resume it or choose another directory"
            )
        if run.root.exists() and any(p.name not in LAUNCHER_FILES for p in run.root.iterdir()):
            raise TrainRunError(f"{run.root} is not empty; choose a new directory for the run")

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> TrainRun:
        run = cls(root)
        if not run.config_path.is_file():
            raise TrainRunError(f"{run.root} is not a training run (no config.json)")
        return run

    def config(self) -> TrainConfig:
        try:
            data = json.loads(self.config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TrainRunError(f"cannot read {self.config_path}: {exc}") from exc
        return TrainConfig.from_mapping(data)

    def replace_config(self, config: TrainConfig) -> None:
        """Record a resumed run's config (only resume-safe fields may differ: checked by the caller)."""
        atomic_write_json(self.config_path, config.to_dict())

    # ---- state --------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"status": "created", "step": 0}
        except (OSError, ValueError):  # a reader racing nothing: the file is replaced atomically
            return {"status": "unknown", "step": 0}
        return data if isinstance(data, dict) else {"status": "unknown", "step": 0}

    def write_state(self, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into the state and write it atomically."""
        state = self.state()
        if "status" in changes and changes["status"] not in STATUSES:
            raise ValueError(f"unknown run status {changes['status']!r}")
        state.update(changes, updated_at=time.time())
        atomic_write_json(self.state_path, state, mkdir=True)
        return state

    # ---- clean stop ---------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the trainer to stop at the next step boundary (it also stops on SIGTERM)."""
        self.stop_path.write_text(str(time.time()), encoding="utf-8")

    def stop_requested(self) -> bool:
        return self.stop_path.exists()

    def clear_stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.stop_path.unlink()

    # ---- metrics ------------------------------------------------------------------------------
    def append_metrics(self, row: Mapping[str, Any]) -> None:
        """One step's metrics, flushed and synced so a reader (or a crash) sees whole lines."""
        _append_jsonl(self.metrics_path, row)

    def read_metrics(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Rows appended since byte ``offset`` and the offset to continue from. A last line still
        being written is left for the next call; a damaged line is skipped."""
        return _read_jsonl(self.metrics_path, offset)

    def metrics(self) -> list[dict[str, Any]]:
        return self.read_metrics(0)[0]

    def append_val_metrics(self, row: Mapping[str, Any]) -> None:
        """One validation's metrics (``step`` and ``val/...``), written as :meth:`append_metrics`."""
        _append_jsonl(self.val_metrics_path, row)

    def read_val_metrics(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        return _read_jsonl(self.val_metrics_path, offset)

    def val_metrics(self) -> list[dict[str, Any]]:
        return self.read_val_metrics(0)[0]

    def truncate_metrics(self, after_step: int) -> None:
        """Drop rows past ``after_step``, of the step and validation metrics both (a resume from an
        earlier checkpoint redoes those steps)."""
        from vrag_desktop.core.fsutil import atomic_write_text

        for path in (self.metrics_path, self.val_metrics_path):
            if path == self.val_metrics_path and not path.exists():  # a run without validation
                continue
            rows = [r for r in _read_jsonl(path, 0)[0] if int(r.get("step", 0)) <= after_step]
            atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))

    # ---- the best validation --------------------------------------------------------------------
    def best(self) -> Best | None:
        """The best validation so far (None: no validation has run, or ``best.json`` is unreadable)."""
        try:
            data = json.loads(self.best_path.read_text(encoding="utf-8"))
            step, value = int(data["step"]), float(data["value"])
            metric = str(data.get("metric", "val/reward"))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        ckpt = next((c for c in self.complete_checkpoints() if c.step == step), None)
        return Best(step, metric, value, ckpt)

    def write_best(self, step: int, metric: str, value: float) -> None:
        """Record step ``step`` (its checkpoint complete) as the best by ``metric``."""
        atomic_write_json(
            self.best_path,
            {
                "step": step,
                "metric": metric,
                "value": value,
                "checkpoint": str(self.checkpoint_dir(step).relative_to(self.root)),
                "time": time.time(),
            },
        )

    # ---- samples ------------------------------------------------------------------------------
    def remove_samples_after(self, step: int) -> int:
        """Delete the samples of the steps after ``step`` and the orphans (see :func:`sample_step`):
        a resume from checkpoint ``step`` redoes those steps and saves their samples again. Returns
        how many were deleted."""
        if not self.samples.is_dir():
            return 0
        removed = 0
        for child in self.samples.iterdir():
            if not (_SAMPLE_ID.match(child.name) and child.is_dir()):
                continue
            got = _sample_dir_step(child)
            if got is None or got > step:
                shutil.rmtree(child, ignore_errors=True)
                removed += 1
        return removed

    # ---- checkpoints --------------------------------------------------------------------------
    def checkpoint_dir(self, step: int) -> Path:
        return self.checkpoints / f"checkpoint-{step}"

    def mark_complete(self, path: Path, step: int) -> None:
        atomic_write_json(path / COMPLETE, {"step": step, "time": time.time()})

    def complete_checkpoints(self) -> list[Checkpoint]:
        """Whole checkpoints, oldest first (a half-written one has no COMPLETE marker)."""
        out: list[Checkpoint] = []
        if not self.checkpoints.is_dir():
            return out
        for child in self.checkpoints.iterdir():
            m = _CKPT.match(child.name)
            if m and (child / COMPLETE).is_file():
                out.append(Checkpoint(int(m.group(1)), child))
        return sorted(out, key=lambda c: c.step)

    def last_checkpoint(self) -> Checkpoint | None:
        done = self.complete_checkpoints()
        return done[-1] if done else None

    def remove_incomplete_checkpoints(self) -> list[Path]:
        """Delete checkpoint folders without a COMPLETE marker (left by a crash or a full disk)."""
        removed: list[Path] = []
        if not self.checkpoints.is_dir():
            return removed
        for child in self.checkpoints.iterdir():
            if _CKPT.match(child.name) and not (child / COMPLETE).is_file():
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
        return removed

    def prune_checkpoints(self, keep: int) -> None:
        """Keep the last ``keep`` complete checkpoints, and the best validation's whatever its age."""
        best = self.best()
        for ckpt in self.complete_checkpoints()[:-keep] if keep > 0 else []:
            if best is None or ckpt.step != best.step:
                shutil.rmtree(ckpt.path, ignore_errors=True)

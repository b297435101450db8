"""Several trainer processes (``accelerate launch --num_processes N``: DDP, NCCL on GPUs, gloo on
the CPU): what each of them may write, how they agree, and how their gradients meet.

Why not plain DDP: a step's rows are our agents' rollouts, so each process has its own number of
them (GGPO: one row per graph node) and so its own number of micro-batches. DDP all-reduces on
every synced backward and TRL's loss gathers its metrics on every micro-batch; both hang (or mix
up shapes) when the processes do not call them the same number of times with the same sizes. So:

* every process pads its rows to the largest count with zero-weight copies (no loss, no gradient),
  so all run the same micro-batches with the same row counts (TRL's gathers line up);
* the forward and backward passes run on the unwrapped model (no DDP hook fires), and the
  gradients are averaged across processes once, after the last micro-batch, before the
  optimiser step (as DDP would: each process's loss is its own mean);
* the stop decision (``STOP`` file, SIGTERM) is agreed at each step end (any process asking stops
  all, at the same step), so none is left waiting in a collective;
* only rank 0 writes the run directory's shared files (state, metrics, checkpoint marker,
  removals); the others join the run rank 0 created.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

__all__ = [
    "RankRun",
    "agree_to_stop",
    "average_gradients",
    "check_processes",
    "create_run",
    "finish",
    "is_main",
    "open_run",
    "pad_rows",
    "rank",
    "world_size",
]

JOIN_TIMEOUT_S = 600.0  # rank 0 may download the model first
BUCKET = 32 * 1024 * 1024  # gradient elements per all-reduce (128 MiB in fp32)


def rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def is_main() -> bool:
    return rank() == 0


def check_processes(cfg: TrainConfig) -> None:
    """``gpus: N > 1`` runs as N processes: a trainer started as one process (``python -m
    vrag_trainer`` by hand) would silently train on one; refuse, naming the command that works."""
    n = world_size()
    if cfg.gpus > 1 and n != cfg.gpus:
        raise ConfigError(
            "gpus",
            f"the config asks for {cfg.gpus} processes but this trainer runs as {n}; start it with "
            f"'vrag-desktop train {cfg.algorithm}' (or accelerate launch --num_processes {cfg.gpus} "
            "-m vrag_trainer …)",
        )


class RankRun(TrainRun):
    """A run directory as one of several processes sees it: rank 0 writes the shared files, the
    others read them (their writes are dropped); the state says how many processes run."""

    def write_state(self, **changes: Any) -> dict[str, Any]:
        if not is_main():
            return self.state()
        if world_size() > 1:
            changes.setdefault("processes", world_size())
        return super().write_state(**changes)

    def replace_config(self, config: TrainConfig) -> None:
        if is_main():
            super().replace_config(config)

    def append_metrics(self, row: Any) -> None:
        if is_main():
            super().append_metrics(row)

    def truncate_metrics(self, after_step: int) -> None:
        if is_main():
            super().truncate_metrics(after_step)

    def mark_complete(self, path: Path, step: int) -> None:
        if is_main():
            super().mark_complete(path, step)

    def remove_samples_after(self, step: int) -> int:
        return super().remove_samples_after(step) if is_main() else 0

    def remove_incomplete_checkpoints(self) -> list[Path]:
        return super().remove_incomplete_checkpoints() if is_main() else []

    def prune_checkpoints(self, keep: int) -> None:
        if is_main():
            super().prune_checkpoints(keep)

    def clear_stop(self) -> None:
        if is_main():
            super().clear_stop()


def create_run(root: str | os.PathLike[str], cfg: TrainConfig) -> RankRun:
    """Rank 0 creates the run (refusing a used folder); the others wait for it, then join."""
    if is_main():
        TrainRun.create(root, cfg)
        return RankRun(root)
    return _join(root)


def open_run(root: str | os.PathLike[str]) -> RankRun:
    TrainRun.open(root)
    return RankRun(root)


def _join(root: str | os.PathLike[str]) -> RankRun:
    run = RankRun(root)
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while not run.config_path.is_file():
        if time.monotonic() > deadline:
            raise TrainRunError(f"rank {rank()}: rank 0 did not create the run in {run.root}")
        time.sleep(0.2)
    return run


# ---- inside a step --------------------------------------------------------------------------------
def _group_ready() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def agree_to_stop(stop: bool, device: Any) -> bool:
    """True on every process when any of them was asked to stop (one all-reduce per step)."""
    if not _group_ready():
        return stop
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1.0 if stop else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)


def pad_rows(rows: list[Any], device: Any) -> list[Any]:
    """``rows`` followed by zero-weight copies of its last row, up to the largest count of any
    process (unchanged with one process). A process with no row at all cannot pad: it fails the
    step (the others stop, the run resumes from its last checkpoint) rather than hang."""
    if not _group_ready():
        return rows
    import torch
    import torch.distributed as dist

    n = torch.tensor([float(len(rows))], device=device)
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    most = int(n.item())
    if len(rows) == most:
        return rows
    if not rows:
        raise RuntimeError(f"rank {rank()}: no rollout of this step produced a training row")
    filler = dataclasses.replace(rows[-1], weight=0, reason="padding (another process has more rows)")
    return [*rows, *([filler] * (most - len(rows)))]


def average_gradients(model: Any) -> None:
    """Average every parameter's gradient across the processes (one flat all-reduce per dtype),
    so each applies the same update and the weights stay identical."""
    if not _group_ready():
        return
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:  # unused on this process this step: it still takes part, with zeros
            p.grad = torch.zeros_like(p)
    buckets: list[list[Any]] = []
    size = 0
    for p in params:  # buckets of one dtype and device, ~BUCKET elements (not a copy of every gradient)
        g = p.grad
        if (
            not buckets
            or size + g.numel() > BUCKET
            or (buckets[-1][0].dtype, buckets[-1][0].device)
            != (
                g.dtype,
                g.device,
            )
        ):
            buckets.append([])
            size = 0
        buckets[-1].append(g)
        size += g.numel()
    for grads in buckets:
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()


def finish() -> None:
    """Every process reaches the end before any leaves (the launcher counts an early exit as a
    failure), then the process group is closed."""
    if not _group_ready():
        return
    import torch.distributed as dist

    try:
        dist.barrier()
    finally:
        dist.destroy_process_group()

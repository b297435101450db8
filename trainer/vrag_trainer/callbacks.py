"""The bridge from TRL's training loop to the run directory: metrics every step, checkpoints marked
complete (with the processor beside the weights), state kept current, clean stops at step ends,
a run that keeps producing non-finite losses stopped before it wrecks the weights, and TensorBoard
events that a resume does not duplicate."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.integrations import TensorBoardCallback

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

__all__ = ["METRIC_NAMES", "PurgingTensorBoard", "RunCallback"]

#: TRL's log keys → the run's metric names (the rest keep theirs).
METRIC_NAMES = {
    "clip_ratio/region_mean": "clip_fraction",
    "train_loss": "loss_mean",
}
NAN_LIMIT = 3


class RunCallback(TrainerCallback):  # type: ignore[misc]
    class NaNLoss(RuntimeError):
        """The loss was not finite for several steps in a row."""

    def __init__(
        self, run: TrainRun, cfg: TrainConfig, processor: Any, stop_flag: Callable[[], bool]
    ) -> None:
        self.run = run
        self.cfg = cfg
        self.processor = processor
        self.stop_flag = stop_flag
        self.nan_streak = 0
        self.t_last = time.time()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        from vrag_trainer.distributed import agree_to_stop

        # several processes stop at the same step, or one would wait for the others forever
        stop = agree_to_stop(self.stop_flag() or self.run.stop_requested(), args.device)
        if stop or (state.max_steps and state.global_step >= state.max_steps):
            control.should_save = True
        if stop:
            control.should_training_stop = True
            self.run.write_state(status="stopping", step=state.global_step)
        return control

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> Any:
        if not state.is_world_process_zero or not logs or ("loss" not in logs and "reward" not in logs):
            return control
        now = time.time()
        row: dict[str, Any] = {"step": int(state.global_step), "time": now, "epoch": logs.get("epoch")}
        for key, value in logs.items():
            if isinstance(value, (int, float)) and key != "epoch":
                row[METRIC_NAMES.get(key, key)] = float(value)
        row["step_seconds"] = now - self.t_last
        self.t_last = now
        loss = row.get("loss")
        if (loss is not None and not math.isfinite(loss)) or row.get("nan_skipped"):
            self.nan_streak += 1
        else:
            self.nan_streak = 0
        self.run.append_metrics(row)
        self.run.write_state(step=int(state.global_step))
        if self.nan_streak >= NAN_LIMIT:
            raise RunCallback.NaNLoss(
                f"the loss was not finite for {NAN_LIMIT} steps in a row (step {state.global_step}); "
                "the run stopped with its last complete checkpoint intact. Lower the learning rate or "
                "check the data, then resume"
            )
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        if not state.is_world_process_zero:
            return control
        path = self.run.checkpoint_dir(int(state.global_step))
        if path.is_dir():
            from vrag_trainer.runner import save_processor

            save_processor(self.processor, path)
            self.run.mark_complete(path, int(state.global_step))
            self.run.write_state(last_checkpoint=int(state.global_step))
        return control


class PurgingTensorBoard(TensorBoardCallback):  # type: ignore[misc]
    """HF's TensorBoard callback, writing to ``log_dir`` with ``purge_step``: a resume from
    checkpoint k logs step k+1 again, which the killed run may have logged already. The writer's
    first event then tells TensorBoard to drop every earlier event of step k+1 or later, so no step
    shows twice. ``purge_step`` None (a new run): an ordinary writer."""

    def __init__(self, log_dir: Path, purge_step: int | None) -> None:
        super().__init__()
        self.logging_dir = str(log_dir)
        self.purge_step = purge_step

    def _init_summary_writer(self, args: Any, *_: Any, **__: Any) -> None:
        self.tb_writer = self._SummaryWriter(log_dir=self.logging_dir, purge_step=self.purge_step)

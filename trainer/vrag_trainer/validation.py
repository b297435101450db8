"""The validation curve: every ``validation.eval_steps`` optimiser steps (and at the last step) the
current policy answers the held-out items, scored by the same code as training and evaluation.

What is the same, not copied: each item is one rollout of the app's own agent
(:func:`~vrag_trainer.rollout.run_rollout`: format, judge, NDCG and the composite reward of
``core/eval``), and the rollouts are summarised by the evaluation's own
:func:`~vrag_desktop.core.eval.answers_eval.summarize_answers` (accuracy, reward, format, NDCG,
judge failures, errors) plus ``core/eval``'s :func:`~vrag_desktop.core.eval.metrics.recall_at_k`
over the pages the agent was shown. The metric names are the evaluation's, under ``val/``.

Decoding is greedy (temperature 0): one answer per item, the policy's most likely one, so the
curve moves with the policy and not with sampling noise. TRL's own vLLM (``generator: vllm`` in
``colocate``/``server`` mode) samples at the run's temperature: its sampling parameters are fixed
when it is built. With several processes the first validates while the others wait.

The best validation reward marks its step, by core's rule
(:func:`~vrag_desktop.core.training.validation.is_new_best`: above every earlier one, above the
warm start's step 0, above 0; a run where none is has no best, and ``export --best`` falls back to
the warm start's weights): a checkpoint is saved there if the step would not have saved one, and
``best.json`` names it once the checkpoint is complete (``train export RUN --best``). With
validation on, ``save_total_limit`` is kept by the run, not by Hugging Face's rotation: after each
save the last ``save_total_limit`` complete checkpoints stay, and the best one whatever its age
(HF's own rotation would delete the *last* checkpoint at the end of a run whose limit is 1 and
whose best is older).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import statistics
import time
from typing import Any

from transformers import TrainerCallback

from vrag_desktop.core.eval.answers_eval import summarize_answers
from vrag_desktop.core.eval.metrics import first_seen, recall_at_k
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.validation import (
    BEST_METRIC,
    ValidationSplit,
    best_words,
    is_new_best,
    split_record,
    start_value,
)
from vrag_trainer.generation import ROLLOUT_ORDER
from vrag_trainer.rollout import Rollout, run_rollout

__all__ = ["ValidationCallback", "summarize", "validation_row"]

log = logging.getLogger("vrag_trainer")


def validation_row(r: Rollout, query_type: str = "") -> dict[str, Any]:
    """One rollout as the evaluation's answer row (:func:`summarize_answers` reads it). The judge is
    not asked when the format check fails (the reward's gate); that answer counts as wrong (0),
    as it does in the reward, rather than as a judge failure."""
    generated = sum(s.generated_tokens for s in r.segments)
    judge = None if r.parts.judge_failed else float(bool(r.parts.judge))
    shown = first_seen(r.retrieved)
    return {
        "uid": r.uid,
        "query_type": query_type,
        "answer": r.answer,
        "judge": judge,
        "format": r.parts.format,
        "ndcg": r.parts.ndcg if r.golden else None,
        "reward": r.reward,
        "recall": recall_at_k(shown, r.golden, max(1, len(shown))) if r.golden else None,
        "steps": r.turns,
        "seconds": r.seconds,
        "prompt_tokens": sum(len(s.input_ids) for s in r.segments) - generated,
        "completion_tokens": generated,
        "error": r.error,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The ``val/`` metrics of a validation: the evaluation's summary of ``rows`` (its names) and
    the recall of the evidence pages the agent was shown."""
    s = summarize_answers(rows)
    out = {
        f"val/{k}": float(s[k])
        for k in ("reward", "accuracy", "format", "ndcg", "judge_failures", "errors", "items")
        if s.get(k) is not None
    }
    recall = [r["recall"] for r in rows if r["recall"] is not None]
    if recall:
        out["val/recall"] = statistics.fmean(recall)
    return out


class ValidationCallback(TrainerCallback):  # type: ignore[misc]
    """Runs the validation at step ends (see the module); ``trainer`` is the
    :class:`~vrag_trainer.trl_trainer.AgentGRPOTrainer` it validates."""

    def __init__(self, trainer: Any, run: TrainRun, cfg: TrainConfig, split: ValidationSplit) -> None:
        self.trainer = trainer
        self.run = run
        self.cfg = cfg
        self.items = list(split.val.items)
        self.golden = [tuple(g) for g in split.val.golden]
        best = run.best()
        self.best_value = best.value if best is not None else None
        self.best_step = best.step if best is not None else None
        self._pending: tuple[int, float] | None = None  # a new best whose checkpoint is being saved
        if trainer.accelerator.is_main_process:
            self._record(split)

    def _record(self, split: ValidationSplit) -> None:
        """Keep which items are validated on; a resume whose split differs says so."""
        import json

        from vrag_desktop.core.fsutil import atomic_write_json

        record = split_record(split, self.cfg)
        try:
            before = json.loads(self.run.validation_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            before = None
        if isinstance(before, dict) and before.get("uids") != record["uids"]:
            log.warning(
                "warning: the validation items differ from this run's earlier ones (the dataset or "
                "the corpora changed): the curve before and after this resume is not comparable"
            )
        atomic_write_json(self.run.validation_path, record)

    def due(self, step: int, final: bool) -> bool:
        every = self.cfg.validation.eval_steps
        return bool(every) and step > 0 and (step % every == 0 or final)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        """A warm-started run (``init_from``) first validates the weights it starts from, as step 0:
        the warm-start value its curve is to rise above (not a best: it has no checkpoint here)."""
        first = self.cfg.init_from and int(state.global_step) == 0 and state.is_world_process_zero
        if first and not any(int(r.get("step", -1)) == 0 for r in self.run.val_metrics()):
            self.evaluate(0, baseline=True)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        from vrag_trainer.distributed import agree_to_stop

        step = int(state.global_step)
        final = bool(state.max_steps) and step >= state.max_steps
        if control.should_training_stop and not final:  # a stop request: the step ends unvalidated
            return control
        if not self.due(step, final):
            return control
        better, value = False, 0.0
        if state.is_world_process_zero:
            t0 = time.perf_counter()
            metrics = self.evaluate(step)
            self._slow_step(time.perf_counter() - t0)
            if metrics is not None:
                value = metrics[BEST_METRIC]
                better = self._better(value)
        # every process saves the same checkpoints: the first process's verdict, agreed
        if agree_to_stop(better, args.device):
            control.should_save = True  # a checkpoint at the best step, whatever save_steps says
            self._pending = (step, value)
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        """After the run's callback marked the checkpoint complete: record a new best, then keep
        ``save_total_limit`` checkpoints and the best."""
        pending, self._pending = self._pending, None
        if not state.is_world_process_zero:
            return control
        if pending is not None and pending[0] == int(state.global_step):
            step, value = pending
            if (self.run.checkpoint_dir(step) / "COMPLETE").is_file():
                self.best_step, self.best_value = step, value
                self.run.write_best(step, BEST_METRIC, value)
                log.info(
                    "validation: step %d is %s (%s %.4f); its checkpoint is kept",
                    step, best_words(value, start_value(self.run.val_metrics())), BEST_METRIC, value,
                )  # fmt: skip
            else:
                log.warning("validation: step %d was the best, but its checkpoint is not complete", step)
        self.run.prune_checkpoints(self.cfg.save_total_limit)
        return control

    # ---- one validation ------------------------------------------------------------------------
    def evaluate(self, step: int, *, baseline: bool = False) -> dict[str, float] | None:
        """Run and score every validation item once with the current policy; write the row. None
        when no rollout could reach the search server (nothing measured: no point, no best).
        ``baseline``: the starting weights' value (step 0), never marked the best."""
        trainer = self.trainer
        spec = dataclasses.replace(trainer.spec, temperature=0.0)  # greedy: one answer per item
        t0 = time.perf_counter()
        rollouts = trainer._loop.run_until_complete(self._rollouts(spec))
        gen = spec.generator
        failure = getattr(gen, "failure", None)
        if failure is not None:  # a rollout server that failed fails the run, as in training
            raise failure
        take = getattr(gen, "take_stats", None)
        if take is not None:
            take()  # the server's counters are the training steps'; validation's are not among them
        usable = [r for r in rollouts if r.usable]
        lost = len(rollouts) - len(usable)
        if not usable:
            log.warning("validation at step %d skipped: every rollout lost its search server", step)
            return None
        by_uid = {it.uid: it for it in self.items}
        rows = [validation_row(r, by_uid[r.uid].query_type if r.uid in by_uid else "") for r in usable]
        metrics = summarize(rows)
        metrics["val/search_failures"] = float(lost)
        metrics["val/seconds"] = time.perf_counter() - t0
        start = None if baseline else start_value(self.run.val_metrics())
        better = not baseline and self._better(metrics[BEST_METRIC])
        self.run.append_val_metrics({"step": step, "time": time.time(), **metrics, "best": better})
        self._tensorboard(metrics, step)
        log.info(
            "validation at step %d: reward %.4f, accuracy %.4f, recall %s on %d item(s) (%.1f s)%s",
            step,
            metrics[BEST_METRIC],
            metrics.get("val/accuracy", 0.0),
            f"{metrics['val/recall']:.4f}" if "val/recall" in metrics else "n/a",
            len(usable),
            metrics["val/seconds"],
            f" — {best_words(metrics[BEST_METRIC], start)}" if better else "",
        )
        return metrics

    def _better(self, value: float) -> bool:
        """Whether ``value`` is a new best: core's rule (above the previous best, the warm start's
        step 0 and 0), the one verdict for the row's ``best`` flag and for the checkpoint."""
        return is_new_best(value, self.best_value, start_value(self.run.val_metrics()))

    async def _rollouts(self, spec: Any) -> list[Rollout]:
        limit = asyncio.Semaphore(8)

        async def one(i: int) -> Rollout:
            ROLLOUT_ORDER.set((i,))  # the batch's order: the items', whatever the search timing
            async with limit:
                rollout, _ = await run_rollout(
                    spec, self.items[i], self.golden[i], i, judge=self.trainer.judge
                )
                return rollout

        return list(await asyncio.gather(*(one(i) for i in range(len(self.items)))))

    def _tensorboard(self, metrics: dict[str, float], step: int) -> None:
        """The ``val/`` scalars in the run's TensorBoard events (the writer a resume purges)."""
        for cb in self.trainer.callback_handler.callbacks:
            writer = getattr(cb, "tb_writer", None)
            if writer is not None:
                for key, value in metrics.items():
                    writer.add_scalar(key, value, step)
                writer.flush()

    def _slow_step(self, seconds: float) -> None:
        """The step's ``step_seconds`` stay the training's: the validation's time is not in them."""
        for cb in self.trainer.callback_handler.callbacks:
            if hasattr(cb, "t_last") and hasattr(cb, "nan_streak"):  # the RunCallback
                cb.t_last += seconds

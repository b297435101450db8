"""GRPO and GGPO on TRL's ``GRPOTrainer`` (pinned: trl 1.16.0).

What TRL does for us: the model, reference model and optimiser set-up under accelerate (DDP,
DeepSpeed, FSDP), the repeat sampler that forms groups, the clipped objective with the k3 KL
(``_compute_loss``), metrics, TensorBoard, checkpoints and resume. What this subclass replaces is
the one place TRL cannot serve multi-turn multimodal agents: where the batch is *made*.
``_prepare_inputs`` runs our agents' rollouts (:mod:`.rollout`), scores them with the core reward,
turns them into rows (:mod:`.ggpo`) and ``training_step`` feeds them to TRL's loss in micro-batches
(:mod:`.batch`), every retrieved image and crop included.

Loss normalisation, decided and documented (docs/trainer.md):

* GRPO: ``loss_type="bnpo"`` — the token mean over all loss tokens of the step (what the
  original's verl ``token-mean`` does), token-level ratio.
* GGPO: ``loss_type="grpo"`` with ``importance_sampling_level="sequence"`` — the clipped,
  sequence-level objective averaged per segment, then over *all* segments of the step (Σ n_g,
  masked ones included, contributing 0), as the GGPO description normalises.

Micro-batches are weighted so their sum is exactly the full-step loss (tokens for GRPO, rows for
GGPO). A non-finite loss skips the micro-batch's backward and is counted (``nan_skipped``).

Several updates per batch (``ppo_epochs`` → TRL's ``num_iterations``): TRL's sampler hands each
batch over ``ppo_epochs`` steps in a row; the first makes the rollouts and, before its update, the
policy's own log-probs (π_old), which the later steps reuse with the rows, so the ratio π/π_old
moves and the clip acts (with one update per batch it is 1 and the clip never does). The batch's
rollout metrics are logged again on each of its steps, with ``ppo_epoch`` (1 … ppo_epochs).

DAPO's options (off by default, :mod:`.sampling`): overlong shaping; dynamic sampling, which drops
groups of equal rewards and rolls out new prompts instead; a step left with no group is skipped.

The reference policy: TRL's ``ref_model`` for full fine-tuning; for LoRA (a PEFT model, no
``ref_model``) the same model with its adapter disabled. With vLLM rollouts, TRL's importance
sampling correction stays on and its ratio is supplied from vLLM's recorded log-probs
(:mod:`.offpolicy`), at the cost of one extra no-grad forward pass per micro-batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.training.config import TrainConfig
from vrag_trainer.batch import chunks, collate
from vrag_trainer.distributed import agree_to_stop, average_gradients, pad_rows
from vrag_trainer.generation import ROLLOUT_ORDER
from vrag_trainer.ggpo import Row, training_rows
from vrag_trainer.offpolicy import importance_ratio, ratio_metrics
from vrag_trainer.rollout import Rollout, RolloutSpec, run_rollout
from vrag_trainer.sampling import FILTERED, pick_prompts, shape_overlong, varied_groups

__all__ = ["AgentGRPOTrainer", "SearchDown", "grpo_args"]

log = logging.getLogger("vrag_trainer")


class SearchDown(RuntimeError):
    """Every rollout of a step lost its search server: nothing to learn from, stop cleanly."""


def grpo_args(
    cfg: TrainConfig,
    output_dir: str,
    *,
    world_size: int = 1,
    use_cpu: bool,
    bf16: bool,
    logging_dir: str | None,
) -> GRPOConfig:
    """TRL's config from ours: one generation per optimiser step, the whole group on one device."""
    prompts_per_device = max(1, math.ceil(cfg.prompts_per_step / max(1, world_size)))
    ggpo = cfg.algorithm == "ggpo"
    kwargs: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=cfg.group_size * prompts_per_device,
        num_generations=cfg.group_size,
        steps_per_generation=1,
        gradient_accumulation_steps=1,
        num_iterations=cfg.ppo_epochs,
        learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        max_grad_norm=cfg.grad_clip,
        beta=cfg.kl_coef,
        epsilon=cfg.clip_ratio,
        epsilon_high=cfg.clip_ratio_high or cfg.clip_ratio,  # clip-higher (DAPO); 0: symmetric
        loss_type="grpo" if ggpo else "bnpo",
        importance_sampling_level="sequence" if ggpo else "token",
        entropy_coef=cfg.entropy_coef,
        max_completion_length=cfg.max_model_len,
        temperature=cfg.temperature,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        # with validation on, the run keeps the limit itself, the best checkpoint included
        # (validation.py): HF's rotation would delete the last one at the end of the run
        save_total_limit=None if cfg.validation.eval_steps else cfg.save_total_limit,
        logging_steps=1,
        report_to=["tensorboard"] if cfg.tensorboard else "none",
        use_cpu=use_cpu,
        bf16=bf16,
        seed=cfg.seed,
        # TRL's configs default the deprecated name to True: the new one set too, or transformers warns
        # "`gradient_checkpointing` is deprecated" into every run's log
        gradient_checkpointing=cfg.gradient_checkpointing,
        activation_checkpointing=cfg.gradient_checkpointing,
        remove_unused_columns=False,
        shuffle_dataset=True,
        log_completions=False,
        disable_dropout=True,
        dataloader_num_workers=0,
    )
    if cfg.generator == "vllm" and cfg.vllm_mode != "app_server":
        # TRL builds its VLLMGeneration; our rollouts call it (generation.py). app_server: our own
        # HTTP client (vllm_http.py), TRL builds nothing.
        kwargs.update(
            use_vllm=True,
            vllm_mode=cfg.vllm_mode,
            vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            vllm_max_model_length=cfg.max_model_len,
            max_completion_length=cfg.max_response_length,
        )
    if logging_dir:
        kwargs["logging_dir"] = logging_dir
    try:
        return GRPOConfig(**kwargs)
    except TypeError:  # logging_dir dropped by newer transformers: TENSORBOARD_LOGGING_DIR is read instead
        kwargs.pop("logging_dir", None)
        return GRPOConfig(**kwargs)


@dataclass
class _Batch:
    """A batch of rows kept over its ``ppo_epochs`` updates: the rows (padded to the other
    processes'), the step's loss normalisers, and per micro-batch the log-probs taken before the
    first update (:meth:`AgentGRPOTrainer._frozen_logps`)."""

    rows: list[Row]
    tokens: int
    n_rows: int
    iteration: int = 0
    skipped: bool = False  # dynamic sampling found no group that differs: no update
    frozen: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)


def _unused_reward(*_a: Any, **_k: Any) -> list[float]:
    raise RuntimeError("rewards come from the rollouts, not from TRL's reward functions")


class AgentGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose batches are our agents' rollouts. ``items[i]`` / ``golden[i]`` are the
    dataset row ``i``; ``make_spec`` builds the rollout spec once the model is placed."""

    def __init__(
        self,
        *args: Any,
        run_config: TrainConfig,
        items: Sequence[DatasetItem],
        golden: Sequence[Sequence[str]],
        make_spec: Callable[[AgentGRPOTrainer], RolloutSpec],
        judge: Any,
        samples_dir: Any = None,
        on_step: Callable[[AgentGRPOTrainer, list[Rollout], list[Row]], None] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("reward_funcs", [_unused_reward])
        super().__init__(*args, **kwargs)
        self.run_config = run_config
        self.items = list(items)
        self.golden = [tuple(g) for g in golden]
        self.judge = judge
        self.samples_dir = samples_dir
        self.on_step = on_step
        self._spec: RolloutSpec | None = None
        self._make_spec = make_spec
        self._loop = asyncio.new_event_loop()
        self.last_rollouts: list[Rollout] = []
        self.nan_skipped = 0
        self._kept: _Batch | None = None  # the rollouts' rows while their updates last
        self._kept_metrics: dict[str, float] = {}
        self._sampling: dict[str, float] = {}  # the batch's dynamic-sampling counts
        self.search_client: Any = None  # the rollouts' shared searcher, closed by whoever built it
        if run_config.generator == "vllm" and run_config.vllm_mode == "app_server":
            # Rollouts come from the app's vLLM server (vllm_http.py), not from a TRL-built engine;
            # TRL's loss multiplies by the importance-sampling ratio only under this flag.
            self.use_vllm = True

    # ---- rollouts ------------------------------------------------------------------------------
    @property
    def spec(self) -> RolloutSpec:
        if self._spec is None:
            self._spec = self._make_spec(self)
        return self._spec

    async def _rollouts(self, rows: list[dict[str, Any]], round_no: int = 0) -> list[tuple[Rollout, Any]]:
        limit = asyncio.Semaphore(8)
        main = self.accelerator.is_main_process and round_no == 0
        sample_left = self.run_config.samples_per_step if main else 0
        jobs = []
        for n, row in enumerate(rows):
            i = int(row["index"])
            keep = self.samples_dir if n < sample_left else None
            settings = {
                "model": "policy",
                "training_step": self.state.global_step + 1,
                "uid": self.items[i].uid,
            }

            async def one(
                i: int = i, n: int = n, keep: Any = keep, settings: dict[str, Any] = settings
            ) -> tuple[Rollout, Any]:
                ROLLOUT_ORDER.set((round_no, n))  # this task's own context: its batch position
                async with limit:
                    return await run_rollout(
                        self.spec,
                        self.items[i],
                        self.golden[i],
                        i + round_no * len(self.items),  # a resampled group is a group of its own
                        judge=self.judge,
                        samples=keep,
                        settings=settings,
                    )

            jobs.append(one())
        return list(await asyncio.gather(*jobs))

    def _prepare_inputs(self, generation_batch: Any) -> dict[str, Any]:
        """One generation per optimiser step: run the rollouts, score them, make the rows."""
        t0 = time.perf_counter()
        batch = list(generation_batch)
        done = self._round(batch, 0)
        rollouts = [r for r, _ in done]
        if rollouts and not any(r.usable for r in rollouts):
            for _, rec in done:
                if rec is not None:
                    rec.finish()
            raise SearchDown(
                "every rollout of this step failed to reach the search server; the run stops here "
                "(resume it when the server is back)"
            )
        keep: set[int] | None = None
        if self.run_config.dynamic_sampling.enabled:
            keep = self._resample(done, {int(row["index"]) for row in batch})
            rollouts = [r for r, _ in done]
        rows = training_rows(rollouts, self.run_config.algorithm)
        if keep is not None:  # the filtered groups' rows are kept for the samples, masked
            rows = [
                row
                if rollouts[row.rollout].group in keep
                else dataclasses.replace(row, weight=0, reason=FILTERED)
                for row in rows
            ]
        self._record_samples(done, rows)
        trained = rows if keep is None else [r for r in rows if rollouts[r.rollout].group in keep]
        self._log_rollouts(rollouts, trained, time.perf_counter() - t0)
        rows = trained or rows[:1]  # none: one masked row, which another process may need to pad
        self.last_rollouts = rollouts
        if self.on_step is not None:
            self.on_step(self, rollouts, rows)
        return {"rows": rows}

    def _round(self, rows: list[dict[str, Any]], round_no: int) -> list[tuple[Rollout, Any]]:
        """One round of rollouts, checked and (overlong shaping) scored."""
        done = self._loop.run_until_complete(self._rollouts(rows, round_no))
        self._generator_report(done)
        ov = self.run_config.overlong
        if ov.enabled:
            rollouts = [r for r, _ in done]
            pen = shape_overlong(rollouts, self.run_config.max_response_length, ov.buffer, ov.penalty)
            self._metrics["train"]["reward/overlong"].append(sum(pen) / max(1, len(pen)))
        return done

    def _resample(self, done: list[tuple[Rollout, Any]], used: set[int]) -> set[int]:
        """DAPO's dynamic sampling: while fewer groups differ than the step asked for, roll out new
        prompts in the place of the uniform ones (``max_resample_rounds`` rounds at most). Extends
        ``done``; returns the groups that train."""
        cfg = self.run_config
        want = len({r.group for r, _ in done})
        keep = varied_groups([r for r, _ in done])
        rounds = 0
        while len(keep) < want and rounds < cfg.dynamic_sampling.max_resample_rounds:
            rounds += 1
            step = self.state.global_step + 1
            rng = random.Random(f"{cfg.seed}:{self.accelerator.process_index}:{step}:{rounds}")
            picks = pick_prompts(want - len(keep), used, len(self.items), rng)
            used |= set(picks)
            new = self._round([{"index": i} for i in picks for _ in range(cfg.group_size)], rounds)
            done += new
            keep |= varied_groups([r for r, _ in new])
        made = len({r.group for r, _ in done})
        self._sampling = {"groups_filtered": float(made - len(keep)), "resample_rounds": float(rounds)}
        return keep

    def _generator_report(self, done: list[tuple[Rollout, Any]]) -> None:
        """A rollout server that failed fails the step (the agents only saw an endpoint error);
        otherwise its counters join the step's metrics."""
        gen = self.spec.generator
        failure = getattr(gen, "failure", None)
        if failure is not None:
            for _, rec in done:
                if rec is not None:
                    rec.finish()
            raise failure
        take = getattr(gen, "take_stats", None)
        if take is not None:
            for key, value in take().items():
                self._metrics["train"][key].append(value)

    def _record_samples(self, done: list[tuple[Rollout, Any]], rows: list[Row]) -> None:
        for k, (r, rec) in enumerate(done):
            if rec is None:
                continue
            mine = [row for row in rows if row.rollout == k]
            rec.summary.settings["training"] = {
                "step": self.state.global_step + 1,
                "algorithm": self.run_config.algorithm,
                "reward": r.reward,
                "parts": {"format": r.parts.format, "judge": r.parts.judge, "ndcg": r.parts.ndcg},
                "advantage": mine[0].advantage if mine else 0.0,
                "correct": r.correct,
                "answer_path": r.answer_path,
                "segments": [
                    {
                        "node_id": row.segment.node_id,
                        "masked": not row.weight,
                        "reason": row.reason,
                        "tokens": len(row.segment.input_ids),
                        "generated": row.segment.generated_tokens,
                        "images": row.segment.n_images,
                        "truncated": row.segment.truncated,
                    }
                    for row in mine
                ],
            }
            rec.finish()

    def _log_rollouts(self, rollouts: list[Rollout], rows: list[Row], seconds: float) -> None:
        n = max(1, len(rollouts))
        usable = [r for r in rollouts if r.usable] or rollouts
        k = max(1, len(usable))
        gen = sum(s.generated_tokens for r in rollouts for s in r.segments)
        batch = {
            "reward": sum(r.reward for r in usable) / k,
            "reward/format": sum(r.parts.format for r in usable) / k,
            "reward/judge": sum(float(r.parts.judge or 0) for r in usable) / k,
            "reward/ndcg": sum(r.parts.ndcg for r in usable) / k,
            "accuracy": sum(1.0 for r in usable if r.correct) / k,
            "turns": sum(r.turns for r in rollouts) / n,
            "response_length": gen / n,
            "segments": float(len(rows)),
            "masked_segments": float(sum(1 for r in rows if not r.weight)),
            "truncated": float(sum(1 for r in rollouts if r.truncated)),
            "search_failures": float(sum(1 for r in rollouts if not r.usable)),
            "judge_failures": float(sum(1 for r in rollouts if r.parts.judge_failed)),
            "rollout_errors": float(sum(1 for r in rollouts if r.error)),
        }
        self._kept_metrics = batch  # logged again on the batch's later updates (ppo_epochs > 1)
        m = self._metrics["train"]
        for key, value in batch.items():
            m[key].append(value)
        for key, value in self._sampling.items():  # the batch's, once (summed over steps in the panel)
            m[key].append(value)
        m["tokens_per_second"].append(gen / seconds if seconds > 0 else 0.0)
        m["rollout_seconds"].append(seconds)
        for error in sorted({r.error for r in rollouts if r.error})[:3]:  # say why, once per kind
            log.warning("step %d: a rollout ended with %s", self.state.global_step + 1, error)

    # ---- the update ----------------------------------------------------------------------------
    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        t0 = time.perf_counter()
        model.train()
        first = self._kept is None or self.state.global_step % self.num_iterations == 0
        if first:
            rows: list[Row] = self._prepare_inputs(inputs)["rows"]
            # agree_to_stop: true on every process when any has a row that trains
            skipped = self.run_config.dynamic_sampling.enabled and not agree_to_stop(
                any(r.weight for r in rows), self.accelerator.device
            )
            self._kept = _Batch(
                rows=[] if skipped else pad_rows(rows, self.accelerator.device),
                tokens=max(1, sum(sum(r.segment.loss_mask) * r.weight for r in rows)),
                n_rows=max(1, len(rows)),
                skipped=skipped,
            )
            if skipped:
                log.warning(
                    "step %d skipped: every group's rollouts got the same reward (no variance, so "
                    "every advantage is 0) after %d resample round(s); no update was made",
                    self.state.global_step + 1,
                    int(self._sampling.get("resample_rounds", 0)),
                )
        else:  # another update on the kept batch: TRL's sampler handed the same prompts again
            for key, value in self._kept_metrics.items():
                self._metrics["train"][key].append(value)
        kept = self._kept
        assert kept is not None
        kept.iteration += 1
        if self.num_iterations > 1:
            self._metrics["train"]["ppo_epoch"].append(float(kept.iteration))
        if self.run_config.dynamic_sampling.enabled:
            self._metrics["train"]["skipped_steps"].append(1.0 if kept.skipped else 0.0)
        pc: Any = self.processing_class
        tok = pc.tokenizer if hasattr(pc, "tokenizer") else pc
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        image_token = getattr(self.accelerator.unwrap_model(model).config, "image_token_id", None)
        ggpo = self.run_config.algorithm == "ggpo"
        total = torch.zeros((), device=self.accelerator.device)
        # Several processes: as many micro-batches of as many rows on each (TRL's loss gathers its
        # metrics per micro-batch), passes on the unwrapped model, gradients averaged once at the end
        # (see distributed.py). One process: unchanged.
        several = self.accelerator.num_processes > 1
        forward = self.accelerator.unwrap_model(model) if several else model
        for n, part in enumerate(chunks(kept.rows, self.run_config.micro_batch_rows)):
            batch = collate(part, pad, image_token, self.accelerator.device)
            share = len(part) / kept.n_rows if ggpo else float(batch["tool_mask"].sum()) / kept.tokens
            if share == 0.0 and not several:
                continue
            if n not in kept.frozen:  # before the batch's first update, kept for the later ones
                kept.frozen[n] = self._frozen_logps(batch)
            batch.update(kept.frozen[n])
            with self.compute_loss_context_manager():
                loss = self._compute_loss(forward, batch) * share
            if share == 0.0:  # padding: computed only so that every process gathers alike
                continue
            if not torch.isfinite(loss):
                self.nan_skipped += 1
                self._metrics["train"]["nan_skipped"].append(1.0)
                continue
            self.accelerator.backward(loss)
            total += loss.detach()
        if not kept.skipped:  # skipped: no gradient at all, so the optimiser step changes nothing
            average_gradients(model)
        if kept.iteration >= self.num_iterations:
            self._kept = None  # its last update: the next step makes new rollouts
        self._step += 1
        m = self._metrics["train"]
        m["step_time"].append(time.perf_counter() - t0)
        if torch.cuda.is_available():
            m["gpu_memory_gb"].append(torch.cuda.max_memory_allocated() / 2**30)
        return total

    def _frozen_logps(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """What stays fixed over a batch's ``ppo_epochs`` updates, computed before the first: the
        reference log-probs (KL), the policy's own (π_old of the clipped ratio, when there is more
        than one update) and vLLM's importance-sampling ratio (made from those same log-probs)."""
        out: dict[str, torch.Tensor] = {}
        if self.beta != 0.0:
            out["ref_per_token_logps"] = self._ref_logps(batch)
        correct = self.use_vllm and self.vllm_importance_sampling_correction
        if self.num_iterations > 1 or correct:
            old = self._logps(self.model, batch)
            if self.num_iterations > 1:
                out["old_per_token_logps"] = old
            if correct:
                out["importance_sampling_ratio"] = self._importance_ratio(batch, old)
        return out

    def _ref_logps(self, batch: dict[str, Any]) -> torch.Tensor:
        """The reference policy's log-probs: TRL's ``ref_model``, or (LoRA) the base model, i.e.
        this model with its adapter disabled."""
        if self.ref_model is not None:
            return self._logps(self.ref_model, batch)
        policy = self.accelerator.unwrap_model(self.model)
        off = policy.disable_adapter() if hasattr(policy, "peft_config") else contextlib.nullcontext()
        with off:
            return self._logps(self.model, batch)

    def _importance_ratio(self, batch: dict[str, Any], policy: torch.Tensor) -> torch.Tensor:
        """TRL's vLLM importance-sampling ratio for ``batch``, from the policy's log-probs before
        the update and the sampler's recorded ones (see :mod:`.offpolicy`)."""
        mask = batch["completion_mask"] * batch["tool_mask"]
        sampling = batch.get("sampling_per_token_logps")
        if sampling is None:  # no log-probs recorded (not vLLM-sampled): ratio 1
            sampling = torch.full_like(policy, float("nan"))
        ratio = importance_ratio(
            policy,
            sampling,
            mask,
            mode=self.vllm_importance_sampling_mode,
            clip_min=self.vllm_importance_sampling_clip_min,
            clip_max=self.vllm_importance_sampling_clip_max,
        )
        for key, value in ratio_metrics(policy, sampling, mask, ratio).items():
            self._metrics["train"][key].append(value)
        return ratio

    @torch.no_grad()
    def _logps(self, model: Any, batch: dict[str, Any]) -> torch.Tensor:
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logps, _, _ = self._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention,
            batch["completion_ids"].size(1),
            pixel_values=batch.get("pixel_values"),
            image_grid_thw=batch.get("image_grid_thw"),
            num_images=batch.get("num_images"),
            mm_token_type_ids=batch.get("mm_token_type_ids"),
        )
        return logps

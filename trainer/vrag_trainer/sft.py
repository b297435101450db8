"""The supervised warm start (``algorithm: sft``) on the transformers ``Trainer``, with our own
dataset and collate.

Why not TRL's ``SFTTrainer``: for a vision dataset it renders and tokenises ``messages`` itself in
its collator (its assistant-only mask needs a chat template with ``{% generation %}`` markers, which
Qwen-VL's lacks, so TRL swaps in a training template); it takes no pre-built token ids with their
pixels. The sequences here must be the agent's own (:mod:`.sft_data`: built by the code that builds
the RL rows, with PolicyChat's loss mask), so they are fed as they are: ``Trainer`` still gives the
optimiser and schedule, gradient accumulation, checkpoints and resume, TensorBoard, LoRA through
PEFT and DDP under ``accelerate launch``; :class:`~vrag_trainer.callbacks.RunCallback` writes the
run directory exactly as for GRPO/GGPO (metrics rows with ``loss``, COMPLETE checkpoints, clean stop).

The loss is the token mean over the step: the summed cross-entropy of every trained token (loss mask
1: the model's own replies and their end-of-turn token) divided by how many there are in the whole
step (``num_items_in_batch``, counted by ``Trainer`` over the accumulated micro-batches and across
processes), so a long trajectory weighs by its tokens, as GRPO's ``bnpo`` does. Masked positions
(prompt, observations, images, padding) get label -100: they are read by the forward pass and give
no loss and no gradient of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainingArguments

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun
from vrag_trainer.policy import Segment

__all__ = ["IGNORE", "AgentSFTTrainer", "SftLoss", "build_sft", "collate_sft", "sft_args"]

log = logging.getLogger("vrag_trainer")
IGNORE = -100


class SegmentDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """The run's sequences, one per item (``Trainer`` shuffles them with the run's seed)."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self.segments = list(segments)

    def __len__(self) -> int:
        return len(self.segments)

    def __getitem__(self, i: int) -> Segment:
        return self.segments[i]


def collate_sft(
    segments: Sequence[Segment], pad_id: int, image_token_id: int | None, dtype: Any
) -> dict[str, Any]:
    """Right-padded ids, attention mask and labels (the id where the loss mask is 1, else -100),
    with every image of every sequence (pixels in the model's dtype) and the token types M-RoPE
    reads."""
    b, width = len(segments), max(len(s.input_ids) for s in segments)
    input_ids = torch.full((b, width), pad_id, dtype=torch.long)
    attention = torch.zeros((b, width), dtype=torch.long)
    labels = torch.full((b, width), IGNORE, dtype=torch.long)
    for i, s in enumerate(segments):
        ids = torch.tensor(s.input_ids, dtype=torch.long)
        n = len(s.input_ids)
        input_ids[i, :n] = ids
        attention[i, :n] = 1
        labels[i, :n] = torch.where(torch.tensor(s.loss_mask, dtype=torch.bool), ids, IGNORE)
    out: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention, "labels": labels}
    pixels = [p for s in segments for p in s.pixel_values]
    if pixels:
        out["pixel_values"] = torch.cat(pixels).to(dtype)
        out["image_grid_thw"] = torch.stack([torch.as_tensor(g) for s in segments for g in s.image_grid_thw])
    if image_token_id is not None:
        out["mm_token_type_ids"] = (input_ids == image_token_id).long()
    return out


class SftLoss:
    """``Trainer``'s ``compute_loss_func``: the summed next-token cross-entropy of the trained
    positions over ``num_items_in_batch`` (the step's trained tokens). Keeps the step's token count
    and greedy accuracy for the metrics row."""

    def __init__(self) -> None:
        self.tokens = 0
        self.correct = 0

    def __call__(self, outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs.logits
        target = labels[:, 1:]
        keep = target != IGNORE
        picked = logits[:, :-1][keep].float()
        loss = torch.nn.functional.cross_entropy(picked, target[keep], reduction="sum")
        n = num_items_in_batch if num_items_in_batch is not None else keep.sum().clamp(min=1)
        with torch.no_grad():
            self.tokens += int(keep.sum())
            self.correct += int((picked.argmax(-1) == target[keep]).sum())
        return loss / n

    def take(self) -> dict[str, float]:
        out = {
            "tokens": float(self.tokens),
            "token_accuracy": self.correct / self.tokens if self.tokens else 0.0,
        }
        self.tokens = self.correct = 0
        return out


class AgentSFTTrainer(Trainer):  # type: ignore[misc]
    """``Trainer`` whose loss is :class:`SftLoss`; each logged step carries its trained-token count
    and token accuracy beside ``loss`` (``metrics.jsonl``, the Training panel's loss plot)."""

    def __init__(self, *args: Any, sft_loss: SftLoss, **kwargs: Any) -> None:
        super().__init__(*args, compute_loss_func=sft_loss, **kwargs)
        self.sft_loss = sft_loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if "loss" in logs:
            logs = {**logs, **self.sft_loss.take()}
        super().log(logs, *args, **kwargs)


def sft_args(
    cfg: TrainConfig,
    output_dir: str,
    *,
    world_size: int = 1,
    use_cpu: bool,
    bf16: bool,
    logging_dir: str | None,
) -> TrainingArguments:
    """``Trainer``'s arguments from the config: ``sft.batch_size`` sequences per optimiser step in
    micro-batches of ``micro_batch_rows`` per process (accumulated), the learning rate constant after
    ``warmup_steps``, a metrics row every step."""
    per_step = max(1, math.ceil(cfg.sft.batch_size / max(1, world_size)))
    micro = min(cfg.micro_batch_rows, per_step)
    kwargs: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=max(1, math.ceil(per_step / micro)),
        learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        weight_decay=0.0,
        max_grad_norm=cfg.grad_clip,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        logging_steps=1,
        report_to=["tensorboard"] if cfg.tensorboard else "none",
        use_cpu=use_cpu,
        bf16=bf16,
        seed=cfg.seed,
        data_seed=cfg.seed,
        # TRL's configs default the deprecated name to True: the new one set too, or transformers warns
        # "`gradient_checkpointing` is deprecated" into every run's log
        gradient_checkpointing=cfg.gradient_checkpointing,
        activation_checkpointing=cfg.gradient_checkpointing,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    if logging_dir:
        kwargs["logging_dir"] = logging_dir
    try:
        return TrainingArguments(**kwargs)
    except TypeError:  # logging_dir dropped by newer transformers: TENSORBOARD_LOGGING_DIR is read instead
        kwargs.pop("logging_dir", None)
        return TrainingArguments(**kwargs)


def _rows(cfg: TrainConfig, data_root: Path, processor: Any) -> Any:
    """The run's sequences (:mod:`.sft_data`) from an SFT export or a dataset's labelled items."""
    from vrag_desktop.core.agents.searchers import HttpSearcher
    from vrag_desktop.core.training.config import ConfigError
    from vrag_desktop.core.training.sft import is_sft_export, read_sft_export
    from vrag_trainer.data import DataError, load_train_data, serve_search
    from vrag_trainer.sft_data import export_segments, teacher_segments

    if is_sft_export(cfg.dataset):
        try:
            export = read_sft_export(cfg.dataset)
        except ConfigError as exc:
            raise DataError(str(exc)) from exc
        for line in export.lines():
            log.info("%s", line)
        if cfg.agent != "vrag":
            raise DataError(
                f"agent: {cfg.dataset} is an SFT export of VRAG trajectories (History exports VRAG runs "
                "only); set agent to vrag"
            )
        rows = asyncio.run(export_segments(export.samples, processor, cfg))
    else:
        data = load_train_data(cfg, data_root)
        for line in data.lines():
            log.info("%s", line)
        with contextlib.ExitStack() as search:  # only while the trajectories are built (the
            url = cfg.search_url  # server holds the corpora's embedder in memory)
            if not url:
                url, stop_search = serve_search(data_root, data.corpora)
                search.callback(stop_search)
                log.info("serving the corpora for the teacher's searches at %s", url)
            searcher = HttpSearcher(url)
            search.callback(searcher.close)
            rows = asyncio.run(teacher_segments(cfg, data.items, data.golden, processor, lambda: searcher))
    for line in rows.lines():
        log.info("%s", line)
    if not rows.segments:
        raise DataError(
            f"{cfg.dataset}: no trajectory could be built to train on:\n" + "\n".join(rows.lines()[1:])
        )
    return rows


def build_sft(
    run: TrainRun,
    cfg: TrainConfig,
    data_root: Path,
    stop_flag: Callable[[], bool],
    *,
    resume: Path | None = None,
) -> AgentSFTTrainer:
    """The SFT trainer of ``run``: the policy (warm-started from ``init_from`` when set), LoRA when
    asked, the sequences, and the run directory's callback."""
    from vrag_trainer.callbacks import RunCallback
    from vrag_trainer.runner import RunRefused, device_and_dtype
    from vrag_trainer.warmstart import load_start, skip_trainer_load

    torch.manual_seed(cfg.seed)
    device, dtype = device_and_dtype(cfg)
    model, processor = load_start(cfg, run, dtype, resume)
    model.config.use_cache = False
    rows = _rows(cfg, data_root, processor)
    if cfg.lora.enabled:
        from peft import get_peft_model

        from vrag_trainer.lora import LoraRefused, peft_config

        try:
            model = get_peft_model(model, peft_config(model, cfg.lora))
        except LoraRefused as exc:
            raise RunRefused(str(exc)) from exc
        n = sum(p.numel() for p in model.parameters() if p.requires_grad)
        log.info("LoRA: %d adapter parameters train (rank %d); the base is frozen", n, cfg.lora.rank)
    tok = processor.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    image_token = getattr(model.config, "image_token_id", None)
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run.tensorboard)
    args = sft_args(
        cfg,
        str(run.checkpoints),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        use_cpu=device == "cpu",
        bf16=dtype == torch.bfloat16,
        logging_dir=str(run.tensorboard),
    )
    log.info(
        "SFT: %d sequence(s) an epoch, %d per optimiser step (%d per micro-batch)",
        len(rows.segments),
        args.per_device_train_batch_size * args.gradient_accumulation_steps,
        args.per_device_train_batch_size,
    )
    trainer = AgentSFTTrainer(
        model=model,
        args=args,
        train_dataset=SegmentDataset(rows.segments),
        data_collator=lambda segs: collate_sft(segs, pad, image_token, dtype),
        callbacks=[RunCallback(run, cfg, processor, stop_flag)],
        sft_loss=SftLoss(),
    )
    # the model must not get num_items_in_batch (SftLoss normalises); Trainer still counts it for
    # a compute_loss_func and treats the loss as already scaled for accumulation and processes
    trainer.model_accepts_loss_kwargs = False
    if resume is not None:
        skip_trainer_load(trainer)
    return trainer

"""The vLLM server a ``vllm_mode: app_server`` run samples its rollouts from: what it must be
started with, and what is wrong with the one running.

Why here: the New-run dialog offers to start that server through the app's own runtime supervisor
(the Runtime dock's vLLM section) and must know the flags; the CLI user reads the same reasons.
The trainer needs (trainer/vrag_trainer/vllm_http.py): the run's base model, LoRA adapters loaded
at run time (``--enable-lora``, ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``) up to the run's rank (a
``--max-lora-rank`` vLLM accepts), token ids with images (``--enable-scale-out``), a context of at
least ``max_model_len`` and room for ``max_images`` images a prompt.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.runtime.vllm import VLLM_LORA_RANKS

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.settings import VLLMSettings
    from vrag_desktop.core.runtime.vllm import VLLMConfig
    from vrag_desktop.core.training.config import TrainConfig

__all__ = ["needs_rollout_server", "rollout_problem", "rollout_rank", "rollout_settings"]


def needs_rollout_server(cfg: TrainConfig) -> bool:
    return cfg.generator == "vllm" and cfg.vllm_mode == "app_server"


def rollout_rank(cfg: TrainConfig) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds the run's adapter."""
    rank = int(cfg.lora.rank)
    return next((r for r in VLLM_LORA_RANKS if r >= rank), rank)


def rollout_settings(base: VLLMSettings, cfg: TrainConfig) -> VLLMSettings:
    """``base`` (the Runtime dock's settings: environment, port, memory share, dtype…) serving the
    run's base model with the flags its rollouts need; larger limits already set are kept."""
    return replace(
        base,
        model=cfg.model,
        served_model_name="",
        max_model_len=max(cfg.max_model_len, base.max_model_len or 0),
        limit_images=max(cfg.max_images, base.limit_images or 0),
        runtime_lora=True,
        max_lora_rank=max(rollout_rank(cfg), base.max_lora_rank or 0),
        scale_out=True,
    )


def _same_model(a: str, b: str) -> bool:
    if a == b:
        return True
    pa, pb = Path(os.path.expanduser(a)), Path(os.path.expanduser(b))
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def rollout_problem(cfg: TrainConfig, server: VLLMConfig | None, ready: bool) -> str | None:
    """Why the app's server (``server``, None when none was started; ``ready`` when it answers)
    cannot serve this run's rollouts, in words for the person; None when it can."""
    if not needs_rollout_server(cfg):
        return None
    if server is None or not ready:
        return "the rollout server (the app's vLLM server) is not running"
    why = []
    if not _same_model(server.model, cfg.model):
        why.append(f"it serves {server.model}, the run trains {cfg.model}")
    if not server.runtime_lora:
        why.append("it cannot load adapters while it runs (--enable-lora, runtime LoRA updating)")
    elif (server.max_lora_rank or 16) < cfg.lora.rank:
        why.append(
            f"its --max-lora-rank {server.max_lora_rank or 16} is below the run's LoRA rank {cfg.lora.rank}"
        )
    if not server.scale_out:
        why.append("it was started without --enable-scale-out (turns with images)")
    if server.max_model_len and server.max_model_len < cfg.max_model_len:
        why.append(f"its context {server.max_model_len} is shorter than max_model_len {cfg.max_model_len}")
    limit = (server.limit_mm_per_prompt or {}).get("image")
    if limit is not None and limit < cfg.max_images:
        why.append(f"it takes {limit} images a prompt, the run up to {cfg.max_images}")
    if not why:
        return None
    return "the running vLLM server cannot serve this run's rollouts: " + "; ".join(why)

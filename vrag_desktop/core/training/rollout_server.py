"""The vLLM server a ``vllm_mode: app_server`` run samples its rollouts from: what it must be
started with, and what is wrong with the one running.

Why here: the New-run dialog offers to start that server through the app's own runtime supervisor
(the Runtime dock's vLLM section) and must know the flags; the CLI user reads the same reasons.
The trainer needs (trainer/vrag_trainer/vllm_http.py): the weights the run starts from (the base
model, or a warm start's full weights: the adapter trains on top of them), LoRA adapters loaded
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

__all__ = [
    "CANNOT_START",
    "needs_rollout_server",
    "rollout_problem",
    "rollout_rank",
    "rollout_settings",
    "served_model",
]


#: How :func:`rollout_problem` begins when no server could serve the run (no button to offer).
CANNOT_START = "the rollout server cannot be started for this run"


def needs_rollout_server(cfg: TrainConfig) -> bool:
    return cfg.generator == "vllm" and cfg.vllm_mode == "app_server"


def rollout_rank(cfg: TrainConfig) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds the run's adapter."""
    rank = int(cfg.lora.rank)
    return next((r for r in VLLM_LORA_RANKS if r >= rank), rank)


def served_model(cfg: TrainConfig) -> str:
    """The weights the rollout server must serve: those the run starts from. Raises ``ValueError``
    when they exist only once the run starts (a LoRA warm start, merged into the run's folder then)
    or ``init_from`` is refused (``ConfigError``)."""
    if not cfg.init_from:
        return cfg.model
    from vrag_desktop.core.training.warmstart import check_init_from

    start = check_init_from(cfg)
    if start is None:
        return cfg.model
    if start.adapter:
        raise ValueError(
            f"init_from is a LoRA adapter ({start.describe()}), merged into the run's folder only when "
            "the run starts, so no server can serve it before: export that run (merged) and start from "
            "its export"
        )
    return str(start.path)


def rollout_settings(base: VLLMSettings, cfg: TrainConfig) -> VLLMSettings:
    """``base`` (the Runtime dock's settings: environment, port, memory share, dtype…) serving the
    weights the run starts from with the flags its rollouts need; larger limits already set are
    kept. Raises ``ValueError`` as :func:`served_model`."""
    return replace(
        base,
        model=served_model(cfg),
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
    try:
        model = served_model(cfg)
    except ValueError as exc:
        return f"{CANNOT_START}: {exc}"
    if server is None or not ready:
        return "the rollout server (the app's vLLM server) is not running"
    why = []
    if not _same_model(server.model, model):
        why.append(f"it serves {server.model}, the run starts from {model}")
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

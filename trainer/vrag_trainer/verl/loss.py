"""GGPO's objective and segment-aware GRPO advantages, in verl's registry signatures.

**Policy loss** (VimRAG §6.7, as the one-workstation trainer computes it): per segment ``i`` the
sequence-level ratio ``s_i = exp(mean_t(log π - log π_old))`` over its loss tokens, the clipped
surrogate ``max(-A_i s_i, -A_i clip(s_i, 1-ε, 1+ε))``, weighted by ``1 - μ_i`` and summed over
segments, then divided by the number of *all* segments (``Σ n_g``, masked ones included: they
add 0). The mask reaches the loss inside the batch itself: the agent loop zeroes a masked
segment's ``response_mask`` (no policy gradient, KL or entropy on it, as TRL's ``tool_mask`` does
here), so a row without loss tokens has weight 0 and still counts in the denominator.

**Advantages**: verl's GRPO standardises over *rows*; VimRAG yields one row per graph node, so a
rollout with five nodes would count five times. ``segment_grpo`` reads the rollout of each row
from its group key (``"<uid>::<rollout>"``, ``"::skip"`` appended when the search server failed)
and standardises over rollouts, as :func:`vrag_trainer.ggpo.group_advantages` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from vrag_trainer.ggpo import EPS, group_advantages

__all__ = [
    "compute_policy_loss_ggpo",
    "compute_segment_grpo_advantage",
    "ggpo_policy_loss",
    "register",
    "segment_advantages",
]

LOG_RATIO_MAX = 10.0  # as verl's GSPO clamps, so one drifted segment cannot overflow exp()


def ggpo_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    weight: torch.Tensor | None = None,
    num_segments: int | None = None,
    dp_size: int = 1,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GGPO loss of a (micro-)batch of segments, ``(B, T)`` tensors; ``weight`` is ``1 - μ`` per
    segment (default: 1 where the segment has loss tokens). ``num_segments`` is the step's segment
    count when the batch is a part of it (verl's ``global_batch_size``), else ``B``."""
    mask = response_mask.to(log_prob.dtype)
    lengths = mask.sum(-1)
    has_tokens = (lengths > 0).to(log_prob.dtype)
    w = has_tokens if weight is None else weight.to(log_prob.dtype) * has_tokens
    denom = lengths.clamp(min=1)
    log_ratio = ((log_prob - old_log_prob) * mask).sum(-1) / denom
    ratio = torch.exp(log_ratio.clamp(max=LOG_RATIO_MAX))
    adv = (advantages.to(log_prob.dtype) * mask).sum(-1) / denom  # the segment's broadcast advantage
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_segment = torch.maximum(unclipped, clipped)
    n = num_segments if num_segments else log_prob.shape[0]
    loss = (per_segment * w).sum() / max(1, n) * dp_size
    live = float(w.sum().item())
    metrics = {
        "actor/pg_clipfrac": float(((clipped > unclipped).to(w.dtype) * w).sum().item()) / max(live, 1.0),
        "actor/ppo_kl": float((-(log_ratio.detach()) * w).sum().item()) / max(live, 1.0),
        "actor/pg_clipfrac_lower": 0.0,
        "actor/ggpo_masked_fraction": 1.0 - live / max(1, log_prob.shape[0]),
    }
    return loss, metrics


def compute_policy_loss_ggpo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's ``PolicyLossFn`` signature (``actor.policy_loss.loss_mode=ggpo``). ``loss_agg_mode``
    is ignored: GGPO fixes its own normalisation. Rollout-correction weights, when verl passes
    them, scale each segment by their mean over its tokens."""
    base = getattr(config, "clip_ratio", 0.2) if config is not None else 0.2
    low = getattr(config, "clip_ratio_low", None) if config is not None else None
    high = getattr(config, "clip_ratio_high", None) if config is not None else None
    info = dict(getattr(config, "global_batch_info", None) or {})
    weight = None
    if rollout_is_weights is not None:
        mask = response_mask.to(rollout_is_weights.dtype)
        weight = (rollout_is_weights * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return ggpo_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        clip_low=float(low if low is not None else base),
        clip_high=float(high if high is not None else base),
        weight=weight,
        num_segments=info.get("global_batch_size"),
        dp_size=int(info.get("dp_size") or 1),
    )


def _parse_key(key: Any, row: int) -> tuple[str, str, bool]:
    """``uid::rollout[::skip]`` → (group, rollout, usable); a plain uid is one rollout per row."""
    parts = str(key).split("::")
    if len(parts) == 1:
        return parts[0], f"row{row}", True
    return parts[0], parts[1], not (len(parts) > 2 and parts[2] == "skip")


def segment_advantages(scores: Sequence[float], index: Sequence[Any]) -> list[float]:
    """Each row's advantage: its rollout's reward standardised over the distinct rollouts of its
    group (unusable rollouts get 0 and are left out), broadcast to all the rollout's rows."""
    keys = [_parse_key(k, i) for i, k in enumerate(index)]
    rollouts: dict[tuple[str, str], int] = {}
    rewards: list[float] = []
    groups: list[int] = []
    usable: list[bool] = []
    group_ids: dict[str, int] = {}
    for (group, rollout, ok), score in zip(keys, scores, strict=True):
        if (group, rollout) not in rollouts:
            rollouts[(group, rollout)] = len(rewards)
            rewards.append(float(score))
            groups.append(group_ids.setdefault(group, len(group_ids)))
            usable.append(ok)
    adv = group_advantages(rewards, groups, usable)
    return [adv[rollouts[(g, r)]] for g, r, _ in keys]


def compute_segment_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    epsilon: float = EPS,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's advantage-estimator signature (``algorithm.adv_estimator=segment_grpo``)."""
    scores = token_level_rewards.sum(-1).tolist()
    keys = list(index) if index is not None else [str(i) for i in range(len(scores))]
    adv = torch.tensor(segment_advantages(scores, keys), dtype=token_level_rewards.dtype)
    out = adv.to(response_mask.device).unsqueeze(-1) * response_mask.to(token_level_rewards.dtype)
    return out, out


def register() -> bool:
    """Add ``ggpo`` and ``segment_grpo`` to verl's registries (idempotent); False without verl."""
    try:
        from verl.trainer.ppo import core_algos  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    if core_algos.POLICY_LOSS_REGISTRY.get("ggpo") is not compute_policy_loss_ggpo:
        core_algos.register_policy_loss("ggpo")(compute_policy_loss_ggpo)
    if core_algos.ADV_ESTIMATOR_REGISTRY.get("segment_grpo") is not compute_segment_grpo_advantage:
        core_algos.register_adv_est("segment_grpo")(compute_segment_grpo_advantage)
    return True

"""The off-policy gap between the rollout engine and the trained policy (vLLM's sampler is not the
training forward pass: other kernels, other precision), corrected by importance sampling.

Why here and not TRL: TRL computes the ratio inside ``_generate_and_score_completions``, which this
trainer replaces (our agents make the batch). So :class:`~vrag_trainer.trl_trainer.AgentGRPOTrainer`
supplies it: the log-probabilities vLLM reported for each sampled token are recorded token by token
beside the ids (``Segment.logprobs``, NaN on prompt and observation tokens), the policy's own
log-probabilities for the same tokens come from a no-grad forward pass before the update, and the
ratio ``exp(policy − sampler)`` is truncated or masked exactly as TRL 1.16 does for its mode
(default ``sequence_mask``: one ratio per row over its generated tokens, rows outside
``[clip_min, clip_max]`` get weight 0). Tokens the engine could not score count as ratio 1.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MODES", "importance_ratio", "ratio_metrics"]

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def importance_ratio(
    policy_logps: Any,
    sampling_logps: Any,
    mask: Any,
    *,
    mode: str = "sequence_mask",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> Any:
    """The ratio TRL's loss multiplies each token's loss by: (B, T) for token modes, (B, 1) for
    sequence modes. ``mask`` is 1 on the tokens the loss trains (generated ones)."""
    import torch

    if mode not in MODES:
        raise ValueError(f"unknown importance sampling mode {mode!r} (one of {', '.join(MODES)})")
    diff = torch.nan_to_num((policy_logps - sampling_logps) * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = clip_min if clip_min is not None else -math.inf
    high = clip_max if clip_max is not None else math.inf
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def ratio_metrics(policy_logps: Any, sampling_logps: Any, mask: Any, ratio: Any) -> dict[str, float]:
    """What TRL logs about the gap: |policy − sampler| per scored token (mean, max) and the ratio
    (min, mean, max) over trained tokens (token modes) or rows (sequence modes)."""
    import torch

    keep = mask.bool()
    delta = torch.abs(policy_logps - sampling_logps)[keep]
    delta = delta[~torch.isnan(delta)]
    flat = ratio.flatten() if ratio.size(-1) == 1 else ratio[keep]
    out = {
        "sampling/sampling_logp_difference/mean": float(delta.mean()) if delta.numel() else 0.0,
        "sampling/sampling_logp_difference/max": float(delta.max()) if delta.numel() else 0.0,
    }
    if flat.numel():
        out |= {
            "sampling/importance_sampling_ratio/min": float(flat.min()),
            "sampling/importance_sampling_ratio/mean": float(flat.mean()),
            "sampling/importance_sampling_ratio/max": float(flat.max()),
        }
    return out

"""Rows → the tensors TRL's GRPO loss reads (pinned to trl 1.16: ``prompt_ids``, ``prompt_mask``,
``completion_ids``, ``completion_mask``, ``tool_mask``, ``advantages``, ``pixel_values``,
``image_grid_thw``, ``num_images``, ``mm_token_type_ids``, ``num_items_in_batch``; with vLLM also
``sampling_per_token_logps`` and the ``importance_sampling_ratio`` made from it, :mod:`.offpolicy`;
with ``ppo_epochs`` > 1 the ``old_per_token_logps`` taken before a batch's first update).

Each segment splits at its first generated token: the context before it is the "prompt" (left
padded, as TRL pads prompts), everything after — the policy's turns *and* the observations between
them — is the "completion" (right padded). ``tool_mask`` carries the state mask (1 only on
generated tokens) times the row's GGPO weight, so observations and masked segments get no loss,
while the forward pass still sees every token and every image of the sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vrag_trainer.ggpo import Row

__all__ = ["LOSS_KEYS", "chunks", "collate"]

#: The batch keys TRL 1.16's ``_compute_loss`` reads (tests check this list against the source).
LOSS_KEYS = (
    "prompt_ids",
    "prompt_mask",
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "advantages",
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "mm_token_type_ids",
    "num_items_in_batch",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
    "old_per_token_logps",
)


def collate(
    rows: Sequence[Row], pad_id: int, image_token_id: int | None, device: Any = "cpu"
) -> dict[str, Any]:
    import torch

    if not rows:
        raise ValueError("no rows to collate")
    prompts = [r.segment.input_ids[: r.segment.prompt_len] for r in rows]
    completions = [r.segment.input_ids[r.segment.prompt_len :] for r in rows]
    masks = [[m * r.weight for m in r.segment.loss_mask[r.segment.prompt_len :]] for r in rows]
    p_len = max(len(p) for p in prompts)
    c_len = max(1, max(len(c) for c in completions))
    b = len(rows)
    prompt_ids = torch.full((b, p_len), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((b, p_len), dtype=torch.long)
    completion_ids = torch.full((b, c_len), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((b, c_len), dtype=torch.long)
    tool_mask = torch.zeros((b, c_len), dtype=torch.long)
    sampling = torch.full((b, c_len), float("nan"), dtype=torch.float32)
    for i, (p, c, m) in enumerate(zip(prompts, completions, masks, strict=True)):
        if p:
            prompt_ids[i, p_len - len(p) :] = torch.tensor(p)
            prompt_mask[i, p_len - len(p) :] = 1
        if c:
            completion_ids[i, : len(c)] = torch.tensor(c)
            completion_mask[i, : len(c)] = 1
            tool_mask[i, : len(m)] = torch.tensor(m)
            seg = rows[i].segment
            if len(seg.logprobs) == len(seg.input_ids):  # the engine's log-probs, token by token
                sampling[i, : len(c)] = torch.tensor(seg.logprobs[seg.prompt_len :], dtype=torch.float32)
    out: dict[str, Any] = {
        "prompt_ids": prompt_ids.to(device),
        "prompt_mask": prompt_mask.to(device),
        "completion_ids": completion_ids.to(device),
        "completion_mask": completion_mask.to(device),
        "tool_mask": tool_mask.to(device),
        "advantages": torch.tensor([r.advantage for r in rows], dtype=torch.float32, device=device),
        "num_items_in_batch": tool_mask.sum().clamp(min=1).to(device),
    }
    if not torch.isnan(sampling).all():  # NaN where unknown (prompt, observations, HF sampling)
        out["sampling_per_token_logps"] = sampling.to(device)
    pixels = [p for r in rows for p in r.segment.pixel_values]
    if pixels:
        out["pixel_values"] = torch.cat(pixels).to(device)
        out["image_grid_thw"] = torch.stack(
            [torch.as_tensor(g) for r in rows for g in r.segment.image_grid_thw]
        ).to(device)
        out["num_images"] = [r.segment.n_images for r in rows]
    if image_token_id is not None:
        full = torch.cat([prompt_ids, completion_ids], dim=1)
        out["mm_token_type_ids"] = (full == image_token_id).long().to(device)
    return out


def chunks(rows: Sequence[Row], size: int) -> list[list[Row]]:
    """Micro-batches of ``size`` rows, longest sequences together (less padding)."""
    order = sorted(rows, key=lambda r: len(r.segment.input_ids), reverse=True)
    return [list(order[i : i + size]) for i in range(0, len(order), size)]

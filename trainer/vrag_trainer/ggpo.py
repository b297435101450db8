"""Group-relative advantages (GRPO) and the graph mask (GGPO), as pure functions over rollouts.

**Advantage** (the original's ``adv_estimator=grpo``): within the rollouts of one dataset row,
``(r - mean) / (std + 1e-6)`` with the unbiased std; a group of one gets mean 0, std 1. Rollouts
the infrastructure spoiled (the search server failed) are left out of their group's statistics
and get no gradient. The advantage is broadcast to every segment and token of its rollout.

**GGPO mask** (VimRAG §6.7): ``μ = 1[positive]·1[node ∉ P_ans] + 1[negative]·1[node ∈ R_val]``;
a segment with μ = 1 gets no gradient. *Positive* means the judge (or metric) found the answer
correct — not "reward above the group mean" — because the mask's logic is about the answer: in a
right answer, nodes off the root→answer path were dead ends, and in a wrong one, retrievals that
hit the reference evidence were still good moves. With the composite reward this keeps the
original's binary notion while format and NDCG still shape the advantage. Segments whose tool
call named no node count as off the answer path.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from vrag_trainer.policy import Segment
from vrag_trainer.rollout import Rollout

__all__ = ["MASK_OFF_PATH", "MASK_VALUABLE", "Row", "group_advantages", "mask_reason", "training_rows"]

EPS = 1e-6
MASK_OFF_PATH = "off the answer path (positive rollout)"
MASK_VALUABLE = "retrieved reference evidence (negative rollout)"


@dataclass
class Row:
    """One training sequence with its advantage; ``weight`` 0 masks it out of the loss."""

    segment: Segment
    advantage: float
    weight: int
    rollout: int  # index of its rollout in the step
    reason: str = ""  # why it is masked, for the saved samples and the panel


def group_advantages(
    rewards: Sequence[float], groups: Sequence[int], usable: Sequence[bool] | None = None
) -> list[float]:
    """Per-group standardised rewards; unusable rollouts get 0 and do not count in their group."""
    ok = list(usable) if usable is not None else [True] * len(rewards)
    members: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        if ok[i]:
            members[g].append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        vals = [float(rewards[i]) for i in idx]
        if len(vals) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(vals) / len(vals)
            std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
        for i in idx:
            out[i] = (float(rewards[i]) - mean) / (std + EPS)
    return out


def mask_reason(rollout: Rollout, segment: Segment) -> str:
    """Why GGPO masks ``segment`` of ``rollout`` ("" when it trains)."""
    if rollout.correct:
        return "" if segment.node_id is not None and segment.node_id in rollout.answer_path else MASK_OFF_PATH
    golden = set(rollout.golden)
    return MASK_VALUABLE if golden and any(k in golden for k in segment.retrieved) else ""


def training_rows(rollouts: Sequence[Rollout], algorithm: str) -> list[Row]:
    """The step's rows: one per segment (GGPO) or per rollout's sequences (GRPO), advantages set."""
    adv = group_advantages(
        [r.reward for r in rollouts], [r.group for r in rollouts], [r.usable for r in rollouts]
    )
    rows: list[Row] = []
    for i, (r, a) in enumerate(zip(rollouts, adv, strict=True)):
        for seg in r.segments:
            if not r.usable:
                rows.append(Row(seg, 0.0, 0, i, "the search server failed during this rollout"))
                continue
            reason = mask_reason(r, seg) if algorithm == "ggpo" else ""
            rows.append(Row(seg, a, 0 if reason else 1, i, reason))
    return rows

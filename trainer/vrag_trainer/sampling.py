"""DAPO's dynamic sampling and soft overlong punishment, as pure functions over rollouts (the
trainer's loop is in :mod:`.trl_trainer`; the config fields in
:mod:`vrag_desktop.core.training.sampling`).

Groups are keyed by :attr:`Rollout.group`: round 0's groups are the dataset row indices TRL's
sampler chose; a group resampled in round ``k`` gets ``k * len(dataset) + index``, so a prompt drawn
again is still a group of its own (its advantages are not mixed with the first draw's).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence

from vrag_trainer.policy import Segment
from vrag_trainer.rollout import Rollout

__all__ = [
    "FILTERED",
    "overlong_penalty",
    "pick_prompts",
    "reply_lengths",
    "shape_overlong",
    "varied_groups",
]

#: Why a filtered group's segments did not train (the saved samples show it).
FILTERED = "filtered: every rollout of its group got the same reward (dynamic sampling)"
TIE = 1e-9  # rewards closer than this are equal (sums of weights leave float dust)


def overlong_penalty(length: int, max_length: int, buffer: int, penalty: float) -> float:
    """DAPO's soft overlong punishment: 0 up to ``max_length - buffer`` tokens, then falling
    linearly to ``-penalty`` at ``max_length`` (and staying there beyond it)."""
    start = max_length - buffer
    if length <= start:
        return 0.0
    return -penalty * min(1.0, (length - start) / buffer)


def reply_lengths(segment: Segment) -> list[int]:
    """Tokens of each reply the policy wrote in ``segment``: the runs of 1 in its loss mask
    (observations and prompts between turns are 0)."""
    out: list[int] = []
    run = 0
    for m in (*segment.loss_mask, 0):
        if m:
            run += 1
        elif run:
            out.append(run)
            run = 0
    return out


def shape_overlong(rollouts: Iterable[Rollout], max_length: int, buffer: int, penalty: float) -> list[float]:
    """Add each usable rollout's penalty (its longest reply against the per-turn limit
    ``max_length``) to its reward; returns the penalties. The limit is per turn because that is
    where a reply is cut (``max_response_length``), whatever the turns before it wrote."""
    out: list[float] = []
    for r in rollouts:
        if not r.usable:
            continue
        longest = max((n for s in r.segments for n in reply_lengths(s)), default=0)
        p = overlong_penalty(longest, max_length, buffer, penalty)
        r.reward += p
        out.append(p)
    return out


def varied_groups(rollouts: Sequence[Rollout]) -> set[int]:
    """Groups whose usable rollouts' rewards differ (at least two of them): the ones that teach."""
    rewards: dict[int, list[float]] = defaultdict(list)
    for r in rollouts:
        if r.usable:
            rewards[r.group].append(r.reward)
    return {g for g, v in rewards.items() if len(v) > 1 and max(v) - min(v) > TIE}


def pick_prompts(n: int, used: set[int], n_items: int, rng: random.Random) -> list[int]:
    """``n`` distinct dataset indices to roll out again (at most the dataset's size): prompts not
    used this step first, then any (a prompt drawn again may well differ on a new try)."""
    fresh = [i for i in range(n_items) if i not in used]
    rng.shuffle(fresh)
    picks = fresh[:n]
    if len(picks) < n:
        rest = [i for i in range(n_items) if i not in picks]
        rng.shuffle(rest)
        picks += rest[: n - len(picks)]
    return picks

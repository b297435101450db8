"""The training reward as the original composes it (reference §6.4): a weighted sum of the judge's
verdict, the format check and the retrieval NDCG, gated by the format check.

Gate: a trajectory that fails the format check gets reward 0 whatever else it did, so the judge need
not be called for it (:func:`needs_judge`) — the original skips the call too, which saves most judge
calls early in training.

Weights are a plain weighted sum, **not** renormalised and not required to sum to 1: the original's
(0.7, 0.1, 0.2) do, and then the reward lies in [0, 1]; other weights scale it to [0, their sum].
``RewardWeights(judge=1, format=0, ndcg=0)`` is the original's validation reward (judge only).

A failed judge call (``judge=None``: the judge timed out, was refused, or kept replying neither
True nor False) counts as 0 — a wrong answer — so a training step never crashes on it; it is
reported through :attr:`RewardParts.judge_failed` so the run can count and show such rewards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RewardParts", "RewardWeights", "composite_reward", "needs_judge"]

_SLACK = 1e-9  # float error tolerated above 1 (an NDCG computed as x / x)


def _unit(name: str, value: float) -> float:
    if math.isnan(value) or not -_SLACK <= value <= 1 + _SLACK:
        raise ValueError(f"{name} must lie in [0, 1], not {value}")
    return min(1.0, max(0.0, float(value)))


@dataclass(frozen=True)
class RewardWeights:
    """Weight of each part; defaults are the original's train reward (0.7·judge + 0.1·format +
    0.2·NDCG). Non-negative, finite, summing to more than 0."""

    judge: float = 0.7
    format: float = 0.1
    ndcg: float = 0.2

    def __post_init__(self) -> None:
        for name in ("judge", "format", "ndcg"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"reward weight {name} must be a finite number >= 0, not {value}")
        if self.judge + self.format + self.ndcg <= 0:
            raise ValueError("reward weights must not all be 0")


@dataclass(frozen=True)
class RewardParts:
    """One trajectory's parts, each in [0, 1]: ``format`` (:func:`~.answers.format_score`),
    ``judge`` (the verdict: True/False, 1/0, or None when the judge failed or was not called),
    ``ndcg`` (of the retrieved pages, e.g. :func:`~.metrics.ndcg_original`)."""

    format: float
    judge: bool | float | None
    ndcg: float

    def __post_init__(self) -> None:
        _unit("format", self.format)
        _unit("ndcg", self.ndcg)
        if self.judge is not None:
            _unit("judge", float(self.judge))

    @property
    def judge_failed(self) -> bool:
        """The judge was needed (format passed) but gave no verdict: the reward counted it as 0."""
        return needs_judge(self.format) and self.judge is None


def needs_judge(format_score: float) -> bool:
    """Whether the judge's verdict can change the reward: only when the format check passed."""
    return format_score > 0


def composite_reward(parts: RewardParts, weights: RewardWeights | None = None) -> float:
    """``weights.judge·judge + weights.format·format + weights.ndcg·ndcg``, or 0 when the format
    check failed. A missing verdict (``judge=None``) counts as 0; see :attr:`RewardParts.judge_failed`."""
    w = weights or RewardWeights()
    if not needs_judge(parts.format):
        return 0.0
    judge = 0.0 if parts.judge is None else _unit("judge", float(parts.judge))
    return w.judge * judge + w.format * _unit("format", parts.format) + w.ndcg * _unit("ndcg", parts.ndcg)

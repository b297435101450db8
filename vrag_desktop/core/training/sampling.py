"""DAPO's options, each off by default (the original VRAG-RL uses none of them): dynamic sampling,
soft overlong punishment, and clip-higher (``clip_ratio_high``, checked here with the others).

Why dynamic sampling: a group whose rollouts all get the same reward has advantage 0 everywhere,
so it costs a full forward and backward for nothing (only the KL term acts). With it on, such
groups are dropped and new prompts are rolled out in their place, ``max_resample_rounds`` times at
most; a step left with no group that differs is skipped (no update), said in the log and counted.

Why overlong shaping: a reply cut at ``max_response_length`` is usually rambling, and a hard cut
gives no signal about *how* long is too long; DAPO's soft punishment lowers the reward linearly over
the last ``buffer`` tokens before the limit, down to ``-penalty`` at the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vrag_desktop.core.training.config import TrainConfig

__all__ = ["DAPO_TABLES", "DynamicSamplingConfig", "OverlongConfig", "check_dapo"]


@dataclass(frozen=True)
class DynamicSamplingConfig:
    """Drop groups whose rewards are all equal and roll out new prompts in their place, at most
    ``max_resample_rounds`` times a step (DAPO's dynamic sampling)."""

    enabled: bool = False
    max_resample_rounds: int = 3


@dataclass(frozen=True)
class OverlongConfig:
    """DAPO's soft overlong punishment: a reply longer than ``max_response_length - buffer``
    tokens loses up to ``penalty`` of its reward, linearly, reaching ``penalty`` at the limit."""

    enabled: bool = False
    buffer: int = 256
    penalty: float = 1.0


#: The config's tables these are (read like ``reward`` and ``judge``).
DAPO_TABLES: tuple[tuple[str, type], ...] = (
    ("dynamic_sampling", DynamicSamplingConfig),
    ("overlong", OverlongConfig),
)


def check_dapo(c: TrainConfig) -> None:
    """Validate the DAPO fields of ``c`` (raises the config's ``ConfigError``, naming the field)."""
    from vrag_desktop.core.training.config import ConfigError, _num

    _num("clip_ratio_high", c.clip_ratio_high, low=0.0, high=10.0)
    if 0 < c.clip_ratio_high < c.clip_ratio:
        raise ConfigError(
            "clip_ratio_high",
            f"must be 0 (symmetric: clip_ratio) or at least clip_ratio ({c.clip_ratio}), "
            f"not {c.clip_ratio_high}: clip-higher widens the upper bound only",
        )
    ds = c.dynamic_sampling
    if not isinstance(ds, DynamicSamplingConfig):
        raise ConfigError("dynamic_sampling", "must be a table (enabled, max_resample_rounds)")
    _bool("dynamic_sampling.enabled", ds.enabled)
    _num("dynamic_sampling.max_resample_rounds", ds.max_resample_rounds, integer=True, low=0, high=100)
    ov = c.overlong
    if not isinstance(ov, OverlongConfig):
        raise ConfigError("overlong", "must be a table (enabled, buffer, penalty)")
    _bool("overlong.enabled", ov.enabled)
    _num("overlong.buffer", ov.buffer, integer=True, low=1)
    _num("overlong.penalty", ov.penalty, low=0.0, high=10.0)
    if ov.enabled and ov.buffer >= c.max_response_length:
        raise ConfigError(
            "overlong.buffer",
            f"must be below max_response_length ({c.max_response_length}): the penalty starts "
            "buffer tokens before the limit",
        )


def _bool(name: str, value: Any) -> None:
    from vrag_desktop.core.training.config import ConfigError

    if not isinstance(value, bool):
        raise ConfigError(name, f"must be true or false, not {value!r}")

"""The ``lora`` table of a training config: LoRA adapters instead of full fine-tuning, its fields,
how the table is read and its checks.

Why its own module: like ``sampling``, ``sft`` and ``validation``, a table of the config with its
own rules (layer names, QLoRA's GPU), read by the CLI, the New-run dialog and the trainer's
``vrag_trainer/lora.py``; :mod:`~vrag_desktop.core.training.config` composes it. No heavy import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vrag_desktop.core.training.config import TrainConfig

__all__ = ["LORA_TARGETS", "LoraConfig", "check_lora", "lora_from"]

#: The language model's linear layers (Qwen2/2.5-VL names): attention and MLP projections.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraConfig:
    """LoRA instead of full fine-tuning (``enabled``): only the adapters train, so the optimiser
    holds their state alone and the reference policy is the base model with the adapter off (no
    second copy). ``target_modules`` are layer names of the *language model*; ``vision`` adds
    every linear layer of the vision tower. ``qlora`` loads the base in 4 bits (bitsandbytes,
    a GPU). ``alpha / rank`` scales the update."""

    enabled: bool = False
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    target_modules: tuple[str, ...] = LORA_TARGETS
    vision: bool = False
    qlora: bool = False


def lora_from(value: Any) -> LoraConfig:
    """The ``lora`` table of a config file (unknown keys named), its layer names as a tuple."""
    from vrag_desktop.core.training.config import ConfigError, _fields_from

    if not isinstance(value, Mapping):
        raise ConfigError("lora", f"must be a table of fields, not {type(value).__name__}")
    kwargs = _fields_from(LoraConfig, value, "lora.")
    if "target_modules" in kwargs:
        names = kwargs["target_modules"]
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise ConfigError("lora.target_modules", "must be a list of layer names such as q_proj")
        kwargs["target_modules"] = tuple(names)
    return LoraConfig(**kwargs)


def check_lora(c: TrainConfig) -> None:
    """Validate ``c.lora`` (``ConfigError`` naming the field), and QLoRA against the device."""
    from vrag_desktop.core.training.config import ConfigError, _num

    lo = c.lora
    if not isinstance(lo, LoraConfig):
        raise ConfigError("lora", "must be a table (enabled, rank, alpha, dropout, target_modules, ...)")
    for name in ("enabled", "vision", "qlora"):
        if not isinstance(getattr(lo, name), bool):
            raise ConfigError(f"lora.{name}", f"must be true or false, not {getattr(lo, name)!r}")
    _num("lora.rank", lo.rank, integer=True, low=1, high=1024)
    _num("lora.alpha", lo.alpha, low=0.0, low_open=True)
    _num("lora.dropout", lo.dropout, low=0.0, high=0.9)
    names = lo.target_modules
    if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
        raise ConfigError("lora.target_modules", "must be a list of layer names such as q_proj")
    bad = [n for n in names if not n.replace("_", "").isalnum()]
    if bad:
        raise ConfigError("lora.target_modules", f"must be plain layer names such as q_proj, not {bad}")
    if not lo.target_modules and not lo.vision:
        raise ConfigError("lora.target_modules", "is empty: name the layers to adapt, or set vision")
    if lo.qlora and not lo.enabled:
        raise ConfigError("lora.qlora", "needs lora.enabled: QLoRA trains LoRA adapters on a 4-bit base")
    if lo.qlora and c.device == "cpu":
        raise ConfigError("lora.qlora", "4-bit (bitsandbytes) bases need a GPU; use device cuda or auto")

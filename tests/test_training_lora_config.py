"""The ``lora`` section of the training config: defaults (full fine-tuning unless enabled, the
language model's projections), files and ``--set`` overrides, every bad value refused with its
dotted field named, and a resume that changes it refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.training.config import (
    ConfigError,
    LoraConfig,
    TrainConfig,
    changed_fields,
    load_config,
)

BASE = {"model": "tiny", "dataset": "d.json"}


def test_off_by_default_with_the_language_models_projections() -> None:
    cfg = TrainConfig.from_mapping(BASE)
    assert cfg.lora == LoraConfig() and not cfg.lora.enabled and not cfg.lora.vision
    assert cfg.lora.target_modules == (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    assert cfg.to_dict()["lora"]["target_modules"] == list(cfg.lora.target_modules)  # JSON-ready


def test_a_file_and_set_overrides_fill_the_section(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text(
        json.dumps({**BASE, "lora": {"enabled": True, "rank": 8, "target_modules": ["q_proj", "v_proj"]}})
    )
    cfg = load_config(p, **{"lora.alpha": 16, "lora.vision": True})
    assert cfg.lora == LoraConfig(
        enabled=True, rank=8, alpha=16, target_modules=("q_proj", "v_proj"), vision=True
    )
    again = TrainConfig.from_mapping(cfg.to_dict())  # what the run directory stores reads back equal
    assert again == cfg


@pytest.mark.parametrize(
    "lora,field,needle",
    [
        ("yes", "lora", "must be a table"),
        ({"rnak": 8}, "lora.rnak", "did you mean 'rank'"),
        ({"rank": 0}, "lora.rank", "must be >= 1"),
        ({"rank": 8.5}, "lora.rank", "whole number"),
        ({"alpha": 0}, "lora.alpha", "must be > 0.0"),
        ({"dropout": 1.0}, "lora.dropout", "must be <= 0.9"),
        ({"enabled": "true"}, "lora.enabled", "true or false"),
        ({"target_modules": [3]}, "lora.target_modules", "list of layer names"),
        ({"target_modules": ["model.layers.0.q_proj"]}, "lora.target_modules", "plain layer names"),
        ({"target_modules": []}, "lora.target_modules", "is empty"),
        ({"qlora": True}, "lora.qlora", "needs lora.enabled"),
    ],
)
def test_bad_values_name_the_field(lora: Any, field: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        TrainConfig.from_mapping({**BASE, "lora": lora})
    assert exc.value.field == field and needle in str(exc.value), str(exc.value)


def test_qlora_needs_a_gpu_and_vision_alone_is_enough() -> None:
    with pytest.raises(ConfigError, match=r"^lora.qlora: 4-bit .* need a GPU"):
        TrainConfig.from_mapping({**BASE, "device": "cpu", "lora": {"enabled": True, "qlora": True}})
    cfg = TrainConfig.from_mapping({**BASE, "lora": {"enabled": True, "target_modules": [], "vision": True}})
    assert cfg.lora.vision and cfg.lora.target_modules == ()


def test_a_resume_may_not_switch_lora_on_or_change_it() -> None:
    old = TrainConfig.from_mapping(BASE)
    new = TrainConfig.from_mapping({**BASE, "lora": {"enabled": True, "rank": 4}})
    assert changed_fields(old, new) == ["lora.enabled", "lora.rank"]

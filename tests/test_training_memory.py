"""The training memory estimate (core/training/memory.py) on the real Qwen2.5-VL-7B config: LoRA
against a full fine-tune, the documented 24 GB settings, growth with group size, image pixels and
context, and the refusal (plan.new_run and the estimate) naming the estimate, the GPU and what
to change. No GPU: the GPU is a probe result (GPUReport), as NVML would give it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.models.catalogue_data import QWEN25_VL_7B
from vrag_desktop.core.runtime.gpu import GPUInfo, GPUReport
from vrag_desktop.core.training import plan
from vrag_desktop.core.training.config import LoraConfig, TrainConfig
from vrag_desktop.core.training.memory import (
    SKIP_CHECK_ENV,
    gib,
    lora_params,
    memory_estimate,
    model_shape,
)

GiB = 1024**3
RTX_24 = GPUReport((GPUInfo(0, "RTX 4090", 24 * GiB, int(23.5 * GiB)),), "550", "12.8")
#: The settings docs/trainer.md ("Memory") gives for the 7B model on one 24 GB GPU.
FITS_24GB: dict[str, Any] = {
    "lora": LoraConfig(enabled=True),
    "gradient_checkpointing": True,
    "micro_batch_rows": 1,
    "max_model_len": 6144,
    "max_response_length": 1024,
    "max_images": 8,
}


def _cfg(**kw: Any) -> TrainConfig:
    return TrainConfig(model="m", dataset="d", **kw)


def _est(gpus: GPUReport = RTX_24, **kw: Any) -> Any:
    return memory_estimate("Qwen2.5-VL-7B", _cfg(**kw), gpus, config=QWEN25_VL_7B)


def test_7b_lora_and_full_fine_tuning() -> None:
    shape = model_shape(QWEN25_VL_7B)
    assert 8.2e9 < shape.params < 8.4e9 and 0.6e9 < shape.vis_params < 0.7e9  # 7.6 B LM + 0.67 B ViT
    h, kv, inter = 3584, 512, 18944
    per_layer = 16 * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h))
    assert lora_params(shape, LoraConfig().target_modules, 16, False) == 28 * per_layer  # ≈ 40 M
    full, lora = _est(), _est(lora=LoraConfig(enabled=True))
    fp, lp = dict(full.parts), dict(lora.parts)
    assert fp["weights"] == lp["weights"] == 2 * shape.params  # bf16 on a GPU
    assert fp["AdamW moments (2)"] == 4 * shape.params and fp["reference model (KL)"] == 2 * shape.params
    assert fp["gradients"] == 2 * shape.params
    adapters = 28 * per_layer
    assert lp["gradients"] == 4 * adapters and lp["AdamW moments (adapters)"] == 8 * adapters
    assert "reference model (KL)" not in lp  # the base with the adapter off, no second copy
    assert full.per_device_bytes - lora.per_device_bytes > 60 * GiB
    assert "reference model (KL)" not in dict(_est(kl_coef=0.0).parts)
    qlora = _est(lora=LoraConfig(enabled=True, qlora=True))
    assert dict(qlora.parts)["weights (4-bit)"] < lp["weights"] / 2


def test_the_documented_24gb_settings_fit_and_the_defaults_do_not() -> None:
    fits = _est(**FITS_24GB)
    assert fits.refusal is None and fits.per_device_bytes < 24 * GiB, fits.lines()
    assert fits.per_device_bytes > 20 * GiB  # weights alone are 15.4 GiB: not a vacuous pass
    assert _cfg(**FITS_24GB).group_size == 5  # the original's group size
    for change in ({"gradient_checkpointing": False}, {"micro_batch_rows": 4}, {"lora": LoraConfig()}):
        assert _est(**{**FITS_24GB, **change}).refusal is not None, change


def test_the_estimate_grows_with_group_size_pixels_and_context() -> None:
    def peak(**kw: Any) -> int:
        return int(_est(**{**FITS_24GB, "prompts_per_step": 1, **kw}).per_device_bytes)

    def kv(group: int) -> int:
        est = _est(**{**FITS_24GB, "prompts_per_step": 1, "group_size": group})
        return next(b for w, b in est.rollout if w.startswith("HF generate KV cache"))

    assert kv(2) < kv(5) < kv(8) == kv(16)  # rollouts run 8 at a time
    groups = [peak(group_size=g) for g in (2, 5, 8, 16)]
    assert groups == sorted(groups)
    contexts = [peak(max_model_len=n) for n in (2048, 4096, 8192, 16384)]
    assert contexts == sorted(contexts) and len(set(contexts)) == 4
    cfg = _cfg(**FITS_24GB)
    pixels = [
        memory_estimate("7b", cfg, RTX_24, config=QWEN25_VL_7B, max_pixels=p).per_device_bytes
        for p in (200_704, 401_408, 1_003_520)
    ]
    assert pixels == sorted(pixels) and len(set(pixels)) == 3
    rows = [peak(micro_batch_rows=r) for r in (1, 2, 4)]
    assert rows == sorted(rows) and len(set(rows)) == 3


def test_the_refusal_names_the_estimate_the_gpu_and_what_to_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "qwen7b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN25_VL_7B))
    cfg = TrainConfig(model=str(model), dataset="d", gradient_checkpointing=True)
    est = memory_estimate(cfg.model, cfg, RTX_24)
    monkeypatch.delenv(SKIP_CHECK_ENV, raising=False)
    with pytest.raises(plan.LaunchRefused) as e:
        plan.new_run(cfg, tmp_path / "run", "python", gpus=RTX_24)
    msg = str(e.value)
    assert msg == est.refusal and f"needs ~{gib(est.per_device_bytes)} GiB per GPU to train (estimate)" in msg
    assert "RTX 4090, 24 GiB" in msg and "lora.enabled: true" in msg and "max_model_len" in msg
    assert "max_images" in msg and SKIP_CHECK_ENV in msg
    assert not (tmp_path / "run").exists()  # refused before anything is written
    ok = plan.new_run(cfg.with_changes(**FITS_24GB), tmp_path / "lora", "python", gpus=RTX_24)
    assert ok.config_path is not None and ok.config_path.is_file()
    monkeypatch.setenv(SKIP_CHECK_ENV, "1")
    assert plan.new_run(cfg, tmp_path / "anyway", "python", gpus=RTX_24).config_path is not None


def test_vllm_colocate_takes_its_share_of_the_gpu() -> None:
    hf = _est(**FITS_24GB)
    vllm = _est(**FITS_24GB, generator="vllm")
    assert hf.refusal is None and vllm.refusal is not None  # 0.6 × 24 GiB leaves 9.6 GiB
    assert "after vLLM's colocated share" in vllm.refusal
    assert not vllm.rollout  # vLLM's KV cache lives inside its share

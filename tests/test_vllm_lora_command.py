"""Serving a LoRA run's adapter with vLLM: ``VLLMConfig.lora_modules`` becomes ``--enable-lora
--max-lora-rank R --lora-modules name=path`` on the base model, R read from the adapters' own
``adapter_config.json`` and rounded up to a rank vLLM accepts; without adapters nothing changes."""

from __future__ import annotations

import json
from pathlib import Path

from vrag_desktop.core.runtime.vllm import VLLMConfig


def _adapter(folder: Path, rank: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    return folder


def test_adapters_on_the_base_model(tmp_path: Path) -> None:
    a = _adapter(tmp_path / "run-a" / "export" / "adapter", 4)
    b = _adapter(tmp_path / "run-b" / "export" / "adapter", 24)
    cfg = VLLMConfig(
        model="/models/qwen", python="/py", port=8000, lora_modules={"run-a": str(a), "run-b": str(b)}
    )
    cmd = cfg.build_command()
    assert cmd[cmd.index("--model") + 1] == "/models/qwen"
    i = cmd.index("--enable-lora")
    assert cmd[i:] == ["--enable-lora", "--max-lora-rank", "32", "--lora-modules", f"run-a={a}", f"run-b={b}"]
    assert "--lora-modules run-a=" in cfg.shell_command()


def test_an_explicit_rank_wins_and_unreadable_adapters_leave_vllms_default(tmp_path: Path) -> None:
    a = _adapter(tmp_path / "a", 4)
    cmd = VLLMConfig(
        model="m", python="/py", port=1, lora_modules={"a": str(a)}, max_lora_rank=64
    ).build_command()
    assert cmd[cmd.index("--max-lora-rank") + 1] == "64"
    cmd = VLLMConfig(
        model="m", python="/py", port=1, lora_modules={"x": str(tmp_path / "missing")}
    ).build_command()
    assert "--enable-lora" in cmd and "--max-lora-rank" not in cmd
    assert "--enable-lora" not in VLLMConfig(model="m", python="/py", port=1).build_command()

"""Every training-config field changes the run or is refused by name (issue 29, item 6), for the
fields whose effect lies in the trainer: each TRL argument follows its field, ``engine: verl`` under
``grpo`` is refused with the command that runs verl, and ``max_prompt_length`` ends a trajectory
whose starting prompt is longer (the original's ``data.max_prompt_length``, at a turn boundary)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import write_config
from test_training import _config, vrag_script
from vrag_trainer import runner
from vrag_trainer.trl_trainer import grpo_args

from vrag_desktop.core.run.store import RunStore
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun


def test_trl_arguments_follow_the_config(tmp_path: Path) -> None:
    changed = TrainConfig(
        model="m", dataset="d", group_size=3, prompts_per_step=4, learning_rate=2e-5, warmup_steps=7,
        kl_coef=0.05, clip_ratio=0.3, entropy_coef=0.01, grad_clip=0.5, epochs=3, max_steps=9,
        save_steps=4, save_total_limit=2, tensorboard=False, seed=11, gradient_checkpointing=True,
        temperature=0.7, max_model_len=4096, max_response_length=512, ppo_epochs=2,
    )  # fmt: skip
    a = grpo_args(changed, str(tmp_path), world_size=2, use_cpu=True, bf16=False, logging_dir=None)
    got = {
        "num_generations": a.num_generations,
        "per_device_train_batch_size": a.per_device_train_batch_size,  # group × prompts per process
        "learning_rate": a.learning_rate,
        "warmup_steps": a.warmup_steps,
        "beta": a.beta,
        "epsilon": a.epsilon,
        "entropy_coef": a.entropy_coef,
        "max_grad_norm": a.max_grad_norm,
        "num_train_epochs": a.num_train_epochs,
        "max_steps": a.max_steps,
        "save_steps": a.save_steps,
        "save_total_limit": a.save_total_limit,
        "report_to": list(a.report_to or []),
        "seed": a.seed,
        "gradient_checkpointing": a.gradient_checkpointing,
        "temperature": a.temperature,
        "max_completion_length": a.max_completion_length,
        "num_iterations": a.num_iterations,
    }
    assert got == {
        "num_generations": 3,
        "per_device_train_batch_size": 3 * 2,
        "learning_rate": 2e-5,
        "warmup_steps": 7,
        "beta": 0.05,
        "epsilon": 0.3,
        "entropy_coef": 0.01,
        "max_grad_norm": 0.5,
        "num_train_epochs": 3,
        "max_steps": 9,
        "save_steps": 4,
        "save_total_limit": 2,
        "report_to": [],
        "seed": 11,
        "gradient_checkpointing": True,
        "temperature": 0.7,
        "max_completion_length": 4096,
        "num_iterations": 2,
    }


def test_train_grpo_with_engine_verl_is_refused_with_the_command(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.json", model="m", dataset="d.json", engine="verl")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "vrag_trainer", "grpo", "--config", str(cfg), "--run", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == runner.EXIT_BAD, proc.stderr[-2000:]
    assert "engine: verl runs on a Ray cluster, not from 'train grpo'" in proc.stderr
    assert "python -m vrag_trainer verl --config" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_max_prompt_length_ends_a_trajectory_whose_prompt_is_longer(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, processor, tmp_path
) -> None:
    # the system prompt and question alone are longer than 64 tokens: no rollout may generate
    cfg = _config(tiny_model_dir, dataset_file, toy_data, search_url, max_prompt_length=64, max_steps=1)
    rc = runner.start(cfg, str(tmp_path / "run"), generator=lambda _m, p: vrag_script(p))
    assert rc == runner.EXIT_OK
    run = TrainRun.open(tmp_path / "run")
    (row,) = run.metrics()
    rollouts = cfg.group_size * cfg.prompts_per_step
    assert row["truncated"] == rollouts and row["response_length"] == 0, row
    for s in RunStore(run.samples).list():
        assert s.settings["training"]["segments"] == []  # nothing generated, nothing to train on
    store = RunStore(run.samples)
    events = " ".join(repr(e) for s in store.list() for e in store.events(s.id))
    assert "prompt length" in events  # the rollout says why it ended


def test_device_and_dtype_follow_the_config() -> None:
    import pytest
    import torch

    assert runner.device_and_dtype(TrainConfig(model="m", dataset="d", device="cpu")) == (
        "cpu",
        torch.float32,
    )
    assert runner.device_and_dtype(TrainConfig(model="m", dataset="d", device="cpu", dtype="bf16")) == (
        "cpu",
        torch.bfloat16,
    )
    if not torch.cuda.is_available():
        with pytest.raises(runner.RunRefused, match="device: cuda was asked for but no GPU is visible"):
            runner.device_and_dtype(TrainConfig(model="m", dataset="d", device="cuda"))
